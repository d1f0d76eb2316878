/* What every sandbox tool shares: the call's job (audit and finish in one place), ownership and
 * state checks through the store, error and argument mapping. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/json_out.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"
#include "lib/store/store.h"

#define AUDIT_DETAIL_MAX 300

struct tool_job *tool_job_new(struct tool_call *call, json_t *args)
{
    struct tool_job *job = xcalloc(1, sizeof(*job));
    job->call = call;
    job->ctx = tool_call_context(call);
    const char *owner = tool_call_owner(call);
    job->owner = xstrdup(owner ? owner : "");
    job->args = json_incref(args);
    job->started_ms = now_mono_ms();
    return job;
}

static void job_free(struct tool_job *job)
{
    free(job->sandbox_id);
    free(job->owner);
    free(job->detail);
    json_decref(job->args);
    free(job);
}

void tool_job_set_detail(struct tool_job *job, const char *fmt, ...)
{
    char tmp[AUDIT_DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    free(job->detail);
    job->detail = xstrdup(tmp);
}

/* What the audit row needs from the call, taken before the call is answered (and freed). */
struct job_audit_row {
    char tool[64];
    int64_t ms;
};

static void audit_row_take(const struct tool_job *job, struct job_audit_row *row)
{
    snprintf(row->tool, sizeof row->tool, "%s", tool_call_tool_name(job->call));
    row->ms = (int64_t)(now_mono_ms() - job->started_ms);
}

/* Written after the reply: a SQLite write (WAL pages) is not the caller's to wait for. */
static void job_audit(struct tool_job *job, const struct job_audit_row *row, const char *outcome,
                      const char *detail)
{
    if (job->ctx == NULL || job->ctx->store == NULL)
        return;
    struct mcp_error err;
    if (store_audit(job->ctx->store, job->owner, row->tool, job->sandbox_id, outcome, row->ms,
                    detail, &err) < 0)
        log_warn("audit of %s failed: %s", row->tool, err.msg);
}

/* The text block normally repeats structuredContent (clients without structured output read it).
 * A big result (file contents, long output) would then travel twice, and the official SDK's stdio
 * client drops the connection on any message over 10 MiB: above TOOLS_TEXT_MAX the text names
 * the long fields instead of repeating them. */
static char *result_text(json_t *structured)
{
    char *full = json_out_dump(structured, NULL);
    if (full == NULL || strlen(full) <= TOOLS_TEXT_MAX)
        return full;
    free(full);
    json_t *brief = json_copy(structured);
    const char *key;
    json_t *v;
    json_object_foreach(structured, key, v) {
        if (json_is_string(v) && json_string_length(v) > TOOLS_TEXT_FIELD_MAX) {
            char note[160];
            snprintf(note, sizeof(note), "[%zu bytes: see structuredContent.%s]",
                     json_string_length(v), key);
            json_object_set_new(brief, key, json_string(note));
        }
    }
    char *text = json_dumps(brief, JSON_COMPACT);
    json_decref(brief);
    return text;
}

/* Whether a successful call of this tool may have changed the sandbox's files: the file tools
 * that write, a command (run_command, run_code; get_command and kill_command once it has ended:
 * a background command writes while nobody asks) and destroy_sandbox (the files are gone).
 * Subscribers of those files are told to read them again (docs/tools-design.md, "Resources"). */
static bool may_change_files(const char *tool, json_t *structured)
{
    static const char *const writers[] = {"write_file",  "replace_in_file", "move_path",
                                          "delete_path", "make_directory",  "run_command",
                                          "run_code",    "destroy_sandbox"};
    for (size_t i = 0; i < sizeof writers / sizeof writers[0]; i++)
        if (strcmp(tool, writers[i]) == 0)
            return true;
    const char *status = json_string_value(json_object_get(structured, "status"));
    return (strcmp(tool, "get_command") == 0 || strcmp(tool, "kill_command") == 0) &&
           status != NULL && strcmp(status, "running") != 0;
}

void tool_job_finish(struct tool_job *job, json_t *structured)
{
    tool_job_finish_blocks(job, structured, NULL, NULL);
}

void tool_job_finish_blocks(struct tool_job *job, json_t *structured, const char *own_text,
                            json_t *blocks)
{
    struct job_audit_row row;
    audit_row_take(job, &row);
    const char *outcome = tool_call_is_cancelled(job->call) ? "cancelled" : "ok";
    char *text = own_text                     ? xstrdup(own_text)
                 : json_is_object(structured) ? result_text(structured)
                                              : NULL;
    bool changed = job->sandbox_id != NULL && job->ctx != NULL &&
                   job->ctx->sandbox_changed != NULL && may_change_files(row.tool, structured);
    tool_call_finish_blocks(job->call, structured, text, blocks); /* takes both */
    free(text);
    if (changed) /* after the reply, as a client reading the file again would expect */
        job->ctx->sandbox_changed(job->ctx, job->owner, job->sandbox_id);
    job_audit(job, &row, outcome, job->detail);
    job_free(job);
}

