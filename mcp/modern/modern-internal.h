/* Shared between the files of mcp/modern/ and the core's hooks. */
#ifndef MCPBOX_MODERN_INTERNAL_H
#define MCPBOX_MODERN_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

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

#endif
