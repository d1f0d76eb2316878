/* The 2026-07-28 conformance fixtures (schemas/fixtures-modern/): tools and a prompt that ask
 * the client for input through InputRequiredResult (MRTR), and the probes of server-stateless
 * (a tool that needs sampling, one that asks mid-call, one that logs). Registered only with
 * --conformance-fixtures. A 2025-11-25 client calling an MRTR fixture gets a tool error. */
#include <stdio.h>
#include <string.h>

#include "mcp/base/cleanup.h"
#include "mcp/modern/modern-internal.h"
#include "mcp/modern/modern.h"
#include "mcp/registry.h"
#include "mcp/server.h"
#include "mcp/tool_call.h"
#include "mcp/request.h"
#include "mcp/tool.h"

#define MRTR_PROMPT "test_input_required_result_prompt"
#define SAMPLING_MAX_TOKENS 100
#define FIXTURE_TEXT_MAX 512

/* ---- building input requests and reading the answers --------------------------------------- */

static json_t *elicit_request(const char *message, const char *field, const char *type)
{
    return json_pack("{s:s, s:{s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}}", "method",
                     "elicitation/create", "params", "message", message, "requestedSchema",
                     "type", "object", "properties", field, "type", type, "required", field);
}

static json_t *sampling_request(const char *question)
{
    return json_pack("{s:s, s:{s:[{s:s, s:{s:s, s:s}}], s:i}}", "method",
                     "sampling/createMessage", "params", "messages", "role", "user", "content",
                     "type", "text", "text", question, "maxTokens", SAMPLING_MAX_TOKENS);
}

static json_t *roots_request(void)
{
    return json_pack("{s:s, s:{}}", "method", "roots/list", "params");
}

/* The accepted elicitation answer's content[field], or NULL. */
static json_t *elicited(json_t *responses, const char *key, const char *field)
{
    json_t *r = json_object_get(responses, key);
    if (!json_is_object(r) || !json_is_string(json_object_get(r, "action")) ||
        strcmp(json_string_value(json_object_get(r, "action")), "accept") != 0)
        return NULL;
    return json_object_get(json_object_get(r, "content"), field);
}

static const char *elicited_string(json_t *responses, const char *key, const char *field)
{
    return json_string_value(elicited(responses, key, field));
}

/* The text of a sampling answer (content is one block or an array of blocks), or NULL. */
static const char *sampled_text(json_t *responses, const char *key)
{
    json_t *content = json_object_get(json_object_get(responses, key), "content");
    if (json_is_array(content))
        content = json_array_get(content, 0);
    return json_string_value(json_object_get(content, "text"));
}

static json_t *listed_roots(json_t *responses, const char *key)
{
    json_t *roots = json_object_get(json_object_get(responses, key), "roots");
    return json_is_array(roots) ? roots : NULL;
}

static void finish_text(struct tool_call *call, const char *text)
{
    tool_call_finish_result(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text",
                                            "text", text));
}

/* MRTR fixtures need a 2026-07-28 client and the capability they ask with. */
static bool mrtr_ready(struct tool_call *call, const char *capability)
{
    if (!tool_call_is_stateless(call)) {
        tool_call_error(call, NULL, "%s asks for input with an InputRequiredResult, which needs "
                        "a %s client", tool_call_tool_name(call), MODERN_PROTOCOL_VERSION);
        return false;
    }
    if (capability && !tool_call_client_has(call, capability)) {
        tool_call_missing_capability(call, capability);
        return false;
    }
    return true;
}

/* The opened requestState if it belongs to this tool; answers the call and returns NULL when
 * it was altered. *absent: no (usable) state came. */
static json_t *own_state(struct tool_call *call, bool *absent)
{
    bool tampered;
    json_t *state = tool_call_request_state(call, &tampered);
    const char *tool = json_string_value(json_object_get(state, "tool"));

    *absent = false;
    if (tampered || (state && (!tool || strcmp(tool, tool_call_tool_name(call)) != 0))) {
        json_decref(state);
        tool_call_protocol_error(call, MCP_ERR_INVALID_PARAMS, "Invalid params: requestState "
                                 "failed its integrity check; call again without it");
        return NULL;
    }
    *absent = state == NULL;
    return state;
}

static json_t *new_state(struct tool_call *call, int round)
{
    return json_pack("{s:s, s:i}", "tool", tool_call_tool_name(call), "round", round);
}

/* ---- the MRTR tools ------------------------------------------------------------------------ */

