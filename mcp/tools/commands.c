/* Command tools: run_command (progress heartbeats, a per-call time budget after which the command
 * goes on in the background, cancellation that kills it, capped output), get_command and
 * kill_command. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "mcp/tools/session.h"
#include "server/context.h"

/* After a cancellation, how long to wait for the killed command to report before giving up on
 * it (the reply is discarded anyway; this only bounds how long we hold its state). */
#define RUN_CANCEL_GRACE_MS 10000u

struct run_job {
    struct tool_job *job;
    struct exec_handle *handle;
    char *command_id;
    struct out_capture out, err, tail;
    uv_timer_t progress_timer, budget_timer;
    int open_timers;
    uint64_t started_ms;
    double last_progress;
    bool finished, kill_pending, budget_passed, background;
    struct session_run session; /* run_command's session argument (mcp/tools/session.c) */
};

static void run_free_cb(uv_handle_t *h)
{
    struct run_job *rj = h->data;
    if (--rj->open_timers > 0)
        return;
    out_capture_release(&rj->out);
    out_capture_release(&rj->err);
    out_capture_release(&rj->tail);
    session_run_release(&rj->session);
    free(rj->command_id);
    free(rj);
}

/* Called once the call has its answer and the backend will call us no more. */
static void run_cleanup(struct run_job *rj)
{
    uv_close((uv_handle_t *)&rj->progress_timer, run_free_cb);
    uv_close((uv_handle_t *)&rj->budget_timer, run_free_cb);
}

static void copy_or_null(json_t *dst, json_t *src, const char *key)
{
    json_t *v = src ? json_object_get(src, key) : NULL;
    json_object_set_new(dst, key, v ? json_incref(v) : json_null());
}

static const char *run_note(const char *status, bool truncated)
{
    if (strcmp(status, "running") == 0)
        return "still running in the background; call get_command with this command_id "
               "(wait_seconds to wait for the end, offset to read output)";
    if (strcmp(status, "oom_killed") == 0)
        return "killed for running out of memory; create the sandbox with more memory or call "
               "diagnose_sandbox";
    if (strcmp(status, "timed_out") == 0)
        return "killed after timeout_seconds; raise timeout_seconds or run it with "
               "background:true";
    if (truncated)
        return "output cut in the middle; call get_command with offset to read all of it";
    return NULL;
}

static json_t *run_result(struct run_job *rj, const char *status, json_t *fin)
{
    bool t_out = false, t_err = false;
    json_t *res = json_object();
    json_object_set_new(res, "command_id", json_string(rj->command_id ? rj->command_id : ""));
    json_object_set_new(res, "status", json_string(status));
    copy_or_null(res, fin, "exit_code");
    copy_or_null(res, fin, "signal");
    json_object_set_new(res, "stdout", out_capture_render(&rj->out, &t_out));
    json_object_set_new(res, "stderr", out_capture_render(&rj->err, &t_err));
    json_t *dur = fin ? json_object_get(fin, "duration_ms") : NULL;
    json_object_set_new(res, "duration_ms",
                        json_is_integer(dur) ? json_incref(dur)
                                             : json_integer((json_int_t)(now_mono_ms() -
                                                                         rj->started_ms)));
    json_object_set_new(res, "truncated", json_boolean(t_out || t_err));
    json_object_set_new(res, "stdout_bytes", json_integer((json_int_t)rj->out.total));
    json_object_set_new(res, "stderr_bytes", json_integer((json_int_t)rj->err.total));
    const char *note = run_note(status, t_out || t_err);
    if (note != NULL)
        json_object_set_new(res, "note", json_string(note));
    return res;
}

static void run_finish(struct run_job *rj, const char *status, json_t *fin)
{
    rj->finished = true;
    uv_timer_stop(&rj->progress_timer);
    uv_timer_stop(&rj->budget_timer);
    tool_job_set_detail(rj->job, "command_id=%s status=%s", rj->command_id ? rj->command_id : "",
                        status);
    json_t *res = run_result(rj, status, fin);
    struct mcp_error err;
    if (rj->session.name != NULL && session_run_decorate(&rj->session, res, &err) < 0) {
        json_decref(res);
        tool_job_fail(rj->job, &err);
    } else {
        tool_job_finish(rj->job, res);
    }
    rj->job = NULL;
}

