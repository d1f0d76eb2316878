/* Conformance fixtures that send server-to-client requests: sampling and elicitation. */
#include <stdlib.h>
#include <string.h>

#include "mcp/base/cleanup.h"
#include "mcp/base/xalloc.h"
#include "mcp/fixtures-internal.h"
#include "mcp/fixtures.h"

static void finish_text(struct tool_call *call, const char *msg)
{
    tool_call_finish_result(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text",
                                            "text", msg));
}

/* Either the client answered (result) or it failed / was cancelled (error). */
static bool reply_failed(struct tool_call *call, const char *what, json_t *error)
{
    if (!error)
        return false;
    const char *msg = json_string_value(json_object_get(error, "message"));
    tool_call_error(call, NULL, "%s failed: %s", what, msg ? msg : "unknown error");
    return true;
}

static void on_sampling_reply(void *arg, json_t *result, json_t *error)
{
    struct tool_call *call = arg;

    if (reply_failed(call, "sampling/createMessage", error))
        return;
    const char *t = json_string_value(json_object_get(json_object_get(result, "content"), "text"));
    cleanup_free char *msg = xasprintf("LLM response: %s", t ? t : "(no text)");
    finish_text(call, msg);
}

static void ask_client(struct tool_call *call, const char *method, json_t *params,
                       tool_client_reply_fn *cb)
{
    struct mcp_error err;

    if (tool_call_request_client(call, method, params, cb, call, &err) < 0)
        tool_call_error(call, NULL, "cannot send %s: %s", method, err.msg);
}

void fixture_sampling(struct tool_call *call, json_t *args)
{
    const char *prompt = json_string_value(json_object_get(args, "prompt"));

    ask_client(call, "sampling/createMessage",
               json_pack("{s:[{s:s, s:{s:s, s:s}}], s:i}", "messages", "role", "user", "content",
                         "type", "text", "text", prompt, "maxTokens", 100),
               on_sampling_reply);
}

static void on_elicitation_reply(void *arg, json_t *result, json_t *error)
{
    struct tool_call *call = arg;

    if (reply_failed(call, "elicitation/create", error))
        return;
    const char *action = json_string_value(json_object_get(result, "action"));
    json_t *content = json_object_get(result, "content");
    cleanup_free char *c = content ? json_dumps(content, JSON_COMPACT) : NULL;
    cleanup_free char *msg = xasprintf("User response: action=%s, content=%s",
                                       action ? action : "(none)", c ? c : "{}");
    finish_text(call, msg);
}

void fixture_elicitation(struct tool_call *call, json_t *args)
{
    const char *message = json_string_value(json_object_get(args, "message"));
    json_t *schema = json_pack("{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s, s]}", "type",
                               "object", "properties", "username", "type", "string",
                               "description", "Your username", "email", "type", "string",
                               "description", "Your email address", "required", "username",
                               "email");

    ask_client(call, "elicitation/create",
               json_pack("{s:s, s:o}", "message", message, "requestedSchema", schema),
               on_elicitation_reply);
}

void fixture_elicitation_defaults(struct tool_call *call, json_t *args)
{
    json_t *props = json_pack(
        "{s:{s:s, s:s}, s:{s:s, s:i}, s:{s:s, s:f}, s:{s:s, s:[s, s, s], s:s}, s:{s:s, s:b}}",
        "name", "type", "string", "default", "John Doe", "age", "type", "integer", "default", 30,
        "score", "type", "number", "default", 95.5, "status", "type", "string", "enum", "active",
        "inactive", "pending", "default", "active", "verified", "type", "boolean", "default", 1);

    ask_client(call, "elicitation/create",
               json_pack("{s:s, s:{s:s, s:o}}", "message", "Please review and update the form",
                         "requestedSchema", "type", "object", "properties", props),
               on_elicitation_reply);
}

static json_t *titled(const char *const titles[3])
{
    json_t *arr = json_array();

    for (int i = 0; i < 3; i++) {
        cleanup_free char *v = xasprintf("value%d", i + 1);
        json_array_append_new(arr, json_pack("{s:s, s:s}", "const", v, "title", titles[i]));
    }
    return arr;
}

void fixture_elicitation_enums(struct tool_call *call, json_t *args)
{
    static const char *const opts[3] = {"First Option", "Second Option", "Third Option"};
    static const char *const choices[3] = {"First Choice", "Second Choice", "Third Choice"};
    json_t *props = json_pack(
        "{s:{s:s, s:[s, s, s]}, s:{s:s, s:o}, s:{s:s, s:[s, s, s], s:[s, s, s]},"
        " s:{s:s, s:i, s:i, s:{s:s, s:[s, s, s]}}, s:{s:s, s:i, s:i, s:{s:o}}}",
        "untitledSingle", "type", "string", "enum", "option1", "option2", "option3",
        "titledSingle", "type", "string", "oneOf", titled(opts),
        "legacyEnum", "type", "string", "enum", "opt1", "opt2", "opt3", "enumNames",
        "Option One", "Option Two", "Option Three",
        "untitledMulti", "type", "array", "minItems", 1, "maxItems", 3, "items", "type",
        "string", "enum", "option1", "option2", "option3",
        "titledMulti", "type", "array", "minItems", 1, "maxItems", 3, "items", "anyOf",
        titled(choices));

    ask_client(call, "elicitation/create",
               json_pack("{s:s, s:{s:s, s:o}}", "message", "Please choose from the options",
                         "requestedSchema", "type", "object", "properties", props),
               on_elicitation_reply);
}
