/* Which handler a request goes to, authentication (OPEN-SANDBOX-API-KEY on the lifecycle API,
 * execd's X-EXECD-ACCESS-TOKEN on the proxy path), the request object that outlives the call
 * when a backend answers later, and replies in OpenSandbox's shapes. */
#define LOG_MODULE "osapi"
#include "osapi/osapi-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"
#include "osapi/osapi.h"
#include "server/server.h"
#include "lib/store/store.h"

#define OSAPI_ID_MAX 128

/* ---- the request object ----------------------------------------------------------------------- */

/* A random UUID (version 4), the spec's X-Request-ID format. */
static void new_request_id(char out[37])
{
    unsigned char b[16];
    char hex[33];
    random_bytes(b, sizeof(b));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    hex_encode(b, sizeof(b), hex);
    snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

static void req_aborted(void *arg)
{
    struct osapi_req *req = arg;
    req->conn = NULL;
    if (req->on_abort)
        req->on_abort(req);
}

struct osapi_req *osapi_req_new(struct osapi *api, struct http_conn *c)
{
    struct osapi_req *req = xcalloc(1, sizeof(*req));
    req->api = api;
    req->conn = c;
    const char *rid = http_request_header(http_ext_request(c), "x-request-id", NULL);
    if (rid && *rid && strlen(rid) < sizeof(req->request_id) && utf8_is_text(rid, strlen(rid)) &&
        !strpbrk(rid, "\r\n"))
        snprintf(req->request_id, sizeof(req->request_id), "%s", rid);
    else
        new_request_id(req->request_id);
    req->next = api->reqs;
    if (api->reqs)
        api->reqs->prev = req;
    api->reqs = req;
    http_ext_on_abort(c, req_aborted, req);
    return req;
}

void osapi_req_free(struct osapi_req *req)
{
    struct osapi *api = req->api;
    if (req->prev)
        req->prev->next = req->next;
    else if (api->reqs == req)
        api->reqs = req->next;
    if (req->next)
        req->next->prev = req->prev;
    if (req->conn)
        http_ext_on_abort(req->conn, NULL, NULL);
    if (req->free_state && req->state)
        req->free_state(req->state);
    free(req->sandbox_id);
    free(req);
    if (api->stopping && !api->reqs)
        osapi_free(api);
}

const struct http_request *osapi_req_http(struct osapi_req *req)
{
    return http_ext_request(req->conn);
}

const char *osapi_req_query(struct osapi_req *req)
{
    const char *q = strchr(osapi_req_http(req)->target, '?');
    return q ? q + 1 : "";
}

/* ---- replies ------------------------------------------------------------------------------------ */

void osapi_reply_raw(struct osapi_req *req, int status, const char *content_type,
                     const char *extra, const char *body, size_t len)
{
    if (req->conn) {
        char head[512];
        snprintf(head, sizeof(head), "X-Request-ID: %s\r\n%s", req->request_id,
                 extra ? extra : "");
        struct http_conn *c = req->conn;
        req->conn = NULL;
        http_ext_on_abort(c, NULL, NULL);
        http_ext_respond(c, status, content_type, head, body, len);
    }
    osapi_req_free(req);
}

void osapi_reply_json(struct osapi_req *req, int status, json_t *body, const char *extra)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    osapi_reply_raw(req, status, text ? "application/json" : NULL, extra, text ? text : "",
                    text ? strlen(text) : 0);
    free(text);
}

static void reply_verror(struct osapi_req *req, int status, const char *code, const char *fmt,
                         va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    log_debug("%d %s: %s", status, code, msg);
    osapi_reply_json(req, status, json_pack("{s:s, s:s}", "code", code, "message", msg), NULL);
}

void osapi_reply_error(struct osapi_req *req, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_verror(req, status, code, fmt, ap);
    va_end(ap);
}

void osapi_reply_unsupported(struct osapi_req *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (req->execd)
        reply_verror(req, 400, "NOT_SUPPORTED", fmt, ap); /* 400: a status every path declares */
    else
        reply_verror(req, 400, "SANDBOX::API_NOT_SUPPORTED", fmt, ap);
    va_end(ap);
}