static void fx_elicitation(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    if (!mrtr_ready(call, "elicitation"))
        return;
    const char *name = elicited_string(tool_call_input_responses(call), "user_name", "name");
    if (!name) {
        tool_call_input_required(
            call,
            json_pack("{s:o}", "user_name", elicit_request("What is your name?", "name", "string")),
            NULL);
        return;
    }
    snprintf(text, sizeof(text), "Hello, %s!", name);
    finish_text(call, text);
}

static void fx_sampling(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    if (!mrtr_ready(call, "sampling"))
        return;
    const char *answer = sampled_text(tool_call_input_responses(call), "capital_question");
    if (!answer) {
        tool_call_input_required(call,
                                 json_pack("{s:o}", "capital_question",
                                           sampling_request("What is the capital of France?")),
                                 NULL);
        return;
    }
    snprintf(text, sizeof(text), "The model answered: %s", answer);
    finish_text(call, text);
}

static void fx_list_roots(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    if (!mrtr_ready(call, "roots"))
        return;
    json_t *roots = listed_roots(tool_call_input_responses(call), "client_roots");
    if (!roots) {
        tool_call_input_required(call, json_pack("{s:o}", "client_roots", roots_request()), NULL);
        return;
    }
    const char *first = json_string_value(json_object_get(json_array_get(roots, 0), "uri"));
    snprintf(text, sizeof(text), "The client has %zu root(s)%s%s", json_array_size(roots),
             first ? "; the first is " : "", first ? first : "");
    finish_text(call, text);
}

static void fx_request_state(struct tool_call *call, json_t *args)
{
    bool absent;
    if (!mrtr_ready(call, "elicitation"))
        return;
    json_auto_t *state = own_state(call, &absent);
    if (!state && !absent)
        return;
    json_t *ok = elicited(tool_call_input_responses(call), "confirm", "ok");
    if (absent || !json_is_boolean(ok)) {
        json_auto_t *fresh = new_state(call, 1);
        tool_call_input_required(
            call, json_pack("{s:o}", "confirm", elicit_request("Please confirm", "ok", "boolean")),
            fresh);
        return;
    }
    finish_text(call, json_is_true(ok) ? "state-ok: confirmed" : "state-ok: declined");
}

static void fx_multiple_inputs(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    bool absent;
    if (!mrtr_ready(call, NULL))
        return;
    json_auto_t *state = own_state(call, &absent);
    if (!state && !absent)
        return;
    json_t *resp = tool_call_input_responses(call);
    const char *name = elicited_string(resp, "user_name", "name");
    const char *greeting = sampled_text(resp, "greeting");
    json_t *roots = listed_roots(resp, "client_roots");
    if (absent || !name || !greeting || !roots) {
        json_auto_t *fresh = new_state(call, 1);
        json_t *asks = json_object();
        if (!name)
            json_object_set_new(asks, "user_name",
                                elicit_request("What is your name?", "name", "string"));
        if (!greeting)
            json_object_set_new(asks, "greeting", sampling_request("Generate a greeting"));
        if (!roots)
            json_object_set_new(asks, "client_roots", roots_request());
        tool_call_input_required(call, asks, fresh);
        return;
    }
    snprintf(text, sizeof(text), "%s, %s (%zu root(s))", greeting, name, json_array_size(roots));
    finish_text(call, text);
}

static void multi_round_ask(struct tool_call *call, int round, const char *name)
{
    json_auto_t *state = new_state(call, round);
    if (name)
        json_object_set_new(state, "name", json_string(name));
    json_t *ask = round == 1
        ? json_pack("{s:o}", "step1", elicit_request("Step 1: What is your name?", "name",
                                                     "string"))
        : json_pack("{s:o}", "step2", elicit_request("Step 2: What is your favorite color?",
                                                     "color", "string"));
    tool_call_input_required(call, ask, state);
}

static void fx_multi_round(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    bool absent;
    if (!mrtr_ready(call, "elicitation"))
        return;
    json_auto_t *state = own_state(call, &absent);
    if (!state && !absent)
        return;
    json_t *resp = tool_call_input_responses(call);
    json_int_t round = json_integer_value(json_object_get(state, "round"));
    const char *name = elicited_string(resp, "step1", "name");
    if (round == 1 && name) {
        multi_round_ask(call, 2, name);
        return;
    }
    const char *color = elicited_string(resp, "step2", "color");
    const char *known = json_string_value(json_object_get(state, "name"));
    if (round != 2 || !color || !known) {
        multi_round_ask(call, round == 2 && known ? 2 : 1, known);
        return;
    }
    snprintf(text, sizeof(text), "%s likes %s", known, color);
    finish_text(call, text);
}

