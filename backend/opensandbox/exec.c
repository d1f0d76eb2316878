/* Commands through execd: POST /command streams events (init, stdout/stderr lines, pings every
 * 3 s, then error{evalue=exit code} or execution_complete). A watched command keeps streaming
 * after exec_detach, so its output stays available to command_get in this process; commands
 * this process does not know are asked of execd (/command/status, /command/{id}/logs). */
#define LOG_MODULE "opensandbox"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/opensandbox/osb.h"
#include "backend/opensandbox/sse.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define OSB_SIGKILL 9
#define OSB_SIGTERM 15
#define OSB_TIMEOUT_SLACK_MS 50

struct osb_cmd {
    struct osb_cmd *next;
    struct osb_backend *b;
    char *sid;
    char *id;               /* execd's execution id (init.text); NULL before init */
    struct httpc_req *req;    /* the stream while it runs */
    struct osb_sse sse;
    struct exec_observer obs;
    bool observing, starting, finished, killed;
    struct mcp_error start_err;
    bool start_failed;
    struct buf log;         /* the tail of the interleaved output */
    uint64_t log_base;      /* offset of log.data[0] in the whole output */
    uint64_t stdout_bytes, stderr_bytes;
    uint64_t started_ms, duration_ms;
    int64_t timeout_ms;
    const char *status;     /* "running", "exited", "killed", "timed_out", "lost" */
    int64_t exit_code;      /* valid when has_exit */
    bool has_exit;
    int signal;             /* 0: none */
    char *lost_reason;
    json_t *body;           /* the /command body until the request starts */
    char *path;             /* NULL: /command; else a session's run (session.c) */
    struct osb_sess_run *sess;
};

/* ---- text -------------------------------------------------------------------------------------- */

/* ---- the request body -------------------------------------------------------------------------- */

json_t *osb_command_body(const struct exec_request *req, struct mcp_error *err)
{
    cleanup_free char *cmd = NULL;
    if (req->stdin_data != NULL) {
        if (req->stdin_len > OSB_STDIN_MAX) {
            mcp_error_set(err, MCP_ERR_LIMIT, 0,
                          "stdin is limited to %u bytes on OpenSandbox sandboxes; write "
                          "the data to a file with write_file and redirect from it",
                          OSB_STDIN_MAX);
            return NULL;
        }
        /* execd has no stdin for commands: feed it through base64 (safe in single quotes). */
        cleanup_free char *b64 = xmalloc(base64_encoded_len(req->stdin_len) + 1);
        base64_encode(req->stdin_data, req->stdin_len, b64);
        cmd = xasprintf("printf '%%s' '%s' | base64 -d | (\n%s\n)", b64, req->command);
    }
    cleanup_free char *cwd = osb_sandbox_path(req->cwd ? req->cwd : OSB_WORKSPACE);
    json_t *body = json_pack("{s:s,s:s}", "command", cmd ? cmd : req->command, "cwd", cwd);
    if (req->timeout_ms > 0)
        json_object_set_new(body, "timeout", json_integer(req->timeout_ms));
    if (req->env != NULL && json_object_size(req->env) > 0) {
        const char *k;
        json_t *v;
        json_object_foreach(req->env, k, v) {
            if (!json_is_string(v)) {
                json_decref(body);
                mcp_error_set(err, MCP_ERR_INVALID, 0, "env.%s must be a string", k);
                return NULL;
            }
        }
        json_object_set_new(body, "envs", json_deep_copy(req->env));
    }
    return body;
}

/* ---- the command table --------------------------------------------------------------------- */

static void cmd_free(struct osb_cmd *c)
{
    osb_sse_release(&c->sse);
    buf_release(&c->log);
    free(c->sid);
    free(c->id);
    free(c->lost_reason);
    json_decref(c->body);
    free(c->path);
    osb_sess_run_free(c->sess);
    free(c);
}

