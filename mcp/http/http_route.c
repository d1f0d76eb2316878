/* What a complete HTTP request means for MCP Streamable HTTP (2025-11-25), once the listener
 * has checked Host and Origin and no extension took it: the token, then POST (one JSON-RPC
 * message), GET (the session's standalone stream) or DELETE (end the session) on the one
 * endpoint, /mcp; and MCP's error replies (JSON-RPC). */
#define LOG_MODULE "http"
#include "mcp/http/http-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/json_out.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/session.h"

static const struct http_request *req_of(struct http_conn *c)
{
    return &c->reader.req;
}

void http_conn_error(struct http_conn *c, int status, int code, const json_t *id,
                     const char *extra, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    http_printable(msg); /* it may quote header values: valid JSON text */
    cleanup_json json_t *body = json_pack("{s:s, s:{s:i, s:s}, s:O?}", "jsonrpc", "2.0", "error",
                                          "code", code, "message", msg, "id", (json_t *)id);
    cleanup_free char *text = json_dumps(body, JSON_COMPACT);
    log_debug("HTTP %d: %s", status, msg);
    http_conn_respond(c, status, "application/json", extra, text, strlen(text));
}

/* A header that must not repeat: *bad is set (and a 400 sent) if it does. */
static const char *single_header(struct http_conn *c, const char *name, bool *bad)
{
    return http_conn_single_header(c, name, bad);
}

/* The token; answers and returns false when the request is refused. The body says what to send:
 * a person reads it in the client's error (Claude Code shows it verbatim). */
static bool admit_token(struct http_conn *c)
{
    bool bad = false;
    const char *auth = single_header(c, "authorization", &bad);
    if (bad)
        return false;
    if (!http_policy_auth_ok(&c->hs->policy, auth)) {
        http_conn_error(c, 401, -32000, NULL, "WWW-Authenticate: Bearer realm=\"mcpbox\"\r\n",
                        "Unauthorized: send Authorization: Bearer <token>, the token this server "
                        "was started with (mcpbox serve --token or MCPBOX_TOKEN); this server "
                        "does not use OAuth");
        return false;
    }
    return true;
}

/* OAuth discovery and registration paths (RFC 9728 protected resource metadata, RFC 8414
 * authorization server metadata, the 2025-03-26 default endpoints). This server has no OAuth:
 * they answer 404 even without a token, as the MCP authorization spec expects of a server
 * without authorization, so that clients stop there instead of reading a 401 as "OAuth needed"
 * and trying dynamic client registration (Claude Code did). */
static bool is_oauth_path(const char *path)
{
    static const char *const exact[] = {"/register", "/authorize", "/token"};
    if (strncmp(path, "/.well-known/", strlen("/.well-known/")) == 0)
        return true;
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (strcmp(path, exact[i]) == 0)
            return true;
    return false;
}

/* MCP-Protocol-Version and Mcp-Session-Id; on success *sid is the session id or NULL. */
static bool session_headers(struct http_conn *c, const char **sid)
{
    bool bad = false;
    const char *version = single_header(c, "mcp-protocol-version", &bad);
    *sid = single_header(c, "mcp-session-id", &bad);
    if (bad)
        return false;
    if (version && !http_protocol_version_ok(version)) {
        http_conn_error(c, 400, -32000, NULL, NULL,
                        "Bad Request: Unsupported protocol version: %.64s (supported: "
                        "2025-11-25, 2025-06-18, 2025-03-26)",
                        version);
        return false;
    }
    return true;
}

static struct http_sess *known_session(struct http_conn *c, const char *sid)
{
    if (!sid) {
        http_conn_error(c, 400, -32000, NULL, NULL,
                        "Bad Request: Mcp-Session-Id header is required");
        return NULL;
    }
    struct http_sess *s = http_sess_find(mcp_http_of(c), sid);
    if (s && !http_sess_peer_ok(s, c))
        s = NULL; /* another user's session: as unknown to this one as a missing session */
    if (!s)
        http_conn_error(c, 404, -32001, NULL, NULL, "Session not found");
    else
        s->last_active = now_mono_ms();
    return s;
}

static bool post_headers_ok(struct http_conn *c)
{
    /* prefer_sse is kept for post_request (reset when the exchange ends). */
    if (!http_accept_post(http_request_header(req_of(c), "accept", NULL), &ex_of(c)->prefer_sse)) {
        http_conn_error(c, 406, -32000, NULL, NULL,
                        "Not Acceptable: Client must accept both application/json and "
                        "text/event-stream");
        return false;
    }
    if (!http_content_type_is_json(http_request_header(req_of(c), "content-type", NULL))) {
        http_conn_error(c, 415, -32000, NULL, NULL,
                        "Unsupported Media Type: Content-Type must be application/json");
        return false;
    }
    return true;
}

