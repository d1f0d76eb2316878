/* One tools/call: validation, the handler's view (mcp/tool.h), result shaping. */
#define LOG_MODULE "tool"
#include "mcp/tool_call.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "mcp/registry.h"
#include "mcp/request.h"
#include "mcp/schema.h"
#include "mcp/session.h"
#include "mcp/tool_args.h"
#include "mcp/server.h"
#include "mcp/tool.h"

struct tool_call {
    struct request *req;
    const struct registry_tool *tool; /* borrowed from the registry */
    char *name;                       /* owned copy (the registry may change meanwhile) */
    json_t *args;                     /* owned reference */
    json_t *output_schema;            /* owned reference, or NULL */
    json_t *ignored;                  /* owned: unknown argument names the result reports */
};

static void call_free(struct tool_call *call)
{
    json_decref(call->args);
    json_decref(call->output_schema);
    json_decref(call->ignored);
    free(call->name);
    free(call);
}

/* The sandbox tools (schemas/tools/) follow the argument policy of mcp/tool_args.h; the
 * protocol fixtures keep plain validation (the conformance suites expect it). */
static json_t *arguments(const struct registry_tool *tool, json_t *args, json_t *ignored)
{
    if (tool->needs_sandboxes)
        return tool_args_normalize(tool->input_schema, args, ignored);
    return args ? json_incref(args) : json_object();
}

void tool_call_start(struct request *req, const struct registry_tool *tool, json_t *args)
{
    struct mcp_error err;
    json_auto_t *ignored = json_array();
    json_auto_t *given = arguments(tool, args, ignored);

    if (schema_validate(tool->input_schema, given, "arguments", &err) < 0) {
        log_debug("tools/call %s: invalid arguments: %s", tool->name, err.msg);
        cleanup_free char *note = tool_args_ignored_note(tool->name, ignored);
        json_t *text = json_pack("{s:s, s:s+++}", "type", "text", "text", "Invalid arguments: ",
                                 err.msg, note ? "; " : "", note ? note : "");
        request_reply(req, json_pack("{s:[o], s:b}", "content", text, "isError", 1));
        return;
    }
    if (tool->needs_sandboxes && !server_sandbox_context(request_server(req), &err)) {
        log_warn("tools/call %s: %s", tool->name, err.msg);
        json_t *text = json_pack("{s:s, s:s}", "type", "text", "text", err.msg);
        request_reply(req, json_pack("{s:[o], s:b}", "content", text, "isError", 1));
        return;
    }
    struct tool_call *call = xcalloc(1, sizeof(*call));
    call->req = req;
    call->tool = tool;
    call->name = xstrdup(tool->name);
    call->args = json_incref(given);
    call->output_schema = tool->output_schema ? json_incref(tool->output_schema) : NULL;
    call->ignored = json_incref(ignored);
    tool->handler(call, call->args);
}

struct request *tool_call_req(const struct tool_call *call)
{
    return call->req;
}

struct request *tool_call_end(struct tool_call *call)
{
    struct request *req = call->req;

    call_free(call);
    return req;
}

struct mcp_context *tool_call_context(struct tool_call *call)
{
    return server_context(request_server(call->req));
}

const char *tool_call_owner(const struct tool_call *call)
{
    return request_owner(call->req);
}

const char *tool_call_tool_name(const struct tool_call *call)
{
    return call->name;
}

bool tool_call_wants_progress(const struct tool_call *call)
{
    return request_progress_token(call->req) != NULL;
}

void tool_call_progress(struct tool_call *call, double progress, double total,
                        const char *message)
{
    request_progress(call->req, progress, total, message);
}

void tool_call_log(struct tool_call *call, const char *level, const char *logger, json_t *data)
{
    request_log(call->req, level, logger, data);
}

void tool_call_on_cancel(struct tool_call *call, tool_cancel_fn *fn, void *arg)
{
    request_on_cancel(call->req, fn, arg);
}

