/* OpenSandbox's lifecycle API (/v1/sandboxes) and, per sandbox, its execd API, served by
 * `mcpbox serve --http ADDR --opensandbox-api` on the same listener and loop as MCP, over the
 * local backend and the shared store (a sandbox made through either API is visible to both,
 * ownership rules apply). See docs/opensandbox-api.md. */
#ifndef MCPBOX_OSAPI_H
#define MCPBOX_OSAPI_H

#include "lib/base/error.h"

struct mcp_server;
struct http_extension;

/* The HTTP extension serving the API (freed when the server stops), or NULL with err. key: the
 * API key every request must carry (OPEN-SANDBOX-API-KEY), or NULL or "" for none (loopback
 * only); the composition root picks it (--opensandbox-api-key, else the MCP bearer token). */
const struct http_extension *osapi_new(struct mcp_server *srv, const char *key,
                                       struct mcp_error *err);

/* Approvals (issue 38): the person's settings decide what this API's callers may widen
 * (egress beyond their list); settings must outlive the server. Not called: nothing is asked. */
struct approval_settings;
void osapi_approval_set(const struct approval_settings *settings);

#endif