/* The one place that routes a command id: a session command on the proc primitive has an id of
 * its own (backend/shell_session_proc.h), every other id is the backend's. */
static int command_get_any(struct backend *be, const char *sandbox_id, const char *command_id,
                           uint64_t offset, uint64_t limit, backend_cb *cb, void *arg,
                           struct mcp_error *err)
{
    if (shell_session_proc_available(be) && shell_session_proc_is_command_id(command_id))
        return shell_session_proc_command_get(be, sandbox_id, command_id, offset, limit, cb, arg,
                                              err);
    return be->ops->command_get(be, sandbox_id, command_id, offset, limit, cb, arg, err);
}

static int command_kill_any(struct backend *be, const char *sandbox_id, const char *command_id,
                            int sig, backend_cb *cb, void *arg, struct mcp_error *err)
{
    if (shell_session_proc_available(be) && shell_session_proc_is_command_id(command_id))
        return shell_session_proc_command_kill(be, sandbox_id, command_id, sig, cb, arg, err);
    return be->ops->command_kill(be, sandbox_id, command_id, sig, cb, arg, err);
}

static void kill_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    if (err != NULL)
        log_info("killing a cancelled command: %s", err->msg);
}

static void run_kill(struct run_job *rj)
{
    struct mcp_error err;
    struct backend *be = rj->job->be;
    /* A session's helper passes SIGTERM on to the command as SIGINT; SIGKILL would leave it. */
    int sig = rj->session.name != NULL ? SIGTERM : SIGKILL;
    if (command_kill_any(be, rj->job->sandbox_id, rj->command_id, sig, kill_done_cb, NULL, &err) <
        0)
        log_info("killing cancelled command %s: %s", rj->command_id, err.msg);
}

static void run_budget_cb(uv_timer_t *t);

static void run_on_started(void *arg, const char *command_id)
{
    struct run_job *rj = arg;
    rj->command_id = xstrdup(command_id);
    if (rj->kill_pending)
        run_kill(rj);
    else if (rj->background || rj->budget_passed)
        uv_timer_start(&rj->budget_timer, run_budget_cb, 0, 0); /* detach, outside this callback */
}

static void run_emit_stdout(void *arg, const char *data, size_t len)
{
    struct run_job *rj = arg;
    out_capture_add(&rj->out, data, len);
    out_capture_add(&rj->tail, data, len);
}

static void run_on_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct run_job *rj = arg;
    if (rj->session.tail != NULL && stream == EXEC_STDOUT) { /* hold back a trailer */
        shell_session_tail_feed(rj->session.tail, data, len, run_emit_stdout, rj);
        return;
    }
    out_capture_add(stream == EXEC_STDERR ? &rj->err : &rj->out, data, len);
    out_capture_add(&rj->tail, data, len);
}

/* The end of a session command's stdout, with its trailer cut off (or all of it, when the
 * reply goes before the end). */
static void run_session_flush(struct run_job *rj)
{
    if (rj->session.tail != NULL)
        shell_session_tail_finish(rj->session.tail, run_emit_stdout, rj, &rj->session.res);
}

static void run_on_done(void *arg, json_t *result, const struct mcp_error *err);

/* The remote turned out to keep no sessions: the command goes to the helper scripts. */
static bool run_session_fallback(struct run_job *rj, const struct mcp_error *why,
                                 struct mcp_error *err)
{
    if (!rj->session.remote || why->code != MCP_ERR_UNSUPPORTED || rj->command_id != NULL)
        return false;
    struct exec_observer obs = {run_on_started, run_on_output, run_on_done, rj};
    return session_run_fallback(rj->job->be, rj->job->sandbox_id, &rj->session, why, &obs,
                                &rj->handle, err) == 0;
}

