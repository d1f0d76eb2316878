/* The sandbox tools: what an agent sees of mcpbox (create_sandbox, run_command, read_file, ...).
 *
 * Each tool's description and schemas live in schemas/tools/<name>.json; this module provides the
 * handlers (backend-agnostic, on the backend vtable), plus the resource template for files in a
 * sandbox, the troubleshoot_sandbox prompt and completions for sandbox ids. */
#ifndef MCPBOX_TOOLS_H
#define MCPBOX_TOOLS_H

#include <stddef.h>

#include "mcp/tool.h"

struct registry;
struct mcp_context;

extern const struct tool_def sandbox_tools[];
extern const size_t sandbox_tools_count;

/* Registers the resource template sandbox://{sandbox_id}/{+path}, the troubleshoot_sandbox
 * prompt and the sandbox_id completions. Called once by the server after the tools are loaded. */
void sandbox_tools_register(struct registry *reg, struct mcp_context *ctx);

#endif
