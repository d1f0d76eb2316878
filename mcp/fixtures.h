/* The conformance fixtures (docs/internals/mcp-spec-points.md §2): the tools, resources,
 * templates and prompts that
 * the official conformance suite calls by name. Registered only with --conformance-fixtures. */
#ifndef MCPBOX_FIXTURES_H
#define MCPBOX_FIXTURES_H

#include "mcp/base/error.h"

struct registry;

/* Registers every fixture (tool schemas from schemas/fixtures/). */
int fixtures_register(struct registry *reg, struct mcp_error *err);
/* The fixture parts, one per file. */
int fixtures_register_tools(struct registry *reg, struct mcp_error *err);
int fixtures_register_resources(struct registry *reg, struct mcp_error *err);
int fixtures_register_prompts(struct registry *reg, struct mcp_error *err);

#endif
