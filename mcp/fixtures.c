/* Conformance fixture tools (docs/internals/mcp-spec-points.md §2). Their schemas are
 * schemas/fixtures/<name>.json. */
#define LOG_MODULE "fixtures"
#include "mcp/fixtures.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "mcp/base/cleanup.h"
#include "mcp/base/log.h"
#include "mcp/base/xalloc.h"
#include "mcp/context.h"
#include "mcp/fixtures-internal.h"
#include "mcp/modern/modern.h"
#include "mcp/registry.h"
#include "mcp/tool.h"

/* Delay between the notifications of the logging and progress fixtures. */
#define FIXTURE_STEP_MS 50
/* test_reconnection answers after this long (time for an HTTP client to reconnect). */
#define FIXTURE_RECONNECT_DELAY_MS 100

/* Built member by member rather than with json_pack: test_simple_text is the benchmark's tool,
 * and json_pack's format parsing was ~1.5k instructions of each call. */
static json_t *text(const char *t)
{
    json_t *block = json_object();
    json_object_set_new_nocheck(block, "type", json_string_nocheck("text"));
    json_object_set_new_nocheck(block, "text", json_string(t));
    return block;
}

/* A one-element array holding `item` (reference stolen). */
static json_t *one(json_t *item)
{
    json_t *a = json_array();
    json_array_append_new(a, item);
    return a;
}

static json_t *image(void)
{
    return json_pack("{s:s, s:s, s:s}", "type", "image", "data", FIXTURE_PNG_BASE64, "mimeType",
                     "image/png");
}

static void finish_content(struct tool_call *call, json_t *content)
{
    json_t *result = json_object();
    json_object_set_new_nocheck(result, "content", content);
    tool_call_finish_result(call, result);
}

static void fx_simple_text(struct tool_call *call, json_t *args)
{
    finish_content(call, one(text("This is a simple text response for testing.")));
}

static void fx_image(struct tool_call *call, json_t *args)
{
    finish_content(call, json_pack("[o]", image()));
}

static void fx_audio(struct tool_call *call, json_t *args)
{
    finish_content(call, json_pack("[{s:s, s:s, s:s}]", "type", "audio", "data",
                                   FIXTURE_WAV_BASE64, "mimeType", "audio/wav"));
}

static void fx_embedded_resource(struct tool_call *call, json_t *args)
{
    finish_content(call, json_pack("[{s:s, s:{s:s, s:s, s:s}}]", "type", "resource", "resource",
                                   "uri", "test://embedded-resource", "mimeType", "text/plain",
                                   "text", "This is an embedded resource content."));
}

static void fx_multiple(struct tool_call *call, json_t *args)
{
    finish_content(call, json_pack("[o, o, {s:s, s:{s:s, s:s, s:s}}]",
                                   text("Multiple content types test:"), image(), "type",
                                   "resource", "resource", "uri",
                                   "test://mixed-content-resource", "mimeType",
                                   "application/json", "text", "{\"test\":\"data\",\"value\":123}"));
}

static void fx_error(struct tool_call *call, json_t *args)
{
    tool_call_error(call, NULL, "This tool intentionally returns an error for testing");
}

/* ---- timed fixtures: steps on a uv timer, never sleeps ------------------------------------- */

struct stepper {
    uv_timer_t timer;
    struct tool_call *call; /* NULL once finished */
    int step;
    void (*on_step)(struct stepper *st); /* does step st->step; finishes the call at the end */
};

static void stepper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void stepper_done(struct stepper *st)
{
    st->call = NULL;
    uv_timer_stop(&st->timer);
    uv_close((uv_handle_t *)&st->timer, stepper_closed);
}

static void stepper_tick(uv_timer_t *t)
{
    struct stepper *st = t->data;

    st->on_step(st);
    st->step++;
}

static void stepper_cancel(void *arg)
{
    struct stepper *st = arg;
    struct tool_call *call = st->call;

    stepper_done(st);
    tool_call_error(call, NULL, "cancelled");
}

static void stepper_start(struct tool_call *call, void (*on_step)(struct stepper *),
                          uint64_t first_ms, uint64_t repeat_ms)
{
    struct stepper *st = xcalloc(1, sizeof(*st));

    st->call = call;
    st->on_step = on_step;
    uv_timer_init(tool_call_context(call)->loop, &st->timer);
    st->timer.data = st;
    tool_call_on_cancel(call, stepper_cancel, st);
    uv_timer_start(&st->timer, stepper_tick, first_ms, repeat_ms);
}

static void finish_text(struct stepper *st, const char *msg)
{
    struct tool_call *call = st->call;

    stepper_done(st);
    finish_content(call, json_pack("[o]", text(msg)));
}

static void logging_step(struct stepper *st)
{
    static const char *const lines[] = {"Tool execution started", "Tool processing data",
                                        "Tool execution completed"};

    /* Like the reference server, pause after the last notification too: clients handle
     * notifications asynchronously, and one arriving with the result can be dropped. */
    if (st->step == 3) {
        finish_text(st, "Tool with logging executed successfully");
        return;
    }
    tool_call_log(st->call, "info", "test_tool_with_logging", json_string(lines[st->step]));
}

static void fx_logging(struct tool_call *call, json_t *args)
{
    stepper_start(call, logging_step, 0, FIXTURE_STEP_MS);
}

static void progress_step(struct stepper *st)
{
    if (st->step == 3) {
        finish_text(st, "Tool with progress executed successfully");
        return;
    }
    tool_call_progress(st->call, st->step * 50.0, 100.0, NULL);
}

static void fx_progress(struct tool_call *call, json_t *args)
{
    stepper_start(call, progress_step, 0, FIXTURE_STEP_MS);
}

static void reconnection_step(struct stepper *st)
{
    finish_text(st, "Reconnection test completed");
}

static void fx_reconnection(struct tool_call *call, json_t *args)
{
    stepper_start(call, reconnection_step, FIXTURE_RECONNECT_DELAY_MS, 0);
}

static void fx_schema_2020_12(struct tool_call *call, json_t *args)
{
    tool_call_finish(call, json_incref(args), NULL);
}

static const struct tool_def fixture_tools[] = {
    {"test_simple_text", fx_simple_text},
    {"test_image_content", fx_image},
    {"test_audio_content", fx_audio},
    {"test_embedded_resource", fx_embedded_resource},
    {"test_multiple_content_types", fx_multiple},
    {"test_tool_with_logging", fx_logging},
    {"test_tool_with_progress", fx_progress},
    {"test_error_handling", fx_error},
    {"test_sampling", fixture_sampling},
    {"test_elicitation", fixture_elicitation},
    {"test_elicitation_sep1034_defaults", fixture_elicitation_defaults},
    {"test_elicitation_sep1330_enums", fixture_elicitation_enums},
    {"json_schema_2020_12_tool", fx_schema_2020_12},
    {"test_reconnection", fx_reconnection},
};

int fixtures_register_tools(struct registry *reg, struct mcp_error *err)
{
    return registry_load_tools(reg, "fixtures", fixture_tools, ARRAY_SIZE(fixture_tools), err);
}

int fixtures_register(struct registry *reg, struct mcp_error *err)
{
    if (fixtures_register_tools(reg, err) < 0 || fixtures_register_resources(reg, err) < 0 ||
        fixtures_register_prompts(reg, err) < 0 || modern_fixtures_register(reg, err) < 0)
        return -1;
    log_info("conformance fixtures registered (%zu tools)", registry_tool_count(reg));
    return 0;
}
