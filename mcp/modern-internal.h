/* Shared between the files of mcp/modern* and the core's hooks. */
#ifndef MCPBOX_MODERN_INTERNAL_H
#define MCPBOX_MODERN_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "lib/base/error.h"
#include "mcp/modern.h"

struct request;


/* requestState sealing (state.c): seal returns a new string; open returns the state (new
 * reference) or NULL when the string was not sealed by this process or was altered. */
char *modern_state_seal(const json_t *state);
json_t *modern_state_open(const char *sealed);

/* MRTR helpers shared by tools (mrtr.c) and prompts. */
json_t *modern_request_state(struct request *req, bool *tampered);

/* Answers req with -32021 naming an extension ({extensions: {name: {}}}). */
void modern_missing_extension(struct request *req, const char *extension);

/* ---- tasks (tasks.c) ---- */
struct session;
struct task;
enum modern_task_support modern_task_tool_support(const char *name);
/* The task whose private session s is, or NULL for a client's session. */
struct task *session_task_of(struct session *s);
/* Whether this tools/call of tool should become a task if it goes asynchronous. */
bool modern_task_wanted(struct request *req, const char *tool);
/* Turns the running req into a task: the client gets CreateTaskResult now. */
void modern_task_escalate(struct request *req);
void modern_method_subscriptions_listen(struct request *req, json_t *params);
void modern_method_tasks_get(struct request *req, json_t *params);
void modern_method_tasks_update(struct request *req, json_t *params);
void modern_method_tasks_cancel(struct request *req, json_t *params);

#endif