static void fx_tampered_state(struct tool_call *call, json_t *args)
{
    bool absent;
    if (!mrtr_ready(call, "elicitation"))
        return;
    json_auto_t *state = own_state(call, &absent);
    if (!state && !absent)
        return;
    if (absent || !json_is_boolean(elicited(tool_call_input_responses(call), "confirm", "ok"))) {
        json_auto_t *fresh = new_state(call, 1);
        tool_call_input_required(
            call, json_pack("{s:o}", "confirm", elicit_request("Proceed?", "ok", "boolean")),
            fresh);
        return;
    }
    finish_text(call, "The sealed state came back intact");
}

/* Asks for each kind of input the client declared, and nothing else. */
static void fx_capabilities(struct tool_call *call, json_t *args)
{
    if (!mrtr_ready(call, NULL))
        return;
    json_t *resp = tool_call_input_responses(call);
    if (resp && json_object_size(resp) > 0) {
        finish_text(call, "Received the answers the client could give");
        return;
    }
    json_t *asks = json_object();
    if (tool_call_client_has(call, "elicitation"))
        json_object_set_new(asks, "user_name",
                            elicit_request("What is your name?", "name", "string"));
    if (tool_call_client_has(call, "sampling"))
        json_object_set_new(asks, "greeting", sampling_request("Generate a greeting"));
    if (tool_call_client_has(call, "roots"))
        json_object_set_new(asks, "client_roots", roots_request());
    if (json_object_size(asks) == 0) {
        json_decref(asks);
        finish_text(call, "The client declared no way to answer questions");
        return;
    }
    tool_call_input_required(call, asks, NULL);
}

/* ---- server-stateless probes ---------------------------------------------------------------- */

static void fx_missing_capability(struct tool_call *call, json_t *args)
{
    if (!tool_call_client_has(call, "sampling")) {
        tool_call_missing_capability(call, "sampling");
        return;
    }
    if (!tool_call_is_stateless(call)) {
        finish_text(call, "The client declared sampling");
        return;
    }
    const char *answer = sampled_text(tool_call_input_responses(call), "probe");
    if (!answer) {
        tool_call_input_required(call, json_pack("{s:o}", "probe", sampling_request("Say hello")),
                                 NULL);
        return;
    }
    finish_text(call, answer);
}

static void fx_streaming_elicitation(struct tool_call *call, json_t *args)
{
    fx_elicitation(call, args);
}

static void fx_custom_header(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    snprintf(text, sizeof(text), "Region: %s", json_string_value(json_object_get(args, "region")));
    finish_text(call, text);
}

/* ---- list changes for subscriptions/listen ---------------------------------------------------- */

#define DYNAMIC_TOOL "test_dynamic_tool"
#define DYNAMIC_PROMPT "test_dynamic_prompt"

static struct registry *call_registry(struct tool_call *call)
{
    return server_registry(request_server(tool_call_req(call)));
}

static void fx_dynamic(struct tool_call *call, json_t *args)
{
    finish_text(call, "A tool that comes and goes");
}

static int dynamic_prompt(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                          json_t **result, struct mcp_error *err)
{
    *result = json_pack("{s:[{s:s, s:{s:s, s:s}}]}", "messages", "role", "user", "content",
                        "type", "text", "text", "A prompt that comes and goes");
    return 0;
}

/* Each call adds the dynamic tool, or removes it if present: one tools/list_changed. */
static void fx_trigger_tool_change(struct tool_call *call, json_t *args)
{
    struct registry *reg = call_registry(call);
    struct mcp_error err;
    if (registry_find_tool(reg, DYNAMIC_TOOL)) {
        registry_remove_tool(reg, DYNAMIC_TOOL);
        finish_text(call, "Removed " DYNAMIC_TOOL);
        return;
    }
    json_auto_t *def = json_pack("{s:s, s:s, s:{s:s, s:b}}", "name", DYNAMIC_TOOL, "description",
                                 "Appears and disappears with test_trigger_tool_change",
                                 "inputSchema", "type", "object", "additionalProperties", 0);
    if (registry_add_tool(reg, def, fx_dynamic, &err) < 0) {
        tool_call_fail(call, &err);
        return;
    }
    finish_text(call, "Added " DYNAMIC_TOOL);
}

