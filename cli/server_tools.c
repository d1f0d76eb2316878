/* Registers the sandbox tools (mcp/tools/) into the server's registry: the executable puts them
 * together, so that the protocol core does not depend on the tools that use it. */
#define LOG_MODULE "server"
#include <string.h>

#include "cli/cli.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "server/config.h"
#include "mcp/registry.h"
#include "mcp/server.h"
#include "mcp/tools/tools.h"

int server_add_sandbox_tools(struct mcp_server *srv, struct mcp_error *err)
{
    struct registry *reg = server_registry(srv);

    if (registry_load_tools(reg, "tools", sandbox_tools, sandbox_tools_count, err) < 0)
        return -1;
    /* A tool no configured backend can do costs every conversation its bytes in tools/list: of
     * this executable's backends only OpenSandbox has code contexts, so those are listed only
     * when it is configured (a call still answers with what to use instead). Snapshots: every
     * backend here has them (the local one since issue 36). */
    for (size_t i = 0; !server_config(srv)->opensandbox_domain && sandbox_tools_optional[i]; i++)
        if (strcmp(sandbox_tools_optional[i], "snapshot_sandbox") != 0)
            registry_unlist_tool(reg, sandbox_tools_optional[i]);
    sandbox_tools_register(reg, server_context(srv));
    log_info("%zu sandbox tools registered", sandbox_tools_count);
    return 0;
}