/* The session a POSTed message belongs to: an initialize without a session id opens one. */
static struct http_sess *post_session(struct http_conn *c, const char *sid,
                                      const struct jsonrpc_msg *msg)
{
    bool is_init = msg->kind == JSONRPC_REQUEST && strcmp(msg->method, "initialize") == 0;
    if (sid || !is_init)
        return known_session(c, sid);
    struct http_sess *s = http_sess_create(mcp_http_of(c), c);
    if (!s)
        http_conn_error(c, 503, -32000, msg->id, "Retry-After: 60\r\n",
                        "Service Unavailable: too many sessions (limit %d); end unused "
                        "sessions with DELETE or retry later",
                        HTTP_MAX_SESSIONS);
    ex_of(c)->is_initialize = s != NULL;
    return s;
}

/* A request: its reply (JSON or an SSE stream) comes through the session's send callback. */
static void post_request(struct http_conn *c, struct http_sess *s, struct jsonrpc_msg *msg)
{
    char *key = json_out_dump(msg->id, NULL);
    if (http_sess_has_key(s, key)) {
        free(key);
        http_conn_error(c, 409, -32600, msg->id, NULL,
                        "Conflict: a request with this id is already in progress");
        return;
    }
    ex_of(c)->key = key; /* prefer_sse: set by post_headers_ok */
    http_sess_attach(s, c, EX_PENDING);
    session_handle(s->core, msg);
}

static void route_post(struct http_conn *c)
{
    const char *sid;
    if (!post_headers_ok(c) || http_modern_route(c) || !session_headers(c, &sid))
        return;
    struct jsonrpc_msg msg;
    const struct buf *body = &c->reader.req.body;
    jsonrpc_parse(body->data ? body->data : "", body->len, &msg);
    if (msg.kind == JSONRPC_INVALID) {
        http_conn_error(c, 400, msg.err.code, msg.id, NULL, "%s", msg.err.msg);
    } else {
        struct http_sess *s = post_session(c, sid, &msg);
        if (s && msg.kind == JSONRPC_REQUEST) {
            post_request(c, s, &msg);
        } else if (s) {
            session_handle(s->core, &msg);
            http_conn_respond(c, 202, NULL, NULL, "", 0);
        }
    }
    jsonrpc_msg_release(&msg);
}

static void route_get(struct http_conn *c)
{
    const char *sid;
    if (!http_accepts(http_request_header(req_of(c), "accept", NULL), "text/event-stream")) {
        http_conn_error(c, 406, -32000, NULL, NULL,
                        "Not Acceptable: Client must accept text/event-stream");
        return;
    }
    if (!session_headers(c, &sid))
        return;
    struct http_sess *s = known_session(c, sid);
    if (!s)
        return;
    if (s->get_stream) {
        http_conn_error(c, 409, -32000, NULL, NULL,
                        "Conflict: Only one SSE stream is allowed per session");
        return;
    }
    http_sess_attach(s, c, EX_GET);
    http_conn_sse_start(c, http_protocol_has_priming(session_protocol_version(s->core)));
}

static void route_delete(struct http_conn *c)
{
    const char *sid;
    if (!session_headers(c, &sid))
        return;
    struct http_sess *s = known_session(c, sid);
    if (!s)
        return;
    http_sess_destroy(s);
    http_conn_respond(c, 200, NULL, NULL, "", 0);
}

void http_route_mcp(void *arg, struct http_conn *c, const char *path)
{
    (void)arg;
    bool have_path = path != NULL;
    if (have_path && is_oauth_path(path)) {
        http_conn_error(c, 404, -32000, NULL, NULL,
                        "Not Found: this MCP server does not use OAuth%s",
                        c->hs->policy.token ? "; send Authorization: Bearer <token>, the token it "
                                              "was started with"
                                            : "");
        return;
    }
    if (!admit_token(c))
        return;
    if (!have_path || strcmp(path, HTTP_ENDPOINT) != 0) {
        http_conn_error(c, 404, -32000, NULL, NULL, "Not Found: the MCP endpoint is %s",
                        HTTP_ENDPOINT);
        return;
    }
    switch (req_of(c)->method) {
    case HTTP_POST:
        route_post(c);
        break;
    case HTTP_GET:
        if (!http_modern_refuse_stream(c))
            route_get(c);
        break;
    case HTTP_DELETE:
        if (!http_modern_refuse_stream(c))
            route_delete(c);
        break;
    default:
        http_conn_error(c, 405, -32000, NULL, "Allow: GET, POST, DELETE\r\n",
                        "Method Not Allowed");
        break;
    }
}
