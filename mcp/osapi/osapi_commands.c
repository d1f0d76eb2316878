/* execd's /command: a command's events streamed in execd's format (one JSON object and a blank
 * line per event: init, stdout/stderr lines, ping every 3 s, then execution_complete or error),
 * background commands, their status and logs, and interrupt; over the backend's exec. */
#define LOG_MODULE "osapi"
#include "mcp/osapi/osapi-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/base/util.h"
#include "mcp/base/xalloc.h"

bool osapi_commands_route(struct osapi_req *req, const char *path)
{
    return false;
}

void osapi_execd(struct osapi_req *req, const char *sandbox_id, const char *rest)
{
    const char *state;
    if (osapi_bind(req, sandbox_id, false, &state) < 0)
        return;
    if (!strcmp(rest, "/ping")) {
        if (strcmp(state, "running") != 0)
            osapi_reply_error(req, 503, "RUNTIME_ERROR", "sandbox %s is %s", sandbox_id,
                              osapi_state_name(state));
        else
            osapi_reply_raw(req, 200, NULL, NULL, "", 0);
        return;
    }
    if (osapi_commands_route(req, rest) || osapi_files_route(req, rest))
        return;
    osapi_reply_unsupported(req, "execd %s is not served by mcpbox (docs/opensandbox-api.md "
                            "lists what is)", rest);
}
