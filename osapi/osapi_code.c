/* execd's code interpreter over the backend's code_context and code_run: POST /code with a
 * context streams a run as ServerStreamEvents (init, stdout and stderr as lines, then each result,
 * the error if any, execution_count and execution_complete; a ping every 3 s), DELETE /code?id=
 * interrupts, /code/context creates, /code/contexts lists and deletes by language,
 * /code/contexts/{id} gets and deletes one. POST /code without a context (the spec's stateless
 * form) is a shell command: osapi_commands.c. */
#define LOG_MODULE "osapi"
#include "osapi/osapi-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

/* Output buffered while waiting for a line's end; a longer line is sent in pieces. */
#define CODE_MAX_LINE (64u * 1024u)

struct code_stream {
    struct osapi_req *req; /* while the client is there and the stream open, else NULL */
    uv_timer_t ping;
    struct buf line[3]; /* partial lines of stdout (1) and stderr (2) */
    char context_id[64];
    uint64_t started_ms;
    bool streaming, done;
};

/* ---- events ------------------------------------------------------------------------------------- */

static void send_event(struct code_stream *cs, json_t *ev)
{
    if (cs->req && cs->req->conn && cs->streaming) {
        json_object_set_new(ev, "timestamp", json_integer(now_wall_ms()));
        char *s = json_dumps(ev, JSON_COMPACT);
        struct buf b;
        buf_init(&b, (size_t)-1);
        buf_printf(&b, "%s\n\n", s);
        http_ext_stream_write(cs->req->conn, b.data, b.len);
        buf_release(&b);
        free(s);
    }
    json_decref(ev);
}

static void send_text(struct code_stream *cs, int stream, const char *data, size_t len)
{
    json_t *text = utf8_json_text(data, len);
    send_event(cs, json_pack("{s:s, s:o}", "type", stream == EXEC_STDERR ? "stderr" : "stdout",
                             "text", text));
}

/* A line at a time, with its newline (Jupyter's stream text keeps them). */
static void take_output(struct code_stream *cs, int stream, const char *data, size_t len)
{
    struct buf *b = &cs->line[stream];
    for (size_t i = 0; i < len; i++) {
        buf_append(b, data + i, 1);
        if (data[i] == '\n' || b->len >= CODE_MAX_LINE) {
            send_text(cs, stream, b->data, b->len);
            buf_reset(b);
        }
    }
}

static void flush_lines(struct code_stream *cs)
{
    for (int s = EXEC_STDOUT; s <= EXEC_STDERR; s++)
        if (cs->line[s].len) {
            send_text(cs, s, cs->line[s].data, cs->line[s].len);
            buf_reset(&cs->line[s]);
        }
}

static void send_results(struct code_stream *cs, json_t *res)
{
    json_t *count = json_object_get(res, "execution_count"), *r, *err;
    size_t i;
    json_int_t dropped = json_integer_value(json_object_get(res, "results_dropped"));
    if (dropped > 0) { /* execd's stream has no field for it */
        char note[160];
        int n = snprintf(note, sizeof(note),
                         "mcpbox: %lld results left out past 1 MiB of "
                         "results; save large values to files\n",
                         (long long)dropped);
        send_text(cs, EXEC_STDERR, note, (size_t)n);
    }
    json_array_foreach(json_object_get(res, "results"), i, r) send_event(
        cs, json_pack("{s:s, s:O, s:O}", "type", "result", "results", r, "execution_count", count));
    if (json_is_object(err = json_object_get(res, "error")))
        send_event(cs,
                   json_pack("{s:s, s:{s:O, s:O, s:O}}", "type", "error", "error", "ename",
                             json_object_get(err, "name"), "evalue", json_object_get(err, "value"),
                             "traceback", json_object_get(err, "traceback")));
    send_event(cs, json_pack("{s:s, s:O}", "type", "execution_count", "execution_count", count));
    send_event(cs, json_pack("{s:s, s:I}", "type", "execution_complete", "execution_time",
                             (json_int_t)(now_mono_ms() - cs->started_ms)));
}

/* ---- the run's life ----------------------------------------------------------------------------- */

static void stream_free_cb(uv_handle_t *h)
{
    struct code_stream *cs = h->data;
    for (int s = 0; s < 3; s++)
        buf_release(&cs->line[s]);
    free(cs);
}

