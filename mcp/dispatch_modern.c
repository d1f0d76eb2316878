/* The 2026-07-28 method table, server/discover, and the shape of every modern reply
 * (resultType, serverInfo in _meta, caching hints, -32602 for an unknown resource). */
#include <string.h>

#include "lib/base/cleanup.h"
#include "mcp/dispatch.h"
#include "mcp/modern.h"
#include "mcp/modern-internal.h"
#include "mcp/registry.h"
#include "mcp/request.h"
#include "mcp/server.h"

/* Caching hints (SEP-2549). Lists can change at any time (list_changed), and reads return live
 * sandbox state, so nothing may be reused without asking again: ttlMs 0. The tool, prompt and
 * template lists are the same for every caller ("public"); resources are per owner. */
#define MODERN_CACHE_TTL_MS 0

static void method_server_discover(struct request *req, json_t *params);
static void method_prompts_get_modern(struct request *req, json_t *params);
static void method_tools_call_modern(struct request *req, json_t *params);

static const struct method_def modern_methods[] = {
    {"server/discover", method_server_discover, METHOD_BEFORE_INIT},
    {"tools/list", method_tools_list, METHOD_BEFORE_INIT},
    {"tools/call", method_tools_call_modern, METHOD_BEFORE_INIT},
    {"resources/list", method_resources_list, METHOD_BEFORE_INIT},
    {"resources/templates/list", method_resources_templates_list, METHOD_BEFORE_INIT},
    {"resources/read", method_resources_read, METHOD_BEFORE_INIT},
    {"prompts/list", method_prompts_list, METHOD_BEFORE_INIT},
    {"prompts/get", method_prompts_get_modern, METHOD_BEFORE_INIT},
    {"completion/complete", method_completion_complete, METHOD_BEFORE_INIT},
    {"subscriptions/listen", modern_method_subscriptions_listen, METHOD_BEFORE_INIT},
    {"tasks/get", modern_method_tasks_get, METHOD_BEFORE_INIT},
    {"tasks/update", modern_method_tasks_update, METHOD_BEFORE_INIT},
    {"tasks/cancel", modern_method_tasks_cancel, METHOD_BEFORE_INIT},
};

const struct method_def *modern_dispatch_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(modern_methods); i++)
        if (strcmp(modern_methods[i].name, name) == 0)
            return &modern_methods[i];
    return NULL;
}

json_t *modern_server_capabilities(void)
{
    /* Changes reach a stateless client on a subscriptions/listen stream. */
    return json_pack("{s:{s:b}, s:{s:b, s:b}, s:{s:b}, s:{}, s:{s:{}}}", "tools", "listChanged",
                     1, "resources", "listChanged", 1, "subscribe", 1, "prompts", "listChanged",
                     1, "completions", "extensions", MODERN_TASKS_EXTENSION);
}

static json_t *server_info(void)
{
    return json_pack("{s:s, s:s, s:s}", "name", MCPBOX_SERVER_NAME, "title", "mcpbox sandboxes",
                     "version", MCPBOX_VERSION);
}

static void method_server_discover(struct request *req, json_t *params)
{
    request_reply(req, json_pack("{s:[s], s:o, s:s}", "supportedVersions",
                                 MODERN_PROTOCOL_VERSION, "capabilities",
                                 modern_server_capabilities(), "instructions",
                                 server_instructions(request_server(req))));
}

const json_t *modern_tool_input_schema(struct mcp_server *srv, const char *name)
{
    const struct registry_tool *tool = name ? registry_find_tool(server_registry(srv), name)
                                            : NULL;
    return tool ? tool->input_schema : NULL;
}

/* ---- tools/call: tasks ---------------------------------------------------------------------- */

/* A task-capable tool whose handler goes asynchronous becomes a task (tasks.c); a tool that
 * can only run as a task needs the extension. */
static void method_tools_call_modern(struct request *req, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    struct session *s = request_session(req);

    if (modern_task_tool_support(name) == TASK_SUPPORT_REQUIRED && !session_task_of(s) &&
        !modern_meta_has_capability(request_modern_meta(req),
                                    "extensions/" MODERN_TASKS_EXTENSION)) {
        modern_missing_extension(req, MODERN_TASKS_EXTENSION);
        return;
    }
    if (!modern_task_wanted(req, name)) {
        method_tools_call(req, params);
        return;
    }
    json_auto_t *id = json_incref((json_t *)request_id(req));
    method_tools_call(req, params); /* may answer at once (then req is gone) */
    struct request *running = session_find_request(s, id);
    if (running)
        modern_task_escalate(running);
}

/* ---- prompts that ask for input (MRTR) ------------------------------------------------------ */

#define MODERN_MAX_INPUT_PROMPTS 8

static struct {
    const char *name;
    modern_prompt_fn *fn;
} input_prompts[MODERN_MAX_INPUT_PROMPTS];

void modern_input_prompt_add(const char *name, modern_prompt_fn *fn)
{
    for (size_t i = 0; i < MODERN_MAX_INPUT_PROMPTS; i++) {
        if (!input_prompts[i].name || strcmp(input_prompts[i].name, name) == 0) {
            input_prompts[i].name = name;
            input_prompts[i].fn = fn;
            return;
        }
    }
}

static void method_prompts_get_modern(struct request *req, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));

    for (size_t i = 0; name && i < MODERN_MAX_INPUT_PROMPTS && input_prompts[i].name; i++)
        if (strcmp(input_prompts[i].name, name) == 0) {
            input_prompts[i].fn(req, params);
            return;
        }
    method_prompts_get(req, params);
}

/* ---- reply shaping -------------------------------------------------------------------------- */

static bool is_cacheable(const char *method, const char **scope)
{
    static const char *const public_lists[] = {"tools/list", "prompts/list",
                                               "resources/templates/list"};
    for (size_t i = 0; i < ARRAY_SIZE(public_lists); i++) {
        if (strcmp(method, public_lists[i]) == 0) {
            *scope = "public";
            return true;
        }
    }
    *scope = "private";
    return strcmp(method, "resources/list") == 0 || strcmp(method, "resources/read") == 0 ||
           strcmp(method, "server/discover") == 0;
}

static void decorate_result(const char *method, json_t *result)
{
    const char *scope;

    if (!json_object_get(result, "resultType"))
        json_object_set_new(result, "resultType", json_string("complete"));
    json_t *meta = json_object_get(result, "_meta");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(result, "_meta", meta);
    }
    json_object_set_new(meta, MODERN_META_SERVER_INFO, server_info());
    if (is_cacheable(method, &scope) && !json_object_get(result, "ttlMs")) {
        json_object_set_new(result, "ttlMs", json_integer(MODERN_CACHE_TTL_MS));
        json_object_set_new(result, "cacheScope", json_string(scope));
    }
}

void modern_decorate_reply(const char *method, json_t *reply)
{
    json_t *result = json_object_get(reply, "result");
    json_t *error = json_object_get(reply, "error");

    if (json_is_object(result))
        decorate_result(method, result);
    /* 2026-07-28 (SEP-2164): an unknown resource is invalid params, not -32002. */
    if (json_is_object(error) &&
        json_integer_value(json_object_get(error, "code")) == MCP_ERR_RESOURCE_NOT_FOUND)
        json_object_set_new(error, "code", json_integer(MCP_ERR_INVALID_PARAMS));
}
