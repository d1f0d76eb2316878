/* The JSON Schema name of a value's type, for error messages that name what was found. */
#ifndef MCP_BASE_JSON_KIND_H
#define MCP_BASE_JSON_KIND_H

#include <jansson.h>

/* "object", "array", "string", "integer", "number", "boolean", "null"; "nothing" for NULL. */
const char *json_kind_name(const json_t *v);

#endif
