/* The terminal tool: a program on a PTY in the sandbox, driven by actions (backend/shell_terminal.h
 * has the in-sandbox side; docs/tools-design.md, "Terminals"). start and send wait until the
 * program has printed and gone quiet, then return what it printed, so that an agent sees the
 * prompt or the echo without another call. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <stdio.h>
#include <string.h>

#include "backend/shell_terminal.h"
#include "mcp/tools/terminal_pty.h"
#include "lib/base/buf.h"
#include "lib/base/term_text.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"

#define TERM_OUTPUT_CAP 16384u  /* text returned per call: the newest part */
/* After start or send, read back to back (TERM_POLL_MS apart) until no new output came for
 * TERM_QUIET_MS, or, when it printed nothing at all, for TERM_SILENT_MS, or TERM_SETTLE_MAX_MS
 * passed: the wait adapts to the program instead of a fixed count of slow polls. */
#define TERM_POLL_MS 5u
#define TERM_QUIET_MS 25u
#define TERM_SILENT_MS 400u
#define TERM_SETTLE_MAX_MS 3000

struct term_job {
    struct tool_job *job;
    char id[72];
    const char *action; /* the tool's action (static) */
    struct buf out, err, screen;
    uint64_t first_offset, deadline_ms, last_news_ms; /* last_news_ms: new output last came */
    int exit_code;
    bool settling, raw, have_first;
    char *keys; /* send: the bytes typed */
    size_t keys_len;
    json_t *env;
    uv_timer_t timer;
};

static void term_step(struct term_job *tj, const char *action);

static void term_free_cb(uv_handle_t *h)
{
    struct term_job *tj = h->data;
    buf_release(&tj->out);
    buf_release(&tj->err);
    buf_release(&tj->screen);
    json_decref(tj->env);
    free(tj->keys);
    free(tj);
}

static void term_end(struct term_job *tj, json_t *res, const struct mcp_error *err)
{
    if (err != NULL)
        tool_job_fail(tj->job, err);
    else
        tool_job_finish(tj->job, res);
    uv_close((uv_handle_t *)&tj->timer, term_free_cb);
}

/* What the program printed, as text: cleaned unless raw, the newest TERM_OUTPUT_CAP bytes. */
static json_t *term_text(struct term_job *tj, bool *cut)
{
    size_t n = tj->screen.len;
    char *text = tj->raw ? xstrdup(buf_cstr(&tj->screen))
                         : term_text_clean(buf_cstr(&tj->screen), tj->screen.len, &n);
    size_t from = n > TERM_OUTPUT_CAP ? n - TERM_OUTPUT_CAP : 0;
    from += utf8_skip_continuation(text + from, n - from);
    *cut = from > 0;
    json_t *s = utf8_json_text(text + from, n - from);
    free(text);
    return s;
}

static json_t *term_result(struct term_job *tj, const struct shell_terminal_status *st)
{
    bool cut = false;
    json_t *res = json_pack("{s:s, s:b}", "terminal_id", tj->id, "running", st->running);
    json_object_set_new(res, "output", term_text(tj, &cut));
    json_object_set_new(res, "offset", json_integer((json_int_t)tj->first_offset));
    json_object_set_new(res, "next_offset", json_integer((json_int_t)st->size));
    json_object_set_new(res, "exit_code",
                        st->running || st->exit_code < 0 ? json_null()
                                                         : json_integer(st->exit_code));
    if (cut)
        json_object_set_new(res, "note",
                            json_string("output cut to its newest 16 KiB; read "
                                        "with offset to see the rest"));
    else if (!st->running && strcmp(tj->action, "close") != 0)
        json_object_set_new(res, "note",
                            json_string("the program has exited; close the "
                                        "terminal to remove it"));
    return res;
}

static void term_on_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct term_job *tj = arg;
    buf_append(stream == EXEC_STDERR ? &tj->err : &tj->out, data, len);
}

static void term_timer_cb(uv_timer_t *t)
{
    term_step(t->data, "read");
}

