/* Running one tools/call (internal; handlers see mcp/tool.h). */
#ifndef MCPBOX_TOOL_CALL_H
#define MCPBOX_TOOL_CALL_H

#include <jansson.h>

struct request;
struct registry_tool;

/* Validates args (borrowed; NULL = {}) against the tool's inputSchema, then runs its handler.
 * Invalid arguments finish req with an isError result naming the field and the problem. */
void tool_call_start(struct request *req, const struct registry_tool *tool, json_t *args);

struct tool_call;
/* The request a call answers (for the MRTR helpers in mcp/modern_mrtr.c). */
struct request *tool_call_req(const struct tool_call *call);
/* Frees the call without answering; returns its request, which the caller must answer. */
struct request *tool_call_end(struct tool_call *call);

#endif