static void run_on_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct run_job *rj = arg;
    struct mcp_error fallback_err;
    rj->handle = NULL;
    rj->session.proc = NULL; /* its end: freed by the session */
    if (err != NULL && rj->session.remote && !rj->finished && rj->job != NULL) {
        if (run_session_fallback(rj, err, &fallback_err))
            return;
        if (!rj->session.remote) /* the fallback failed to start: its error */
            err = &fallback_err;
    }
    if (err != NULL) {
        rj->finished = true;
        tool_job_fail(rj->job, err);
        rj->job = NULL;
    } else {
        const char *status = json_string_value(json_object_get(result, "status"));
        run_session_flush(rj);
        run_finish(rj, status ? status : "exited", result);
    }
    run_cleanup(rj);
}

/* The call's time budget passed (or background:true): leave the command running. */
static void run_budget_cb(uv_timer_t *t)
{
    struct run_job *rj = t->data;
    if (rj->finished)
        return;
    if (rj->command_id == NULL) {
        rj->budget_passed = true; /* detach as soon as it has an id */
        return;
    }
    if (rj->session.name != NULL)
        session_run_detach(&rj->session, rj->job->be, rj->handle);
    else
        rj->job->be->ops->exec_detach(rj->handle);
    rj->handle = NULL;
    run_session_flush(rj);
    run_finish(rj, "running", NULL);
    run_cleanup(rj);
}

static void run_progress_cb(uv_timer_t *t)
{
    struct run_job *rj = t->data;
    if (!rj->finished)
        tools_progress_heartbeat(rj->job->call, "running", rj->started_ms, &rj->last_progress,
                                 &rj->tail);
}

static void run_cancel_cb(void *arg)
{
    struct run_job *rj = arg;
    if (rj->finished)
        return;
    if (rj->command_id != NULL)
        run_kill(rj);
    else
        rj->kill_pending = true;
    /* Wait for the command's end; if the backend never reports it, give up after a grace. */
    rj->background = false;
    uv_timer_start(&rj->budget_timer, run_budget_cb, RUN_CANCEL_GRACE_MS, 0);
}

static struct run_job *run_job_new(struct tool_job *job, json_t *args)
{
    struct run_job *rj = xcalloc(1, sizeof(*rj));
    rj->job = job;
    size_t cap = (size_t)tools_arg_int(args, "max_output_bytes", TOOLS_DEFAULT_OUTPUT_CAP,
                                       TOOLS_MIN_OUTPUT_CAP, TOOLS_MAX_OUTPUT_CAP);
    out_capture_init(&rj->out, cap);
    out_capture_init(&rj->err, cap);
    out_capture_init_split(&rj->tail, 0, TOOLS_PROGRESS_TAIL_BYTES * 4);
    rj->background = tools_arg_bool(args, "background", false);
    uv_timer_init(job->ctx->loop, &rj->progress_timer);
    uv_timer_init(job->ctx->loop, &rj->budget_timer);
    rj->progress_timer.data = rj->budget_timer.data = rj;
    rj->open_timers = 2;
    rj->started_ms = now_mono_ms();
    return rj;
}

static void exec_request_from_args(json_t *args, struct exec_request *req)
{
    memset(req, 0, sizeof(*req));
    req->command = tools_arg_str(args, "command", "");
    req->cwd = tools_arg_str(args, "cwd", NULL);
    req->env = json_object_get(args, "env");
    json_t *in = json_object_get(args, "stdin");
    if (json_is_string(in)) {
        req->stdin_data = json_string_value(in);
        req->stdin_len = json_string_length(in);
    }
    req->timeout_ms = duration_ms(tools_arg_int(args, "timeout_seconds", 0, 0, MAX_DURATION_S));
}

