/* The Streamable HTTP transport (MCP 2025-11-25) on the server's loop: one endpoint, /mcp, for
 * POST, GET and DELETE, with sessions, SSE replies, DNS-rebinding defence, an optional bearer
 * token, and limits on everything a peer can make us hold. See docs/http.md. */
#ifndef MCPBOX_HTTP_SERVER_H
#define MCPBOX_HTTP_SERVER_H

#include "lib/base/error.h"

struct mcp_server;
struct mcp_config;

/* Listens on cfg->http_listen ("127.0.0.1:8765", "[::1]:0", "localhost:8765"; port 0 picks a
 * free one) and prints "listening on http://HOST:PORT/mcp" on stderr. Refuses a non-loopback
 * address without cfg->token. Registers a stop hook with the server that closes the listener,
 * every connection and every session. cfg is borrowed and must outlive the server. */
int http_server_start(struct mcp_server *srv, const struct mcp_config *cfg,
                      struct mcp_error *err);

#endif
