/* The terminal tool over interactive commands (terminal_pty.h; docs/tools-design.md,
 * "Terminals"). start and send wait until the program has printed and gone quiet, polling the
 * command's log size (a command_get of one byte, an agent round trip), then fetch what it printed
 * in one command_get. */
#define LOG_MODULE "tools"
#include "mcp/tools/terminal_pty.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/term_text.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store_terminals.h"
#include "server/context.h"

#define PTY_OUTPUT_CAP 16384u    /* text returned per call: the newest part */
#define PTY_FETCH_MAX (1u << 20) /* raw bytes fetched per call: the newest */
#define PTY_MAX 8u               /* live terminals per sandbox */
/* start and send: poll every PTY_POLL_MS until no new output came for quiet_ms (default
 * PTY_QUIET_MS), or, when nothing came at all, for PTY_SILENT_MS, or PTY_SETTLE_MAX_MS passed. */
#define PTY_POLL_MS 1u
#define PTY_QUIET_MS 25u
#define PTY_SILENT_MS 400u
#define PTY_SETTLE_MAX_MS 3000u
/* After keys that end in Enter or another control key, with the default quiet: while what came
 * is no more than their echo (PTY_ECHO_SLACK bytes more than the keys: "\r\n", "^C"), wait this
 * long for the program's reply, which a loaded machine may hold back past the quiet time. */
#define PTY_REPLY_GRACE_MS 100u
#define PTY_ECHO_SLACK 4u
#define PTY_CLOSE_POLL_MS 10u
#define PTY_CLOSE_WAIT_MS 1000u /* after SIGHUP, then SIGKILL */

/* The program runs under bash -c where there is bash, as on the exec path: a shell that outlives
 * a program's own SIGINT (dash does not); the command comes in the env, never in the text. */
static const char pty_wrapper[] =
    "c=$MCPBOX_TC; unset MCPBOX_TC; command -v bash >/dev/null 2>&1 && exec bash -c \"$c\"; "
    "exec sh -c \"$c\"";

static const char pty_exited[] = "the terminal's program has exited, so it takes no more input; "
                                 "read shows what it printed last, close removes it, start runs "
                                 "a new one";

struct pty_job {
    struct tool_job *job;
    struct store *st;
    const char *action;
    char id[72], cmd[72];
    char *keys;
    size_t keys_len;
    bool raw, refetched, retried, report_only, awaits_reply;
    uint64_t first, total, deadline_ms, last_news_ms, quiet_ms, close_until_ms;
    json_t *env;
    struct store_terminal *live; /* at the cap: the live ones, checked one by one */
    size_t n_live, i_live;
    void (*next)(struct pty_job *pj); /* what the timer runs */
    uv_timer_t timer;
};

static void pty_settle_poll(struct pty_job *pj);
static void pty_exec(struct pty_job *pj);
static void pty_reserve(struct pty_job *pj);

bool terminal_pty_supported(const struct tool_job *job)
{
    return job->be != NULL && job->be->ops->command_input != backend_def_command_input &&
           job->be->ops->command_input != NULL;
}

json_t *terminal_text(const char *data, size_t len, bool raw, size_t cap, bool *cut)
{
    size_t n = len;
    char *text = raw ? xstrndup(data, len) : term_text_clean(data, len, &n);
    size_t from = n > cap ? n - cap : 0;
    from += utf8_skip_continuation(text + from, n - from);
    *cut = from > 0;
    json_t *s = utf8_json_text(text + from, n - from);
    free(text);
    return s;
}

static void pty_free_cb(uv_handle_t *h)
{
    struct pty_job *pj = h->data;
    json_decref(pj->env);
    free(pj->keys);
    free(pj->live);
    free(pj);
}

static void pty_end(struct pty_job *pj, json_t *res, const struct mcp_error *err)
{
    if (err != NULL)
        tool_job_fail(pj->job, err);
    else
        tool_job_finish(pj->job, res);
    uv_close((uv_handle_t *)&pj->timer, pty_free_cb);
}

static void pty_fail(struct pty_job *pj, int code, const char *msg)
{
    struct mcp_error err;
    mcp_error_set(&err, code, 0, "terminal %s: %s", pj->id, msg);
    pty_end(pj, NULL, &err);
}

