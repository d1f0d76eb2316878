/* Registers the sandbox tools into the server's registry, when the executable has them.
 * Kept out of mcpbox_core so that mcpbox_tools (which uses the core) can link after it. */
#define LOG_MODULE "server"
#include "mcp/base/error.h"
#include "mcp/base/log.h"
#include "mcp/cli.h"
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
#ifdef SANDBOX_TOOLS_HAVE_REGISTER
    sandbox_tools_register(reg, server_context(srv));
#endif
    log_info("%zu sandbox tools registered", sandbox_tools_count);
#else
    log_info("built without the sandbox tools (mcp/tools/): serving no sandbox tools");
#endif
    return 0;
}