static void end_stream(struct code_stream *cs)
{
    struct osapi_req *req = cs->req;
    cs->req = NULL;
    uv_timer_stop(&cs->ping);
    if (req == NULL)
        return;
    struct http_conn *c = req->conn;
    req->conn = NULL;
    req->state = NULL;
    if (c) {
        http_ext_on_abort(c, NULL, NULL);
        http_ext_stream_end(c);
    }
    osapi_req_free(req);
}

static void ping_cb(uv_timer_t *t)
{
    send_event(t->data, json_pack("{s:s, s:s}", "type", "ping", "text", "pong"));
}

static void run_started(void *arg, const char *context_id)
{
    struct code_stream *cs = arg;
    snprintf(cs->context_id, sizeof(cs->context_id), "%s", context_id);
    if (!cs->req || !cs->req->conn)
        return;
    char extra[80];
    snprintf(extra, sizeof(extra), "X-Request-ID: %s\r\n", cs->req->request_id);
    http_ext_stream_start(cs->req->conn, 200, "text/event-stream", extra);
    cs->streaming = true;
    send_event(cs, json_pack("{s:s, s:s}", "type", "init", "text", context_id));
    uv_timer_start(&cs->ping, ping_cb, OSAPI_PING_MS, OSAPI_PING_MS);
}

static void run_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    take_output(arg, stream, data, len);
}

static void run_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct code_stream *cs = arg;
    cs->done = true;
    if (err && !cs->streaming && cs->req) {
        struct osapi_req *req = cs->req;
        cs->req = NULL;
        req->state = NULL;
        osapi_reply_mcp_error(req, err); /* nothing sent yet: a JSON error */
    } else {
        flush_lines(cs);
        if (err)
            send_event(cs,
                       json_pack("{s:s, s:{s:s, s:s, s:[s]}}", "type", "error", "error", "ename",
                                 "ContextLost", "evalue", err->msg, "traceback", err->msg));
        else
            send_results(cs, result);
        end_stream(cs);
    }
    uv_close((uv_handle_t *)&cs->ping, stream_free_cb);
}

/* The client left: the run goes on to its end (interrupt it with DELETE /code), which frees the
 * request; nothing more is sent. */
static void run_aborted(struct osapi_req *req)
{
    struct code_stream *cs = req->state;
    uv_timer_stop(&cs->ping);
}

static void no_free(void *p)
{
    (void)p; /* the stream frees itself when the run ends */
}

static void start_run(struct osapi_req *req, json_t *body)
{
    json_t *ctx = json_object_get(body, "context");
    struct code_request cr = {
        .language = json_string_value(json_object_get(ctx, "language")),
        .code = json_string_value(json_object_get(body, "code")),
        .context_id = json_string_value(json_object_get(ctx, "id")),
    };
    if (!cr.code) {
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY", "code is required (a string)");
        return;
    }
    struct code_stream *cs = xcalloc(1, sizeof(*cs));
    for (int s = 0; s < 3; s++)
        buf_init(&cs->line[s], (size_t)-1);
    cs->req = req;
    cs->started_ms = now_mono_ms();
    uv_timer_init(req->be->loop, &cs->ping);
    cs->ping.data = cs;
    req->state = cs;
    req->free_state = no_free;
    req->on_abort = run_aborted;
    struct exec_observer obs = {run_started, run_output, run_done, cs};
    struct mcp_error err;
    if (req->be->ops->code_run(req->be, req->sandbox_id, &cr, &obs, &err) < 0) {
        req->state = NULL;
        cs->req = NULL;
        osapi_reply_mcp_error(req, &err);
        uv_close((uv_handle_t *)&cs->ping, stream_free_cb);
    }
}

/* POST /code with a context (an id, or a language for its default context). */
static bool handle_run(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req);
    if (!body)
        return true;
    json_t *ctx = json_object_get(body, "context");
    const char *lang = json_string_value(json_object_get(ctx, "language"));
    const char *id = json_string_value(json_object_get(ctx, "id"));
    bool stateless = !(lang && *lang) && !(id && *id);
    if (!stateless && osapi_bind(req, req->sandbox_id, true, NULL) == 0)
        start_run(req, body);
    json_decref(body);
    return !stateless;
}

/* ---- contexts ------------------------------------------------------------------------------------ */

