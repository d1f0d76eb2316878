/* The fixtures of the conformance suite's tasks scenarios (io.modelcontextprotocol/tasks):
 * greet (never a task), slow_compute, failing_job, protocol_error_job, confirm_delete,
 * multi_input, test_tool_with_task. Their waits run on loop timers; a cancelled call stops its
 * timer at once. Schemas: schemas/fixtures-modern/. */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "mcp/base/cleanup.h"
#include "mcp/base/xalloc.h"
#include "mcp/context.h"
#include "mcp/modern/modern-internal.h"
#include "mcp/modern/modern.h"
#include "mcp/registry.h"
#include "mcp/tool.h"

#define FIXTURE_TEXT_MAX 512
/* failing_job and protocol_error_job fail after this long; the others' "work" takes this. */
#define FIXTURE_JOB_MS 1000
#define FIXTURE_STEP_MS 200

/* What a timer does when it fires. */
typedef void fixture_step_fn(struct tool_call *call, json_t *args);

struct fixture_wait {
    uv_timer_t timer;
    struct tool_call *call; /* NULL once the call was cancelled (and finished) */
    json_t *args;
    fixture_step_fn *then;
};

static void wait_closed(uv_handle_t *h)
{
    struct fixture_wait *w = h->data;
    json_decref(w->args);
    free(w);
}

static void wait_fire(uv_timer_t *timer)
{
    struct fixture_wait *w = timer->data;
    struct tool_call *call = w->call;
    w->call = NULL;
    uv_close((uv_handle_t *)&w->timer, wait_closed);
    if (call)
        w->then(call, w->args);
}

static void wait_cancel(void *arg)
{
    struct fixture_wait *w = arg;
    struct tool_call *call = w->call;
    w->call = NULL;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, wait_closed);
    tool_call_error(call, NULL, "cancelled");
}

/* Calls then(call, args) after ms on the loop (0: on the next loop iteration). */
static void fixture_after(struct tool_call *call, json_t *args, uint64_t ms, fixture_step_fn *then)
{
    struct fixture_wait *w = xcalloc(1, sizeof(*w));
    w->call = call;
    w->args = json_incref(args);
    w->then = then;
    uv_timer_init(tool_call_context(call)->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, wait_fire, ms, 0);
    tool_call_on_cancel(call, wait_cancel, w);
}

static void finish_text(struct tool_call *call, const char *text)
{
    tool_call_finish_result(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text",
                                            "text", text));
}

static json_t *confirm_request(const char *message)
{
    return json_pack("{s:s, s:{s:s, s:{s:s, s:{s:{s:s}, s:{s:s}}}}}", "method",
                     "elicitation/create", "params", "message", message, "requestedSchema",
                     "type", "object", "properties", "name", "type", "string", "confirm", "type",
                     "boolean");
}

static bool accepted(json_t *responses, const char *key)
{
    const char *action = json_string_value(json_object_get(json_object_get(responses, key),
                                                           "action"));
    return action && strcmp(action, "accept") == 0;
}

/* ---- the tools ------------------------------------------------------------------------------ */

static void fx_greet(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    const char *name = json_string_value(json_object_get(args, "name"));
    snprintf(text, sizeof(text), "Hello, %s!", name ? name : "world");
    finish_text(call, text);
}

static void slow_done(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    const char *label = json_string_value(json_object_get(args, "label"));
    snprintf(text, sizeof(text), "Computed %s after %.3g s", label ? label : "(unlabelled)",
             json_number_value(json_object_get(args, "seconds")));
    finish_text(call, text);
}

static void fx_slow_compute(struct tool_call *call, json_t *args)
{
    double seconds = json_number_value(json_object_get(args, "seconds"));
    if (seconds <= 0)
        slow_done(call, args); /* the immediate-result shortcut: no task */
    else
        fixture_after(call, args, (uint64_t)(seconds * 1000.0), slow_done);
}

static void failing_done(struct tool_call *call, json_t *args)
{
    tool_call_error(call, NULL, "failing_job failed on purpose (a tool execution error)");
}

static void fx_failing_job(struct tool_call *call, json_t *args)
{
    fixture_after(call, args, FIXTURE_JOB_MS, failing_done);
}

