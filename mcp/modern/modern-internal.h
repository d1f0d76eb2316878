/* Shared between the files of mcp/modern/ and the core's hooks. */
#ifndef MCPBOX_MODERN_INTERNAL_H
#define MCPBOX_MODERN_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "mcp/base/error.h"

struct request;

/* A prompt whose prompts/get may answer InputRequiredResult: fn sees the whole params
 * (inputResponses, requestState) and answers req. name must outlive the server. */
typedef void modern_prompt_fn(struct request *req, json_t *params);
void modern_input_prompt_add(const char *name, modern_prompt_fn *fn);

/* requestState sealing (state.c): seal returns a new string; open returns the state (new
 * reference) or NULL when the string was not sealed by this process or was altered. */
char *modern_state_seal(const json_t *state);
json_t *modern_state_open(const char *sealed);

/* MRTR helpers shared by tools (mrtr.c) and prompts. */
json_t *modern_request_state(struct request *req, bool *tampered);
/* {resultType:"input_required", inputRequests (stolen), requestState: sealed(state)?}. */
json_t *modern_input_required_result(json_t *input_requests, const json_t *state);
/* Answers req with -32021 naming capability. */
void modern_missing_capability(struct request *req, const char *capability);

/* Answers req with -32021 naming an extension ({extensions: {name: {}}}). */
void modern_missing_extension(struct request *req, const char *extension);

/* ---- tasks (tasks.c) ---- */
enum modern_task_support {
    TASK_SUPPORT_NONE,     /* always answered in the request */
    TASK_SUPPORT_OPTIONAL, /* a task when the client has the extension and the call goes async */
    TASK_SUPPORT_REQUIRED, /* only as a task: -32021 without the extension */
};
struct session;
struct task;
void modern_task_tool_add(const char *name, enum modern_task_support support);
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
/* The tasks scenarios' fixtures (fixtures_tasks.c). */
struct registry;
int modern_task_fixtures_register(struct registry *reg, struct mcp_error *err);

#endif
