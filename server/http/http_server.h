/* The HTTP listener on the server's loop: an HTTP/1.1 server with DNS-rebinding defence (Host,
 * Origin), limits on everything a peer can make us hold, and two kinds of users: one front-end
 * built into it (struct http_frontend in http_conn.h: mcp/http/, Streamable HTTP) and an
 * optional extension taking the paths it owns (http_ext.h: osapi/). Knows no protocol. See
 * docs/http.md. */
#ifndef MCPBOX_HTTP_SERVER_H
#define MCPBOX_HTTP_SERVER_H

#include "lib/base/error.h"

struct mcp_server;
struct mcp_config;
struct http_server;
struct http_frontend;
struct http_extension;

/* Listens on cfg->http_listen ("127.0.0.1:8765", "[::1]:0", "localhost:8765"; port 0 picks a
 * free one) and prints "listening on http://HOST:PORT<fe->endpoint>" on stderr. Refuses a
 * non-loopback address without cfg->token. Registers a stop hook with the server that stops
 * the front-end and closes the listener and every connection. fe is copied; ext (or NULL) and
 * cfg are borrowed and must outlive the server. Returns the listener, or NULL with err. */
struct http_server *http_server_listen(struct mcp_server *srv, const struct mcp_config *cfg,
                                       const struct http_frontend *fe,
                                       const struct http_extension *ext, struct mcp_error *err);

#endif
