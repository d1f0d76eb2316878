/* Registers the sandbox tools into the server's registry, when the executable has them.
 * Kept out of mcpbox_core so that mcpbox_tools (which uses the core) can link after it. */
#define LOG_MODULE "server"
#include "mcp/base/error.h"
#include "mcp/base/log.h"
#include "mcp/cli.h"
#include "mcp/config.h"
#include "mcp/registry.h"
#include "mcp/server.h"
#ifdef MCPBOX_HAVE_TOOLS
#include "mcp/tools/tools.h"
#endif

int server_add_sandbox_tools(struct mcp_server *srv, struct mcp_error *err)
{
#ifdef MCPBOX_HAVE_TOOLS
    struct registry *reg = server_registry(srv);

    if (registry_load_tools(reg, "tools", sandbox_tools, sandbox_tools_count, err) < 0)
        return -1;
    /* A tool only one backend can do costs every conversation its bytes in tools/list: list it
     * only where that backend is enabled (a call still answers with what to use instead). */
    for (size_t i = 0; !server_config(srv)->opensandbox_domain &&
                       sandbox_tools_opensandbox_only[i]; i++)
        registry_unlist_tool(reg, sandbox_tools_opensandbox_only[i]);
#ifdef SANDBOX_TOOLS_HAVE_REGISTER
    sandbox_tools_register(reg, server_context(srv));
#endif
    log_info("%zu sandbox tools registered", sandbox_tools_count);
#else
    log_info("built without the sandbox tools (mcp/tools/): serving no sandbox tools");
#endif
    return 0;
}