/* Keeps at most OSB_CMDS_RETAINED finished commands (the oldest go first). */
static void cmds_trim(struct osb_backend *b)
{
    while (b->ncmds > OSB_CMDS_RETAINED) {
        struct osb_cmd **victim = NULL;
        for (struct osb_cmd **pp = &b->cmds; *pp != NULL; pp = &(*pp)->next)
            if ((*pp)->finished && (*pp)->req == NULL)
                victim = pp; /* the list is newest first: the last finished is the oldest */
        if (victim == NULL)
            return;
        struct osb_cmd *c = *victim;
        *victim = c->next;
        b->ncmds--;
        cmd_free(c);
    }
}

void osb_cmds_free(struct osb_backend *b)
{
    while (b->cmds != NULL) {
        struct osb_cmd *c = b->cmds;
        b->cmds = c->next;
        cmd_free(c);
    }
    b->ncmds = 0;
}

static struct osb_cmd *cmd_find(struct osb_backend *b, const char *sid, const char *id)
{
    for (struct osb_cmd *c = b->cmds; c != NULL; c = c->next)
        if (c->id != NULL && strcmp(c->id, id) == 0 && strcmp(c->sid, sid) == 0)
            return c;
    return NULL;
}

/* ---- streaming ------------------------------------------------------------------------------- */

static void cmd_log(struct osb_cmd *c, const char *data, size_t len)
{
    if (c->log.len + len > OSB_CMD_LOG_MAX) { /* drop a quarter at once: amortised O(1) */
        size_t drop = c->log.len < OSB_CMD_LOG_MAX / 4 ? c->log.len : OSB_CMD_LOG_MAX / 4;
        if (c->log.len + len - drop > OSB_CMD_LOG_MAX)
            drop = c->log.len;
        buf_consume(&c->log, drop);
        c->log_base += drop;
    }
    if (len > OSB_CMD_LOG_MAX) {
        c->log_base += len - OSB_CMD_LOG_MAX;
        data += len - OSB_CMD_LOG_MAX;
        len = OSB_CMD_LOG_MAX;
    }
    buf_append(&c->log, data, len);
}

void osb_cmd_emit(struct osb_cmd *c, enum exec_stream stream, const char *data, size_t n)
{
    cmd_log(c, data, n);
    if (stream == EXEC_STDOUT)
        c->stdout_bytes += n;
    else
        c->stderr_bytes += n;
    if (c->observing && c->obs.on_output)
        c->obs.on_output(c->obs.arg, stream, data, n);
}

static void cmd_output(struct osb_cmd *c, enum exec_stream stream, const char *text)
{
    /* One event per line, terminator removed; an empty line arrives as "\n". */
    size_t n = strlen(text);
    cleanup_free char *line = xmalloc(n + 2);
    memcpy(line, text, n);
    if (n == 0 || text[n - 1] != '\n')
        line[n++] = '\n';
    line[n] = '\0';
    if (c->sess != NULL && stream == EXEC_STDOUT)
        osb_sess_run_stdout(c->sess, line, n);
    else
        osb_cmd_emit(c, stream, line, n);
}

static json_t *cmd_status_json(const struct osb_cmd *c)
{
    json_t *j = json_pack("{s:s,s:s,s:I,s:I,s:I}", "command_id", c->id ? c->id : "", "status",
                          c->status ? c->status : "running", "duration_ms",
                          (json_int_t)c->duration_ms, "stdout_bytes",
                          (json_int_t)c->stdout_bytes, "stderr_bytes",
                          (json_int_t)c->stderr_bytes);
    json_object_set_new(j, "exit_code", c->has_exit ? json_integer(c->exit_code) : json_null());
    json_object_set_new(j, "signal", c->signal ? json_integer(c->signal) : json_null());
    if (c->lost_reason)
        json_object_set_new(j, "error", json_string(c->lost_reason));
    return j;
}

