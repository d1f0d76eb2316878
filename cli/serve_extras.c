/* mcpbox serves the sandbox tools and nothing else: the MCP conformance fixtures are built into
 * the test-only mcpbox-conformance (tests/fixtures/), never into the product. */
#include "cli/cli.h"
#include "lib/base/error.h"
#include "server/config.h"

int cli_serve_extras(struct mcp_server *srv, const struct mcp_config *cfg, struct mcp_error *err)
{
    if (!cfg->conformance_fixtures)
        return 0;
    return mcp_error_set(err, MCP_ERR_INVALID, 0,
                         "--conformance-fixtures: this mcpbox has no conformance fixtures; they "
                         "are served by the test binary mcpbox-conformance (build it with the "
                         "tests, then run build/mcpbox-conformance serve "
                         "--conformance-fixtures)");
}