/* mcpbox's {context_id, language, ...} -> execd's CodeContext {id, language}. */
static json_t *code_context(json_t *c)
{
    return json_pack("{s:O, s:O}", "id", json_object_get(c, "context_id"), "language",
                     json_object_get(c, "language"));
}

static void reply_context_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    if (err)
        osapi_reply_mcp_error(arg, err);
    else
        osapi_reply_json(arg, 200, code_context(result), NULL);
}

static void reply_list_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    if (err) {
        osapi_reply_mcp_error(arg, err);
        return;
    }
    json_t *out = json_array(), *c;
    size_t i;
    json_array_foreach(json_object_get(result, "contexts"), i, c)
        json_array_append_new(out, code_context(c));
    osapi_reply_json(arg, 200, out, NULL);
}

static void reply_empty_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    if (err)
        osapi_reply_mcp_error(arg, err);
    else
        osapi_reply_raw(arg, 200, NULL, NULL, "", 0);
}

/* Calls code_context(action, args stolen); the reply comes from cb. */
static void context_call(struct osapi_req *req, const char *action, json_t *args, backend_cb *cb)
{
    struct mcp_error err;
    if (osapi_bind(req, req->sandbox_id, true, NULL) < 0) {
        json_decref(args);
        return;
    }
    if (req->be->ops->code_context(req->be, req->sandbox_id, action, args, cb, req, &err) < 0)
        osapi_reply_mcp_error(req, &err);
    json_decref(args);
}

static json_t *language_args(struct osapi_req *req)
{
    char *lang = osapi_query_get(osapi_req_query(req), "language");
    json_t *args = lang && *lang ? json_pack("{s:s}", "language", lang) : json_object();
    free(lang);
    return args;
}

static void handle_create(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req);
    if (!body)
        return;
    json_t *lang = json_object_get(body, "language");
    if (lang && !json_is_string(lang) && !json_is_null(lang))
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY", "language must be a string");
    else
        context_call(req, "create",
                     json_pack("{s:s}", "language",
                               json_is_string(lang) ? json_string_value(lang) : "python"),
                     reply_context_cb);
    json_decref(body);
}

static void handle_contexts(struct osapi_req *req, enum http_method m)
{
    json_t *args = language_args(req);
    if (m == HTTP_GET) {
        context_call(req, "list", args, reply_list_cb);
    } else if (!json_object_get(args, "language")) {
        json_decref(args);
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "language is required: DELETE "
                          "/code/contexts?language=python deletes that language's contexts");
    } else {
        context_call(req, "delete", args, reply_empty_cb);
    }
}

static void handle_one(struct osapi_req *req, const char *id, enum http_method m)
{
    json_t *args = json_pack("{s:s}", "context_id", id);
    context_call(req, m == HTTP_GET ? "get" : "delete", args,
                 m == HTTP_GET ? reply_context_cb : reply_empty_cb);
}

static void handle_interrupt(struct osapi_req *req)
{
    char *id = osapi_query_get(osapi_req_query(req), "id");
    if (!id || !*id)
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY", "id is required: DELETE /code?id=CTX");
    else
        context_call(req, "interrupt", json_pack("{s:s}", "context_id", id), reply_empty_cb);
    free(id);
}

bool osapi_code_route(struct osapi_req *req, const char *path)
{
    enum http_method m = osapi_req_http(req)->method;
    if (!strcmp(path, "/code") && m == HTTP_POST)
        return handle_run(req);
    if (!strcmp(path, "/code") && m == HTTP_DELETE)
        handle_interrupt(req);
    else if (!strcmp(path, "/code/context") && m == HTTP_POST)
        handle_create(req);
    else if (!strcmp(path, "/code/contexts") && (m == HTTP_GET || m == HTTP_DELETE))
        handle_contexts(req, m);
    else if (!strncmp(path, "/code/contexts/", 15) && path[15] && !strchr(path + 15, '/') &&
             (m == HTTP_GET || m == HTTP_DELETE))
        handle_one(req, path + 15, m);
    else if (!strcmp(path, "/code") || !strncmp(path, "/code/", 6))
        osapi_reply_error(req, 405, "INVALID_REQUEST_BODY",
                          "%s does not take this method "
                          "(docs/opensandbox-api.md)",
                          path);
    else
        return false;
    return true;
}