static void protocol_error_done(struct tool_call *call, json_t *args)
{
    tool_call_protocol_error(call, MCP_ERR_INTERNAL,
                             "protocol_error_job ended in a protocol error on purpose");
}

static void fx_protocol_error_job(struct tool_call *call, json_t *args)
{
    fixture_after(call, args, FIXTURE_STEP_MS, protocol_error_done);
}

/* Looks the file up (asynchronously), then asks before "deleting" it. */
static void confirm_step(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    const char *file = json_string_value(json_object_get(args, "filename"));
    json_t *resp = tool_call_input_responses(call);
    if (!json_object_get(resp, "confirm")) {
        snprintf(text, sizeof(text), "Delete %s?", file ? file : "the file");
        tool_call_input_required(call, json_pack("{s:o}", "confirm", confirm_request(text)), NULL);
        return;
    }
    snprintf(text, sizeof(text), "%s %s", accepted(resp, "confirm") ? "Deleted" : "Kept",
             file ? file : "the file");
    finish_text(call, text);
}

static void fx_confirm_delete(struct tool_call *call, json_t *args)
{
    fixture_after(call, args, 0, confirm_step);
}

static void multi_step(struct tool_call *call, json_t *args)
{
    json_t *resp = tool_call_input_responses(call);
    bool first = json_object_get(resp, "first") != NULL;
    bool second = json_object_get(resp, "second") != NULL;
    if (first && second) {
        finish_text(call, "Both inputs received");
        return;
    }
    json_t *asks = json_object();
    if (!first)
        json_object_set_new(asks, "first", confirm_request("First input?"));
    if (!second)
        json_object_set_new(asks, "second", confirm_request("Second input?"));
    tool_call_input_required(call, asks, NULL);
}

static void fx_multi_input(struct tool_call *call, json_t *args)
{
    fixture_after(call, args, 0, multi_step);
}

static void with_task_done(struct tool_call *call, json_t *args)
{
    char text[FIXTURE_TEXT_MAX];
    snprintf(text, sizeof(text), "Hello, %s! (finished in a task)", json_string_value(args));
    finish_text(call, text);
}

/* Round 1: asks the name (MRTR, no task); round 2: works on it asynchronously (a task). */
static void fx_with_task(struct tool_call *call, json_t *args)
{
    json_t *content = json_object_get(json_object_get(tool_call_input_responses(call),
                                                      "user_name"), "content");
    json_t *name = json_object_get(content, "name");
    if (!json_is_string(name)) {
        tool_call_input_required(call,
                                 json_pack("{s:{s:s, s:{s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}}}",
                                           "user_name", "method", "elicitation/create", "params",
                                           "message", "What is your name?", "requestedSchema",
                                           "type", "object", "properties", "name", "type", "string",
                                           "required", "name"),
                                 NULL);
        return;
    }
    fixture_after(call, name, FIXTURE_STEP_MS, with_task_done);
}

static const struct tool_def task_fixture_tools[] = {
    {"greet", fx_greet},
    {"slow_compute", fx_slow_compute},
    {"failing_job", fx_failing_job},
    {"protocol_error_job", fx_protocol_error_job},
    {"confirm_delete", fx_confirm_delete},
    {"multi_input", fx_multi_input},
    {"test_tool_with_task", fx_with_task},
};

int modern_task_fixtures_register(struct registry *reg, struct mcp_error *err)
{
    modern_task_tool_add("slow_compute", TASK_SUPPORT_OPTIONAL);
    modern_task_tool_add("failing_job", TASK_SUPPORT_REQUIRED);
    modern_task_tool_add("protocol_error_job", TASK_SUPPORT_OPTIONAL);
    modern_task_tool_add("confirm_delete", TASK_SUPPORT_OPTIONAL);
    modern_task_tool_add("multi_input", TASK_SUPPORT_OPTIONAL);
    modern_task_tool_add("test_tool_with_task", TASK_SUPPORT_REQUIRED);
    return registry_load_tools(reg, "fixtures-tasks", task_fixture_tools,
                               ARRAY_SIZE(task_fixture_tools), err);
}
