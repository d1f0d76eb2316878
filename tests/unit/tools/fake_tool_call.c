/* The tool_call double: records what a handler answered (see fake.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct mcp_context *tool_call_context(struct tool_call *call) { return call->ctx; }
const char *tool_call_owner(const struct tool_call *call) { return call->owner; }
const char *tool_call_tool_name(const struct tool_call *call) { return call->name; }
bool tool_call_wants_progress(const struct tool_call *call) { return call->wants_progress; }
bool tool_call_is_cancelled(const struct tool_call *call) { return call->cancelled; }
bool tool_call_client_has(const struct tool_call *call, const char *cap) { return false; }
/* The double is a 2025-11-25 call: never a task. */
bool tool_call_runs_as_task(const struct tool_call *call) { return false; }

void tool_call_progress(struct tool_call *call, double progress, double total, const char *msg)
{
    call->progress_count++;
    snprintf(call->last_progress, sizeof(call->last_progress), "%s", msg ? msg : "");
}

void tool_call_log(struct tool_call *call, const char *level, const char *logger, json_t *data)
{
    json_decref(data);
}

void tool_call_on_cancel(struct tool_call *call, tool_cancel_fn *fn, void *arg)
{
    call->cancel_fn = fn;
    call->cancel_arg = arg;
}

void tool_call_finish_result(struct tool_call *call, json_t *result)
{
    if (call->finished)
        abort(); /* a handler answered twice */
    call->finished = true;
    call->is_error = json_is_true(json_object_get(result, "isError"));
    call->structured = json_incref(json_object_get(result, "structuredContent"));
    json_t *content = json_array_get(json_object_get(result, "content"), 0);
    const char *text = json_string_value(json_object_get(content, "text"));
    snprintf(call->text, sizeof(call->text), "%s", text ? text : "");
    json_decref(result);
}

void tool_call_finish(struct tool_call *call, json_t *structured, const char *text)
{
    json_t *r = json_object();
    char *dump = structured && !text ? json_dumps(structured, JSON_COMPACT) : NULL;
    json_object_set_new(r, "content", json_pack("[{s:s, s:s}]", "type", "text", "text",
                                                text ? text : dump ? dump : ""));
    free(dump);
    if (structured)
        json_object_set_new(r, "structuredContent", structured);
    tool_call_finish_result(call, r);
}

void tool_call_finish_blocks(struct tool_call *call, json_t *structured, const char *text,
                             json_t *blocks)
{
    json_decref(blocks); /* the fake keeps the text block only */
    tool_call_finish(call, structured, text);
}

void tool_call_error(struct tool_call *call, json_t *structured, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", msg,
                          "isError", 1);
    if (structured)
        json_object_set_new(r, "structuredContent", structured);
    tool_call_finish_result(call, r);
}

void tool_call_fail(struct tool_call *call, const struct mcp_error *err)
{
    tool_call_error(call, NULL, "%s", err->msg);
}

int tool_call_request_client(struct tool_call *call, const char *method, json_t *params,
                             tool_client_reply_fn *cb, void *arg, struct mcp_error *err)
{
    json_decref(params);
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "not in tests");
}

/* Approvals (mcp/approval_elicit.c): a handler test's client never speaks 2026-07-28. */
uint64_t tool_call_session_serial(const struct tool_call *call) { return 1; }
bool tool_call_is_stateless(const struct tool_call *call)
{
    return false;
}
json_t *tool_call_input_responses(const struct tool_call *call)
{
    return NULL;
}
json_t *tool_call_request_state(const struct tool_call *call, bool *tampered)
{
    *tampered = false;
    return NULL;
}
void tool_call_input_required(struct tool_call *call, json_t *input_requests, const json_t *state)
{
    json_decref(input_requests);
    tool_call_error(call, NULL, "no input_required in tests");
}
void tool_call_protocol_error(struct tool_call *call, int code, const char *message)
{
    tool_call_error(call, NULL, "%s", message);
}
