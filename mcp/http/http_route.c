/* What a complete HTTP request means for MCP Streamable HTTP (2025-11-25): admission checks
 * (Host, Origin, token), then POST (one JSON-RPC message), GET (the session's standalone
 * stream) or DELETE (end the session) on the one endpoint, /mcp. */
#define LOG_MODULE "http"
#include "mcp/http/http-internal.h"

#include <string.h>

#include "lib/base/json_out.h"
#include "lib/base/util.h"
#include "mcp/jsonrpc.h"
#include "mcp/session.h"

#define HTTP_ENDPOINT "/mcp"
#define HTTP_PATH_MAX 1024

static const struct http_request *req_of(struct http_conn *c)
{
    return &c->reader.req;
}

/* A header that must not repeat: *bad is set (and a 400 sent) if it does. */
static const char *single_header(struct http_conn *c, const char *name, bool *bad)
{
    bool dup = false;
    const char *v = http_request_header(req_of(c), name, &dup);
    if (dup && !*bad) {
        *bad = true;
        http_conn_error(c, 400, -32600, NULL, NULL, "Bad Request: repeated %s header", name);
    }
    return v;
}

/* Host and Origin; answers and returns false when the request is refused. */
static bool admit_origin(struct http_conn *c)
{
    const struct http_policy *pol = &c->hs->policy;
    bool bad = false;
    const char *host = single_header(c, "host", &bad);
    const char *origin = single_header(c, "origin", &bad);
    if (bad)
        return false;
    if (!http_policy_host_ok(pol, host)) {
        http_conn_error(c, 403, -32000, NULL, NULL, "Forbidden: invalid Host header: %.100s",
                        host ? host : "(none)");
        return false;
    }
    if (!http_policy_origin_ok(pol, origin, host)) {
        http_conn_error(c, 403, -32000, NULL, NULL, "Forbidden: invalid Origin header: %.100s",
                        origin);
        return false;
    }
    return true;
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
    struct http_sess *s = http_sess_find(c->hs, sid);
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
    if (!http_accept_post(http_request_header(req_of(c), "accept", NULL), &c->prefer_sse)) {
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
    struct http_sess *s = http_sess_create(c->hs, c);
    if (!s)
        http_conn_error(c, 503, -32000, msg->id, "Retry-After: 60\r\n",
                        "Service Unavailable: too many sessions (limit %d); end unused "
                        "sessions with DELETE or retry later",
                        HTTP_MAX_SESSIONS);
    c->is_initialize = s != NULL;
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
    c->key = key; /* c->prefer_sse: set by post_headers_ok */
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

bool http_route_head(struct http_conn *c)
{
    const struct http_extension *ext = c->hs->ext;
    const struct http_policy *pol = &c->hs->policy;
    char path[HTTP_PATH_MAX];
    bool dup_host = false, dup_origin = false;
    const char *host = http_request_header(req_of(c), "host", &dup_host);
    const char *origin = http_request_header(req_of(c), "origin", &dup_origin);
    /* What fails the checks is answered the usual way, once the whole request is in. */
    if (!ext || !ext->route_head || dup_host || dup_origin || !http_policy_host_ok(pol, host) ||
        !http_policy_origin_ok(pol, origin, host) ||
        http_request_path(req_of(c), path, sizeof(path)) != 0)
        return false;
    c->phase = CONN_RESPONDING;
    c->body_streaming = true;
    c->deadline = 0; /* the body comes as fast as the extension takes it */
    if (ext->route_head(ext->arg, c, path))
        return true;
    c->phase = CONN_READING;
    c->body_streaming = false;
    return false;
}

void http_route_request(struct http_conn *c)
{
    char path[HTTP_PATH_MAX];
    if (!admit_origin(c))
        return;
    bool have_path = http_request_path(req_of(c), path, sizeof(path)) == 0;
    const struct http_extension *ext = c->hs->ext;
    if (have_path && ext && ext->route(ext->arg, c, path))
        return; /* another API on this listener, with its own authentication */
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