static void pty_timer_cb(uv_timer_t *t)
{
    struct pty_job *pj = t->data;
    pj->next(pj);
}

static void pty_later(struct pty_job *pj, void (*next)(struct pty_job *), uint64_t ms)
{
    pj->next = next;
    uv_timer_start(&pj->timer, pty_timer_cb, ms, 0);
}

static bool reply_running(json_t *reply)
{
    const char *s = json_string_value(json_object_get(reply, "status"));
    return s != NULL && strcmp(s, "running") == 0;
}

static uint64_t reply_u64(json_t *reply, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(reply, key));
    return v > 0 ? (uint64_t)v : 0;
}

/* An error of the backend about the terminal's command, in the terminal's words: a command the
 * sandbox no longer has (it was restarted) is a terminal that is gone. */
static void pty_backend_failed(struct pty_job *pj, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err->code == MCP_ERR_NOT_FOUND) {
        store_terminal_delete(pj->st, pj->job->sandbox_id, pj->id, &e);
        pty_fail(pj, MCP_ERR_NOT_FOUND,
                 "no terminal with this terminal_id in the sandbox (it was closed, or never "
                 "started); start one with action start");
        return;
    }
    pty_end(pj, NULL, err);
}

/* command_get of cmd from offset; on a refusal the job ends. */
static void pty_get(struct pty_job *pj, uint64_t offset, uint64_t limit, backend_cb *cb)
{
    struct mcp_error err;
    struct tool_job *job = pj->job;
    if (job->be->ops->command_get(job->be, job->sandbox_id, pj->cmd, offset, limit, cb, pj, &err) <
        0)
        pty_backend_failed(pj, &err);
}

/* ---- the result ------------------------------------------------------------------------------ */

static json_t *pty_exit_code(json_t *reply)
{
    json_t *code = json_object_get(reply, "exit_code");
    json_t *sig = json_object_get(reply, "signal");
    if (reply_running(reply))
        return json_null();
    if (json_is_integer(code))
        return json_integer(json_integer_value(code));
    return json_is_integer(sig) ? json_integer(128 + json_integer_value(sig)) : json_null();
}

static json_t *pty_result(struct pty_job *pj, json_t *reply)
{
    bool running = reply_running(reply), cut = false;
    json_t *out = json_object_get(reply, "output");
    const char *data = pj->report_only ? "" : json_string_value(out);
    size_t len = pj->report_only || data == NULL ? 0 : json_string_length(out);
    json_t *res = json_pack("{s:s, s:b}", "terminal_id", pj->id, "running", running);
    json_object_set_new(res, "output",
                        terminal_text(data ? data : "", len, pj->raw, PTY_OUTPUT_CAP, &cut));
    uint64_t next = reply_u64(reply, "next_offset");
    json_object_set_new(
        res, "offset",
        json_integer((json_int_t)(pj->report_only ? next : reply_u64(reply, "offset"))));
    json_object_set_new(res, "next_offset", json_integer((json_int_t)next));
    json_object_set_new(res, "exit_code", pty_exit_code(reply));
    if (cut)
        json_object_set_new(res, "note",
                            json_string("output cut to its newest 16 KiB; read with offset to "
                                        "see the rest"));
    else if (!running && strcmp(pj->action, "close") != 0)
        json_object_set_new(res, "note",
                            json_string("the program has exited; close the terminal to remove "
                                        "it"));
    return res;
}

/* Ends the job with what reply says; records where this read stopped, and whether the program
 * has exited, for the next call (of any process). */
static void pty_finish(struct pty_job *pj, json_t *reply)
{
    struct mcp_error err;
    bool closing = strcmp(pj->action, "close") == 0;
    int rc = closing           ? store_terminal_delete(pj->st, pj->job->sandbox_id, pj->id, &err)
             : pj->report_only ? 0
                               : store_terminal_set_seen(pj->st, pj->job->sandbox_id, pj->id,
                                                         reply_u64(reply, "next_offset"),
                                                         !reply_running(reply), &err);
    if (rc < 0) {
        pty_end(pj, NULL, &err);
        return;
    }
    json_t *res = pty_result(pj, reply);
    if (closing)
        json_object_set_new(res, "closed", json_true());
    pty_end(pj, res, NULL);
}