/* The command ended (terminal event, or the stream broke after init). */
static void cmd_finish(struct osb_cmd *c, const struct mcp_error *err)
{
    if (c->finished)
        return;
    c->finished = true;
    c->duration_ms = now_mono_ms() - c->started_ms;
    if (c->req != NULL)
        httpc_cancel(c->req); /* execd holds the stream ~1 s after the end: drop it */
    if (c->sess != NULL && err == NULL)
        osb_sess_run_end(c->sess, c, c->status, c->has_exit ? c->exit_code : -1);
    if (c->observing) {
        c->observing = false;
        json_t *st = err ? NULL : cmd_status_json(c);
        c->obs.on_done(c->obs.arg, st, err);
        json_decref(st);
    }
}

static void cmd_error_event(struct osb_cmd *c, json_t *ev)
{
    json_t *e = json_object_get(ev, "error");
    const char *evalue = json_string_value(json_object_get(e, "evalue"));
    const char *tb = json_string_value(json_array_get(json_object_get(e, "traceback"), 0));
    char *end = NULL;
    long code = evalue ? strtol(evalue, &end, 10) : 0;
    if (evalue == NULL || end == evalue || *end != '\0') { /* cmd.Start() failed */
        struct mcp_error err;
        if (c->sess != NULL && c->killed) { /* kill_command deleted its session */
            osb_cmd_killed(c->b, c->sid, c->id);
            return;
        }
        if (c->sess != NULL) { /* a session run that did not run: execd's word on the session */
            osb_sess_run_refused(c->sess, evalue ? evalue : "no details", &err);
            cmd_finish(c, &err);
            return;
        }
        mcp_error_set(&err, MCP_ERR_BACKEND, 0, "the command could not be started in %s: %s",
                      c->sid, evalue ? evalue : "execd reported an error without details");
        cmd_finish(c, &err);
        return;
    }
    if (code >= 0) {
        c->status = "exited";
        c->exit_code = code;
        c->has_exit = true;
    } else {
        c->signal = (tb && strstr(tb, "terminated")) ? OSB_SIGTERM : OSB_SIGKILL;
        uint64_t ran = now_mono_ms() - c->started_ms;
        c->status = c->killed ? "killed"
                    : (c->timeout_ms > 0 && ran + OSB_TIMEOUT_SLACK_MS >= (uint64_t)c->timeout_ms)
                        ? "timed_out"
                        : "killed";
    }
    cmd_finish(c, NULL);
}

static int cmd_event(void *arg, json_t *ev)
{
    struct osb_cmd *c = arg;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *text = json_string_value(json_object_get(ev, "text"));
    if (type == NULL || c->finished)
        return 0;
    if (strcmp(type, "init") == 0 && c->id == NULL) {
        c->id = c->sess ? osb_sess_run_command_id(c->sess) : xstrdup(text ? text : "");
        if (c->observing && c->obs.on_started)
            c->obs.on_started(c->obs.arg, c->id);
    } else if (strcmp(type, "stdout") == 0 && text) {
        cmd_output(c, EXEC_STDOUT, text);
    } else if (strcmp(type, "stderr") == 0 && text) {
        cmd_output(c, EXEC_STDERR, text);
    } else if (strcmp(type, "error") == 0) {
        cmd_error_event(c, ev);
    } else if (strcmp(type, "execution_complete") == 0) {
        c->status = "exited";
        c->exit_code = 0;
        c->has_exit = true;
        cmd_finish(c, NULL);
    } /* ping and anything newer: ignored */
    return 0;
}

static int cmd_sink(void *arg, const char *data, size_t len)
{
    struct osb_cmd *c = arg;
    return osb_sse_feed(&c->sse, data, len) == 0 || c->finished ? 0 : -1;
}

