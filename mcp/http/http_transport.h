/* The Streamable HTTP transport (MCP 2025-11-25, and 2026-07-28's stateless requests) on the
 * listener of server/http/: one endpoint, /mcp, for POST, GET and DELETE, with sessions, SSE
 * replies, resumable streams, an optional bearer token and a cap on sessions. See
 * docs/http.md. */
#ifndef MCPBOX_MCP_HTTP_TRANSPORT_H
#define MCPBOX_MCP_HTTP_TRANSPORT_H

#include "lib/base/error.h"

struct mcp_server;
struct mcp_config;
struct http_extension;

/* Starts the listener (http_server_listen: cfg->http_listen, loopback rules, Host and Origin)
 * with MCP as its front-end, and ext (another API on the same listener, or NULL). Stopping the
 * server ends every session. cfg and ext are borrowed and must outlive the server. */
int http_transport_start(struct mcp_server *srv, const struct mcp_config *cfg,
                         const struct http_extension *ext, struct mcp_error *err);

#endif