void osapi_reply_mcp_error(struct osapi_req *req, const struct mcp_error *err)
{
    int status = 500;
    const char *code = req->execd ? "RUNTIME_ERROR" : "SANDBOX::UNKNOWN_ERROR";
    switch (err->code) {
    case MCP_ERR_NOT_FOUND:
        status = 404;
        code = req->execd ? "FILE_NOT_FOUND" : "SANDBOX::NOT_FOUND";
        break;
    case MCP_ERR_CONFLICT:
        status = 409;
        code = req->execd ? "RUNTIME_ERROR" : "SANDBOX::INVALID_STATE";
        break;
    case MCP_ERR_DENIED:
        status = 403;
        code = req->execd ? "RUNTIME_ERROR" : "SANDBOX::FORBIDDEN";
        break;
    case MCP_ERR_INVALID:
    case MCP_ERR_LIMIT:
    case MCP_ERR_INVALID_PARAMS:
        status = 400;
        code = req->execd ? "INVALID_REQUEST_BODY" : "SANDBOX::INVALID_PARAMETER";
        break;
    case MCP_ERR_UNSUPPORTED:
        status = 400;
        code = req->execd ? "NOT_SUPPORTED" : "SANDBOX::API_NOT_SUPPORTED";
        break;
    default:
        break;
    }
    osapi_reply_error(req, status, code, "%s", err->msg);
}

json_t *osapi_req_json(struct osapi_req *req)
{
    const struct buf *body = &osapi_req_http(req)->body;
    json_error_t jerr;
    json_t *v = body->len ? json_loadb(body->data, body->len, JSON_REJECT_DUPLICATES, &jerr)
                          : NULL;
    if (v && (json_is_object(v) || json_is_array(v)))
        return v;
    json_decref(v);
    osapi_reply_error(req, 400, req->execd ? "INVALID_REQUEST_BODY" : "SANDBOX::INVALID_PARAMETER",
                      "the request body must be a JSON %s%s%s",
                      body->len ? "object: " : "object (the body is empty)",
                      body->len ? jerr.text : "", "");
    return NULL;
}

/* ---- sandboxes ---------------------------------------------------------------------------------- */

struct mcp_context *osapi_context(struct osapi_req *req)
{
    struct mcp_error err;
    struct mcp_context *ctx = server_sandbox_context(req->api->srv, &err);
    if (!ctx)
        osapi_reply_error(req, 500, req->execd ? "RUNTIME_ERROR" : "SANDBOX::UNKNOWN_ERROR",
                          "the state store could not be opened: %s", err.msg);
    return ctx;
}

static void reply_no_sandbox(struct osapi_req *req, const char *id)
{
    /* Same words whether it never existed, was destroyed or belongs to another key. */
    osapi_reply_error(req, 404, req->execd ? "CONTEXT_NOT_FOUND" : "SANDBOX::NOT_FOUND",
                      "Sandbox %s not found (it never existed, was deleted, or belongs to another "
                      "API key); GET /v1/sandboxes lists yours",
                      id);
}

int osapi_bind(struct osapi_req *req, const char *id, bool need_running, const char **state_out)
{
    static char state[32];
    struct mcp_context *ctx = osapi_context(req);
    if (!ctx)
        return -1;
    struct mcp_error err;
    struct backend *be = backend_for_sandbox_id(&ctx->backends, id, &err);
    struct store_sandbox sb;
    memset(&sb, 0, sizeof(sb));
    if (!be || store_sandbox_get(ctx->store, id, &sb, &err) < 0 || !sb.owner ||
        strcmp(sb.owner, req->owner) != 0 || (sb.state && !strcmp(sb.state, "destroyed"))) {
        store_sandbox_release(&sb);
        reply_no_sandbox(req, id);
        return -1;
    }
    snprintf(state, sizeof(state), "%s", sb.state ? sb.state : "running");
    store_sandbox_release(&sb);
    if (need_running && strcmp(state, "running") != 0) {
        osapi_reply_error(req, 409, req->execd ? "RUNTIME_ERROR" : "SANDBOX::INVALID_STATE",
                          "sandbox %s is %s, not Running%s", id, osapi_state_name(state),
                          strcmp(state, "paused") == 0 ? "; resume it first (POST "
                                                         "/v1/sandboxes/{id}/resume)"
                                                       : "");
        return -1;
    }
    char *copy = xstrdup(id); /* id may be req->sandbox_id itself */
    free(req->sandbox_id);
    req->sandbox_id = copy;
    req->be = be;
    if (state_out)
        *state_out = state;
    return 0;
}

