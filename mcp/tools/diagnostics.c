/* Network and diagnostics tools: get_endpoint, diagnose_sandbox (of a sandbox, or of the host). */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <stddef.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "server/config.h"
#include "server/context.h"
#include "lib/store/store.h"

void tool_get_endpoint(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    int port = (int)tools_arg_int(args, "port", 0, 1, 65535);
    tool_job_set_detail(job, "port=%d", port);
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0 ||
        job->be->ops->endpoint(job->be, job->sandbox_id, port, tool_job_done_cb, job, &err) < 0)
        tool_job_fail(job, &err);
}

/* Metrics are a diagnosis "what": {sandbox_id, what:"metrics", metrics:{...}}. */
static void metrics_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    if (err != NULL || !json_is_object(result)) {
        tool_job_done_cb(job, result, err);
        return;
    }
    tool_job_finish(job, json_pack("{s:s,s:s,s:O}", "sandbox_id", job->sandbox_id, "what",
                                   "metrics", "metrics", result));
}

/* ---- diagnose_sandbox command_id: one command's end, output tail and events ----------------- */

#define DIAG_TAIL_BYTES 2048 /* output shown for one command */
#define DIAG_EVENT_SCAN 200  /* events searched for the command's */

struct diag_cmd {
    struct tool_job *job;
    char *command_id;
    json_t *first; /* the status query (offset 0), while the tail is read */
};

/* The sandbox's events that name the command. */
static json_t *command_events(struct tool_job *job, const char *command_id)
{
    json_t *events = NULL, *mine = json_array();
    struct mcp_error err;
    if (job->ctx->store == NULL ||
        store_event_list(job->ctx->store, job->sandbox_id, DIAG_EVENT_SCAN, &events, &err) < 0)
        return mine;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *id = json_string_value(json_object_get(json_object_get(ev, "data"),
                                                           "command_id"));
        if (id && strcmp(id, command_id) == 0)
            json_array_append(mine, ev);
    }
    json_decref(events);
    return mine;
}

static void diag_cmd_free(struct diag_cmd *dc)
{
    json_decref(dc->first);
    free(dc->command_id);
    free(dc);
}

static void diag_cmd_finish(struct diag_cmd *dc, json_t *status, json_t *tail,
                            const struct mcp_error *err)
{
    json_t *events = command_events(dc->job, dc->command_id);
    if (status == NULL && json_array_size(events) == 0) { /* neither the agent nor the log */
        json_decref(events);
        tool_job_fail(dc->job, err);
        diag_cmd_free(dc);
        return;
    }
    json_t *cmd = json_pack("{s:s}", "command_id", dc->command_id);
    static const char *const keys[] = {"status", "exit_code", "signal", "duration_ms",
                                       "total_bytes"};
    for (size_t i = 0; status && i < sizeof keys / sizeof keys[0]; i++)
        if (json_object_get(status, keys[i]))
            json_object_set(cmd, keys[i], json_object_get(status, keys[i]));
    if (tail != NULL) {
        json_object_set(cmd, "output_tail", json_object_get(tail, "output"));
        json_object_set(cmd, "tail_offset", json_object_get(tail, "offset"));
    } else if (err != NULL) {
        json_object_set_new(cmd, "unavailable", json_string(err->msg)); /* the log still says */
    }
    tool_job_finish(dc->job, json_pack("{s:s, s:s, s:o, s:o}", "sandbox_id", dc->job->sandbox_id,
                                       "what", "command", "command", cmd, "events", events));
    diag_cmd_free(dc);
}

static void diag_tail_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct diag_cmd *dc = arg;
    diag_cmd_finish(dc, dc->first, err ? NULL : result, err);
}

/* The status query answered: read the last DIAG_TAIL_BYTES of the output. */
static void diag_status_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct diag_cmd *dc = arg;
    struct mcp_error e;
    if (err != NULL || !json_is_object(result)) {
        diag_cmd_finish(dc, NULL, NULL, err ? err : (tools_no_result(&e), &e));
        return;
    }
    dc->first = json_incref(result);
    json_int_t total = json_integer_value(json_object_get(result, "total_bytes"));
    uint64_t from = total > DIAG_TAIL_BYTES ? (uint64_t)(total - DIAG_TAIL_BYTES) : 0;
    struct backend *be = dc->job->be;
    if (be->ops->command_get(be, dc->job->sandbox_id, dc->command_id, from, DIAG_TAIL_BYTES,
                             diag_tail_cb, dc, &e) < 0)
        diag_cmd_finish(dc, result, NULL, &e);
}

