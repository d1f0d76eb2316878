/* execd's /command: a command's events streamed in execd's format (one JSON object and a blank
 * line per event: init, one stdout/stderr event per line, ping every 3 s, then
 * execution_complete or error), background commands, their status and logs (byte cursors), and
 * interrupt; over the backend's exec, command_get and command_kill. Also /ping and the dispatch
 * of the other execd paths. */
#define LOG_MODULE "osapi"
#include "osapi/osapi-internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shell_session.h"
#include "backend/shell_session_proc.h"
#include "lib/base/buf.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/server.h"

/* Output buffered while waiting for a line's end; a longer line is sent in pieces. */
#define CMD_MAX_LINE (64u * 1024u)
/* Bytes of log one /command/{id}/logs answer carries at most (the cursor says where to go on). */
#define CMD_LOGS_LIMIT (1u << 20)

struct cmd {
    struct osapi_req *req; /* the request while its stream is open, else NULL */
    struct backend *be;
    struct exec_handle *h; /* NULL once on_done came or after detaching */
    char *command;
    char id[80];
    uv_timer_t timer; /* pings while streaming; the deferred detach */
    struct buf line[3]; /* partial lines of stdout (1) and stderr (2) */
    struct shell_session_tail *tail; /* a session command's (osapi_session.c), else NULL */
    struct shell_session_handle *proc; /* a session command on the proc primitive, until done */
    struct shell_session_result *res;  /* ... and how it went */
    uint64_t started_ms;
    bool background, streaming, done, detach_pending, timer_open;
};

/* ---- events ----------------------------------------------------------------------------------- */

/* Valid UTF-8 copy of data (each invalid byte becomes U+FFFD). */
static char *utf8_clean(const char *data, size_t len)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)data[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n && i + n <= len && utf8_is_text(data + i, n) && c != 0) {
            buf_append(&b, data + i, n);
            i += n;
        } else {
            buf_append_str(&b, "\xef\xbf\xbd");
            i++;
        }
    }
    return buf_steal(&b, NULL);
}

static void send_event(struct cmd *cm, json_t *ev)
{
    if (!cm->req || !cm->req->conn) {
        json_decref(ev);
        return;
    }
    json_object_set_new(ev, "timestamp", json_integer(now_wall_ms()));
    char *s = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    size_t n = strlen(s);
    char *framed = xmalloc(n + 3);
    memcpy(framed, s, n);
    memcpy(framed + n, "\n\n", 3);
    http_ext_stream_write(cm->req->conn, framed, n + 2);
    free(framed);
    free(s);
}

static void send_line(struct cmd *cm, int stream, const char *data, size_t len)
{
    char *text = len ? utf8_clean(data, len) : xstrdup("\n"); /* execd sends "\n" for an empty line */
    send_event(cm, json_pack("{s:s, s:s}", "type", stream == EXEC_STDERR ? "stderr" : "stdout",
                             "text", text));
    free(text);
}

/* Lines end at \n or \r (execd's rule); the terminator is not sent. */
static void take_output(struct cmd *cm, int stream, const char *data, size_t len)
{
    struct buf *b = &cm->line[stream];
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\n' || data[i] == '\r') {
            bool crlf = data[i] == '\n' && b->len == 0 && i > 0 && data[i - 1] == '\r';
            if (!crlf)
                send_line(cm, stream, b->data, b->len);
            buf_reset(b);
            continue;
        }
        buf_append(b, data + i, 1);
        if (b->len >= CMD_MAX_LINE) {
            send_line(cm, stream, b->data, b->len);
            buf_reset(b);
        }
    }
}

static void flush_lines(struct cmd *cm)
{
    for (int s = EXEC_STDOUT; s <= EXEC_STDERR; s++)
        if (cm->line[s].len) {
            send_line(cm, s, cm->line[s].data, cm->line[s].len);
            buf_reset(&cm->line[s]);
        }
}

/* ---- the command's life ------------------------------------------------------------------------ */

static void cmd_free_cb(uv_handle_t *t)
{
    struct cmd *cm = t->data;
    for (int s = 0; s < 3; s++)
        buf_release(&cm->line[s]);
    free(cm->command);
    free(cm->tail);
    free(cm->res);
    free(cm);
}

/* Frees cm once the backend will not call it any more and the stream is over. */
static void cmd_maybe_free(struct cmd *cm)
{
    if (cm->h || cm->proc || cm->req || !cm->timer_open)
        return;
    cm->timer_open = false;
    uv_close((uv_handle_t *)&cm->timer, cmd_free_cb);
}