static void pty_fetch(struct pty_job *pj, uint64_t from);

static void pty_on_fetch(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    if (err != NULL) {
        pty_backend_failed(pj, err);
        return;
    }
    uint64_t total = reply_u64(reply, "total_bytes"), offset = reply_u64(reply, "offset");
    if (!pj->refetched && total - offset > PTY_FETCH_MAX) { /* behind by more: the newest part */
        pj->refetched = true;
        pty_fetch(pj, total - PTY_FETCH_MAX);
        return;
    }
    pty_finish(pj, reply);
}

/* What the program printed from `from` (from where the last read stopped, or offset). */
static void pty_fetch(struct pty_job *pj, uint64_t from)
{
    if (pj->total > from && pj->total - from > PTY_FETCH_MAX)
        from = pj->total - PTY_FETCH_MAX;
    pty_get(pj, from, PTY_FETCH_MAX, pty_on_fetch);
}

/* ---- waiting for the output to settle --------------------------------------------------------- */

static void pty_on_poll(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    if (err != NULL) {
        pty_backend_failed(pj, err);
        return;
    }
    uint64_t now = now_mono_ms(), total = reply_u64(reply, "total_bytes");
    if (total != pj->total) {
        pj->total = total;
        pj->last_news_ms = now;
    }
    uint64_t news = pj->total - pj->first;
    uint64_t enough = news > 0 ? pj->quiet_ms : PTY_SILENT_MS;
    if (news > 0 && pj->awaits_reply && news <= pj->keys_len + PTY_ECHO_SLACK)
        enough = PTY_REPLY_GRACE_MS;
    if (!reply_running(reply) || now >= pj->deadline_ms || now - pj->last_news_ms >= enough) {
        pty_fetch(pj, pj->first);
        return;
    }
    pty_later(pj, pty_settle_poll, PTY_POLL_MS);
}

static void pty_settle_poll(struct pty_job *pj)
{
    pty_get(pj, pj->total, 1, pty_on_poll);
}

static void pty_settle(struct pty_job *pj, uint64_t first)
{
    pj->first = pj->total = first;
    pj->last_news_ms = now_mono_ms();
    pj->deadline_ms = pj->last_news_ms + PTY_SETTLE_MAX_MS;
    pty_settle_poll(pj);
}

/* ---- start ------------------------------------------------------------------------------------ */

static void pty_on_started(void *arg, const char *command_id)
{
    struct pty_job *pj = arg;
    struct mcp_error err;
    snprintf(pj->cmd, sizeof pj->cmd, "%s", command_id); /* the agent holds the pty from here on */
    if (store_terminal_set_command(pj->st, pj->job->sandbox_id, pj->id, pj->cmd, &err) < 0) {
        pty_end(pj, NULL, &err);
        return;
    }
    pty_settle(pj, 0);
}

/* Called only when the exec failed (unwatched: nothing follows on_started). */
static void pty_on_exec_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    struct mcp_error e;
    (void)result;
    store_terminal_delete(pj->st, pj->job->sandbox_id, pj->id, &e);
    if (err == NULL)
        mcp_error_set(&e, MCP_ERR_BACKEND, 0,
                      "terminal %s: its program could not be started; call diagnose_sandbox",
                      pj->id);
    pty_end(pj, NULL, err ? err : &e);
}

static void pty_exec(struct pty_job *pj)
{
    struct tool_job *job = pj->job;
    /* TERM as on the exec path (script(1) passed on the exec's dumb): programs draw plainly and
     * none waits for a terminal's answers (vim under xterm stalls 100 ms at exit for them). */
    pj->env = json_pack("{s:s, s:s}", "MCPBOX_TC",
                        tools_arg_str(job->args, "command", "exec bash -i"), "TERM", "dumb");
    struct exec_request req = {
        .command = pty_wrapper,
        .env = pj->env,
        .pty_rows = (uint16_t)tools_arg_int(job->args, "rows", 24, 2, 1000),
        .pty_cols = (uint16_t)tools_arg_int(job->args, "cols", 80, 10, 1000),
        .unwatched = true, /* its output would stream to this process for its whole life */
    };
    struct exec_observer obs = {pty_on_started, NULL, pty_on_exec_done, pj};
    struct mcp_error err, e;
    if (job->be->ops->exec(job->be, job->sandbox_id, &req, &obs, NULL, &err) < 0) {
        store_terminal_delete(pj->st, job->sandbox_id, pj->id, &e);
        pty_end(pj, NULL, &err);
    }
}

