/* Registers the sandbox tools (mcp/tools/) into the server's registry: the executable puts them
 * together, so that the protocol core does not depend on the tools that use it. */
#define LOG_MODULE "server"

#include "cli/cli.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "mcp/registry.h"
#include "mcp/server.h"
#include "mcp/tools/tools.h"

int server_add_sandbox_tools(struct mcp_server *srv, struct mcp_error *err)
{
    struct registry *reg = server_registry(srv);

    if (registry_load_tools(reg, "tools", sandbox_tools, sandbox_tools_count, err) < 0)
        return -1;
    /* Every tool is listed on every server: since issues 34 and 36 the local backend has code
     * contexts and snapshots too, so no tool is left without a backend that can do it. */
    sandbox_tools_register(reg, server_context(srv));
    log_info("%zu sandbox tools registered", sandbox_tools_count);
    return 0;
}