void tool_run_command(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    if (tools_pairs_to_object(args, "env", &err) < 0 ||
        tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    struct run_job *rj = run_job_new(job, args);
    struct exec_request req;
    exec_request_from_args(args, &req);
    struct exec_observer obs = {run_on_started, run_on_output, run_on_done, rj};
    int rc = json_is_string(json_object_get(args, "session"))
                 ? session_run_start(job->be, job->sandbox_id, args, &rj->session, &obs,
                                     &rj->handle, &err)
                 : job->be->ops->exec(job->be, job->sandbox_id, &req, &obs, &rj->handle, &err);
    if (rc < 0) {
        rj->finished = true;
        tool_job_fail(job, &err);
        run_cleanup(rj);
        return;
    }
    /* The same default in a task as in a plain call, so that an agent gets the command id at
     * 50 s on either protocol revision; longer only when asked and a client will wait. */
    bool capped;
    int64_t wait_s = tools_wait_seconds(call, args, "wait_seconds", TOOLS_DEFAULT_WAIT_S,
                                        TOOLS_MAX_WAIT_S, &capped);
    if (!rj->background)
        uv_timer_start(&rj->budget_timer, run_budget_cb, (uint64_t)wait_s * 1000, 0);
    if (tool_call_wants_progress(call))
        uv_timer_start(&rj->progress_timer, run_progress_cb, TOOLS_PROGRESS_INTERVAL_MS,
                       TOOLS_PROGRESS_INTERVAL_MS);
    tool_call_on_cancel(call, run_cancel_cb, rj);
}

/* ---- get_command: status and output by offset, optionally waiting for the end ---------------- */

struct get_job {
    struct tool_job *job;
    char *command_id;
    uint64_t offset, limit, deadline_ms, last_progress_ms;
    uv_timer_t timer;
    bool cancelled, capped;
};

static void get_free_cb(uv_handle_t *h)
{
    struct get_job *gj = h->data;
    free(gj->command_id);
    free(gj);
}

static void get_timer_cb(uv_timer_t *t);

static void get_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct get_job *gj = arg;
    struct mcp_error e;
    if (err == NULL && !json_is_object(result))
        err = (tools_no_result(&e), &e);
    const char *status = result ? json_string_value(json_object_get(result, "status")) : NULL;
    uint64_t now = now_mono_ms();
    if (err == NULL && status != NULL && strcmp(status, "running") == 0 && !gj->cancelled &&
        now < gj->deadline_ms) {
        if (now - gj->last_progress_ms >= TOOLS_PROGRESS_INTERVAL_MS) {
            gj->last_progress_ms = now;
            tool_call_progress(gj->job->call, (double)now / 1000.0, 0, "waiting for the command");
        }
        uv_timer_start(&gj->timer, get_timer_cb, TOOLS_GET_POLL_MS, 0);
        return;
    }
    if (err != NULL) {
        tool_job_fail(gj->job, err);
    } else {
        tool_job_set_detail(gj->job, "command_id=%s status=%s", gj->command_id,
                            status ? status : "?");
        bool cut = gj->capped && status != NULL && strcmp(status, "running") == 0;
        json_t *res = cut ? json_deep_copy(result) : json_incref(result);
        if (cut) {
            json_object_set_new(res, "note", json_string(
                "still running; waited 50 s, the most without a progress token (clients time "
                "out at about 60 s): call get_command again"));
        }
        tool_job_finish(gj->job, res);
    }
    uv_close((uv_handle_t *)&gj->timer, get_free_cb);
}

static void get_query(struct get_job *gj)
{
    struct mcp_error err;
    struct backend *be = gj->job->be;
    if (command_get_any(be, gj->job->sandbox_id, gj->command_id, gj->offset, gj->limit, get_done_cb,
                        gj, &err) < 0)
        get_done_cb(gj, NULL, &err);
}


static void get_timer_cb(uv_timer_t *t)
{
    get_query(t->data);
}

static void get_cancel_cb(void *arg)
{
    ((struct get_job *)arg)->cancelled = true;
}

void tool_get_command(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_ANY, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    struct get_job *gj = xcalloc(1, sizeof(*gj));
    gj->job = job;
    gj->command_id = xstrdup(tools_arg_str(args, "command_id", ""));
    gj->offset = (uint64_t)tools_arg_int(args, "offset", 0, 0, INT64_MAX);
    gj->limit = (uint64_t)tools_arg_int(args, "limit", TOOLS_DEFAULT_GET_LIMIT, 1,
                                        TOOLS_MAX_GET_LIMIT);
    gj->last_progress_ms = now_mono_ms();
    gj->deadline_ms = gj->last_progress_ms +
                      (uint64_t)tools_wait_seconds(call, args, "wait_seconds", 0,
                                                   TOOLS_MAX_GET_WAIT_S, &gj->capped) * 1000;
    uv_timer_init(job->ctx->loop, &gj->timer);
    gj->timer.data = gj;
    tool_call_on_cancel(call, get_cancel_cb, gj);
    get_query(gj);
}

