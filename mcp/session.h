/* One MCP session: the protocol state between one client and this server (negotiated version,
 * client capabilities, log level, in-flight requests, pending server-to-client requests).
 *
 * This is the seam between the transports (stdio, Streamable HTTP) and the protocol core:
 * a transport parses bytes into a struct jsonrpc_msg, hands it to session_handle(), and gets
 * every outgoing message through its send() callback, tagged with the client request it
 * belongs to so that HTTP can put it on the right stream.
 */
#ifndef MCPBOX_SESSION_H
#define MCPBOX_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jsonrpc_msg;
struct mcp_server;
struct session;

struct session_transport_ops {
    /* Deliver msg (borrowed: serialise or incref) to the client.
     *  related: the id of the client request msg belongs to (its response, or a progress/log
     *           notification or server-to-client request sent while handling it), or NULL for
     *           a message unrelated to any request (list_changed, resource updates).
     *  final:   true when msg is the response that completes `related`. */
    void (*send)(void *transport_arg, json_t *msg, const json_t *related, bool final);
    /* Optional (may be NULL): the client request `id` is over and gets no response (the client
     * cancelled it, so the core drops its reply). Called once per such request, as soon as it
     * is cancelled; nothing related to it is sent afterwards. A transport that keeps a stream
     * open per request (HTTP) ends that stream here. Not called for requests cut short by
     * session_close (the transport is going away). */
    void (*request_dropped)(void *transport_arg, const json_t *id);
};

/* owner: the caller identity for tool calls (see tool_call_owner). Copied. */
struct session *session_new(struct mcp_server *srv, const struct session_transport_ops *ops,
                            void *transport_arg, const char *owner);

/* Handles one parsed message (ownership of msg's contents is taken; msg is left released).
 * Requests are answered through send(final=true) exactly once, possibly later; notifications
 * and responses produce no reply; an invalid message is answered with a JSON-RPC error
 * (related = the recovered id or NULL, final = true). */
void session_handle(struct session *s, struct jsonrpc_msg *msg);

/* Ends the session: cancels every in-flight request (their replies are dropped), fails pending
 * server-to-client requests, and frees the session once in-flight handlers have finished.
 * No send() happens after this returns. */
void session_close(struct session *s);

/* Every request on this session is served with the 2026-07-28 stateless semantics (the HTTP
 * transport's session for one POST without Mcp-Session-Id). */
void session_set_stateless(struct session *s);
/* Replaces the caller identity given to session_new (copied). */
void session_set_owner(struct session *s, const char *owner);

bool session_is_initialized(const struct session *s);
/* The negotiated protocol version ("2025-11-25", ...) or NULL before initialize. */
const char *session_protocol_version(const struct session *s);
/* A number no other session of this process has had, for what is remembered "for this
 * session" (mcp/approval.c); 0 for the stateless (2026-07-28) session of one HTTP POST. */
uint64_t session_serial(const struct session *s);
/* Requests currently being handled (for per-session limits). */
size_t session_inflight(const struct session *s);

#endif
