/* MCP 2026-07-28, the stateless revision, beside 2025-11-25 (docs/protocol-2026.md).
 *
 * A request is "modern" when it is served without a session handshake: on HTTP, every POST
 * without Mcp-Session-Id that names 2026-07-28 (header or _meta); on stdio, requests that carry
 * _meta["io.modelcontextprotocol/protocolVersion"] before any initialize. A modern request
 * carries its whole context in params._meta (version, client capabilities, log level), gets
 * resultType/serverInfo/caching fields on its result, and asks the client for input through
 * InputRequiredResult (MRTR) instead of server-to-client requests.
 *
 * Everything here is pure protocol logic: the session (mcp/session.c) and the HTTP transport
 * (mcp/http/) call it through small hooks. */
#ifndef MCPBOX_MODERN_H
#define MCPBOX_MODERN_H

#include <jansson.h>
#include <stdbool.h>

#include "lib/base/error.h"

struct jsonrpc_msg;
struct method_def;

#define MODERN_PROTOCOL_VERSION "2026-07-28"
#define MODERN_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MODERN_META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define MODERN_META_INFO "io.modelcontextprotocol/clientInfo"
#define MODERN_META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define MODERN_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define MODERN_TASKS_EXTENSION "io.modelcontextprotocol/tasks"

/* 2026-07-28 error codes. */
#define MODERN_ERR_HEADER_MISMATCH (-32020)
#define MODERN_ERR_MISSING_CAPABILITY (-32021)
#define MODERN_ERR_UNSUPPORTED_VERSION (-32022)

/* Whether version is a revision served with the stateless semantics. */
bool modern_version_is_modern(const char *version);
/* Whether params._meta names a protocol version (the marker of a modern request). */
bool modern_params_have_version(const json_t *params);

/* The HTTP headers of a modern POST (NULL when absent; all NULL on stdio, where no header
 * checks apply). */
struct modern_headers {
    const char *version; /* MCP-Protocol-Version */
    const char *method;  /* Mcp-Method */
    const char *name;    /* Mcp-Name */
};

/* Checks a modern request before dispatch: the headers against the body (HTTP), then
 * params._meta (protocol version supported, client capabilities present). On failure returns
 * -1 with err; *data (new reference or NULL) is the error's data member. */
int modern_check_request(const struct jsonrpc_msg *msg, const struct modern_headers *h,
                         json_t **data, struct mcp_error *err);

/* SEP-2243 custom headers: a tool argument whose schema has "x-mcp-header": NAME travels in
 * the body and, mirrored, in the header Mcp-Param-NAME (the value as text, or
 * "=?base64?...?=" for text that is not plain ASCII). Checks every such argument of args
 * against its header (get looks a header up by lower-case name; NULL when absent or repeated):
 * a missing, undecodable or different header is -32020. */
typedef const char *modern_header_fn(void *arg, const char *lname);
int modern_check_param_headers(const json_t *input_schema, const json_t *args,
                               modern_header_fn *get, void *arg, struct mcp_error *err);
/* The inputSchema of tool name (borrowed), or NULL: for the HTTP layer's header checks. */
struct mcp_server;
const json_t *modern_tool_input_schema(struct mcp_server *srv, const char *name);

/* The HTTP status a modern JSON-RPC reply travels with (200 for results). */
int modern_http_status(const json_t *reply);

/* The method table of the stateless revision (initialize, ping, logging/setLevel and
 * resources/(un)subscribe are gone; server/discover is new). NULL: -32601. */
const struct method_def *modern_dispatch_find(const char *name);

/* Rewrites a reply to a modern request in place: resultType, serverInfo in _meta, ttlMs and
 * cacheScope on cacheable results, -32602 for a missing resource. */
void modern_decorate_reply(const char *method, json_t *reply);

/* Whether the request's _meta declares a client capability ("sampling", "elicitation",
 * "roots", or "extensions/<name>"). meta may be NULL. */
bool modern_meta_has_capability(const json_t *meta, const char *capability);
/* The request's log level (mcp_log_level_parse value), or -1 when _meta sets none (then no
 * notifications/message may be sent). */
int modern_meta_log_level(const json_t *meta);

/* subscriptions/listen streams (subscriptions.c): the server's list-changed and
 * resource-updated broadcasts also go to every open stream whose filter asks for them. */
void modern_listeners_list_changed(const char *what /* "tools", "prompts", "resources" */);
void modern_listeners_resource_updated(const char *uri);
/* The same for each URI starting with prefix that a listener of `owner` watches. */
void modern_listeners_resource_updated_under(const char *owner, const char *prefix);

/* The server capabilities a modern client sees in server/discover. */
json_t *modern_server_capabilities(void);

/* ---- what a module adds to the 2026-07-28 revision (the conformance fixtures do) ---------- */

struct request;
/* A prompt whose prompts/get may answer InputRequiredResult: fn sees the whole params
 * (inputResponses, requestState) and answers req. name must outlive the server. */
typedef void modern_prompt_fn(struct request *req, json_t *params);
void modern_input_prompt_add(const char *name, modern_prompt_fn *fn);
/* {resultType:"input_required", inputRequests (stolen), requestState: sealed(state)?}. */
json_t *modern_input_required_result(json_t *input_requests, const json_t *state);
/* Answers req with -32021 naming capability. */
void modern_missing_capability(struct request *req, const char *capability);

enum modern_task_support {
    TASK_SUPPORT_NONE,     /* always answered in the request */
    TASK_SUPPORT_OPTIONAL, /* a task when the client has the extension and the call goes async */
    TASK_SUPPORT_REQUIRED, /* only as a task: -32021 without the extension */
};
/* Marks tool name (which must outlive the server) as one that may or must run as a task. */
void modern_task_tool_add(const char *name, enum modern_task_support support);

#endif
