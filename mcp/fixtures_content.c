/* Conformance fixture resources, resource template, prompts and completion. */
#include <string.h>

#include "mcp/base/cleanup.h"
#include "mcp/base/xalloc.h"
#include "mcp/fixtures-internal.h"
#include "mcp/fixtures.h"
#include "mcp/registry.h"

/* ---- resources ------------------------------------------------------------------------------- */

static void read_text(struct resource_read *rr, const char *uri, json_t *vars, void *arg)
{
    resource_read_finish(rr, json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "text/plain",
                                       "text", (const char *)arg));
}

static void read_binary(struct resource_read *rr, const char *uri, json_t *vars, void *arg)
{
    resource_read_finish(rr, json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "image/png",
                                       "blob", FIXTURE_PNG_BASE64));
}

static void read_template(struct resource_read *rr, const char *uri, json_t *vars, void *arg)
{
    const char *id = json_string_value(json_object_get(vars, "id"));
    cleanup_free char *data = xasprintf("Data for ID: %s", id);
    json_auto_t *body = json_pack("{s:s, s:b, s:s}", "id", id, "templateTest", 1, "data", data);
    cleanup_free char *text = json_dumps(body, JSON_COMPACT);

    resource_read_finish(rr, json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType",
                                       "application/json", "text", text));
}

static int add_resource(struct registry *reg, const char *uri, const char *name,
                        const char *mime, resource_read_fn *fn, const char *content,
                        struct mcp_error *err)
{
    json_auto_t *def = json_pack("{s:s, s:s, s:s, s:s}", "uri", uri, "name", name, "description",
                                 "Conformance fixture resource", "mimeType", mime);

    return registry_add_resource(reg, def, fn, (void *)content, err);
}

int fixtures_register_resources(struct registry *reg, struct mcp_error *err)
{
    json_auto_t *tmpl = json_pack("{s:s, s:s, s:s, s:s}", "uriTemplate",
                                  "test://template/{id}/data", "name", "Template resource",
                                  "description", "Conformance fixture template: data for an id",
                                  "mimeType", "application/json");

    if (add_resource(reg, "test://static-text", "Static text resource", "text/plain", read_text,
                     "This is the content of the static text resource.", err) < 0 ||
        add_resource(reg, "test://static-binary", "Static binary resource", "image/png",
                     read_binary, NULL, err) < 0 ||
        add_resource(reg, "test://watched-resource", "Watched resource", "text/plain", read_text,
                     "Watched resource content", err) < 0)
        return -1;
    return registry_add_resource_template(reg, tmpl, read_template, NULL, err);
}

/* ---- prompts --------------------------------------------------------------------------------- */

static json_t *user_text(const char *text)
{
    return json_pack("{s:s, s:{s:s, s:s}}", "role", "user", "content", "type", "text", "text",
                     text);
}

static int get_simple(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                      json_t **result, struct mcp_error *err)
{
    *result = json_pack("{s:[o]}", "messages", user_text("This is a simple prompt for testing."));
    return 0;
}

static int get_with_args(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                         json_t **result, struct mcp_error *err)
{
    cleanup_free char *text = xasprintf("Prompt with arguments: arg1='%s', arg2='%s'",
                                        json_string_value(json_object_get(args, "arg1")),
                                        json_string_value(json_object_get(args, "arg2")));

    *result = json_pack("{s:[o]}", "messages", user_text(text));
    return 0;
}

static int get_embedded(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                        json_t **result, struct mcp_error *err)
{
    const char *uri = json_string_value(json_object_get(args, "resourceUri"));

    *result = json_pack("{s:[{s:s, s:{s:s, s:{s:s, s:s, s:s}}}, o]}", "messages", "role", "user",
                        "content", "type", "resource", "resource", "uri", uri, "mimeType",
                        "text/plain", "text", "Embedded resource content for testing.",
                        user_text("Please process the embedded resource above."));
    return 0;
}

static int get_image(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                     json_t **result, struct mcp_error *err)
{
    *result = json_pack("{s:[{s:s, s:{s:s, s:s, s:s}}, o]}", "messages", "role", "user",
                        "content", "type", "image", "data", FIXTURE_PNG_BASE64, "mimeType",
                        "image/png", user_text("Please analyze the image above."));
    return 0;
}

/* Suggests values for the fixture prompt's arguments: the candidates starting with value. */
static int complete_args(void *arg, struct mcp_context *ctx, const char *owner,
                         const char *arg_name, const char *value, json_t *context_args,
                         json_t *values, struct mcp_error *err)
{
    static const char *const candidates[] = {"test", "testValue1", "testValue2", "example"};

    for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
        if (strncmp(candidates[i], value, strlen(value)) == 0)
            json_array_append_new(values, json_string(candidates[i]));
    }
    return 0;
}

static int add_prompt(struct registry *reg, const char *def_json, prompt_get_fn *fn,
                      struct mcp_error *err)
{
    json_auto_t *def = json_loads(def_json, 0, NULL);

    return registry_add_prompt(reg, def, fn, NULL, err);
}

int fixtures_register_prompts(struct registry *reg, struct mcp_error *err)
{
    if (add_prompt(reg,
                   "{\"name\":\"test_simple_prompt\",\"description\":\"A simple prompt without "
                   "arguments (conformance fixture)\"}",
                   get_simple, err) < 0 ||
        add_prompt(reg,
                   "{\"name\":\"test_prompt_with_arguments\",\"description\":\"A prompt with two "
                   "required arguments (conformance fixture)\",\"arguments\":[{\"name\":\"arg1\","
                   "\"description\":\"First argument\",\"required\":true},{\"name\":\"arg2\","
                   "\"description\":\"Second argument\",\"required\":true}]}",
                   get_with_args, err) < 0 ||
        add_prompt(reg,
                   "{\"name\":\"test_prompt_with_embedded_resource\",\"description\":\"A prompt "
                   "that embeds a resource (conformance fixture)\",\"arguments\":[{\"name\":"
                   "\"resourceUri\",\"description\":\"URI of the resource to embed\","
                   "\"required\":true}]}",
                   get_embedded, err) < 0 ||
        add_prompt(reg,
                   "{\"name\":\"test_prompt_with_image\",\"description\":\"A prompt with an "
                   "image (conformance fixture)\"}",
                   get_image, err) < 0)
        return -1;
    return registry_add_completion(reg, "ref/prompt", "test_prompt_with_arguments", complete_args,
                                   NULL, err);
}
