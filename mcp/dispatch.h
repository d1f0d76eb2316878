/* The method table: JSON-RPC method name -> handler (one file per method group, mcp/methods/). */
#ifndef MCPBOX_DISPATCH_H
#define MCPBOX_DISPATCH_H

#include <jansson.h>
#include <stdbool.h>

struct request;

/* A handler answers req exactly once (see request.h). params: the request's params object
 * (borrowed; an empty object if absent), valid until the handler replies. */
typedef void method_fn(struct request *req, json_t *params);

enum method_flags {
    METHOD_BEFORE_INIT = 1u << 0, /* allowed before initialize (ping, initialize) */
};

struct method_def {
    const char *name;
    method_fn *fn;
    unsigned flags;
};

/* The definition for name, or NULL (-32601). */
const struct method_def *dispatch_find(const char *name);

/* Method handlers, grouped by file in mcp/methods/. */
method_fn method_initialize, method_ping, method_logging_set_level;
method_fn method_tools_list, method_tools_call;
method_fn method_resources_list, method_resources_templates_list, method_resources_read;
method_fn method_resources_subscribe, method_resources_unsubscribe;
method_fn method_prompts_list, method_prompts_get, method_completion_complete;

#endif