/* At the cap: the live terminals' programs are asked one by one whether they still run (one may
 * have exited since its last read), then the reservation is tried once more. */
static void pty_check_next(struct pty_job *pj);

static void pty_on_check(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    struct mcp_error e;
    const struct store_terminal *t = &pj->live[pj->i_live++];
    if (err != NULL && err->code == MCP_ERR_NOT_FOUND)
        store_terminal_delete(pj->st, pj->job->sandbox_id, t->terminal_id, &e);
    else if (err == NULL && !reply_running(reply))
        store_terminal_set_seen(pj->st, pj->job->sandbox_id, t->terminal_id, t->seen, true, &e);
    pty_check_next(pj);
}

static void pty_check_next(struct pty_job *pj)
{
    struct tool_job *job = pj->job;
    struct mcp_error err;
    while (pj->i_live < pj->n_live && pj->live[pj->i_live].command_id[0] == '\0')
        pj->i_live++; /* still starting */
    if (pj->i_live >= pj->n_live) {
        pty_reserve(pj);
        return;
    }
    if (job->be->ops->command_get(job->be, job->sandbox_id, pj->live[pj->i_live].command_id,
                                  INT64_MAX, 1, pty_on_check, pj, &err) < 0)
        pty_end(pj, NULL, &err);
}

static void pty_reserve(struct pty_job *pj)
{
    struct mcp_error err;
    if (store_terminal_reserve(pj->st, pj->job->sandbox_id, pj->id, PTY_MAX, &err) == 0) {
        pty_exec(pj);
        return;
    }
    if (err.code != MCP_ERR_LIMIT || pj->retried ||
        store_terminal_live(pj->st, pj->job->sandbox_id, &pj->live, &pj->n_live, &err) < 0) {
        pty_end(pj, NULL, &err);
        return;
    }
    pj->retried = true;
    pty_check_next(pj);
}

/* ---- send, read, resize, close ----------------------------------------------------------------- */

static void pty_on_input(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    struct mcp_error e;
    (void)reply;
    if (err != NULL && err->code == MCP_ERR_CONFLICT) {
        store_terminal_set_seen(pj->st, pj->job->sandbox_id, pj->id, pj->first, true, &e);
        pty_fail(pj, MCP_ERR_CONFLICT, pty_exited);
        return;
    }
    if (err != NULL) {
        pty_backend_failed(pj, err);
        return;
    }
    pty_settle(pj, pj->first);
}

static void pty_send(struct pty_job *pj)
{
    struct tool_job *job = pj->job;
    struct mcp_error err;
    if (job->be->ops->command_input(job->be, job->sandbox_id, pj->cmd, pj->keys, pj->keys_len,
                                    false, pty_on_input, pj, &err) < 0)
        pty_backend_failed(pj, &err);
}

static void pty_on_report(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    if (err != NULL)
        pty_backend_failed(pj, err);
    else
        pty_finish(pj, reply);
}

static void pty_on_resized(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    (void)reply;
    if (err != NULL && err->code == MCP_ERR_CONFLICT) {
        pty_fail(pj, MCP_ERR_CONFLICT, pty_exited);
        return;
    }
    if (err != NULL) {
        pty_backend_failed(pj, err);
        return;
    }
    pj->report_only = true;
    pty_get(pj, INT64_MAX, 1, pty_on_report);
}

static void pty_resize(struct pty_job *pj)
{
    struct tool_job *job = pj->job;
    struct mcp_error err;
    unsigned rows = (unsigned)tools_arg_int(job->args, "rows", 24, 2, 1000);
    unsigned cols = (unsigned)tools_arg_int(job->args, "cols", 80, 10, 1000);
    if (job->be->ops->command_resize(job->be, job->sandbox_id, pj->cmd, rows, cols, pty_on_resized,
                                     pj, &err) < 0)
        pty_backend_failed(pj, &err);
}

