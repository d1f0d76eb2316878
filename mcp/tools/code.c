/* run_code: code in a stateful interpreter context (a driver in a local sandbox, or an
 * OpenSandbox code-interpreter image), with
 * progress heartbeats while it runs (as run_command), capped output, an interrupt after
 * timeout_seconds (the backend's) and on cancellation; actions list, delete and interrupt manage
 * the contexts. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"

struct code_job {
    struct tool_job *job;
    char *context_id;
    struct out_capture out, err, tail;
    uv_timer_t progress_timer;
    uint64_t started_ms;
    double last_progress;
    bool finished, cancel_pending;
    bool capped; /* timeout_seconds cut to what a client without progress waits */
};

static void code_free_cb(uv_handle_t *h)
{
    struct code_job *cj = h->data;
    out_capture_release(&cj->out);
    out_capture_release(&cj->err);
    out_capture_release(&cj->tail);
    free(cj->context_id);
    free(cj);
}

static void code_interrupt(struct code_job *cj);

static void code_on_started(void *arg, const char *context_id)
{
    struct code_job *cj = arg;
    free(cj->context_id);
    cj->context_id = xstrdup(context_id ? context_id : "");
    if (cj->cancel_pending)
        code_interrupt(cj); /* cancelled before the code had a context */
}

static void code_on_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct code_job *cj = arg;
    out_capture_add(stream == EXEC_STDERR ? &cj->err : &cj->out, data, len);
    out_capture_add(&cj->tail, data, len);
}

static const char *code_note(const char *status, bool truncated, bool dropped, bool lost_context,
                             bool output_file, bool capped)
{
    if (strcmp(status, "timed_out") == 0 && capped)
        return "interrupted after 50 s: without progress notifications a call is held within a "
               "client's 60 s timeout; the context keeps its state: send a progressToken to let "
               "timeout_seconds run longer, or run long work with run_command background:true";
    if (strcmp(status, "timed_out") == 0)
        return "interrupted after timeout_seconds; the context keeps its state: raise "
               "timeout_seconds, or run it with run_command background:true";
    if (strcmp(status, "lost") == 0 && lost_context)
        return "the context died and its state is gone (error says why): run again for a fresh "
               "default context, or create a new one";
    if (strcmp(status, "lost") == 0)
        return "the connection to the interpreter broke; the code may still run: call run_code "
               "with action \"interrupt\" or try again";
    if (dropped)
        return "results (such as images) were left out past 1 MiB of results (count in "
               "results_dropped); save large values to files in the sandbox (e.g. savefig) "
               "and fetch them with read_file";
    if (truncated && output_file)
        return "output cut in the middle (max_output_bytes): all of it is in output_file in the "
               "sandbox until the context's next run (read_file it with an offset)";
    if (truncated)
        return "output cut in the middle (max_output_bytes); print less, or write it to a file";
    return NULL;
}

/* The text block: what a notebook shows (output, results' text, the error), then the status. */
static void text_results(struct buf *b, json_t *res)
{
    json_t *r, *tb = json_object_get(json_object_get(res, "error"), "traceback"), *line;
    size_t i;
    json_array_foreach(json_object_get(res, "results"), i, r)
    {
        const char *plain = json_string_value(json_object_get(r, "text"));
        bool image = json_object_get(r, "image/png") || json_object_get(r, "image/jpeg");
        buf_printf(b, "%s%s\n", image ? "[an image: in the next content block] " : "",
                   plain ? plain : "");
    }
    json_array_foreach(tb, i, line) buf_printf(b, "%s\n", json_string_value(line));
}

static char *code_text(json_t *res)
{
    struct buf b;
    buf_init(&b, TOOLS_TEXT_MAX);
    buf_append_str(&b, json_string_value(json_object_get(res, "stdout")));
    const char *err = json_string_value(json_object_get(res, "stderr"));
    if (err && *err)
        buf_printf(&b, "[stderr]\n%s\n", err);
    text_results(&b, res);
    const char *note = json_string_value(json_object_get(res, "note"));
    buf_printf(&b, "[%s, execution_count %lld, context_id %s]%s%s",
               json_string_value(json_object_get(res, "status")),
               (long long)json_integer_value(json_object_get(res, "execution_count")),
               json_string_value(json_object_get(res, "context_id")), note ? " " : "",
               note ? note : "");
    return buf_steal(&b, NULL);
}

/* An image content block for each image result, as a client can show it. */
static json_t *code_images(json_t *res)
{
    json_t *blocks = json_array(), *r;
    size_t i;
    json_array_foreach(json_object_get(res, "results"), i, r)
    {
        const char *types[] = {"image/png", "image/jpeg"};
        for (size_t t = 0; t < 2; t++) {
            json_t *data = json_object_get(r, types[t]);
            if (json_is_string(data))
                json_array_append_new(blocks, json_pack("{s:s, s:O, s:s}", "type", "image", "data",
                                                        data, "mimeType", types[t]));
        }
    }
    return blocks;
}

static void code_finish(struct code_job *cj, json_t *res)
{
    char *text = code_text(res);
    json_t *images = code_images(res);
    tool_job_finish_blocks(cj->job, res, text, images);
    free(text);
}

