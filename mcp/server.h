/* What the MCP front-end keeps with the server runtime (server/server.h): the registry of
 * tools/resources/prompts and the list of live sessions, and the broadcasts to them. Made on
 * first use (server_frontend), so a server that runs only another front-end carries none of it.
 *
 * Everything here runs on the loop thread. */
#ifndef MCPBOX_SERVER_H
#define MCPBOX_SERVER_H

#include <stddef.h>

#include "server/server.h"

struct registry;
struct session;

struct registry *server_registry(struct mcp_server *srv);

/* Broadcast to every initialized session: notifications/{tools,resources,prompts}/list_changed
 * (what = "tools", "resources", "prompts"). */
void server_notify_list_changed(struct mcp_server *srv, const char *what);
/* notifications/resources/updated {uri} to every session subscribed to uri. */
void server_notify_resource_updated(struct mcp_server *srv, const char *uri);

/* Sessions register themselves (session_new / session_close call these). */
void server_session_add(struct mcp_server *srv, struct session *s);
void server_session_remove(struct mcp_server *srv, struct session *s);

/* Server identity and instructions, as served in InitializeResult. */
#define MCPBOX_SERVER_NAME "mcpbox"
const char *server_instructions(const struct mcp_server *srv);

#endif
