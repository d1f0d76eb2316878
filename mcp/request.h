/* One client request being handled (internal to the protocol core). Created by the session
 * for each request it dispatches; a method handler answers it exactly once with request_reply /
 * request_error / request_fail (synchronously or later), which frees it.
 *
 * While it runs, a request can send related notifications (progress, log) and server-to-client
 * requests, which the transport puts on the request's stream. If the client cancels it
 * (notifications/cancelled) or the session ends, the cancel callback runs and the eventual reply
 * is dropped. */
#ifndef MCPBOX_REQUEST_H
#define MCPBOX_REQUEST_H

#include <jansson.h>
#include <stdbool.h>

#include "lib/base/error.h"
#include "mcp/tool.h"

struct request;
struct session;
struct mcp_server;

/* Answers and frees. result is stolen (NULL = {}). */
void request_reply(struct request *req, json_t *result);
/* JSON-RPC error reply; frees. data stolen, may be NULL. */
void request_error(struct request *req, int code, json_t *data, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps an mcp_error to a JSON-RPC error: JSON-RPC codes pass through, MCP_ERR_INVALID/DENIED ->
 * -32602, MCP_ERR_NOT_FOUND -> -32602, anything else -32603. */
void request_fail(struct request *req, const struct mcp_error *err);

const json_t *request_id(const struct request *req);
const char *request_method(const struct request *req);
struct session *request_session(struct request *req);
struct mcp_server *request_server(struct request *req);
const char *request_owner(const struct request *req);
bool request_is_cancelled(const struct request *req);
void request_on_cancel(struct request *req, tool_cancel_fn *fn, void *arg);

/* The request's params object (borrowed; {} if absent). */
json_t *request_params(const struct request *req);
/* params._meta of a 2026-07-28 (stateless) request (borrowed), or NULL for a legacy request. */
const json_t *request_modern_meta(const struct request *req);

/* The request with this id still running on session s (not answered, not cancelled), or NULL. */
struct request *session_find_request(struct session *s, const json_t *id);
/* Answers req's client with result (stolen) now, and moves the request itself to session `to`,
 * which gets the handler's eventual reply (how a running tools/call becomes a task). */
void request_hand_over(struct request *req, json_t *result, struct session *to);

/* The request's _meta.progressToken (borrowed) or NULL. */
const json_t *request_progress_token(const struct request *req);
/* notifications/progress for this request's token; ignored without a token or if progress does
 * not grow. */
void request_progress(struct request *req, double progress, double total, const char *message);
/* notifications/message if the session's log level admits level. data stolen. */
void request_log(struct request *req, const char *level, const char *logger, json_t *data);
/* Sends a notification on this request's stream. params stolen. */
void request_notify(struct request *req, const char *method, json_t *params);
/* Server-to-client request tied to this request (see tool_call_request_client). params stolen. */
int request_send_client(struct request *req, const char *method, json_t *params,
                        tool_client_reply_fn *cb, void *arg, struct mcp_error *err);
/* Whether the client declared capability in initialize. */
bool request_client_has(const struct request *req, const char *capability);

#endif