static void diagnose_command(struct tool_job *job, const char *command_id)
{
    struct diag_cmd *dc = xcalloc(1, sizeof *dc);
    dc->job = job;
    dc->command_id = xstrdup(command_id);
    struct mcp_error err;
    if (job->be->ops->command_get(job->be, job->sandbox_id, command_id, 0, 1, diag_status_cb, dc,
                                  &err) < 0)
        diag_cmd_finish(dc, NULL, NULL, &err);
}

/* The backends' host checks fork probe children and read /proc and /sys: run them off the loop
 * thread. Every backend of the table is asked, also one that could not start (its checks say
 * why); the reports merge into one. */
struct doctor_job {
    uv_work_t work;
    struct tool_job *job;
    char *state_dir;
    json_t *report; /* {ok, checks, note?} */
};

static void doctor_merge(json_t *into, json_t *part)
{
    json_t *ok = json_object_get(part, "ok");
    if (json_is_false(ok))
        json_object_set(into, "ok", ok);
    json_array_extend(json_object_get(into, "checks"), json_object_get(part, "checks"));
    if (json_object_get(part, "note") != NULL && json_object_get(into, "note") == NULL)
        json_object_set(into, "note", json_object_get(part, "note"));
    if (json_object_get(part, "secrets") != NULL) /* names create_sandbox may bind (issue 37) */
        json_object_set(into, "secrets", json_object_get(part, "secrets"));
}

static void doctor_work(uv_work_t *w)
{
    struct doctor_job *dj = container_of(w, struct doctor_job, work);
    const struct backend_set *set = &dj->job->ctx->backends;
    dj->report = json_pack("{s:b, s:[]}", "ok", 1, "checks");
    for (size_t i = 0; i < set->n; i++) {
        json_t *part = set->slots[i].ops->host_check(dj->state_dir);
        if (part != NULL)
            doctor_merge(dj->report, part);
        json_decref(part);
    }
}

static void doctor_after(uv_work_t *w, int status)
{
    struct doctor_job *dj = container_of(w, struct doctor_job, work);
    tool_job_set_detail(dj->job, "ok=%s",
                        json_is_true(json_object_get(dj->report, "ok")) ? "true" : "false");
    tool_job_finish(dj->job, dj->report);
    free(dj->state_dir);
    free(dj);
}

/* diagnose_sandbox without a sandbox: the checks of `mcpbox doctor`, each failure with its fix. */
static void diagnose_host(struct tool_job *job)
{
    struct doctor_job *dj = xcalloc(1, sizeof(*dj));
    dj->job = job;
    const char *dir = job->ctx->store ? store_state_dir(job->ctx->store) : NULL;
    if (dir == NULL && job->ctx->config != NULL)
        dir = job->ctx->config->state_dir;
    dj->state_dir = xstrdup(dir ? dir : ".");
    if (uv_queue_work(job->ctx->loop, &dj->work, doctor_work, doctor_after) != 0) {
        doctor_work(&dj->work); /* no thread pool: run inline rather than fail */
        doctor_after(&dj->work, 0);
    }
}

void tool_diagnose_sandbox(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    if (json_object_get(args, "sandbox_id") == NULL) { /* no sandbox: the host itself */
        diagnose_host(job);
        return;
    }
    const char *what = tools_arg_str(args, "what", "summary");
    bool metrics = strcmp(what, "metrics") == 0;
    tool_job_set_detail(job, "what=%s", what);
    const char *command_id = tools_arg_str(args, "command_id", NULL);
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""),
                      metrics ? TOOL_NEED_RUNNING : TOOL_NEED_ANY, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    if (command_id != NULL && !metrics) {
        tool_job_set_detail(job, "command_id=%s", command_id);
        diagnose_command(job, command_id);
        return;
    }
    if ((metrics ? job->be->ops->metrics(job->be, job->sandbox_id, metrics_done_cb, job, &err)
                 : job->be->ops->diagnose(job->be, job->sandbox_id, what, tool_job_done_cb, job,
                                          &err)) < 0) {
        tools_instead(&err, "call get_sandbox for what it records of the sandbox's usage");
        tool_job_fail(job, &err);
    }
}
