/* Param readers with precise errors (see params.h). */
#include "mcp/methods/params.h"

static int check(json_t *params, const char *key, bool required, json_type type,
                 const char *type_name, json_t **out, struct mcp_error *err)
{
    json_t *v = json_object_get(params, key);

    *out = NULL;
    if (!v && required)
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: missing required \"%s\" (%s)", key, type_name);
    if (v && json_typeof(v) != type)
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"%s\" must be %s, got %s", key, type_name,
                             json_kind_name(v));
    *out = v;
    return 0;
}

int params_string(json_t *params, const char *key, bool required, const char **out,
                  struct mcp_error *err)
{
    json_t *v;

    if (check(params, key, required, JSON_STRING, "a string", &v, err) < 0)
        return -1;
    *out = v ? json_string_value(v) : NULL;
    return 0;
}

int params_object(json_t *params, const char *key, bool required, json_t **out,
                  struct mcp_error *err)
{
    return check(params, key, required, JSON_OBJECT, "an object", out, err);
}