/* A read while settling: keeps its bytes; true while another read is due (the program is
 * still printing, or has printed nothing yet), false once it is quiet, exited or out of time. */
static bool term_settle(struct term_job *tj, const struct shell_terminal_status *st)
{
    if (!tj->have_first) {
        tj->first_offset = st->offset;
        tj->have_first = true;
    }
    buf_append(&tj->screen, tj->out.data ? tj->out.data : "", tj->out.len);
    uint64_t now = now_mono_ms();
    if (tj->out.len > 0)
        tj->last_news_ms = now;
    uint64_t quiet = (uint64_t)tools_arg_int(tj->job->args, "quiet_ms", TERM_QUIET_MS, 0, 3000);
    uint64_t enough = tj->screen.len > 0 ? quiet : TERM_SILENT_MS;
    if (!st->running || now >= tj->deadline_ms || now - tj->last_news_ms >= enough)
        return false;
    uv_timer_start(&tj->timer, term_timer_cb, TERM_POLL_MS, 0);
    return true;
}

/* -1 with err when the helper failed or said no. */
static int term_check(struct term_job *tj, json_t *result, const struct shell_terminal_status *st,
                      struct mcp_error *err)
{
    json_t *code = result ? json_object_get(result, "exit_code") : NULL;
    int rc = json_is_integer(code) ? (int)json_integer_value(code) : -1;
    const char *failure = shell_terminal_failure(rc);
    if (failure != NULL)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "terminal %s: %s", tj->id, failure), -1;
    if (rc != 0 || !st->seen)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "terminal %s: the sandbox's helper failed (exit %d); call "
                             "diagnose_sandbox",
                             tj->id, rc),
               -1;
    return 0;
}

static void term_on_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct term_job *tj = arg;
    struct mcp_error e;
    struct shell_terminal_status st;
    shell_terminal_parse_status(tj->err.data ? tj->err.data : "", tj->err.len, &st);
    if (err == NULL && term_check(tj, result, &st, &e) < 0)
        err = &e;
    if (err != NULL) {
        term_end(tj, NULL, err);
        return;
    }
    bool waits = strcmp(tj->action, "start") == 0 || strcmp(tj->action, "send") == 0;
    if (waits && !tj->settling) { /* the keys are in: now read until the program is quiet */
        tj->settling = true;
        tj->last_news_ms = now_mono_ms();
        tj->deadline_ms = tj->last_news_ms + TERM_SETTLE_MAX_MS;
        term_step(tj, "read");
        return;
    }
    if (tj->settling && term_settle(tj, &st))
        return;
    if (!tj->settling && strcmp(tj->action, "read") == 0) {
        tj->first_offset = st.offset;
        buf_append(&tj->screen, tj->out.data ? tj->out.data : "", tj->out.len);
    }
    json_t *res = term_result(tj, &st);
    if (strcmp(tj->action, "close") == 0)
        json_object_set_new(res, "closed", json_true());
    term_end(tj, res, NULL);
}

/* One exec of the helper for action (the tool's, or "read" while settling). */
static void term_step(struct term_job *tj, const char *action)
{
    struct tool_job *job = tj->job;
    struct shell_terminal_args a = {
        .action = action,
        .id = tj->id,
        .command = tools_arg_str(job->args, "command", NULL),
        .rows = (int)tools_arg_int(job->args, "rows", 24, 2, 1000),
        .cols = (int)tools_arg_int(job->args, "cols", 80, 10, 1000),
        .offset = tj->settling ? -1 : tools_arg_int(job->args, "offset", -1, -1, INT64_MAX),
        .limit = SHELL_TERMINAL_READ_MAX};
    buf_reset(&tj->out);
    buf_reset(&tj->err);
    json_decref(tj->env);
    struct exec_request req;
    shell_terminal_exec_request(&a, &tj->env, &req);
    if (strcmp(action, "send") == 0) {
        req.stdin_data = tj->keys;
        req.stdin_len = tj->keys_len;
    }
    struct exec_observer obs = {NULL, term_on_output, term_on_done, tj};
    struct mcp_error err;
    if (job->be->ops->exec(job->be, job->sandbox_id, &req, &obs, NULL, &err) < 0)
        term_end(tj, NULL, &err);
}