static void end_stream(struct cmd *cm)
{
    struct osapi_req *req = cm->req;
    if (!req)
        return;
    cm->req = NULL;
    uv_timer_stop(&cm->timer);
    struct http_conn *c = req->conn;
    req->conn = NULL; /* the connection's next request must not see our abort hook cleared */
    req->state = NULL;
    if (c) {
        http_ext_on_abort(c, NULL, NULL);
        http_ext_stream_end(c);
    }
    osapi_req_free(req);
}

static void on_timer(uv_timer_t *t)
{
    struct cmd *cm = t->data;
    if (cm->detach_pending && cm->h) {
        struct exec_handle *h = cm->h;
        cm->h = NULL;
        cm->be->ops->exec_detach(h);
    }
    if (cm->detach_pending && cm->proc) {
        shell_session_proc_detach(cm->proc);
        cm->proc = NULL;
    }
    if (cm->detach_pending) {
        cm->detach_pending = false;
        end_stream(cm);
        cmd_maybe_free(cm);
        return;
    }
    send_event(cm, json_pack("{s:s, s:s}", "type", "ping", "text", "pong"));
}

/* Stop watching from the loop, never from inside a backend callback. */
static void schedule_detach(struct cmd *cm)
{
    cm->detach_pending = true;
    uv_timer_start(&cm->timer, on_timer, 0, 0);
}

static void start_stream(struct cmd *cm)
{
    struct osapi_req *req = cm->req;
    cm->streaming = true;
    char extra[80];
    snprintf(extra, sizeof(extra), "X-Request-ID: %s\r\n", req->request_id);
    http_ext_stream_start(req->conn, 200, "text/event-stream", extra);
    send_event(cm, json_pack("{s:s, s:s}", "type", "init", "text", cm->id));
}

static void on_started(void *arg, const char *command_id)
{
    struct cmd *cm = arg;
    snprintf(cm->id, sizeof(cm->id), "%s", command_id);
    if (json_object_size(cm->req->api->commands) >= OSAPI_MAX_COMMANDS)
        json_object_clear(cm->req->api->commands); /* only content/started_at are lost */
    json_object_set_new(cm->req->api->commands, command_id,
                        json_pack("{s:s, s:I}", "content", cm->command, "started_ms",
                                  (json_int_t)now_wall_ms()));
    if (!cm->req->conn) { /* the client left before the command started */
        schedule_detach(cm);
        return;
    }
    start_stream(cm);
    if (cm->background) {
        /* execd: init, then at once execution_complete; the command runs on. */
        send_event(cm, json_pack("{s:s}", "type", "execution_complete"));
        schedule_detach(cm);
        return;
    }
    uv_timer_start(&cm->timer, on_timer, OSAPI_PING_MS, OSAPI_PING_MS);
}

static void take_stdout(void *arg, const char *data, size_t len)
{
    take_output(arg, EXEC_STDOUT, data, len);
}

static void on_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct cmd *cm = arg;
    if (cm->tail && stream == EXEC_STDOUT) /* hold back the session's trailer */
        shell_session_tail_feed(cm->tail, data, len, take_stdout, cm);
    else if (!cm->background)
        take_output(cm, stream, data, len);
}

/* A session command's end: its trailer cut off; a failure of the session itself (busy, gone,
 * missing) is the stream's error event. */
static bool session_end(struct cmd *cm)
{
    struct shell_session_result res;
    if (cm->res != NULL)
        res = *cm->res;
    else
        shell_session_tail_finish(cm->tail, take_stdout, cm, &res);
    flush_lines(cm);
    const char *failure = shell_session_failure(res.kind);
    if (failure != NULL)
        send_event(cm, json_pack("{s:s, s:{s:s, s:s, s:[s]}}", "type", "error", "error", "ename",
                                 "SessionError", "evalue", failure, "traceback", failure));
    return failure != NULL;
}