static void code_on_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct code_job *cj = arg;
    cj->finished = true;
    uv_timer_stop(&cj->progress_timer);
    struct mcp_error e;
    if (err == NULL && !json_is_object(result))
        err = (tools_no_result(&e), &e);
    if (err != NULL) {
        tool_job_fail(cj->job, err);
    } else {
        bool t_out = false, t_err = false;
        json_t *res = json_deep_copy(result);
        json_object_set_new(res, "stdout", out_capture_render(&cj->out, &t_out));
        json_object_set_new(res, "stderr", out_capture_render(&cj->err, &t_err));
        bool dropped = json_integer_value(json_object_get(res, "results_dropped")) > 0;
        json_object_set_new(res, "truncated", json_boolean(t_out || t_err || dropped));
        const char *status = json_string_value(json_object_get(res, "status"));
        const char *ename =
            json_string_value(json_object_get(json_object_get(res, "error"), "name"));
        const char *note = code_note(status ? status : "", t_out || t_err, dropped,
                                     ename && !strcmp(ename, "ContextLost"),
                                     json_object_get(res, "output_file") != NULL, cj->capped);
        if (note != NULL)
            json_object_set_new(res, "note", json_string(note));
        tool_job_set_detail(cj->job, "context_id=%s status=%s",
                            json_string_value(json_object_get(res, "context_id")),
                            status ? status : "?");
        code_finish(cj, res);
    }
    cj->job = NULL;
    uv_close((uv_handle_t *)&cj->progress_timer, code_free_cb);
}

static void code_progress_cb(uv_timer_t *t)
{
    struct code_job *cj = t->data;
    if (!cj->finished)
        tools_progress_heartbeat(cj->job->call, "running code", cj->started_ms,
                                 &cj->last_progress, &cj->tail);
}

static void interrupt_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    if (err != NULL)
        log_info("interrupting cancelled code: %s", err->msg);
}

static void code_interrupt(struct code_job *cj)
{
    struct mcp_error err;
    struct backend *be = cj->job->be;
    json_t *a = json_pack("{s:s}", "context_id", cj->context_id);
    if (be->ops->code_context(be, cj->job->sandbox_id, "interrupt", a, interrupt_done_cb, NULL,
                              &err) < 0)
        log_info("interrupting cancelled code: %s", err.msg);
    json_decref(a);
}

/* The client cancelled: interrupt the kernel (as soon as the run has a context); the run then
 * ends and finishes the call, whose reply is dropped. */
static void code_cancel_cb(void *arg)
{
    struct code_job *cj = arg;
    if (cj->finished)
        return;
    if (cj->context_id == NULL)
        cj->cancel_pending = true;
    else
        code_interrupt(cj);
}

static struct code_job *code_job_new(struct tool_job *job, json_t *args, bool capped)
{
    struct code_job *cj = xcalloc(1, sizeof(*cj));
    cj->job = job;
    cj->capped = capped;
    size_t cap = (size_t)tools_arg_int(args, "max_output_bytes", TOOLS_DEFAULT_OUTPUT_CAP,
                                       TOOLS_MIN_OUTPUT_CAP, TOOLS_MAX_OUTPUT_CAP);
    out_capture_init(&cj->out, cap);
    out_capture_init(&cj->err, cap);
    out_capture_init_split(&cj->tail, 0, TOOLS_PROGRESS_TAIL_BYTES * 4);
    cj->started_ms = now_mono_ms();
    uv_timer_init(job->ctx->loop, &cj->progress_timer);
    cj->progress_timer.data = cj;
    return cj;
}

static void code_run(struct tool_job *job, json_t *args)
{
    struct mcp_error err;
    bool capped; /* as run_command's wait: a client that hears no progress waits at most 50 s */
    int64_t timeout_s = tools_wait_seconds(job->call, args, "timeout_seconds",
                                           TOOLS_DEFAULT_CODE_TIMEOUT_S, TOOLS_MAX_WAIT_S, &capped);
    struct code_request req = {
        .language = tools_arg_str(args, "language", NULL),
        .code = tools_arg_str(args, "code", NULL),
        .context_id = tools_arg_str(args, "context_id", NULL),
        .timeout_ms = (timeout_s < 1 ? 1 : timeout_s) * 1000,
    };
    if (req.code == NULL) {
        mcp_error_set(&err, MCP_ERR_INVALID, 0, "run_code needs code (or an action: create, list, "
                      "delete, interrupt)");
        tool_job_fail(job, &err);
        return;
    }
    struct code_job *cj = code_job_new(job, args, capped);
    struct exec_observer obs = {code_on_started, code_on_output, code_on_done, cj};
    if (job->be->ops->code_run(job->be, job->sandbox_id, &req, &obs, &err) < 0) {
        if (!backend_has(job->be->ops, BACKEND_CODE))
            tools_instead_code(job, &err);
        tool_job_fail(job, &err);
        uv_close((uv_handle_t *)&cj->progress_timer, code_free_cb);
        return;
    }
    if (tool_call_wants_progress(job->call))
        uv_timer_start(&cj->progress_timer, code_progress_cb, TOOLS_PROGRESS_INTERVAL_MS,
                       TOOLS_PROGRESS_INTERVAL_MS);
    tool_call_on_cancel(job->call, code_cancel_cb, cj);
}

void tool_run_code(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *action = tools_arg_str(args, "action", "run");
    tool_job_set_detail(job, "action=%s", action);
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    if (strcmp(action, "run") == 0) {
        code_run(job, args);
        return;
    }
    if (job->be->ops->code_context(job->be, job->sandbox_id, action, args, tool_job_done_cb, job,
                                   &err) < 0) {
        if (!backend_has(job->be->ops, BACKEND_CODE))
            tools_instead_code(job, &err);
        tool_job_fail(job, &err);
    }
}
