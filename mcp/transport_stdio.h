/* The stdio transport: newline-delimited JSON-RPC on stdin/stdout (stdin may be a pipe, a
 * socket, a tty or a regular file). stdout carries nothing but MCP messages. One session, owner
 * "local:uid:<uid>". On EOF it lets in-flight requests finish (up to
 * MCP_STDIO_DRAIN_TIMEOUT_MS, then cancels them), flushes stdout and stops the server. */
#ifndef MCPBOX_TRANSPORT_STDIO_H
#define MCPBOX_TRANSPORT_STDIO_H

#include "lib/base/error.h"

struct mcp_server;

/* Starts reading stdin on the server's loop. in_fd/out_fd are normally 0 and 1. */
int stdio_transport_start(struct mcp_server *srv, int in_fd, int out_fd, struct mcp_error *err);

#endif