void osapi_execd_token(const struct osapi *api, const char *sandbox_id, char out[33])
{
    char digest[65];
    struct sha256_ctx c;
    unsigned char raw[32];
    sha256_init(&c);
    sha256_update(&c, "execd-token:", 12);
    sha256_update(&c, api->token_secret, strlen(api->token_secret));
    sha256_update(&c, ":", 1);
    sha256_update(&c, sandbox_id, strlen(sandbox_id));
    sha256_final(&c, raw);
    hex_encode(raw, 16, digest);
    memcpy(out, digest, 33);
}

/* ---- authentication ------------------------------------------------------------------------------ */

static bool secret_eq(const char *given, const char *want)
{
    size_t n = strlen(want);
    if (!given || strlen(given) != n)
        return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(given[i] ^ want[i]);
    return diff == 0;
}

/* The owner of what this request makes and sees: the key's identity, or without a key (loopback
 * only) the user at the other end of the socket, local:uid:N, the owner MCP over stdio and HTTP
 * and `mcpbox sandbox` give that user. Answers 401 and returns false when the kernel cannot
 * tell who it is. */
static bool identify(struct osapi_req *req)
{
    unsigned uid;
    if (req->api->api_key) {
        snprintf(req->owner, sizeof(req->owner), "%s", req->api->key_owner);
        return true;
    }
    if (http_ext_peer_uid(req->conn, &uid) == 0) {
        snprintf(req->owner, sizeof(req->owner), "local:uid:%u", uid);
        return true;
    }
    osapi_reply_error(req, 401, "MISSING_API_KEY",
                      "cannot tell which local user is connecting; start mcpbox with "
                      "--opensandbox-api-key (or MCPBOX_OPENSANDBOX_API_KEY) and send it in "
                      "OPEN-SANDBOX-API-KEY");
    return false;
}

static bool lifecycle_auth_ok(struct osapi_req *req)
{
    const char *key = req->api->api_key;
    if (!key)
        return identify(req);
    const char *given = http_request_header(osapi_req_http(req), "open-sandbox-api-key", NULL);
    if (!given || !*given) {
        osapi_reply_error(req, 401, "MISSING_API_KEY",
                          "Authentication credentials are missing. Provide API key via "
                          "OPEN-SANDBOX-API-KEY header.");
        return false;
    }
    if (!secret_eq(given, key)) {
        osapi_reply_error(req, 401, "INVALID_API_KEY",
                          "Authentication credentials are invalid. Check your API key and try "
                          "again.");
        return false;
    }
    return identify(req);
}

/* execd's own check: the sandbox's access token (from its endpoint's headers), or the API key
 * itself (the Go SDK sends it as the token in server-proxy mode). */
static bool execd_auth_ok(struct osapi_req *req, const char *sandbox_id)
{
    const char *key = req->api->api_key;
    if (!key)
        return identify(req);
    identify(req);
    char token[33];
    osapi_execd_token(req->api, sandbox_id, token);
    const struct http_request *h = osapi_req_http(req);
    const char *given = http_request_header(h, "x-execd-access-token", NULL);
    const char *api = http_request_header(h, "open-sandbox-api-key", NULL);
    if (secret_eq(given, token) || secret_eq(given, key) || secret_eq(api, key))
        return true;
    osapi_reply_json(req, 401,
                     json_pack("{s:s}", "error",
                               "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN "
                               "(take it from the headers of GET /v1/sandboxes/{id}/endpoints/"
                               "{port}: one token per sandbox, for every port)"),
                     NULL);
    return false;
}

/* ---- routing ------------------------------------------------------------------------------------- */

/* "/sandboxes/{id}/proxy/{port}/rest": the server-proxy path (also under /v1). */
static bool split_proxy(const char *p, char *id, size_t id_size, long *port, const char **rest)
{
    if (strncmp(p, "/sandboxes/", 11) != 0)
        return false;
    p += 11;
    const char *slash = strchr(p, '/');
    if (!slash || slash == p || (size_t)(slash - p) >= id_size || strncmp(slash, "/proxy/", 7))
        return false;
    memcpy(id, p, (size_t)(slash - p));
    id[slash - p] = '\0';
    char *end;
    *port = strtol(slash + 7, &end, 10);
    if (end == slash + 7 || (*end != '/' && *end != '\0'))
        return false;
    *rest = *end ? end : "/";
    return true;
}