void tool_job_fail(struct tool_job *job, const struct mcp_error *err)
{
    char detail[AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof(detail), "%s%s%s", job->detail ? job->detail : "",
             job->detail ? ": " : "", err->msg);
    struct job_audit_row row;
    audit_row_take(job, &row);
    /* No structuredContent: clients validate it against the tool's outputSchema, which
     * describes success. The text says what went wrong and what to do next. */
    tool_call_error(job->call, NULL, "%s", err->msg);
    job_audit(job, &row, tools_outcome(err), detail);
    job_free(job);
}

void tool_job_abandon(struct tool_job *job, const char *tool)
{
    struct job_audit_row row;
    snprintf(row.tool, sizeof row.tool, "%s", tool);
    row.ms = (int64_t)(now_mono_ms() - job->started_ms);
    job_audit(job, &row, "input_required", job->detail);
    job_free(job);
}

int tools_no_result(struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                         "the backend answered without a result; retry, and if it persists call "
                         "diagnose_sandbox");
}

void tool_job_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    struct mcp_error e;
    if (err == NULL && !json_is_object(result))
        err = (tools_no_result(&e), &e);
    if (err != NULL)
        tool_job_fail(job, err);
    else
        tool_job_finish(job, json_incref(result));
}

const char *tools_outcome(const struct mcp_error *err)
{
    static char buf[64];
    snprintf(buf, sizeof(buf), "error:%s", mcp_error_code_name(err->code));
    return buf;
}

int tools_error_no_sandbox(struct mcp_error *err, const char *sandbox_id)
{
    /* Same words whether the sandbox never existed, was destroyed or belongs to someone else:
     * the answer must not reveal other clients' sandboxes. */
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                         "no sandbox %s among yours (it never existed, was destroyed, or "
                         "belongs to another client); call list_sandboxes to see your "
                         "sandboxes or create_sandbox to make one",
                         sandbox_id);
}

int tools_state_check(const char *sandbox_id, const char *state, enum tool_need need,
                      struct mcp_error *err)
{
    if (need == TOOL_NEED_ANY || state == NULL || strcmp(state, "running") == 0)
        return 0;
    if (strcmp(state, "paused") == 0)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "sandbox %s is paused; call update_sandbox with paused: false first",
                             sandbox_id);
    if (strcmp(state, "creating") == 0)
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                             "sandbox %s is still being created; retry in a moment", sandbox_id);
    if (strcmp(state, "destroyed") == 0)
        return tools_error_no_sandbox(err, sandbox_id);
    return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                         "sandbox %s is %s and cannot run commands or file operations; call "
                         "diagnose_sandbox to see why, then destroy_sandbox and create a new one",
                         sandbox_id, state);
}

int tools_check_sandbox(struct mcp_context *ctx, const char *owner, const char *sandbox_id,
                        enum tool_need need, struct backend **be, struct mcp_error *err)
{
    struct backend *b = backend_for_sandbox_id(&ctx->backends, sandbox_id, err);
    if (b == NULL)
        return -1;
    struct store_sandbox sb;
    memset(&sb, 0, sizeof(sb));
    struct mcp_error serr;
    if (store_sandbox_peek(ctx->store, sandbox_id, &sb, &serr) < 0) {
        if (serr.code == MCP_ERR_NOT_FOUND)
            return tools_error_no_sandbox(err, sandbox_id);
        mcp_error_copy(err, &serr);
        return -1;
    }
    int rc = 0;
    if (sb.owner == NULL || strcmp(sb.owner, owner) != 0)
        rc = tools_error_no_sandbox(err, sandbox_id);
    else
        rc = tools_state_check(sandbox_id, sb.state, need, err);
    store_sandbox_release(&sb);
    if (rc == 0 && be != NULL)
        *be = b;
    return rc;
}

int tool_job_bind(struct tool_job *job, const char *sandbox_id, enum tool_need need,
                  struct mcp_error *err)
{
    free(job->sandbox_id);
    job->sandbox_id = xstrdup(sandbox_id);
    return tools_check_sandbox(job->ctx, job->owner, sandbox_id, need, &job->be, err);
}

/* ---- arguments ------------------------------------------------------------------------------ */

static int size_suffix_shift(const char *s, unsigned *shift)
{
    static const char units[] = "bkmgt";
    if (*s == '\0') {
        *shift = 0;
        return 0;
    }
    const char *u = strchr(units, tolower((unsigned char)*s));
    if (u == NULL)
        return -1;
    *shift = (unsigned)(u - units) * 10;
    s++;
    if (u != units && tolower((unsigned char)*s) == 'i')
        s++;
    if (u != units && tolower((unsigned char)*s) == 'b')
        s++;
    return *s == '\0' ? 0 : -1;
}

