/* Asking the person: elicitation/create to a 2025-11-25 client (the call waits on the loop, a
 * timer bounds it and sends progress meanwhile), or an InputRequiredResult to a 2026-07-28
 * client (the call ends; the client retries with the answer and the sealed question). */
#define LOG_MODULE "approval"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "mcp/approval-internal.h"
#include "server/context.h"
#include "mcp/tool.h"

/* ---- 2025-11-25: elicitation/create ----------------------------------------------------------- */

struct waiting {
    struct approval_ask *a; /* NULL once settled */
    uv_timer_t timer;
    unsigned timeout_s;
};

static void waiting_closed(uv_handle_t *h)
{
    free(h->data);
}

/* Settles once; the timer goes with it. A refusal ends the call inside settle, which drops the
 * request to the client, so no reply can come after a timeout. */
static void waiting_settle(struct waiting *w, enum approval_answer answer)
{
    struct approval_ask *a = w->a;
    w->a = NULL;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, waiting_closed);
    approval_settle(a, answer);
}

static void on_reply(void *arg, json_t *result, json_t *error)
{
    struct waiting *w = arg;
    if (w->a == NULL)
        return;
    waiting_settle(w, error ? ANSWER_CANCELLED : approval_read_result(result));
}

static void on_tick(uv_timer_t *t)
{
    struct waiting *w = t->data;
    uint64_t waited = now_mono_ms() - w->a->started_ms;
    if (waited >= (uint64_t)w->timeout_s * 1000u) {
        waiting_settle(w, ANSWER_TIMEOUT);
        return;
    }
    tool_call_progress(w->a->call, (double)waited / 1000.0, (double)w->timeout_s,
                       "waiting for the person to answer the approval question");
}

int approval_elicit_session(struct approval_ask *a, unsigned timeout_s)
{
    struct mcp_context *ctx = tool_call_context(a->call);
    struct waiting *w = xcalloc(1, sizeof *w);
    struct mcp_error err;
    w->a = a, w->timeout_s = timeout_s;
    uv_timer_init(ctx->loop, &w->timer);
    w->timer.data = w;
    if (tool_call_request_client(a->call, "elicitation/create", approval_elicit_params(a), on_reply,
                                 w, &err) < 0) {
        log_warn("cannot ask the person: %s", err.msg);
        waiting_settle(w, ANSWER_BUSY);
        return 0;
    }
    approval_audit_asked(a, "elicitation/create");
    uint64_t tick = (uint64_t)timeout_s * 1000u < APPROVAL_HEARTBEAT_MS
                        ? (uint64_t)timeout_s * 1000u
                        : APPROVAL_HEARTBEAT_MS;
    uv_timer_start(&w->timer, on_tick, tick, tick);
    return 0;
}

/* ---- 2026-07-28: InputRequiredResult ---------------------------------------------------------- */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The questions of this call answered yes in an earlier round. A call with two questions
 * (create_sandbox: egress, then a rw mount) carries the first yes in the sealed state while the
 * second is asked; the retry then settles both. Kept only for the handler run under way (one
 * call, one turn of the loop), since a tool asks all its questions before it returns. */
static struct {
    const struct tool_call *call;
    uint64_t turn;
    json_t *digests;
} carried;

static json_t *carried_for(struct approval_ask *a, const json_t *state)
{
    uint64_t turn = uv_now(tool_call_context(a->call)->loop);
    if (carried.call != a->call || carried.turn != turn) {
        json_decref(carried.digests);
        const char *tool = json_string_value(json_object_get(state, "tool"));
        json_t *approved = json_object_get(state, "approved");
        bool same_tool = tool && strcmp(tool, tool_call_tool_name(a->call)) == 0;
        carried.digests =
            same_tool && json_is_array(approved) ? json_deep_copy(approved) : json_array();
        carried.call = a->call, carried.turn = turn;
    }
    return carried.digests;
}

static bool carried_has(json_t *digests, const char *digest)
{
    size_t i;
    json_t *d;
    json_array_foreach(digests, i, d) if (strcmp(json_string_value(d), digest) == 0) return true;
    return false;
}

static int ask_again(struct approval_ask *a)
{
    json_t *state =
        json_pack("{s:s, s:s, s:I, s:O}", "tool", tool_call_tool_name(a->call), "approval",
                  a->digest, "asked_ms", (json_int_t)wall_ms(), "approved", carried.digests);
    json_t *req = json_pack("{s:s, s:o}", "method", "elicitation/create", "params",
                            approval_elicit_params(a));
    approval_audit_asked(a, "input_required");
    tool_call_input_required(a->call, json_pack("{s:o}", APPROVAL_INPUT_KEY, req), state);
    json_decref(state);
    approval_ask_free(a);
    return 1;
}

/* The retry answers this very question (same tool, same text) when its sealed state says so. */
static bool state_matches(const struct approval_ask *a, const json_t *state)
{
    const char *tool = json_string_value(json_object_get(state, "tool"));
    const char *digest = json_string_value(json_object_get(state, "approval"));
    return tool && digest && strcmp(tool, tool_call_tool_name(a->call)) == 0 &&
           strcmp(digest, a->digest) == 0;
}

int approval_elicit_stateless(struct approval_ask *a, unsigned timeout_s)
{
    bool tampered;
    json_t *state = tool_call_request_state(a->call, &tampered);
    json_t *answer = json_object_get(tool_call_input_responses(a->call), APPROVAL_INPUT_KEY);
    if (tampered) {
        tool_call_protocol_error(a->call, MCP_ERR_INVALID_PARAMS,
                                 "Invalid params: requestState failed its integrity check; "
                                 "call again without it");
        approval_ask_free(a);
        return 1;
    }
    json_t *digests = carried_for(a, state);
    bool before = carried_has(digests, a->digest);
    if (!before && (answer == NULL || !state_matches(a, state))) {
        json_decref(state); /* first round, or the question changed since */
        return ask_again(a);
    }
    bool late = wall_ms() - json_integer_value(json_object_get(state, "asked_ms")) >
                (int64_t)timeout_s * 1000;
    json_decref(state);
    enum approval_answer got = late     ? ANSWER_TIMEOUT
                               : before ? ANSWER_ONCE
                                        : approval_read_result(answer);
    if (got <= ANSWER_SESSION && !before)
        json_array_append_new(digests, json_string(a->digest));
    approval_settle(a, got);
    return 0;
}