static void pty_close_poll(struct pty_job *pj);

static void pty_on_killed(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    (void)reply;
    if (err != NULL) {
        pty_backend_failed(pj, err);
        return;
    }
    pty_close_poll(pj);
}

static void pty_kill(struct pty_job *pj, int sig)
{
    struct tool_job *job = pj->job;
    struct mcp_error err;
    if (job->be->ops->command_kill(job->be, job->sandbox_id, pj->cmd, sig, pty_on_killed, pj,
                                   &err) < 0)
        pty_backend_failed(pj, &err);
}

/* After SIGHUP: until the program has gone, or PTY_CLOSE_WAIT_MS passed (then SIGKILL, once). */
static void pty_on_close_poll(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct pty_job *pj = arg;
    if (err != NULL) {
        pty_backend_failed(pj, err);
        return;
    }
    if (!reply_running(reply)) {
        pty_finish(pj, reply);
        return;
    }
    if (now_mono_ms() >= pj->close_until_ms) {
        pj->close_until_ms = UINT64_MAX;
        pty_kill(pj, SIGKILL);
        return;
    }
    pty_later(pj, pty_close_poll, PTY_CLOSE_POLL_MS);
}

static void pty_close_poll(struct pty_job *pj)
{
    pty_get(pj, INT64_MAX, 1, pty_on_close_poll);
}

static void pty_close(struct pty_job *pj)
{
    pj->report_only = true;
    pj->close_until_ms = now_mono_ms() + PTY_CLOSE_WAIT_MS;
    pty_kill(pj, SIGHUP); /* the program's process group, as a terminal's hangup */
}

/* The terminal's row: its command and read position; -1 having ended the job. */
static int pty_lookup(struct pty_job *pj)
{
    struct store_terminal t;
    struct mcp_error err;
    if (store_terminal_get(pj->st, pj->job->sandbox_id, pj->id, &t, &err) < 0) {
        pty_end(pj, NULL, &err);
        return -1;
    }
    if (t.command_id[0] == '\0') {
        pty_fail(pj, MCP_ERR_CONFLICT, "it is still starting; try again in a moment");
        return -1;
    }
    snprintf(pj->cmd, sizeof pj->cmd, "%s", t.command_id);
    pj->first = t.seen;
    if (t.exited && strcmp(pj->action, "send") == 0) {
        pty_fail(pj, MCP_ERR_CONFLICT, pty_exited);
        return -1;
    }
    return 0;
}

void terminal_pty_run(struct tool_job *job, const char *action, const char *id, char *keys,
                      size_t keys_len, bool raw)
{
    struct pty_job *pj = xcalloc(1, sizeof *pj);
    pj->job = job;
    pj->st = job->ctx->store;
    pj->action = action;
    snprintf(pj->id, sizeof pj->id, "%s", id);
    pj->keys = keys;
    pj->keys_len = keys_len;
    pj->raw = raw;
    pj->quiet_ms =
        (uint64_t)tools_arg_int(job->args, "quiet_ms", PTY_QUIET_MS, 0, PTY_SETTLE_MAX_MS);
    pj->awaits_reply = keys_len > 0 && (unsigned char)keys[keys_len - 1] < 0x20 &&
                       json_object_get(job->args, "quiet_ms") == NULL;
    uv_timer_init(job->ctx->loop, &pj->timer);
    pj->timer.data = pj;
    if (strcmp(action, "start") == 0) {
        pty_reserve(pj);
        return;
    }
    if (pty_lookup(pj) < 0)
        return;
    if (strcmp(action, "send") == 0)
        pty_send(pj);
    else if (strcmp(action, "resize") == 0)
        pty_resize(pj);
    else if (strcmp(action, "close") == 0)
        pty_close(pj);
    else
        pty_fetch(pj,
                  (uint64_t)tools_arg_int(job->args, "offset", (int64_t)pj->first, 0, INT64_MAX));
}