/* ---- kill_command: send the signal, then report what it did ---------------------------------- */

/* The answer must be true: the command's final status once the signal has ended it (polled for
 * up to TOOLS_KILL_WAIT_MS), else "killing" (SIGKILL sent, not reaped yet) or, for a signal the
 * command may handle, "running" with a note saying the signal was delivered. */
struct kill_job {
    struct tool_job *job;
    char *command_id;
    int sig;
    uint64_t deadline_ms;
    uv_timer_t timer;
};

static void kill_free_cb(uv_handle_t *h)
{
    struct kill_job *kj = h->data;
    free(kj->command_id);
    free(kj);
}

static void kill_finish(struct kill_job *kj, json_t *out, const struct mcp_error *err)
{
    if (err != NULL)
        tool_job_fail(kj->job, err);
    else
        tool_job_finish(kj->job, out);
    uv_close((uv_handle_t *)&kj->timer, kill_free_cb);
}

static void kill_poll(struct kill_job *kj);

static void kill_timer_cb(uv_timer_t *t)
{
    kill_poll(t->data);
}

static void kill_status_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct kill_job *kj = arg;
    const char *status = json_string_value(json_object_get(result, "status"));
    bool running = err != NULL || status == NULL || strcmp(status, "running") == 0;
    if (running && now_mono_ms() < kj->deadline_ms) {
        uv_timer_start(&kj->timer, kill_timer_cb, TOOLS_KILL_POLL_MS, 0);
        return;
    }
    json_t *out = json_pack("{s:s}", "command_id", kj->command_id);
    if (!running) {
        json_object_set_new(out, "status", json_string(status));
        json_object_set(out, "exit_code", json_object_get(result, "exit_code"));
        json_object_set(out, "signal", json_object_get(result, "signal"));
    } else {
        json_object_set_new(out, "status", json_string(kj->sig == SIGKILL ? "killing"
                                                                           : "running"));
        json_object_set_new(out, "note", json_string(
            "the signal was delivered and the command has not ended yet; get_command with "
            "wait_seconds reports its end"));
    }
    tool_job_set_detail(kj->job, "command_id=%s signal=%d status=%s", kj->command_id, kj->sig,
                        json_string_value(json_object_get(out, "status")));
    kill_finish(kj, out, NULL);
}

static void kill_poll(struct kill_job *kj)
{
    struct mcp_error err;
    struct backend *be = kj->job->be;
    if (command_get_any(be, kj->job->sandbox_id, kj->command_id, 0, 1, kill_status_cb, kj, &err) <
        0)
        kill_status_cb(kj, NULL, &err);
}

static void kill_sent_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct kill_job *kj = arg;
    if (err != NULL) {
        kill_finish(kj, NULL, err);
        return;
    }
    kj->deadline_ms = now_mono_ms() + TOOLS_KILL_WAIT_MS;
    kill_poll(kj);
}

void tool_kill_command(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *command_id = tools_arg_str(args, "command_id", "");
    int sig = tools_signal_number(tools_arg_str(args, "signal", "KILL"));
    if (sig < 0) {
        mcp_error_set(&err, MCP_ERR_INVALID, 0, "signal: use KILL, TERM, INT, HUP, QUIT, USR1 "
                                                "or USR2");
        tool_job_fail(job, &err);
        return;
    }
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_ANY, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    struct kill_job *kj = xcalloc(1, sizeof(*kj));
    kj->job = job;
    kj->command_id = xstrdup(command_id);
    kj->sig = sig;
    uv_timer_init(job->ctx->loop, &kj->timer);
    kj->timer.data = kj;
    tool_job_set_detail(job, "command_id=%s signal=%d", command_id, sig);
    if (command_kill_any(job->be, job->sandbox_id, command_id, sig, kill_sent_cb, kj, &err) < 0)
        kill_finish(kj, NULL, &err);
}
