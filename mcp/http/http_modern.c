/* Streamable HTTP for MCP 2026-07-28 (stateless): a POST without Mcp-Session-Id that names
 * 2026-07-28 (MCP-Protocol-Version header or _meta) is one self-contained request. It gets a
 * session of its own for the length of the exchange (so progress and the reply travel as for
 * 2025-11-25), which ends with the response; closing the response stream cancels the request.
 * See docs/protocol-2026.md. */
#define LOG_MODULE "http"
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "mcp/http/http-internal.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern.h"
#include "mcp/session.h"

/* One header value, or NULL; *bad set when the header repeats. */
static const char *one_header(struct http_conn *c, const char *name, bool *bad)
{
    bool dup = false;
    const char *v = http_request_header(&c->reader.req, name, &dup);
    if (dup)
        *bad = true;
    return v;
}

/* A JSON-RPC error reply with data, at the status the stateless revision gives its code. */
static void modern_error(struct http_conn *c, const json_t *id, const struct mcp_error *err,
                         json_t *data /* stolen */)
{
    cleanup_json json_t *reply = jsonrpc_error(id, err->code, err->msg, data);
    cleanup_free char *text = json_dumps(reply, JSON_COMPACT);
    log_debug("stateless request refused: %s", err->msg);
    http_conn_respond(c, modern_http_status(reply), "application/json", NULL, text,
                      strlen(text));
}

static void modern_dispatch(struct http_conn *c, struct jsonrpc_msg *msg)
{
    struct http_sess *s = http_sess_create_stateless(mcp_http_of(c), c);
    if (!s) {
        http_conn_error(c, 503, -32000, msg->id, "Retry-After: 5\r\n",
                        "Service Unavailable: too many requests in progress (limit %d)",
                        HTTP_MAX_SESSIONS);
        return;
    }
    ex_of(c)->key = json_dumps(msg->id, JSON_COMPACT | JSON_ENCODE_ANY);
    const char *accept = http_request_header(&c->reader.req, "accept", NULL);
    ex_of(c)->prefer_sse = http_accept_prefers(accept, "text/event-stream", "application/json");
    http_sess_attach(s, c, EX_PENDING);
    session_handle(s->core, msg);
}

/* A header by lower-case name for modern_check_param_headers: NULL when absent or repeated. */
static const char *param_header(void *arg, const char *lname)
{
    bool dup = false;
    struct http_conn *c = arg;
    const char *v = http_request_header(&c->reader.req, lname, &dup);
    return dup ? NULL : v;
}

/* tools/call arguments mirrored into Mcp-Param-* headers (x-mcp-header) must match them. */
static int check_param_headers(struct http_conn *c, const struct jsonrpc_msg *msg,
                               struct mcp_error *err)
{
    if (strcmp(msg->method, "tools/call") != 0)
        return 0;
    const json_t *schema = modern_tool_input_schema(
        c->hs->srv, json_string_value(json_object_get(msg->params, "name")));
    if (!schema)
        return 0; /* an unknown tool: the core answers that */
    return modern_check_param_headers(schema, json_object_get(msg->params, "arguments"),
                                      param_header, c, err);
}

static void modern_request(struct http_conn *c, struct jsonrpc_msg *msg, const char *version)
{
    bool bad = false;
    struct modern_headers h = {
        .version = version,
        .method = one_header(c, "mcp-method", &bad),
        .name = one_header(c, "mcp-name", &bad),
    };
    struct mcp_error err;
    json_t *data = NULL;

    if (bad) {
        mcp_error_set(&err, MODERN_ERR_HEADER_MISMATCH, 0,
                      "Header mismatch: Mcp-Method and Mcp-Name must not repeat");
        modern_error(c, msg->id, &err, NULL);
        return;
    }
    if (modern_check_request(msg, &h, &data, &err) < 0 || check_param_headers(c, msg, &err) < 0) {
        modern_error(c, msg->id, &err, data);
        return;
    }
    modern_dispatch(c, msg); /* an unknown method: -32601 from the core, sent with 404 */
}

bool http_modern_route(struct http_conn *c)
{
    bool bad = false;
    const char *version = one_header(c, "mcp-protocol-version", &bad);
    if (bad || one_header(c, "mcp-session-id", &bad))
        return false; /* the 2025-11-25 path answers both */
    struct jsonrpc_msg msg;
    const struct buf *body = &c->reader.req.body;
    jsonrpc_parse(body->data ? body->data : "", body->len, &msg);
    bool modern = modern_version_is_modern(version) ||
                  (msg.kind == JSONRPC_REQUEST && modern_params_have_version(msg.params));
    if (!modern) {
        jsonrpc_msg_release(&msg);
        return false;
    }
    if (msg.kind == JSONRPC_INVALID)
        http_conn_error(c, 400, msg.err.code, msg.id, NULL, "%s", msg.err.msg);
    else if (msg.kind == JSONRPC_REQUEST)
        modern_request(c, &msg, version);
    else if (msg.kind == JSONRPC_NOTIFICATION)
        http_conn_respond(c, 202, NULL, NULL, "", 0); /* nothing to notify without a session */
    else
        http_conn_error(c, 400, -32600, NULL, NULL,
                        "Bad Request: %s has no requests to the client to answer",
                        MODERN_PROTOCOL_VERSION);
    jsonrpc_msg_release(&msg);
    return true;
}

bool http_modern_refuse_stream(struct http_conn *c)
{
    bool bad = false;
    const char *version = one_header(c, "mcp-protocol-version", &bad);
    if (bad || one_header(c, "mcp-session-id", &bad) || !modern_version_is_modern(version))
        return false;
    http_conn_error(c, 405, -32000, NULL, "Allow: POST\r\n",
                    "Method Not Allowed: %s has no GET stream and no sessions to delete",
                    MODERN_PROTOCOL_VERSION);
    return true;
}
