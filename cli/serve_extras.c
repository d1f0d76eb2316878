/* mcpbox serves the sandbox tools and nothing else: `serve` has no options of its own here and
 * registers nothing more (a test binary built on cli/ adds its own: tests/fixtures/). */
#include "cli/cli.h"

int cli_serve_take_options(int argc, char **argv)
{
    return argc;
}

int cli_serve_extras(struct mcp_server *srv, const struct mcp_config *cfg, struct mcp_error *err)
{
    return 0;
}