bool tool_call_is_cancelled(const struct tool_call *call)
{
    return request_is_cancelled(call->req);
}

uint64_t tool_call_session_serial(const struct tool_call *call)
{
    return session_serial(request_session(call->req));
}

bool tool_call_client_has(const struct tool_call *call, const char *capability)
{
    return request_client_has(call->req, capability);
}

int tool_call_request_client(struct tool_call *call, const char *method, json_t *params,
                             tool_client_reply_fn *cb, void *arg, struct mcp_error *err)
{
    return request_send_client(call->req, method, params, cb, arg, err);
}

/* Unknown arguments are not an error (docs/tools-design.md, "Arguments") but must not go
 * unseen: a text block says so, and structuredContent names them (outputs are open objects). */
static void note_ignored(const struct tool_call *call, json_t *result)
{
    cleanup_free char *note = tool_args_ignored_note(call->name, call->ignored);
    json_t *structured = json_object_get(result, "structuredContent");

    if (!note)
        return;
    json_array_append_new(json_object_get(result, "content"),
                          json_pack("{s:s, s:s}", "type", "text", "text", note));
    if (json_is_object(structured))
        json_object_set(structured, "ignored_arguments", call->ignored);
}

void tool_call_finish_result(struct tool_call *call, json_t *result)
{
    struct request *req = call->req;

    if (!json_is_object(result) || !json_is_array(json_object_get(result, "content"))) {
        log_error("tool %s returned a result without a content array", call->name);
        json_decref(result);
        request_error(req, MCP_ERR_INTERNAL, NULL, "tool %s returned a malformed result",
                      call->name);
        call_free(call);
        return;
    }
    note_ignored(call, result);
    call_free(call);
    request_reply(req, result);
}

/* A server MUST return structured results that conform to the outputSchema: a mismatch is our
 * bug, so it is logged loudly (the result still goes out: the client may find it useful). */
static void check_output(struct tool_call *call, json_t *structured)
{
    struct mcp_error err;

    if (call->output_schema &&
        schema_validate(call->output_schema, structured, "structuredContent", &err) < 0)
        log_error("tool %s: result does not match its outputSchema: %s", call->name, err.msg);
}

static json_t *text_block(const char *text)
{
    return json_pack("{s:s, s:s}", "type", "text", "text", text);
}

void tool_call_finish(struct tool_call *call, json_t *structured, const char *text)
{
    tool_call_finish_blocks(call, structured, text, NULL);
}

void tool_call_finish_blocks(struct tool_call *call, json_t *structured, const char *text,
                             json_t *blocks)
{
    json_t *result = json_object();
    cleanup_free char *rendered = NULL;

    if (json_is_object(structured)) {
        check_output(call, structured);
        if (!text)
            text = rendered = json_dumps(structured, JSON_COMPACT);
        json_object_set(result, "structuredContent", structured);
    }
    json_decref(structured);
    json_t *content = json_pack("[o]", text_block(text ? text : ""));
    json_array_extend(content, blocks); /* NULL: nothing */
    json_decref(blocks);
    json_object_set_new(result, "content", content);
    tool_call_finish_result(call, result);
}

void tool_call_error(struct tool_call *call, json_t *structured, const char *fmt, ...)
{
    char msg[MCP_ERROR_MSG_MAX * 2];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *result = json_pack("{s:[o], s:b}", "content", text_block(msg), "isError", 1);
    if (json_is_object(structured))
        json_object_set(result, "structuredContent", structured);
    json_decref(structured);
    tool_call_finish_result(call, result);
}

void tool_call_fail(struct tool_call *call, const struct mcp_error *err)
{
    json_t *structured = json_pack("{s:{s:s, s:s}}", "error", "code",
                                   mcp_error_code_name(err->code), "message", err->msg);

    tool_call_error(call, structured, "%s", err->msg);
}