int tools_parse_size(json_t *v, const char *field, uint64_t *out, struct mcp_error *err)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    char *end = NULL;
    errno = 0;
    double num = strtod(s, &end);
    unsigned shift = 0;
    while (end != NULL && *end == ' ')
        end++;
    if (end == s || errno != 0 || !isfinite(num) || num < 0 || end == NULL ||
        size_suffix_shift(end, &shift) < 0 || num * (double)(1ull << shift) >= 1.8e19)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s: cannot read %s as a size; give bytes (268435456) or a number "
                             "with k, m, g or t (\"256m\", \"1.5g\")",
                             field, json_is_string(v) ? s : "this value");
    *out = (uint64_t)(num * (double)(1ull << shift));
    return 0;
}

int tools_pairs_to_object(json_t *args, const char *key, struct mcp_error *err)
{
    json_t *list = json_object_get(args, key), *item;
    size_t i;

    if (!json_is_array(list))
        return 0;
    json_t *obj = json_object();
    json_array_foreach(list, i, item) {
        const char *pair = json_string_value(item);
        const char *eq = pair ? strchr(pair, '=') : NULL;
        if (eq == NULL || eq == pair) {
            json_decref(obj);
            return mcp_error_set(err, MCP_ERR_INVALID, 0,
                                 "%s[%zu]: give \"NAME=value\" (got %s)", key, i,
                                 pair ? pair : "a non-string");
        }
        char *name = xstrndup(pair, (size_t)(eq - pair));
        json_object_set_new(obj, name, json_string(eq + 1));
        free(name);
    }
    json_object_set_new(args, key, obj);
    return 0;
}

int tools_parse_mode(const char *s, uint32_t *out, struct mcp_error *err)
{
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 8);
    if (*s == '\0' || end == NULL || *end != '\0' || v > 07777)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "mode: \"%s\" is not an octal permission like \"644\" or \"755\"", s);
    *out = (uint32_t)v;
    return 0;
}

int tools_signal_number(const char *name)
{
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {{"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},
                {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
    if (strncmp(name, "SIG", 3) == 0)
        name += 3;
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (strcmp(name, sigs[i].name) == 0)
            return sigs[i].sig;
    return -1;
}

int64_t tools_arg_int(json_t *args, const char *key, int64_t def, int64_t lo, int64_t hi)
{
    json_t *v = json_object_get(args, key);
    int64_t x = json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
    if (x < lo)
        x = lo;
    if (x > hi)
        x = hi;
    return x;
}

int64_t tools_wait_seconds(struct tool_call *call, json_t *args, const char *key, int64_t def,
                           int64_t max, bool *capped)
{
    int64_t s = tools_arg_int(args, key, def, 0, max);
    bool heard = tool_call_wants_progress(call) || tool_call_runs_as_task(call);
    *capped = !heard && s > TOOLS_UNHEARD_WAIT_S;
    return *capped ? TOOLS_UNHEARD_WAIT_S : s;
}

const char *tools_arg_str(json_t *args, const char *key, const char *def)
{
    json_t *v = json_object_get(args, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

bool tools_arg_bool(json_t *args, const char *key, bool def)
{
    json_t *v = json_object_get(args, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

int tools_instead(struct mcp_error *err, const char *instead)
{
    size_t n = strlen(err->msg);
    if (err->code == MCP_ERR_UNSUPPORTED || err->code == MCP_ERR_UNAVAILABLE)
        snprintf(err->msg + n, sizeof(err->msg) - n, "; %s", instead);
    return -1;
}

void tools_hint_snapshots(const struct backend_set *set, char *out, size_t size)
{
    const struct backend_ops *o = backend_set_having(set, BACKEND_SNAPSHOTS);
    int n = snprintf(out, size, "keep work by copying files out with read_file or archiving them "
                                "with run_command (tar)");
    if (o != NULL && n > 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, "; snapshots need a sandbox on the %s backend "
                 "(create_sandbox backend \"%s\")", o->name, o->name);
}

void tools_hint_code(const struct backend_set *set, char *out, size_t size)
{
    const struct backend_ops *o = backend_set_having(set, BACKEND_CODE);
    int n = snprintf(out, size, "run code with run_command (python3 -c '...', or a script "
                                "written with write_file)");
    if (o != NULL && n > 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, "; stateful contexts need a sandbox on the %s "
                 "backend from a code-interpreter image", o->name);
}

int tools_instead_snapshots(const struct tool_job *job, struct mcp_error *err)
{
    char hint[TOOLS_HINT_MAX];
    tools_hint_snapshots(&job->ctx->backends, hint, sizeof hint);
    return tools_instead(err, hint);
}

int tools_instead_code(const struct tool_job *job, struct mcp_error *err)
{
    char hint[TOOLS_HINT_MAX];
    tools_hint_code(&job->ctx->backends, hint, sizeof hint);
    return tools_instead(err, hint);
}

int tools_unsupported(struct mcp_error *err, const struct backend *be, const char *what,
                      const char *instead)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "the %s backend has no %s; %s",
                         be && be->ops ? be->ops->name : "selected", what, instead);
}
