/* Session internals shared by the protocol core's method handlers and the server (not by
 * transports: they use session.h). */
#ifndef MCPBOX_SESSION_INTERNAL_H
#define MCPBOX_SESSION_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "lib/base/error.h"
#include "mcp/session.h"

/* RFC 5424 levels as MCP names them, in increasing severity. */
enum mcp_log_level {
    MCP_LOG_DEBUG,
    MCP_LOG_INFO,
    MCP_LOG_NOTICE,
    MCP_LOG_WARNING,
    MCP_LOG_ERROR,
    MCP_LOG_CRITICAL,
    MCP_LOG_ALERT,
    MCP_LOG_EMERGENCY,
};
#define MCP_LOG_DEFAULT MCP_LOG_INFO
/* Returns the level or -1 if name is not one of debug, info, ..., emergency. */
int mcp_log_level_parse(const char *name);
const char *mcp_log_level_name(int level);

struct mcp_server *session_server(struct session *s);
const char *session_owner(const struct session *s);

/* Records the negotiated version and what the client declared (both borrowed; copied). */
void session_set_initialized(struct session *s, const char *version, json_t *client_caps,
                             json_t *client_info);
bool session_client_has(const struct session *s, const char *capability);
void session_set_log_level(struct session *s, int level);
int session_log_level(const struct session *s);

int session_subscribe(struct session *s, const char *uri, struct mcp_error *err);
void session_unsubscribe(struct session *s, const char *uri);
bool session_is_subscribed(const struct session *s, const char *uri);
/* notifications/resources/updated for each subscribed URI that starts with prefix. */
void session_notify_updated_under(struct session *s, const char *prefix);

/* The client can no longer send anything (stdin reached EOF): pending server-to-client requests
 * can never be answered, so their callbacks get -32001 now rather than at a timeout. */
void session_input_closed(struct session *s);

/* A notification unrelated to any request (list_changed, resources/updated): sent only once
 * the session is initialized. params stolen. */
void session_notify(struct session *s, const char *method, json_t *params);

#endif
