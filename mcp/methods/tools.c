/* tools/list, tools/call. */
#include "mcp/dispatch.h"
#include "mcp/methods/params.h"
#include "mcp/registry.h"
#include "mcp/request.h"
#include "mcp/server.h"
#include "mcp/tool_call.h"

void method_tools_list(struct request *req, json_t *params)
{
    struct registry *reg = server_registry(request_server(req));

    /* Lists are small: no pagination, so no nextCursor (a cursor sent by the client is ignored). */
    request_reply(req, json_pack("{s:o}", "tools", registry_tools_json(reg)));
}

void method_tools_call(struct request *req, json_t *params)
{
    struct registry *reg = server_registry(request_server(req));
    const char *name;
    json_t *args;
    struct mcp_error err;

    if (params_string(params, "name", true, &name, &err) < 0 ||
        params_object(params, "arguments", false, &args, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    const struct registry_tool *tool = registry_find_tool(reg, name);
    if (!tool) {
        request_error(req, MCP_ERR_INVALID_PARAMS, NULL,
                      "Unknown tool: %s (tools/list shows the available tools)", name);
        return;
    }
    tool_call_start(req, tool, args);
}
