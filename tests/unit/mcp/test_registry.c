/* Registry: tool definitions checked and sorted, URI template matching, completions lookup. */
#include <jansson.h>
#include <string.h>

#include "mcp/registry.h"
#include "test.h"

static void noop(struct tool_call *call, json_t *args)
{
}

static int changes;
static void on_change(void *arg, const char *what)
{
    changes++;
}

static json_t *tool(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s}}", "name", name, "description", "d", "inputSchema",
                     "type", "object");
}

TEST(tools_sorted_and_checked)
{
    struct registry *reg = registry_new(on_change, NULL);
    struct mcp_error err;
    const char *names[] = {"zeta", "alpha", "mid.dle-x"};
    changes = 0;
    for (int i = 0; i < 3; i++) {
        json_t *t = tool(names[i]);
        ASSERT_EQ(registry_add_tool(reg, t, noop, &err), 0);
        json_decref(t);
    }
    ASSERT_EQ(changes, 3);
    json_t *list = registry_tools_json(reg);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(list, 0), "name")), "alpha");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(list, 2), "name")), "zeta");
    json_decref(list);
    json_t *dup = tool("alpha");
    ASSERT_EQ(registry_add_tool(reg, dup, noop, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_CONFLICT);
    json_decref(dup);
    json_t *bad = tool("has space");
    ASSERT_EQ(registry_add_tool(reg, bad, noop, &err), -1);
    json_decref(bad);
    bad = json_pack("{s:s, s:s, s:{}}", "name", "x", "description", "", "inputSchema");
    ASSERT_EQ(registry_add_tool(reg, bad, noop, &err), -1);
    ASSERT_CONTAINS(err.msg, "description");
    json_decref(bad);
    ASSERT(registry_find_tool(reg, "mid.dle-x") != NULL);
    ASSERT_EQ(registry_remove_tool(reg, "mid.dle-x"), 0);
    ASSERT(registry_find_tool(reg, "mid.dle-x") == NULL);
    ASSERT_EQ(registry_tool_count(reg), 2);
    registry_free(reg);
}

static bool match(const char *tmpl, const char *uri, const char *var, const char *want)
{
    json_t *vars = json_object();
    bool ok = registry_template_match(tmpl, uri, vars);
    if (ok && var)
        ok = strcmp(json_string_value(json_object_get(vars, var)), want) == 0;
    json_decref(vars);
    return ok;
}

TEST(uri_templates)
{
    ASSERT(match("test://template/{id}/data", "test://template/123/data", "id", "123"));
    ASSERT(!match("test://template/{id}/data", "test://template//data", NULL, NULL));
    ASSERT(!match("test://template/{id}/data", "test://template/1/2/data", NULL, NULL));
    ASSERT(!match("test://template/{id}/data", "test://template/1/datax", NULL, NULL));
    ASSERT(match("sandbox://{sandbox_id}/{+path}", "sandbox://sbx-1/a/b/c.txt", "path",
                 "a/b/c.txt"));
    ASSERT(match("sandbox://{sandbox_id}/{+path}", "sandbox://sbx-1/a/b/c.txt", "sandbox_id",
                 "sbx-1"));
    ASSERT(!match("sandbox://{sandbox_id}/{+path}", "sandbox://sbx-1/", NULL, NULL));
}

static int comp(void *arg, struct mcp_context *ctx, const char *owner, const char *arg_name,
                const char *value, json_t *context_args, json_t *values, struct mcp_error *err)
{
    return 0;
}

static int comp2(void *arg, struct mcp_context *ctx, const char *owner, const char *arg_name,
                 const char *value, json_t *context_args, json_t *values, struct mcp_error *err)
{
    return 0;
}

TEST(completion_lookup_prefers_exact)
{
    struct registry *reg = registry_new(NULL, NULL);
    struct mcp_error err;
    completion_fn *fn;
    void *arg;
    ASSERT_EQ(registry_add_completion(reg, "ref/prompt", NULL, comp, NULL, &err), 0);
    ASSERT_EQ(registry_add_completion(reg, "ref/prompt", "p", comp2, NULL, &err), 0);
    ASSERT_EQ(registry_add_completion(reg, "ref/other", "p", comp2, NULL, &err), -1);
    ASSERT(registry_find_completion(reg, "ref/prompt", "p", &fn, &arg) && fn == comp2);
    ASSERT(registry_find_completion(reg, "ref/prompt", "q", &fn, &arg) && fn == comp);
    ASSERT(!registry_find_completion(reg, "ref/resource", "q", &fn, &arg));
    registry_free(reg);
}

int main(void)
{
    RUN(tools_sorted_and_checked);
    RUN(uri_templates);
    RUN(completion_lookup_prefers_exact);
    return test_done();
}
