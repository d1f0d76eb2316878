/* The method table (see dispatch.h). */
#include "mcp/dispatch.h"

#include <string.h>

#include "lib/base/cleanup.h"

static const struct method_def methods[] = {
    {"initialize", method_initialize, METHOD_BEFORE_INIT},
    {"ping", method_ping, METHOD_BEFORE_INIT},
    {"logging/setLevel", method_logging_set_level, 0},
    {"tools/list", method_tools_list, 0},
    {"tools/call", method_tools_call, 0},
    {"resources/list", method_resources_list, 0},
    {"resources/templates/list", method_resources_templates_list, 0},
    {"resources/read", method_resources_read, 0},
    {"resources/subscribe", method_resources_subscribe, 0},
    {"resources/unsubscribe", method_resources_unsubscribe, 0},
    {"prompts/list", method_prompts_list, 0},
    {"prompts/get", method_prompts_get, 0},
    {"completion/complete", method_completion_complete, 0},
};

const struct method_def *dispatch_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        if (strcmp(methods[i].name, name) == 0)
            return &methods[i];
    }
    return NULL;
}
