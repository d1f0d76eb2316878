/* The argument policy of the sandbox tools (see tool_args.h). */
#include "mcp/tool_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

/* Gemini CLI adds wait_for_previous to every MCP tool's schema and asks the model to set it for
 * calls that depend on earlier ones; the CLI itself acts on it, the server has nothing to do. */
const char *const tool_args_client_keys[] = {"wait_for_previous", NULL};

static bool is_client_key(const char *key)
{
    for (size_t i = 0; tool_args_client_keys[i]; i++) {
        if (strcmp(tool_args_client_keys[i], key) == 0)
            return true;
    }
    return false;
}

static bool is_required(const json_t *schema, const char *key)
{
    size_t i;
    json_t *name;

    json_array_foreach(json_object_get(schema, "required"), i, name) {
        if (json_is_string(name) && strcmp(json_string_value(name), key) == 0)
            return true;
    }
    return false;
}

static bool has_type(const json_t *schema, const char *type)
{
    const char *t = json_string_value(json_object_get(schema, "type"));

    return t && strcmp(t, type) == 0;
}

/* {"A": "1", "B": "2"} -> ["A=1", "B=2"]; NULL when a value is not a string. */
static json_t *map_to_pairs(const json_t *map)
{
    json_t *list = json_array();
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)map, key, v) {
        if (!json_is_string(v)) {
            json_decref(list);
            return NULL;
        }
        char *pair = xasprintf("%s=%s", key, json_string_value(v));
        json_array_append_new(list, json_string(pair));
        free(pair);
    }
    return list;
}

/* The advertised form of a value given in an older form, or NULL when v is not one. */
static json_t *upgrade(const json_t *prop, const json_t *v)
{
    if (json_is_object(v) && has_type(prop, "array") &&
        has_type(json_object_get(prop, "items"), "string"))
        return map_to_pairs(v);
    if (json_is_integer(v) && has_type(prop, "string") && json_object_get(prop, "pattern")) {
        char text[32];
        snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return json_string(text);
    }
    return NULL;
}

json_t *tool_args_normalize(const json_t *input_schema, const json_t *args, json_t *ignored)
{
    const json_t *props = json_object_get(input_schema, "properties");
    json_t *out = json_object();
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)args, key, v) {
        const json_t *prop = json_object_get(props, key);
        if (!prop) {
            if (!is_client_key(key))
                json_array_append_new(ignored, json_string(key));
            continue;
        }
        if (json_is_null(v) && !is_required(input_schema, key))
            continue;
        json_t *upgraded = upgrade(prop, v);
        json_object_set_new(out, key, upgraded ? upgraded : json_incref(v));
    }
    return out;
}

char *tool_args_ignored_note(const char *tool, const json_t *ignored)
{
    size_t n = json_array_size(ignored), used = 0;
    char names[512] = "";

    if (n == 0)
        return NULL;
    for (size_t i = 0; i < n && used < sizeof(names); i++) {
        int w = snprintf(names + used, sizeof(names) - used, "%s\"%s\"", i ? ", " : "",
                         json_string_value(json_array_get(ignored, i)));
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return xasprintf("ignored unknown argument%s %s: not parameters of %s (check the spelling "
                     "against its inputSchema)", n > 1 ? "s" : "", names, tool);
}
