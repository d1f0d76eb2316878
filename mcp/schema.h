/* JSON Schema validation of tool arguments (the subset tool schemas use, 2020-12 keywords):
 * type, enum, const, minimum/maximum/exclusiveMinimum/exclusiveMaximum/multipleOf,
 * minLength/maxLength (code points), pattern (POSIX extended regex), items/prefixItems,
 * minItems/maxItems/uniqueItems, properties, required, additionalProperties (false or a schema),
 * minProperties/maxProperties, allOf/anyOf/oneOf/not, if/then/else, $ref to "#",
 * "#/$defs/..." or any local JSON pointer or to a "$anchor" ("#name"), and boolean schemas.
 * Annotations (title, description, default, format, examples, $schema, $id, $comment) are
 * ignored. Not enforced: $dynamicRef/$dynamicAnchor, dependentRequired/dependentSchemas,
 * patternProperties, propertyNames, contains, unevaluated*, and $refs to other documents
 * (these fail as unresolvable). Pure: a fuzz target (tests/fuzz/fuzz_schema.c).
 */
#ifndef MCPBOX_SCHEMA_H
#define MCPBOX_SCHEMA_H

#include <jansson.h>

#include "lib/base/error.h"

/* Validates instance against schema; $refs resolve against schema itself. root_name names the
 * instance in messages ("arguments"). Returns 0, or -1 with err (MCP_ERR_INVALID_PARAMS) whose
 * message names the field and the problem, e.g.
 *   arguments.timeout_seconds: must be >= 1 (got 0)
 *   arguments: missing required property "command"
 *   arguments.mode: must be one of "text", "base64" (got "hex") */
int schema_validate(const json_t *schema, const json_t *instance, const char *root_name,
                    struct mcp_error *err);

#endif