/* The same for a prompt: one prompts/list_changed per call. */
static void fx_trigger_prompt_change(struct tool_call *call, json_t *args)
{
    struct registry *reg = call_registry(call);
    struct mcp_error err;
    if (registry_find_prompt(reg, DYNAMIC_PROMPT, NULL, NULL)) {
        registry_remove_prompt(reg, DYNAMIC_PROMPT);
        finish_text(call, "Removed " DYNAMIC_PROMPT);
        return;
    }
    json_auto_t *def = json_pack("{s:s, s:s}", "name", DYNAMIC_PROMPT, "description",
                                 "Appears and disappears with test_trigger_prompt_change");
    if (registry_add_prompt(reg, def, dynamic_prompt, NULL, &err) < 0) {
        tool_call_fail(call, &err);
        return;
    }
    finish_text(call, "Added " DYNAMIC_PROMPT);
}

static void fx_logging_tool(struct tool_call *call, json_t *args)
{
    static const char *const levels[] = {"info", "warning", "error"};
    for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
        tool_call_log(call, levels[i], "test_logging_tool",
                      json_pack("{s:s, s:I}", "message", "logging fixture", "step",
                                (json_int_t)i + 1));
    finish_text(call, "Logged three messages");
}

/* ---- the MRTR prompt ------------------------------------------------------------------------ */

static json_t *prompt_result(const char *context)
{
    char text[FIXTURE_TEXT_MAX];
    snprintf(text, sizeof(text), "Answer with this context in mind: %s", context);
    return json_pack("{s:s, s:[{s:s, s:{s:s, s:s}}]}", "description", "A prompt built from the "
                     "user's context", "messages", "role", "user", "content", "type", "text",
                     "text", text);
}

static void prompt_modern(struct request *req, json_t *params)
{
    const json_t *meta = request_modern_meta(req);
    json_t *resp = json_object_get(params, "inputResponses");
    if (!modern_meta_has_capability(meta, "elicitation")) {
        modern_missing_capability(req, "elicitation");
        return;
    }
    const char *context = elicited_string(resp, "user_context", "context");
    if (context) {
        request_reply(req, prompt_result(context));
        return;
    }
    request_reply(req, modern_input_required_result(
                           json_pack("{s:o}", "user_context",
                                     elicit_request("What context should the prompt use?",
                                                    "context", "string")),
                           NULL));
}

/* A 2025-11-25 client cannot answer an InputRequiredResult: it gets the prompt without one. */
static int prompt_legacy(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                         json_t **result, struct mcp_error *err)
{
    *result = prompt_result("(none given: ask with a 2026-07-28 client)");
    return 0;
}

static const struct tool_def modern_fixture_tools[] = {
    {"test_input_required_result_elicitation", fx_elicitation},
    {"test_input_required_result_sampling", fx_sampling},
    {"test_input_required_result_list_roots", fx_list_roots},
    {"test_input_required_result_request_state", fx_request_state},
    {"test_input_required_result_multiple_inputs", fx_multiple_inputs},
    {"test_input_required_result_multi_round", fx_multi_round},
    {"test_input_required_result_tampered_state", fx_tampered_state},
    {"test_input_required_result_capabilities", fx_capabilities},
    {"test_missing_capability", fx_missing_capability},
    {"test_streaming_elicitation", fx_streaming_elicitation},
    {"test_logging_tool", fx_logging_tool},
    {"test_custom_header", fx_custom_header},
    {"test_trigger_tool_change", fx_trigger_tool_change},
    {"test_trigger_prompt_change", fx_trigger_prompt_change},
};

int modern_fixtures_register(struct registry *reg, struct mcp_error *err)
{
    json_auto_t *prompt = json_pack("{s:s, s:s, s:s}", "name", MRTR_PROMPT, "title",
                                    "MRTR prompt", "description", "Asks the user for context "
                                    "through an InputRequiredResult before building the prompt "
                                    "(2026-07-28 conformance fixture).");
    if (registry_load_tools(reg, "fixtures-modern", modern_fixture_tools,
                            ARRAY_SIZE(modern_fixture_tools), err) < 0 ||
        registry_add_prompt(reg, prompt, prompt_legacy, NULL, err) < 0 ||
        modern_task_fixtures_register(reg, err) < 0)
        return -1;
    modern_input_prompt_add(MRTR_PROMPT, prompt_modern);
    return 0;
}
