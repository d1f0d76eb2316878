/* The MCP-Protocol-Version header of Streamable HTTP: the revisions this transport accepts,
 * kept pure for unit tests and the fuzz target. */
#ifndef MCPBOX_MCP_HTTP_VERSION_H
#define MCPBOX_MCP_HTTP_VERSION_H

#include <stdbool.h>

/* MCP-Protocol-Version values this transport accepts. */
bool http_protocol_version_ok(const char *version);
/* Whether a protocol version has SSE priming events and retry (2025-11-25 and later). */
bool http_protocol_has_priming(const char *version);

#endif
