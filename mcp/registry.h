/* The registry: what this server offers. Tools, resources, resource templates, prompts and
 * completion providers, each described by data (the JSON the client sees) plus a callback.
 *
 * Tools come from schema files embedded at build time (schemas/tools/<name>.json, or a table of
 * the caller's own) and a handler table (struct tool_def):
 * registry_load_tools(). Everything else is registered in code, typically once at startup.
 *
 * How a module (e.g. mcp/tools/, the sandbox tools) adds resources, prompts or completions: it
 * offers a function like sandbox_tools_register(reg, ctx) (mcp/tools/tools.h), which the
 * executable (cli/server_tools.c) calls once after the tools are loaded. In it, call
 * registry_add_resource_template(), registry_add_prompt(), registry_add_completion() below.
 * Adding or removing things later (while sessions are live) broadcasts list_changed.
 *
 * Callbacks run on the loop thread. JSON passed in is borrowed (the registry keeps a reference
 * or a copy) unless marked stolen. All registry_add_* return 0, or -1 with err filled
 * (MCP_ERR_INVALID for a malformed definition, MCP_ERR_CONFLICT for a duplicate name/uri).
 */
#ifndef MCPBOX_REGISTRY_H
#define MCPBOX_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/base/error.h"
#include "mcp/tool.h"

struct registry;
struct mcp_context;

/* ---- tools ------------------------------------------------------------------------------- */

struct registry_tool {
    const char *name;           /* borrowed from def */
    json_t *def;                /* owned: the complete Tool object, served verbatim */
    json_t *input_schema;       /* borrowed from def */
    json_t *output_schema;      /* borrowed from def, or NULL */
    tool_handler_fn *handler;
    bool needs_sandboxes;       /* a sandbox tool (schemas/tools/): the store and backends must
                                 * be started before its handler runs (server_sandbox_context) */
};

/* def: a complete MCP Tool object {name, description, inputSchema, ...} (borrowed; kept by
 * reference, so do not modify it afterwards). The name must be 1-128 chars of [A-Za-z0-9_.-],
 * description non-empty, inputSchema an object. */
int registry_add_tool(struct registry *reg, json_t *def, tool_handler_fn *handler,
                      struct mcp_error *err);
int registry_remove_tool(struct registry *reg, const char *name);
/* For each handler in defs, finds the embedded schema file "<dir>/<name>.json" (dir: "tools")
 * and registers it. A handler without a schema is an error; a schema file without a handler is
 * logged and skipped. */
int registry_load_tools(struct registry *reg, const char *dir, const struct tool_def *defs,
                        size_t n, struct mcp_error *err);
/* The same over another table of embedded schemas (cmake/embed_schemas.cmake with SYMBOL), such
 * as the test binary's conformance fixtures. */
struct embedded_schema;
int registry_load_tools_from(struct registry *reg, const struct embedded_schema *table,
                             const char *dir, const struct tool_def *defs, size_t n,
                             struct mcp_error *err);
const struct registry_tool *registry_find_tool(const struct registry *reg, const char *name);
size_t registry_tool_count(const struct registry *reg);
/* [Tool...] sorted by name (a new reference). */
json_t *registry_tools_json(const struct registry *reg);

/* ---- resources ---------------------------------------------------------------------------- */

/* One resources/read in progress. The read function must eventually call exactly one of
 * resource_read_finish / resource_read_fail (synchronously or later), after which rr is gone. */
struct resource_read;
/* uri: the requested URI; vars: for a template match, {"var": "value", ...} (an empty object for
 * a static resource); both borrowed for the duration of the call only. */
typedef void resource_read_fn(struct resource_read *rr, const char *uri, json_t *vars,
                              void *arg);

struct mcp_context *resource_read_context(struct resource_read *rr);
const char *resource_read_owner(const struct resource_read *rr);
/* contents (stolen): the ReadResourceResult "contents" array, each item {uri, mimeType?,
 * text | blob}. */
