/* prompts/list, prompts/get, completion/complete. */
#include <string.h>

#include "lib/base/cleanup.h"
#include "mcp/dispatch.h"
#include "mcp/methods/params.h"
#include "mcp/registry.h"
#include "mcp/request.h"
#include "mcp/server.h"

/* The spec caps completion values at 100 per response. */
#define COMPLETION_MAX_VALUES 100

void method_prompts_list(struct request *req, json_t *params)
{
    struct registry *reg = server_registry(request_server(req));

    request_reply(req, json_pack("{s:o}", "prompts", registry_prompts_json(reg)));
}

/* Every required argument present and every given argument a string. */
static int check_prompt_args(json_t *def, json_t *args, struct mcp_error *err)
{
    const char *key;
    json_t *v, *a;
    size_t i;

    json_object_foreach(args, key, v) {
        if (!json_is_string(v))
            return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                                 "Invalid params: arguments.%s must be a string, got %s", key,
                                 json_kind_name(v));
    }
    json_array_foreach(json_object_get(def, "arguments"), i, a) {
        const char *name = json_string_value(json_object_get(a, "name"));
        if (name && json_is_true(json_object_get(a, "required")) &&
            !json_object_get(args, name))
            return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                                 "Invalid params: missing required argument \"%s\"", name);
    }
    return 0;
}

void method_prompts_get(struct request *req, json_t *params)
{
    struct mcp_server *srv = request_server(req);
    const char *name;
    json_t *args, *def, *result = NULL;
    prompt_get_fn *fn;
    void *arg;
    struct mcp_error err;

    if (params_string(params, "name", true, &name, &err) < 0 ||
        params_object(params, "arguments", false, &args, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    def = registry_find_prompt(server_registry(srv), name, &fn, &arg);
    if (!def) {
        request_error(req, MCP_ERR_INVALID_PARAMS, NULL,
                      "Invalid params: unknown prompt \"%s\" (see prompts/list)", name);
        return;
    }
    json_auto_t *given = args ? json_incref(args) : json_object();
    struct mcp_context *ctx;
    if (check_prompt_args(def, given, &err) < 0 || !(ctx = server_sandbox_context(srv, &err)) ||
        fn(arg, ctx, request_owner(req), given, &result, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    request_reply(req, result);
}

static json_t *completion_result(json_t *values)
{
    size_t total = json_array_size(values);

    while (json_array_size(values) > COMPLETION_MAX_VALUES)
        json_array_remove(values, json_array_size(values) - 1);
    return json_pack("{s:{s:O, s:I, s:b}}", "completion", "values", values, "total",
                     (json_int_t)total, "hasMore", total > COMPLETION_MAX_VALUES);
}

/* The ref's name: a prompt's "name" or a resource template's "uri". */
static int read_ref(json_t *params, const char **type, const char **name, struct mcp_error *err)
{
    json_t *ref;

    if (params_object(params, "ref", true, &ref, err) < 0 ||
        params_string(ref, "type", true, type, err) < 0)
        return -1;
    if (strcmp(*type, "ref/prompt") == 0)
        return params_string(ref, "name", true, name, err);
    if (strcmp(*type, "ref/resource") == 0)
        return params_string(ref, "uri", true, name, err);
    return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                         "Invalid params: ref.type must be \"ref/prompt\" or \"ref/resource\"");
}

void method_completion_complete(struct request *req, json_t *params)
{
    struct mcp_server *srv = request_server(req);
    const char *type, *name, *arg_name, *value;
    json_t *argument, *context, *ctx_args = NULL;
    completion_fn *fn;
    void *fn_arg;
    struct mcp_error err;

    if (read_ref(params, &type, &name, &err) < 0 ||
        params_object(params, "argument", true, &argument, &err) < 0 ||
        params_string(argument, "name", true, &arg_name, &err) < 0 ||
        params_string(argument, "value", true, &value, &err) < 0 ||
        params_object(params, "context", false, &context, &err) < 0 ||
        (context && params_object(context, "arguments", false, &ctx_args, &err) < 0)) {
        request_fail(req, &err);
        return;
    }
    json_auto_t *values = json_array();
    struct mcp_context *ctx;
    if (registry_find_completion(server_registry(srv), type, name, &fn, &fn_arg) &&
        (!(ctx = server_sandbox_context(srv, &err)) ||
         fn(fn_arg, ctx, request_owner(req), arg_name, value, ctx_args, values, &err) < 0)) {
        request_fail(req, &err);
        return;
    }
    request_reply(req, completion_result(values));
}