static void send_end_event(struct cmd *cm, json_t *fin)
{
    const char *status = json_string_value(json_object_get(fin, "status"));
    json_t *code = json_object_get(fin, "exit_code");
    json_int_t ms = json_integer_value(json_object_get(fin, "duration_ms"));
    if (!ms)
        ms = (json_int_t)(now_mono_ms() - cm->started_ms);
    if (status && !strcmp(status, "exited") && json_integer_value(code) == 0) {
        send_event(cm, json_pack("{s:s, s:I}", "type", "execution_complete", "execution_time", ms));
        return;
    }
    char evalue[32], tb[64];
    if (status && !strcmp(status, "exited")) {
        snprintf(evalue, sizeof(evalue), "%lld", (long long)json_integer_value(code));
        snprintf(tb, sizeof(tb), "exit status %lld", (long long)json_integer_value(code));
    } else {
        /* killed, timed out, OOM, lost: execd reports -1 and the signal */
        snprintf(evalue, sizeof(evalue), "-1");
        snprintf(tb, sizeof(tb), "%s", status && !strcmp(status, "lost") ? "command lost"
                                                                          : "signal: killed");
    }
    send_event(cm, json_pack("{s:s, s:{s:s, s:s, s:[s]}}", "type", "error", "error", "ename",
                             "CommandExecError", "evalue", evalue, "traceback", tb));
}

static void on_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct cmd *cm = arg;
    cm->h = NULL; /* the backend frees the handle after this */
    cm->proc = NULL;
    if (err && !cm->streaming && cm->req) {
        struct osapi_req *req = cm->req;
        cm->req = NULL;
        req->state = NULL;
        osapi_reply_mcp_error(req, err); /* nothing sent yet: a JSON error */
    } else if (!cm->background) {
        if (cm->res && !err && !cm->streaming && cm->req && cm->req->conn)
            start_stream(cm); /* a session command that did not run never started */
        if ((cm->tail || cm->res) && !err && session_end(cm)) {
            end_stream(cm);
            cmd_maybe_free(cm);
            return;
        }
        flush_lines(cm);
        if (err)
            send_event(cm, json_pack("{s:s, s:{s:s, s:s, s:[s]}}", "type", "error", "error",
                                     "ename", "CommandExecError", "evalue", err->msg,
                                     "traceback", err->msg));
        else
            send_end_event(cm, result);
        end_stream(cm);
    }
    cmd_maybe_free(cm);
}

static void cmd_aborted(struct osapi_req *req)
{
    struct cmd *cm = req->state;
    if (cm->h || cm->proc) /* the command runs on (as execd's do); stop watching it */
        schedule_detach(cm);
}

static void cmd_state_free(void *p)
{
    (void)p; /* cm frees itself (cmd_maybe_free) */
}

/* ---- POST /command ------------------------------------------------------------------------------ */

static const char *check_run_body(json_t *body)
{
    json_t *v;
    if (!json_is_string(json_object_get(body, "command")) ||
        !*json_string_value(json_object_get(body, "command")))
        return "command is required (a non-empty string)";
    if ((v = json_object_get(body, "cwd")) && !json_is_null(v) && !json_is_string(v))
        return "cwd must be a string";
    if ((v = json_object_get(body, "timeout")) && !json_is_null(v) &&
        (!json_is_integer(v) || json_integer_value(v) < 0))
        return "timeout must be a number of milliseconds >= 0";
    if ((v = json_object_get(body, "envs")) && !json_is_null(v)) {
        const char *k;
        json_t *x;
        if (!json_is_object(v))
            return "envs must map names to strings";
        json_object_foreach(v, k, x) if (!json_is_string(x)) return "envs must map names to strings";
    }
    return NULL;
}

static void run_body(struct osapi_req *req, json_t *body);

static void handle_run(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req);
    if (body)
        run_body(req, body);
}

/* POST /code: without a context (or a language), execd runs the code as a shell command, the
 * spec's "stateless" form; that works here too. With one, osapi_code.c runs it. */
static void handle_code(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req);
    if (!body)
        return;
    const char *code = json_string_value(json_object_get(body, "code"));
    if (!code) {
        json_decref(body);
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY", "code is required");
        return;
    }
    run_body(req, json_pack("{s:s}", "command", code));
    json_decref(body);
}