void resource_read_finish(struct resource_read *rr, json_t *contents);
/* MCP_ERR_NOT_FOUND becomes JSON-RPC -32002 "Resource not found"; MCP_ERR_DENIED and
 * MCP_ERR_INVALID become -32602; anything else -32603 with err's message. */
void resource_read_fail(struct resource_read *rr, const struct mcp_error *err);
/* Same as tool_call_on_cancel, for a long read. */
void resource_read_on_cancel(struct resource_read *rr, tool_cancel_fn *fn, void *arg);

/* def: a Resource object {uri, name, title?, description?, mimeType?, size?}. */
int registry_add_resource(struct registry *reg, json_t *def, resource_read_fn *fn, void *arg,
                          struct mcp_error *err);
int registry_remove_resource(struct registry *reg, const char *uri);
/* def: a ResourceTemplate {uriTemplate, name, title?, description?, mimeType?}. uriTemplate
 * uses RFC 6570 level 1 ({var} matches one or more characters other than '/'), plus {+var}
 * (reserved expansion: matches anything including '/', at least one character). */
int registry_add_resource_template(struct registry *reg, json_t *def, resource_read_fn *fn,
                                   void *arg, struct mcp_error *err);

/* ---- prompts ------------------------------------------------------------------------------ */

/* Fills *result (new reference) with a GetPromptResult {description?, messages:[...]}, or
 * returns -1 with err (MCP_ERR_INVALID / MCP_ERR_NOT_FOUND -> -32602). args: the request's
 * "arguments" object (string values; required arguments already checked present). owner: the
 * caller identity. */
typedef int prompt_get_fn(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                          json_t **result, struct mcp_error *err);
/* def: a Prompt {name, title?, description, arguments?:[{name, description?, required?}]}. */
int registry_add_prompt(struct registry *reg, json_t *def, prompt_get_fn *fn, void *arg,
                        struct mcp_error *err);
int registry_remove_prompt(struct registry *reg, const char *name);

/* ---- completions -------------------------------------------------------------------------- */

/* Suggests values for argument arg_name of a prompt or resource template, given what the user
 * typed so far (value) and the other arguments already filled (context_args: object or NULL).
 * Append strings to values (an array, borrowed); the core truncates to 100 and sets
 * total/hasMore. Return -1 with err to fail the request. */
typedef int completion_fn(void *arg, struct mcp_context *ctx, const char *owner,
                          const char *arg_name, const char *value, json_t *context_args,
                          json_t *values, struct mcp_error *err);
/* ref_type: "ref/prompt" (ref_name = prompt name) or "ref/resource" (ref_name = uriTemplate).
 * ref_name NULL: a provider for every ref of that type (tried after exact matches). */
int registry_add_completion(struct registry *reg, const char *ref_type, const char *ref_name,
                            completion_fn *fn, void *arg, struct mcp_error *err);

/* ---- internal: used by the method handlers and the server --------------------------------- */

struct registry_resource_match {
    resource_read_fn *fn;
    void *arg;
    json_t *vars; /* owned by the caller of registry_match_resource */
};

typedef void registry_change_fn(void *arg, const char *what /* "tools", ... */);
struct registry *registry_new(registry_change_fn *on_change, void *arg);
void registry_free(struct registry *reg);
json_t *registry_resources_json(const struct registry *reg);
json_t *registry_templates_json(const struct registry *reg);
json_t *registry_prompts_json(const struct registry *reg);
/* Static resources first, then templates in registration order. Returns false if none match. */
bool registry_match_resource(const struct registry *reg, const char *uri,
                             struct registry_resource_match *out);
/* The prompt's definition (borrowed) and callback, or NULL. */
json_t *registry_find_prompt(const struct registry *reg, const char *name, prompt_get_fn **fn,
                             void **arg);
bool registry_find_completion(const struct registry *reg, const char *ref_type,
                              const char *ref_name, completion_fn **fn, void **arg);
/* Matches uri against an RFC 6570 level-1 template; fills vars (an object) on success. */
bool registry_template_match(const char *tmpl, const char *uri, json_t *vars);

#endif
