/* A stateful code interpreter for any backend with interactive commands (exec with stdin_open,
 * command_input, command_kill): each context is a small driver mcpbox ships (backend/drivers/),
 * started inside the sandbox as its user, fed code on its stdin and read back in frames
 * (code_frame.h). A backend uses these two as its code_context and code_run slots (shapes in
 * backend.h) and calls code_interp_release when it is freed. Contexts live in the sandbox: a
 * process that did not make one takes it up through command_find and command_attach
 * (code_adopt.c); the backend needs those too. docs/local-backend.md, "Code contexts". */
#ifndef MCPBOX_BACKEND_CODE_INTERP_H
#define MCPBOX_BACKEND_CODE_INTERP_H

#include "backend/backend.h"

/* Beyond backend.h's actions: "get" {context_id} -> {context_id, language, state,
 * execution_count, error?}; "delete" with language and no context_id deletes every context of
 * that language ({language, deleted:n}). */
int code_interp_context(struct backend *be, const char *sandbox_id, const char *action,
                        json_t *args, backend_cb *cb, void *arg, struct mcp_error *err);
int code_interp_run(struct backend *be, const char *sandbox_id, const struct code_request *req,
                    const struct exec_observer *obs, struct mcp_error *err);
/* Forgets every context of be (their drivers run on, for a later process): no callback follows. */
void code_interp_release(struct backend *be);

/* The drivers' sources, embedded at build time (backend/drivers/). */
extern const char code_driver_python[];
extern const char code_driver_bash[];
extern const char code_driver_node[];

#endif
