/* Tools: how a tool handler sees one tools/call, and how tools are registered.
 *
 * The protocol core (mcp/) owns JSON-RPC, sessions and transports; a tool handler owns nothing
 * but its work. Each tool's description, annotations, inputSchema and outputSchema live in
 * schemas/tools/<name>.json (the test binary's fixtures: tests/fixtures/schemas/) and are served
 * as they are; arguments are validated against inputSchema before the handler runs.
 *
 * A handler is called on the loop thread with the validated arguments. It must eventually call
 * exactly one of tool_call_finish*, tool_call_error* (synchronously or later, from a callback),
 * after which the call object is gone. Everything else is optional.
 */
#ifndef MCPBOX_TOOL_H
#define MCPBOX_TOOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "lib/base/log.h"

struct tool_call;
struct mcp_context;

typedef void tool_handler_fn(struct tool_call *call, json_t *args /* borrowed, validated */);

struct tool_def {
    const char *name; /* must match a schema file's "name" */
    tool_handler_fn *handler;
};

/* Server-wide context: the loop, the store, the backends, the configuration. */
struct mcp_context *tool_call_context(struct tool_call *call);

/* Who is calling: a stable identity used for sandbox ownership and audit ("local:uid:1000" for
 * stdio, "token:<sha256 prefix>" or "session:<id>" for HTTP). */
const char *tool_call_owner(const struct tool_call *call);
const char *tool_call_tool_name(const struct tool_call *call);

/* The caller's MCP session as a number unique in this process (0 on 2026-07-28, which has no
 * session): what approvals remember "for this session" by. */
uint64_t tool_call_session_serial(const struct tool_call *call);

/* True if the request carried _meta.progressToken. */
bool tool_call_wants_progress(const struct tool_call *call);
/* Sends notifications/progress for the request's token (no-op without one). progress must grow
 * between calls; total <= 0 means unknown. message may be NULL. */
void tool_call_progress(struct tool_call *call, double progress, double total,
                        const char *message);
/* Sends notifications/message on the request's stream, if the session's level allows it.
 * level is an RFC 5424 name ("debug", "info", "warning", "error", ...). data is stolen. */
void tool_call_log(struct tool_call *call, const char *level, const char *logger, json_t *data);

/* Cancellation: fn(arg) is called at most once, on the loop thread, when the client cancels the
 * request (notifications/cancelled, or the HTTP stream closes where the protocol says that is
 * a cancellation). The handler must still finish the call; its reply is then discarded. */
typedef void tool_cancel_fn(void *arg);
void tool_call_on_cancel(struct tool_call *call, tool_cancel_fn *fn, void *arg);
bool tool_call_is_cancelled(const struct tool_call *call);

/* Success. structured (stolen, may be NULL) becomes structuredContent; text (may be NULL: then a
 * compact rendering of structured is used) becomes the text content block. */
void tool_call_finish(struct tool_call *call, json_t *structured, const char *text);
/* The same with more content blocks after the text (blocks stolen, NULL: none): run_code's
 * images. */
void tool_call_finish_blocks(struct tool_call *call, json_t *structured, const char *text,
                             json_t *blocks);
/* Success with a complete CallToolResult object (content[], structuredContent?, ...); stolen. */
void tool_call_finish_result(struct tool_call *call, json_t *result);
/* Tool error: a result with isError:true and a message that says what to do next. structured
 * (stolen, may be NULL) is added as structuredContent, e.g. {error:{code, message}}. */
void tool_call_error(struct tool_call *call, json_t *structured, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Tool error from an mcp_error: isError result with {error:{code, message}}. */
void tool_call_fail(struct tool_call *call, const struct mcp_error *err);

/* Server-to-client request (sampling/createMessage, elicitation/create, roots/list) sent on the
 * request's stream. cb gets exactly one of result/error (borrowed) when the client answers, or
 * error {code:-32001,...} if the call is cancelled or the session ends first. */
typedef void tool_client_reply_fn(void *arg, json_t *result, json_t *error);
int tool_call_request_client(struct tool_call *call, const char *method, json_t *params,
                             tool_client_reply_fn *cb, void *arg, struct mcp_error *err);

/* Whether the client declared a capability in initialize ("sampling", "elicitation", "roots"). */
bool tool_call_client_has(const struct tool_call *call, const char *capability);

/* ---- MCP 2026-07-28 (stateless): multi round-trip requests (MRTR) --------------------------
 * A 2026-07-28 client cannot be sent requests. A tool that needs input ends the call with
 * tool_call_input_required(); the client gathers the answers and calls the tool again with the
 * same arguments plus inputResponses (keyed like inputRequests) and the requestState. */

/* True when the call is a 2026-07-28 request (use MRTR, not tool_call_request_client). */
bool tool_call_is_stateless(const struct tool_call *call);
/* The retry's params.inputResponses (borrowed object) or NULL. */
json_t *tool_call_input_responses(const struct tool_call *call);
/* The retry's params.requestState, opened (a new reference), or NULL when absent. Sets
 * *tampered when a requestState was sent but was not sealed by this server or was altered. */
json_t *tool_call_request_state(const struct tool_call *call, bool *tampered);
/* Ends the call with an InputRequiredResult: input_requests (stolen) maps keys to
 * {method, params} requests; state (borrowed, may be NULL) comes back sealed in the retry. */
void tool_call_input_required(struct tool_call *call, json_t *input_requests,
                              const json_t *state);
/* True when the call runs as a task (io.modelcontextprotocol/tasks) if it does not finish at
 * once: the client polls for the result, so no client timeout bounds how long it may take. */
bool tool_call_runs_as_task(const struct tool_call *call);
/* Ends the call with the JSON-RPC error -32021 (MissingRequiredClientCapability) naming
 * capability ("sampling", "elicitation", "roots"). */
void tool_call_missing_capability(struct tool_call *call, const char *capability);
/* Ends the call with a JSON-RPC error (code, message); for protocol errors such as a
 * tampered requestState, not for tool failures (those are tool_call_error). */
void tool_call_protocol_error(struct tool_call *call, int code, const char *message);

#endif
