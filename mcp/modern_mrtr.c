/* InputRequiredResult (MRTR) for tool handlers: the mcp/tool.h side of 2026-07-28's
 * replacement for server-to-client requests. See modern.h and docs/protocol-2026.md. */
#include <string.h>

#include "lib/base/cleanup.h"
#include "mcp/modern-internal.h"
#include "mcp/modern.h"
#include "mcp/request.h"
#include "mcp/tool.h"
#include "mcp/tool_call.h"

bool tool_call_is_stateless(const struct tool_call *call)
{
    return request_modern_meta(tool_call_req(call)) != NULL;
}

bool tool_call_runs_as_task(const struct tool_call *call)
{
    struct request *req = tool_call_req(call);
    return session_task_of(request_session(req)) != NULL ||
           modern_task_wanted(req, tool_call_tool_name(call));
}

json_t *tool_call_input_responses(const struct tool_call *call)
{
    json_t *responses = json_object_get(request_params(tool_call_req(call)), "inputResponses");
    return json_is_object(responses) ? responses : NULL;
}

json_t *modern_request_state(struct request *req, bool *tampered)
{
    json_t *sealed = json_object_get(request_params(req), "requestState");

    *tampered = false;
    if (!sealed)
        return NULL;
    json_t *state = json_is_string(sealed) ? modern_state_open(json_string_value(sealed)) : NULL;
    *tampered = state == NULL;
    return state;
}

json_t *tool_call_request_state(const struct tool_call *call, bool *tampered)
{
    return modern_request_state(tool_call_req(call), tampered);
}

json_t *modern_input_required_result(json_t *input_requests, const json_t *state)
{
    json_t *result = json_pack("{s:s, s:o}", "resultType", "input_required", "inputRequests",
                               input_requests);
    if (state) {
        cleanup_free char *sealed = modern_state_seal(state);
        json_object_set_new(result, "requestState", json_string(sealed));
    }
    return result;
}

void tool_call_input_required(struct tool_call *call, json_t *input_requests,
                              const json_t *state)
{
    request_reply(tool_call_end(call), modern_input_required_result(input_requests, state));
}

void modern_missing_capability(struct request *req, const char *capability)
{
    request_error(req, MODERN_ERR_MISSING_CAPABILITY, json_pack("{s:{s:{}}}",
                  "requiredCapabilities", capability),
                  "Missing required client capability: %s (declare it in _meta[\"%s\"])",
                  capability, MODERN_META_CAPS);
}

void modern_missing_extension(struct request *req, const char *extension)
{
    request_error(req, MODERN_ERR_MISSING_CAPABILITY, json_pack("{s:{s:{s:{}}}}",
                  "requiredCapabilities", "extensions", extension),
                  "Missing required client capability: the %s extension (declare it in "
                  "_meta[\"%s\"].extensions)", extension, MODERN_META_CAPS);
}

void tool_call_missing_capability(struct tool_call *call, const char *capability)
{
    modern_missing_capability(tool_call_end(call), capability);
}

void tool_call_protocol_error(struct tool_call *call, int code, const char *message)
{
    request_error(tool_call_end(call), code, NULL, "%s", message);
}
