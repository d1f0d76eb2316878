/* initialize, ping, logging/setLevel. */
#define LOG_MODULE "lifecycle"
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "mcp/dispatch.h"
#include "mcp/methods/params.h"
#include "mcp/request.h"
#include "mcp/server.h"
#include "mcp/session-internal.h"

/* Newest first: an unknown requested version is answered with the first. */
static const char *const supported_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

static const char *negotiate_version(const char *requested)
{
    for (size_t i = 0; i < ARRAY_SIZE(supported_versions); i++) {
        if (strcmp(requested, supported_versions[i]) == 0)
            return supported_versions[i];
    }
    return supported_versions[0];
}

static json_t *server_capabilities(void)
{
    return json_pack("{s:{s:b}, s:{s:b, s:b}, s:{s:b}, s:{}, s:{}}", "tools", "listChanged", 1,
                     "resources", "subscribe", 1, "listChanged", 1, "prompts", "listChanged", 1,
                     "logging", "completions");
}

void method_initialize(struct request *req, json_t *params)
{
    struct session *s = request_session(req);
    const char *requested;
    json_t *caps, *info;
    struct mcp_error err;

    if (session_is_initialized(s)) {
        request_error(req, MCP_ERR_INVALID_REQUEST, NULL,
                      "Invalid Request: the session is already initialized");
        return;
    }
    if (params_string(params, "protocolVersion", true, &requested, &err) < 0 ||
        params_object(params, "capabilities", false, &caps, &err) < 0 ||
        params_object(params, "clientInfo", false, &info, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    const char *version = negotiate_version(requested);
    session_set_initialized(s, version, caps, info);
    const char *client = json_string_value(json_object_get(info, "name"));
    log_info("session initialized: protocol %s (client asked for %s), client %s", version,
             requested, client ? client : "(unnamed)");
    struct mcp_server *srv = request_server(req);
    request_reply(req, json_pack("{s:s, s:o, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                                 "capabilities", server_capabilities(), "serverInfo", "name",
                                 MCPBOX_SERVER_NAME, "title", "mcpbox sandboxes", "version",
                                 MCPBOX_VERSION, "instructions", server_instructions(srv)));
}

void method_ping(struct request *req, json_t *params)
{
    request_reply(req, json_object());
}

void method_logging_set_level(struct request *req, json_t *params)
{
    const char *name;
    struct mcp_error err;

    if (params_string(params, "level", true, &name, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    int level = mcp_log_level_parse(name);
    if (level < 0) {
        request_error(req, MCP_ERR_INVALID_PARAMS, NULL,
                      "Invalid params: \"level\" must be one of debug, info, notice, "
                      "warning, error, critical, alert, emergency (got \"%s\")",
                      name);
        return;
    }
    session_set_log_level(request_session(req), level);
    request_reply(req, json_object());
}