static void cmd_stream_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct osb_cmd *c = arg;
    c->req = NULL;
    if (!c->finished && resp->status >= 200 && resp->status < 300)
        osb_sse_finish(&c->sse); /* an event may end without its blank line */
    if (!c->finished) {
        struct mcp_error e;
        if (err == NULL) {
            mcp_error_set(&e, MCP_ERR_BACKEND, 0, "execd closed the stream without a final "
                          "event");
            err = &e;
        }
        if (err->code == MCP_ERR_UNAVAILABLE && resp->status == 0)
            osb_endpoint_forget(c->b, c->sid + strlen(OSB_ID_PREFIX));
        if (c->id == NULL && c->sess != NULL && err->code == MCP_ERR_NOT_FOUND)
            err = osb_sess_run_refused(c->sess, err->msg, &e); /* the remote lost it */
        if (c->id == NULL) { /* never started: a plain error */
            if (c->starting) {
                c->start_failed = true;
                mcp_error_copy(&c->start_err, err);
            }
            cmd_finish(c, err);
        } else {
            c->status = "lost";
            c->lost_reason = xasprintf("the stream from execd broke (%s); the command may "
                                       "still be running: call get_command", err->msg);
            cmd_finish(c, NULL);
        }
    }
    cmds_trim(c->b);
}

/* A command with a timeout gets that plus the request timeout; others only the stream's
 * liveness check (and no deadline when the sum would not fit). */
static uint32_t cmd_deadline_ms(const struct osb_cmd *c)
{
    uint64_t d = (uint64_t)c->timeout_ms + c->b->t.request_timeout_ms;
    return c->timeout_ms > 0 && d < UINT32_MAX ? (uint32_t)d : 0;
}

/* The stream could not start: inside osb_exec the error is returned, later it is reported. */
static void cmd_start_fail(struct osb_cmd *c, const struct mcp_error *err)
{
    if (c->starting) {
        c->start_failed = true;
        mcp_error_copy(&c->start_err, err);
        c->observing = false;
        c->finished = true;
        return;
    }
    cmd_finish(c, err);
}

static void cmd_with_endpoint(void *arg, const struct osb_endpoint *ep, const struct mcp_error *err)
{
    struct osb_cmd *c = arg;
    cleanup_json json_t *body = steal_ptr(&c->body);
    if (err != NULL) {
        cmd_start_fail(c, err);
        return;
    }
    struct osb_call_opts o = {
        .method = "POST", .what = "running the command", .sandbox_id = c->sid, .json = body,
        .retry = HTTPC_RETRY_SAFE, .stream = true, .sink = cmd_sink,
        .deadline_ms = cmd_deadline_ms(c),
    };
    struct mcp_error e;
    c->req = osb_execd_call(c->b, ep, c->path ? c->path : "/command", &o, cmd_stream_done, c, &e);
    if (c->req == NULL)
        cmd_start_fail(c, &e);
}

static struct osb_cmd *cmd_new(struct osb_backend *b, const char *sandbox_id, json_t *body,
                               int64_t timeout_ms, const struct exec_observer *obs)
{
    struct osb_cmd *c = xcalloc(1, sizeof(*c));
    c->b = b;
    c->sid = xstrdup(sandbox_id);
    c->body = body;
    c->obs = *obs;
    c->observing = true;
    c->timeout_ms = timeout_ms;
    c->started_ms = now_mono_ms();
    c->status = "running";
    buf_init(&c->log, OSB_CMD_LOG_MAX);
    osb_sse_init(&c->sse, cmd_event, c);
    return c;
}

struct osb_cmd *osb_cmd_for_session(struct osb_backend *b, const char *sandbox_id, json_t *body,
                                    int64_t timeout_ms, const struct exec_observer *obs,
                                    struct osb_sess_run *sess)
{
    struct osb_cmd *c = cmd_new(b, sandbox_id, body, timeout_ms, obs);
    c->sess = sess;
    c->starting = true;
    c->next = b->cmds;
    b->cmds = c;
    b->ncmds++;
    return c;
}

void osb_cmd_start_at(struct osb_cmd *c, const struct osb_endpoint *ep, const char *path)
{
    free(c->path);
    c->path = xstrdup(path);
    cmd_with_endpoint(c, ep, NULL);
}

void osb_cmd_fail(struct osb_cmd *c, const struct mcp_error *err)
{
    json_decref(steal_ptr(&c->body));
    cmd_start_fail(c, err);
    cmds_trim(c->b);
}

