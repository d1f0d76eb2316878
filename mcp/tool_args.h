/* The argument policy of the sandbox tools (docs/tools-design.md, "Arguments"): what a client
 * sends is normalized before it is validated against the advertised inputSchema, so that models
 * in strict mode, clients that add their own keys and callers using older forms all get through,
 * while a typo stays visible. Pure (a unit test drives it: tests/unit/mcp/test_tool_args.c). */
#ifndef MCPBOX_TOOL_ARGS_H
#define MCPBOX_TOOL_ARGS_H

#include <jansson.h>
#include <stdbool.h>

/* Keys some clients add to every tool's arguments, ignored without a note (NULL-terminated). */
extern const char *const tool_args_client_keys[];

/* Returns a new object: args (borrowed; NULL = {}) with, for the object schema input_schema,
 *  - null given for a property that is not required removed (null means absent);
 *  - keys that are not properties removed: client-added ones silently, the others appended to
 *    ignored (an array the caller owns) so the result can say so;
 *  - older forms rewritten to the advertised ones: an object of strings given for a property
 *    advertised as an array of strings becomes ["KEY=VALUE", ...] (env, metadata), and an integer
 *    given for a string property that has a pattern becomes its decimal text (memory: 536870912).
 * Values of any other shape are left for the validator to report. */
json_t *tool_args_normalize(const json_t *input_schema, const json_t *args, json_t *ignored);

/* "ignored unknown arguments "a", "b": not parameters of TOOL; check their spelling against
 * the tool's inputSchema" (a new string), or NULL when ignored is empty. */
char *tool_args_ignored_note(const char *tool, const json_t *ignored);

#endif