static int unknown_key(const char *name, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_INVALID, 0,
                         "keys: unknown key \"%s\"; use Enter, Tab, Esc, Backspace, Up, Down, "
                         "Left, Right, Home, End, Delete, PageUp, PageDown, Space, or ^ and a "
                         "letter for Ctrl (\"^C\"), or put text in input",
                         name ? name : ""),
           -1;
}

/* send's bytes: input as typed, then each key; -1 with err naming a key it does not know. */
static int term_keys(struct term_job *tj, json_t *args, struct mcp_error *err)
{
    struct buf b;
    const char *input = tools_arg_str(args, "input", "");
    /* refused here: the buffer's cap would cut it to nothing */
    if (strlen(input) > SHELL_TERMINAL_READ_MAX - 1024)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "input: one send carries at most 1 MiB (this was %zu bytes); send "
                             "it in pieces",
                             strlen(input)),
               -1;
    buf_init(&b, SHELL_TERMINAL_READ_MAX);
    buf_append_str(&b, input);
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(args, "keys"), i, k)
    {
        char bytes[8];
        int n = shell_terminal_key(json_string_value(k) ? json_string_value(k) : "", bytes);
        if (n < 0) {
            buf_release(&b);
            return unknown_key(json_string_value(k), err);
        }
        buf_append(&b, bytes, (size_t)n);
    }
    if (b.len == 0) {
        buf_release(&b);
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "send needs input or keys, e.g. input "
                             "\"ls\" and keys [\"Enter\"]"),
               -1;
    }
    tj->keys = buf_steal(&b, &tj->keys_len);
    return 0;
}

/* The terminal's id: terminal_id, or a new one for start; -1 with err. */
static int term_id(struct term_job *tj, json_t *args, struct mcp_error *err)
{
    const char *id = tools_arg_str(args, "terminal_id", NULL);
    if (id == NULL && strcmp(tj->action, "start") == 0) {
        random_id(tj->id, sizeof tj->id, "term-", 4);
        return 0;
    }
    if (id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "terminal_id: required for %s; start "
                             "gives one",
                             tj->action),
               -1;
    snprintf(tj->id, sizeof tj->id, "%s", id);
    return 0;
}

static const char *const term_actions[] = {"start", "send", "read", "resize", "close"};

void tool_terminal(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    struct term_job *tj = xcalloc(1, sizeof(*tj));
    tj->job = job;
    tj->raw = tools_arg_bool(args, "raw", false);
    const char *action = tools_arg_str(args, "action", "read");
    for (size_t i = 0; i < sizeof term_actions / sizeof term_actions[0]; i++)
        if (strcmp(action, term_actions[i]) == 0)
            tj->action = term_actions[i];
    buf_init(&tj->out, SHELL_TERMINAL_READ_MAX + 4096);
    buf_init(&tj->err, 65536);
    buf_init(&tj->screen, 4 * SHELL_TERMINAL_READ_MAX);
    uv_timer_init(job->ctx->loop, &tj->timer);
    tj->timer.data = tj;
    if (tj->action == NULL)
        tj->action = "read"; /* the schema's enum refused anything else */
    if (term_id(tj, args, &err) < 0 ||
        (strcmp(tj->action, "send") == 0 && term_keys(tj, args, &err) < 0) ||
        tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0) {
        term_end(tj, NULL, &err);
        return;
    }
    tool_job_set_detail(job, "terminal_id=%s action=%s", tj->id, tj->action);
    if (terminal_pty_supported(job)) { /* the job goes on there; this record is not needed */
        terminal_pty_run(job, tj->action, tj->id, tj->keys, tj->keys_len, tj->raw);
        tj->keys = NULL;
        uv_close((uv_handle_t *)&tj->timer, term_free_cb);
        return;
    }
    term_step(tj, tj->action);
}