int osb_cmd_started(struct osb_cmd *c, int rc, struct mcp_error *err)
{
    c->starting = false;
    if (rc == 0 && !c->start_failed)
        return 0;
    if (rc == 0)
        mcp_error_copy(err, &c->start_err);
    c->observing = false;
    c->finished = true; /* stays in the list without an id: trimmed later */
    return -1;
}

int osb_exec(struct backend *be, const char *sandbox_id, const struct exec_request *req,
             const struct exec_observer *obs, struct exec_handle **out, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    if (req->stdin_open || (req->pty_rows && req->pty_cols))
        return backend_def_command_input(be, sandbox_id, NULL, NULL, 0, false, NULL, NULL, err);
    json_t *body = osb_command_body(req, err);
    if (body == NULL)
        return -1;
    struct osb_cmd *c = cmd_new(b, sandbox_id, body, req->timeout_ms, obs);
    c->starting = true;
    int rc = osb_endpoint_resolve(b, sandbox_id, cmd_with_endpoint, c, err);
    c->starting = false;
    if (rc != 0 || c->start_failed) {
        if (rc == 0)
            mcp_error_copy(err, &c->start_err);
        cmd_free(c);
        return -1;
    }
    c->next = b->cmds;
    b->cmds = c;
    b->ncmds++;
    if (out != NULL)
        *out = (struct exec_handle *)c;
    return 0;
}

void osb_exec_detach(struct exec_handle *h)
{
    struct osb_cmd *c = (struct osb_cmd *)h;
    c->observing = false; /* the stream goes on: the output stays available to command_get */
    if (c->sess != NULL)
        osb_sess_run_detach(c->sess);
}

/* ---- command_get ------------------------------------------------------------------------------ */

static json_t *cmd_page(const char *id, const char *status, json_t *exit_code, json_t *signal,
                        int64_t duration_ms, const char *data, size_t len, uint64_t offset,
                        uint64_t total, bool done)
{
    if (offset + len < total) /* more follows: never end inside a character */
        len = utf8_page_end(data, len);
    json_t *j = json_pack("{s:s,s:s,s:o,s:o,s:o,s:I,s:I,s:I,s:b}", "command_id", id, "status",
                          status, "exit_code", exit_code, "signal", signal, "output",
                          utf8_json_text(data, len), "offset", (json_int_t)offset, "next_offset",
                          (json_int_t)(offset + len), "total_bytes", (json_int_t)total, "eof",
                          done && offset + len >= total);
    json_object_set_new(j, "duration_ms",
                        duration_ms >= 0 ? json_integer(duration_ms) : json_null());
    return j;
}

static json_t *cmd_get_local(struct osb_cmd *c, uint64_t offset, uint64_t limit)
{
    uint64_t total = c->log_base + c->log.len;
    if (offset < c->log_base)
        offset = c->log_base; /* older output was dropped (bounded memory) */
    if (offset > total)
        offset = total;
    uint64_t n = total - offset;
    if (limit > 0 && n > limit)
        n = limit;
    const char *data = c->log.data ? c->log.data + (offset - c->log_base) : "";
    int64_t dur = c->finished ? (int64_t)c->duration_ms : (int64_t)(now_mono_ms() - c->started_ms);
    return cmd_page(c->id, c->status, c->has_exit ? json_integer(c->exit_code) : json_null(),
                    c->signal ? json_integer(c->signal) : json_null(), dur, data, (size_t)n,
                    offset, total, c->finished);
}

struct cmd_query {
    struct osb_backend *b;
    char *sid, *id;
    uint64_t offset, limit;
    backend_cb *cb;
    void *arg;
    json_t *status;
};

static void query_free(struct cmd_query *q)
{
    free(q->sid);
    free(q->id);
    json_decref(q->status);
    free(q);
}

static int64_t remote_duration(json_t *st)
{
    int64_t a, z;
    const char *s = json_string_value(json_object_get(st, "started_at"));
    const char *f = json_string_value(json_object_get(st, "finished_at"));
    if (s == NULL || parse_rfc3339_ms(s, &a) != 0)
        return -1;
    if (f == NULL || parse_rfc3339_ms(f, &z) != 0)
        z = now_wall_ms();
    return z >= a ? z - a : 0;
}

