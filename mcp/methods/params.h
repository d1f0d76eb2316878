/* Reading request params with precise -32602 errors ("Invalid params: \"name\" must be a
 * string, got integer"). Each returns 0, or -1 with err (code MCP_ERR_INVALID_PARAMS). */
#ifndef MCPBOX_METHODS_PARAMS_H
#define MCPBOX_METHODS_PARAMS_H

#include <jansson.h>
#include <stdbool.h>

#include "lib/base/error.h"
#include "lib/base/json_kind.h"

/* *out is borrowed from params (NULL if absent and not required). */
int params_string(json_t *params, const char *key, bool required, const char **out,
                  struct mcp_error *err);
int params_object(json_t *params, const char *key, bool required, json_t **out,
                  struct mcp_error *err);

#endif