static void route_proxy(struct osapi_req *req, const char *id, long port, const char *rest)
{
    req->execd = true;
    if (!execd_auth_ok(req, id))
        return;
    if (port == OSAPI_EXECD_PORT) {
        osapi_execd(req, id, rest);
    } else if (port == OSAPI_EGRESS_PORT) {
        osapi_egress(req, id, rest);
    } else {
        osapi_proxy(req, id, port, rest);
    }
}

static bool osapi_route(void *arg, struct http_conn *c, const char *path)
{
    struct osapi *api = arg;
    const char *p = path;
    if (strcmp(p, "/health") == 0 || strcmp(p, "/v1/health") == 0) {
        struct osapi_req *req = osapi_req_new(api, c);
        osapi_reply_json(req, 200, json_pack("{s:s}", "status", "healthy"), NULL);
        return true;
    }
    if (strncmp(p, "/v1/", 4) == 0)
        p += 3;
    bool sandboxes = strcmp(p, "/sandboxes") == 0 || strncmp(p, "/sandboxes/", 11) == 0;
    bool snapshots = strcmp(p, "/snapshots") == 0 || strncmp(p, "/snapshots/", 11) == 0;
    bool v1 = p != path; /* anything else under /v1 is OpenSandbox's too: its error shape */
    if (!sandboxes && !snapshots && !v1)
        return false;
    struct osapi_req *req = osapi_req_new(api, c);
    if (!sandboxes && !snapshots) {
        if (lifecycle_auth_ok(req))
            osapi_reply_error(req, 404, "SANDBOX::NOT_FOUND",
                              "no such path: %.200s (mcpbox serves /v1/sandboxes; pools are a "
                              "Kubernetes feature)", path);
        return true;
    }
    char id[OSAPI_ID_MAX];
    long port;
    const char *rest;
    if (split_proxy(p, id, sizeof(id), &port, &rest)) {
        route_proxy(req, id, port, rest);
    } else if (!lifecycle_auth_ok(req)) {
        return true;
    } else if (snapshots) {
        osapi_snapshots(req, p + strlen("/snapshots"));
    } else {
        osapi_lifecycle(req, p + strlen("/sandboxes"));
    }
    return true;
}

/* A request with a body, once its head is in: the proxy for a port other than execd's and the
 * egress sidecar's streams the body to the sandbox as it comes; everything else is read whole. */
static bool osapi_route_head(void *arg, struct http_conn *c, const char *path)
{
    const char *p = strncmp(path, "/v1/", 4) == 0 ? path + 3 : path;
    char id[OSAPI_ID_MAX];
    long port;
    const char *rest;
    if (!split_proxy(p, id, sizeof(id), &port, &rest) || port == OSAPI_EXECD_PORT ||
        port == OSAPI_EGRESS_PORT)
        return false;
    struct osapi_req *req = osapi_req_new(arg, c);
    req->body_streaming = true;
    route_proxy(req, id, port, rest);
    return true;
}

/* ---- start and stop ------------------------------------------------------------------------------ */

void osapi_free(struct osapi *api)
{
    json_decref(api->entrypoints);
    json_decref(api->commands);
    free(api->api_key);
    free(api);
}

static void osapi_stop(void *arg)
{
    struct osapi *api = arg;
    api->stopping = true;
    /* Requests still waiting for a backend keep their object (and api) until the callback;
     * nothing more is sent to any client. */
    if (!api->reqs)
        osapi_free(api);
}

const struct http_extension *osapi_new(struct mcp_server *srv, const char *key,
                                       struct mcp_error *err)
{
    struct osapi *api = xcalloc(1, sizeof(*api));
    api->srv = srv;
    if (key != NULL && *key == '\0')
        key = NULL;
    api->api_key = key ? xstrdup(key) : NULL;
    if (key) {
        /* The owner MCP over HTTP gives the same secret as a bearer token: both APIs then see
         * the same sandboxes. */
        char digest[65];
        sha256_hex(key, strlen(key), digest);
        snprintf(api->key_owner, sizeof(api->key_owner), "token:%.16s", digest);
        sha256_hex(digest, 64, api->token_secret);
    } else {
        random_id(api->token_secret, sizeof(api->token_secret), "", 32);
    }
    api->entrypoints = json_object();
    api->commands = json_object();
    api->ext.route = osapi_route;
    api->ext.route_head = osapi_route_head;
    api->ext.arg = api;
    api->ext.stop = osapi_stop;
    (void)err;
    return &api->ext;
}