static void logs_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct cmd_query *q = arg;
    bool running = json_is_true(json_object_get(q->status, "running"));
    json_t *ec = json_object_get(q->status, "exit_code");
    const char *status = running ? "running" : json_is_integer(ec) ? "exited" : "lost";
    const char *data = "";
    size_t len = 0;
    uint64_t total = q->offset;
    if (err == NULL) {
        data = resp->body.data ? resp->body.data : "";
        len = resp->body.len;
        total = q->offset + len;
        const char *cursor = httpc_response_header(resp, OSB_TAIL_CURSOR_HEADER);
        if (cursor[0])
            total = strtoull(cursor, NULL, 10);
        if (q->limit > 0 && len > q->limit)
            len = (size_t)q->limit;
    }
    json_t *page = cmd_page(q->id, status, json_is_integer(ec) ? json_incref(ec) : json_null(),
                            json_null(), remote_duration(q->status), data, len, q->offset,
                            total, !running);
    if (err != NULL)
        json_object_set_new(page, "note", json_string("execd keeps the output of background "
                            "commands only; this command's output is not available here"));
    q->cb(q->arg, page, NULL);
    json_decref(page);
    query_free(q);
}

static void status_done(void *arg, struct httpc_response *resp, const struct mcp_error *err);

static void query_with_endpoint(void *arg, const struct osb_endpoint *ep,
                                const struct mcp_error *err)
{
    struct cmd_query *q = arg;
    struct mcp_error e;
    if (err != NULL) {
        backend_defer(&q->b->base, q->cb, q->arg, NULL, err);
        query_free(q);
        return;
    }
    cleanup_free char *eid = osb_escape(q->id);
    cleanup_free char *path = q->status == NULL
        ? xasprintf("/command/status/%s", eid)
        : xasprintf("/command/%s/logs?cursor=%llu", eid, (unsigned long long)q->offset);
    struct osb_call_opts o = {.method = "GET", .sandbox_id = q->sid,
                              .what = q->status ? "reading the command's output"
                                                : "getting the command's status",
                              .retry = HTTPC_RETRY_IDEMPOTENT, .body_cap = OSB_CMD_LOG_MAX};
    if (osb_execd_call(q->b, ep, path, &o, q->status ? logs_done : status_done, q, &e) == NULL) {
        backend_defer(&q->b->base, q->cb, q->arg, NULL, &e);
        query_free(q);
    }
}

static void status_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct cmd_query *q = arg;
    struct mcp_error e;
    if (err != NULL && err->code == MCP_ERR_NOT_FOUND)
        mcp_error_set(&e, MCP_ERR_NOT_FOUND, 0, "no command %s in sandbox %s; run_command "
                      "returns the command_id to use", q->id, q->sid), err = &e;
    q->status = err ? NULL : osb_resp_json(resp, "getting the command's status", &e);
    if (q->status == NULL) {
        q->cb(q->arg, NULL, err ? err : &e);
        query_free(q);
        return;
    }
    if (osb_endpoint_resolve(q->b, q->sid, query_with_endpoint, q, &e) != 0) {
        q->cb(q->arg, NULL, &e);
        query_free(q);
    }
}

int osb_command_get(struct backend *be, const char *sandbox_id, const char *command_id,
                    uint64_t offset, uint64_t limit, backend_cb *cb, void *arg,
                    struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    struct osb_cmd *c = cmd_find(b, sandbox_id, command_id);
    if (c == NULL && osb_session_command_id(command_id))
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "no command %s known to this mcpbox process: execd keeps no output "
                             "of a command in a session, so only the process that ran it has "
                             "it (run the command again to see its output)",
                             command_id);
    if (c != NULL) {
        json_t *res = cmd_get_local(c, offset, limit);
        backend_defer(be, cb, arg, res, NULL);
        json_decref(res);
        return 0;
    }
    struct cmd_query *q = xcalloc(1, sizeof(*q));
    *q = (struct cmd_query){b, xstrdup(sandbox_id), xstrdup(command_id), offset, limit, cb, arg,
                            NULL};
    /* The first step may complete synchronously from the endpoint cache, but it only starts a
     * request: the callback always comes from the loop. */
    if (osb_endpoint_resolve(b, sandbox_id, query_with_endpoint, q, err) != 0) {
        query_free(q);
        return -1;
    }
    return 0;
}