/* Runs the RunCommandRequest body (stolen). */
static void run_body(struct osapi_req *req, json_t *body)
{
    const char *bad = check_run_body(body);
    json_t *uid = json_object_get(body, "uid"), *gid = json_object_get(body, "gid");
    if (bad) {
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY", "%s", bad);
    } else if ((uid && !json_is_null(uid)) || (gid && !json_is_null(gid))) {
        osapi_reply_unsupported(req, "uid/gid: a local sandbox runs every command as its one "
                                "user; drop uid and gid");
    } else if (osapi_bind(req, req->sandbox_id, true, NULL) == 0) {
        json_t *env = json_object_get(body, "envs");
        struct exec_request er = {
            .command = json_string_value(json_object_get(body, "command")),
            .cwd = json_string_value(json_object_get(body, "cwd")),
            .env = json_is_object(env) ? env : NULL,
            .timeout_ms = json_integer_value(json_object_get(body, "timeout")),
        };
        osapi_cmd_stream(req, er.command, &er, json_is_true(json_object_get(body, "background")),
                         NULL);
    }
    json_decref(body);
}

static struct cmd *cmd_new(struct osapi_req *req, const char *content, bool background)
{
    struct cmd *cm = xcalloc(1, sizeof(*cm));
    cm->req = req;
    cm->command = xstrdup(content);
    cm->background = background;
    cm->started_ms = now_mono_ms();
    for (int s = 0; s < 3; s++)
        buf_init(&cm->line[s], (size_t)-1);
    cm->be = req->be;
    uv_timer_init(server_loop(req->api->srv), &cm->timer);
    cm->timer.data = cm;
    cm->timer_open = true;
    req->state = cm;
    req->free_state = cmd_state_free;
    req->on_abort = cmd_aborted;
    return cm;
}

static void cmd_not_started(struct osapi_req *req, struct cmd *cm, const struct mcp_error *err)
{
    cm->h = NULL;
    cm->proc = NULL;
    cm->req = NULL;
    req->state = NULL;
    osapi_reply_mcp_error(req, err);
    cmd_maybe_free(cm);
}

void osapi_cmd_stream(struct osapi_req *req, const char *content, const struct exec_request *er,
                      bool background, struct shell_session_tail *tail)
{
    struct cmd *cm = cmd_new(req, content, background);
    cm->tail = tail;
    struct exec_observer obs = {on_started, on_output, on_done, cm};
    struct mcp_error err;
    if (req->be->ops->exec(req->be, req->sandbox_id, er, &obs, &cm->h, &err) < 0)
        cmd_not_started(req, cm, &err);
}

void osapi_cmd_stream_session(struct osapi_req *req, const struct shell_session_request *sr)
{
    struct cmd *cm = cmd_new(req, sr->command, false);
    cm->res = xcalloc(1, sizeof(*cm->res));
    struct exec_observer obs = {on_started, on_output, on_done, cm};
    struct mcp_error err;
    if (shell_session_proc_run(req->be, req->sandbox_id, sr, &obs, cm->res, &cm->proc, &err) < 0)
        cmd_not_started(req, cm, &err);
}

/* ---- status, logs, interrupt --------------------------------------------------------------------- */

/* A command that is not known answers 404 in execd's shape; anything else as the backend said. */
static void reply_command_error(struct osapi_req *req, const struct mcp_error *err)
{
    if (err->code == MCP_ERR_NOT_FOUND)
        osapi_reply_error(req, 404, "INVALID_REQUEST_BODY", "%s", err->msg);
    else
        osapi_reply_mcp_error(req, err);
}

static void status_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (err) {
        reply_command_error(req, err);
        return;
    }
    const char *id = json_string_value(json_object_get(result, "command_id"));
    const char *status = json_string_value(json_object_get(result, "status"));
    bool running = status && !strcmp(status, "running");
    json_t *known = id ? json_object_get(req->api->commands, id) : NULL;
    json_t *out = json_pack("{s:s, s:b}", "id", id ? id : "", "running", running);
    const char *content = json_string_value(json_object_get(known, "content"));
    json_object_set_new(out, "content", json_string(content ? content : ""));
    json_int_t started = json_integer_value(json_object_get(known, "started_ms"));
    char t[32];
    if (started) {
        format_rfc3339_ms(started, t);
        json_object_set_new(out, "started_at", json_string(t));
    }
    if (!running) {
        json_t *code = json_object_get(result, "exit_code");
        json_object_set_new(out, "exit_code", json_is_integer(code) ? json_incref(code)
                                                                    : json_integer(-1));
        if (status && strcmp(status, "exited") != 0)
            json_object_set_new(out, "error", json_string(status));
        json_int_t ms = json_integer_value(json_object_get(result, "duration_ms"));
        if (started) {
            format_rfc3339_ms(started + ms, t);
            json_object_set_new(out, "finished_at", json_string(t));
        }
    }
    osapi_reply_json(req, 200, out, NULL);
}

