/* The MCP-Protocol-Version values Streamable HTTP accepts (the stateless 2026-07-28 revision is
 * recognised before this check, in http_modern.c). */
#include "mcp/http/http_version.h"

#include <string.h>

static const char *const protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

bool http_protocol_version_ok(const char *version)
{
    for (size_t i = 0; i < sizeof(protocol_versions) / sizeof(protocol_versions[0]); i++)
        if (version && strcmp(version, protocol_versions[i]) == 0)
            return true;
    return false;
}

bool http_protocol_has_priming(const char *version)
{
    /* ISO dates compare as strings. */
    return version && strcmp(version, "2025-11-25") >= 0;
}