void osb_cmd_killed(struct osb_backend *b, const char *sandbox_id, const char *command_id)
{
    struct osb_cmd *c = cmd_find(b, sandbox_id, command_id);
    if (c == NULL || c->finished)
        return;
    c->status = "killed";
    c->signal = OSB_SIGTERM;
    cmd_finish(c, NULL);
}

/* ---- command_kill ------------------------------------------------------------------------------ */

struct kill_op {
    struct osb_backend *b;
    char *sid, *id;
    int signal;
    backend_cb *cb;
    void *arg;
};

static void kill_free(struct kill_op *k)
{
    free(k->sid);
    free(k->id);
    free(k);
}

static void kill_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct kill_op *k = arg;
    const char *status = "killed";
    if (err != NULL && strstr(err->msg, "not running") != NULL) {
        status = "exited"; /* it had already finished */
        err = NULL;
    }
    if (err != NULL && resp->status == 500 && strstr(err->msg, "no such") != NULL) {
        struct mcp_error e;
        mcp_error_set(&e, MCP_ERR_NOT_FOUND, 0, "no running command %s in sandbox %s", k->id,
                      k->sid);
        k->cb(k->arg, NULL, &e);
        kill_free(k);
        return;
    }
    if (err != NULL) {
        k->cb(k->arg, NULL, err);
        kill_free(k);
        return;
    }
    struct osb_cmd *c = cmd_find(k->b, k->sid, k->id);
    if (c != NULL && !c->finished)
        c->killed = true;
    /* execd sends SIGTERM to the process group, then SIGKILL after 3 s, whatever was asked. */
    json_t *res = json_pack("{s:s,s:i,s:s}", "command_id", k->id, "signal", OSB_SIGTERM,
                            "status", status);
    k->cb(k->arg, res, NULL);
    json_decref(res);
    kill_free(k);
}

static void kill_with_endpoint(void *arg, const struct osb_endpoint *ep,
                               const struct mcp_error *err)
{
    struct kill_op *k = arg;
    struct mcp_error e;
    if (err != NULL) {
        backend_defer(&k->b->base, k->cb, k->arg, NULL, err);
        kill_free(k);
        return;
    }
    struct osb_cmd *c = cmd_find(k->b, k->sid, k->id);
    if (c != NULL && !c->finished)
        c->killed = true; /* the stream's final event will say -1: report "killed" */
    cleanup_free char *eid = osb_escape(k->id);
    cleanup_free char *path = xasprintf("/command?id=%s", eid);
    struct osb_call_opts o = {.method = "DELETE", .what = "interrupting the command",
                              .sandbox_id = k->sid, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_execd_call(k->b, ep, path, &o, kill_done, k, &e) == NULL) {
        backend_defer(&k->b->base, k->cb, k->arg, NULL, &e);
        kill_free(k);
    }
}

int osb_command_kill(struct backend *be, const char *sandbox_id, const char *command_id,
                     int signal, backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    if (osb_session_command_id(command_id)) {
        struct osb_cmd *c = cmd_find(b, sandbox_id, command_id);
        if (c != NULL && !c->finished)
            c->killed = true;
        return osb_session_command_kill(b, sandbox_id, command_id, cb, arg, err);
    }
    struct kill_op *k = xcalloc(1, sizeof(*k));
    *k = (struct kill_op){b, xstrdup(sandbox_id), xstrdup(command_id), signal, cb, arg};
    if (osb_endpoint_resolve(b, sandbox_id, kill_with_endpoint, k, err) != 0) {
        kill_free(k);
        return -1;
    }
    return 0;
}