static void logs_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (err) {
        reply_command_error(req, err);
        return;
    }
    const char *out = json_string_value(json_object_get(result, "output"));
    char extra[80];
    snprintf(extra, sizeof(extra), "EXECD-COMMANDS-TAIL-CURSOR: %lld\r\n",
             (long long)json_integer_value(json_object_get(result, "next_offset")));
    osapi_reply_raw(req, 200, "text/plain; charset=utf-8", extra, out ? out : "",
                    out ? strlen(out) : 0);
}

static void kill_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (err)
        osapi_reply_error(req, 500, "RUNTIME_ERROR", "error interrupting the command: %s",
                          err->msg);
    else
        osapi_reply_raw(req, 200, NULL, NULL, "", 0);
}

static void handle_interrupt(struct osapi_req *req)
{
    char *id = osapi_query_get(osapi_req_query(req), "id");
    struct mcp_error err;
    if (!id || !*id)
        osapi_reply_error(req, 400, "MISSING_QUERY", "missing query parameter id (the command "
                          "id from the stream's init event)");
    else if (osapi_bind(req, req->sandbox_id, true, NULL) == 0 &&
             req->be->ops->command_kill(req->be, req->sandbox_id, id, SIGTERM, kill_cb, req,
                                        &err) < 0)
        osapi_reply_error(req, 500, "RUNTIME_ERROR", "error interrupting the command: %s",
                          err.msg);
    free(id);
}

static void handle_get(struct osapi_req *req, const char *id, bool logs)
{
    uint64_t cursor = 0;
    char *c = logs ? osapi_query_get(osapi_req_query(req), "cursor") : NULL, *end = NULL;
    if (c) {
        long long v = strtoll(c, &end, 10);
        bool ok = *c && !*end && v >= 0;
        free(c);
        if (!ok) {
            osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                              "cursor must be a byte offset >= 0 (the last "
                              "EXECD-COMMANDS-TAIL-CURSOR)");
            return;
        }
        cursor = (uint64_t)v;
    }
    struct mcp_error err;
    if (osapi_bind(req, req->sandbox_id, false, NULL) == 0 &&
        req->be->ops->command_get(req->be, req->sandbox_id, id, cursor, logs ? CMD_LOGS_LIMIT : 1,
                                  logs ? logs_cb : status_cb, req, &err) < 0) {
        reply_command_error(req, &err);
    }
}

static bool method_is(struct osapi_req *req, enum http_method m)
{
    return osapi_req_http(req)->method == m;
}

bool osapi_commands_route(struct osapi_req *req, const char *path)
{
    if (!strcmp(path, "/command")) {
        if (method_is(req, HTTP_POST))
            handle_run(req);
        else if (method_is(req, HTTP_DELETE))
            handle_interrupt(req);
        else
            osapi_reply_error(req, 405, "INVALID_REQUEST_BODY", "use POST or DELETE on /command");
        return true;
    }
    if (!strncmp(path, "/command/status/", 16) && path[16]) {
        handle_get(req, path + 16, false);
        return true;
    }
    if (!strncmp(path, "/command/", 9)) {
        const char *id = path + 9, *slash = strchr(id, '/');
        if (slash && slash > id && !strcmp(slash, "/logs")) {
            char cid[80];
            snprintf(cid, sizeof(cid), "%.*s", (int)(slash - id), id);
            handle_get(req, cid, true);
            return true;
        }
    }
    if (!strcmp(path, "/code") && method_is(req, HTTP_POST)) {
        handle_code(req);
        return true;
    }
    return osapi_session_route(req, path);
}

void osapi_execd(struct osapi_req *req, const char *sandbox_id, const char *rest)
{
    const char *state;
    if (osapi_bind(req, sandbox_id, false, &state) < 0)
        return;
    if (!strcmp(rest, "/ping")) {
        if (strcmp(state, "running") != 0)
            osapi_reply_error(req, 500, "RUNTIME_ERROR", "sandbox %s is %s", sandbox_id,
                              osapi_state_name(state));
        else
            osapi_reply_raw(req, 200, NULL, NULL, "", 0);
        return;
    }
    if (osapi_code_route(req, rest) || osapi_commands_route(req, rest) ||
        osapi_files_route(req, rest))
        return;
    osapi_reply_unsupported(req, "execd %s is not served by mcpbox (docs/opensandbox-api.md "
                            "lists what is)", rest);
}
