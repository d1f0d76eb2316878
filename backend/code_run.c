/* Runs in a code context: the code goes to the driver's stdin ("run <len>\n<code>"), its frames
 * come back (code_frame.c) as output, results (capped at CODE_RESULTS_MAX, the rest counted as
 * dropped), an error and the end of the run; a timeout interrupts, then kills. */
#define LOG_MODULE "code"
#include "backend/code_interp-internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

void code_run_free(struct code_run *r)
{
    if (r == NULL)
        return;
    free(r->code);
    json_decref(r->results);
    json_decref(r->error);
    free(r);
}

static json_t *run_json(struct code_ctx *c, struct code_run *r, const char *status)
{
    json_t *error = r->error ? json_incref(r->error) : json_null();
    if (!strcmp(status, "lost") && !r->error)
        error = json_pack("{s:s, s:s, s:[]}", "name", "ContextLost", "value", c->died, "traceback");
    json_t *res =
        json_pack("{s:s, s:s, s:s, s:I, s:O, s:i, s:o, s:I}", "context_id", c->id, "language",
                  c->lang->name, "status", status, "execution_count", (json_int_t)c->count,
                  "results", r->results, "results_dropped", r->dropped, "error", error,
                  "duration_ms", (json_int_t)(now_mono_ms() - r->started_ms));
    if (r->output_file[0])
        json_object_set_new(res, "output_file", json_string(r->output_file));
    if (r->note)
        json_object_set_new(res, "note", json_string(r->note));
    return res;
}

void code_run_finish(struct code_ctx *c, const char *status, const struct mcp_error *err)
{
    struct code_run *r = c->run;
    if (r == NULL)
        return;
    c->run = NULL;
    uv_timer_stop(&c->timer);
    if (c->state == CODE_RUNNING)
        c->state = CODE_IDLE;
    if (r->timed_out && strcmp(status, "lost") != 0)
        status = "timed_out";
    if (r->obs.on_done) {
        if (err) {
            r->obs.on_done(r->obs.arg, NULL, err);
        } else {
            json_t *res = run_json(c, r, status);
            r->obs.on_done(r->obs.arg, res, NULL);
            json_decref(res);
        }
    }
    code_run_free(r);
}

/* ---- frames ------------------------------------------------------------------------------------- */

/* Whether the frames coming now are of this process's run: one sent, and no other process's run
 * started since (a driver that sends no 's' frames runs only ours). */
static bool frames_are_ours(const struct code_ctx *c)
{
    return c->run && c->run->sent && !c->foreign;
}

static void on_frame_output(void *arg, char kind, const char *data, size_t len)
{
    struct code_ctx *c = arg;
    if (frames_are_ours(c) && c->state == CODE_RUNNING && c->run->obs.on_output)
        c->run->obs.on_output(c->run->obs.arg, kind == 'e' ? EXEC_STDERR : EXEC_STDOUT, data, len);
}

static void take_result(struct code_run *r, json_t *obj, size_t len)
{
    json_t *mime = json_object_get(obj, "mime");
    if (!json_is_object(mime) || r->results_bytes + len > CODE_RESULTS_MAX) {
        r->dropped++;
        return;
    }
    r->results_bytes += len;
    /* execd names text/plain "text" (docs/internals/opensandbox-wire.md §3): the same shape on
     * both backends */
    json_t *bundle = json_copy(mime), *plain = json_object_get(mime, "text/plain");
    if (plain) {
        json_object_set(bundle, "text", plain);
        json_object_del(bundle, "text/plain");
    }
    json_array_append_new(r->results, bundle);
}

/* {name, value, traceback:[strings]}: anything else in it is left out. */
static void take_error(struct code_run *r, json_t *obj)
{
    json_t *tb = json_array(), *lines = json_object_get(obj, "traceback"), *v;
    size_t i;
    json_array_foreach(lines, i, v) if (json_is_string(v)) json_array_append(tb, v);
    const char *name = json_string_value(json_object_get(obj, "name"));
    const char *value = json_string_value(json_object_get(obj, "value"));
    json_decref(r->error);
    r->error = json_pack("{s:s, s:s, s:o}", "name", name ? name : "Error", "value",
                         value ? value : "", "traceback", tb);
}

/* An absolute path of printable characters, or nothing: it is shown to the agent as a path for
 * read_file (which resolves it inside the sandbox), never opened here. */
static void take_output_file(struct code_run *r, const char *path)
{
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n >= sizeof(r->output_file) || path[0] != '/')
        return;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
            return;
    memcpy(r->output_file, path, n + 1);
}

static void on_hello(struct code_ctx *c)
{
    if (c->state != CODE_STARTING)
        return;
    c->state = CODE_IDLE;
    backend_cb *cb = c->create_cb;
    c->create_cb = NULL;
    if (cb) {
        json_t *res = json_pack("{s:s, s:s}", "context_id", c->id, "language", c->lang->name);
        cb(c->create_arg, res, NULL);
        json_decref(res);
    }
    if (c->run && c->state == CODE_IDLE)
        code_run_send(c);
}

/* A run starts in the driver: this process's (its tag), or another's, whose frames are not ours
 * (a process that ended with it in flight, or one that shares the context). The driver runs one
 * at a time: a start while one is going is forged (code can reach the channel) and ignored. */
static void on_run_start(struct code_ctx *c, json_t *obj)
{
    const char *tag = json_string_value(json_object_get(obj, "tag"));
    if (c->current[0] || !tag || !*tag)
        return;
    snprintf(c->current, sizeof(c->current), "%s", tag);
    c->foreign = !(c->run && c->run->sent && !strcmp(tag, c->run->tag));
    if (c->foreign && c->state == CODE_IDLE)
        c->state = CODE_RUNNING;
}

/* The end of the run going (an end with another tag is forged: ignored, count and all); a
 * driver without 's' frames ends only this process's runs. */
static void on_run_end(struct code_ctx *c, json_t *obj)
{
    const char *tag = json_string_value(json_object_get(obj, "tag"));
    if (c->current[0] && (!tag || strcmp(tag, c->current)))
        return;
    json_int_t n = json_integer_value(json_object_get(obj, "count"));
    if (n > c->count)
        c->count = n;
    bool ours = c->run && c->run->sent && c->state == CODE_RUNNING && !c->foreign;
    c->foreign = false;
    c->current[0] = '\0';
    if (!ours) { /* another's run ended: idle, unless ours waits behind it in the driver */
        if (c->state == CODE_RUNNING && !(c->run && c->run->sent))
            c->state = CODE_IDLE;
        return;
    }
    const char *status = json_string_value(json_object_get(obj, "status"));
    take_output_file(c->run, json_string_value(json_object_get(obj, "output_file")));
    code_run_finish(
        c, status && (!strcmp(status, "error") || !strcmp(status, "interrupted")) ? status : "ok",
        NULL);
}

static void on_frame_json(void *arg, char kind, json_t *obj, size_t len)
{
    struct code_ctx *c = arg;
    if (kind == 'h')
        on_hello(c);
    else if (kind == 's')
        on_run_start(c, obj);
    else if (kind == 'd')
        on_run_end(c, obj);
    else if (!frames_are_ours(c) || c->state != CODE_RUNNING)
        return; /* between runs (a thread of earlier code), or another's run: nobody asked */
    else if (kind == 'r')
        take_result(c->run, obj, len);
    else if (kind == 'x')
        take_error(c->run, obj);
}

static void on_frame_dropped(void *arg, char kind, uint64_t len)
{
    struct code_ctx *c = arg;
    if (kind == 'r' && c->run)
        c->run->dropped++;
    else if (kind == 'd' || kind == 'h')
        code_ctx_kill(c, "was stopped: its driver sent a malformed frame");
}

const struct code_frame_sink code_frame_sink_of_ctx = {on_frame_output, on_frame_json,
                                                       on_frame_dropped, NULL};

/* ---- sending a run ------------------------------------------------------------------------------ */

static void timeout_cb(uv_timer_t *t);

static void grace_cb(uv_timer_t *t)
{
    struct code_ctx *c = t->data;
    if (c->state == CODE_RUNNING)
        code_ctx_kill(c, "was killed: it did not stop within 2 s of being interrupted");
}

static void timeout_cb(uv_timer_t *t)
{
    struct code_ctx *c = t->data;
    if (c->state != CODE_RUNNING || c->run == NULL)
        return;
    c->run->timed_out = true;
    code_ctx_signal(c, SIGINT);
    uv_timer_start(&c->timer, grace_cb, CODE_KILL_GRACE_MS, 0);
}

static void input_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct code_ctx *c = arg;
    if (err && c->state != CODE_DEAD) {
        char why[200];
        snprintf(why, sizeof(why), "was lost: its input failed (%s)", err->msg);
        code_ctx_kill(c, why);
    }
    code_ctx_unref(c);
}

void code_run_send(struct code_ctx *c)
{
    struct code_run *r = c->run;
    size_t n = strlen(r->code);
    char *msg = xmalloc(n + 64);
    random_id(r->tag, sizeof(r->tag), "", 8);
    r->sent = true;
    int head = snprintf(msg, 64, "run %zu %s\n", n, r->tag);
    memcpy(msg + head, r->code, n);
    free(r->code);
    r->code = NULL;
    struct mcp_error err;
    c->state = CODE_RUNNING;
    r->started_ms = now_mono_ms();
    c->refs++;
    int rc = c->be->ops->command_input(c->be, c->sandbox_id, c->cmd_id, msg, (size_t)head + n,
                                       false, input_cb, c, &err);
    free(msg);
    if (r->obs.on_started)
        r->obs.on_started(r->obs.arg, c->id);
    if (rc < 0) {
        c->refs--;
        char why[200];
        snprintf(why, sizeof(why), "was lost: its input failed (%s)", err.msg);
        code_ctx_kill(c, why);
        return;
    }
    if (r->timeout_ms > 0)
        uv_timer_start(&c->timer, timeout_cb, (uint64_t)r->timeout_ms, 0);
}

static void send_soon_cb(uv_timer_t *t)
{
    struct code_ctx *c = t->data;
    if (c->run && c->state == CODE_IDLE)
        code_run_send(c);
}

/* ---- code_run ----------------------------------------------------------------------------------- */

static struct code_ctx *default_ctx(struct backend *be, const char *sandbox_id,
                                    const struct code_lang *lang, bool *fresh,
                                    struct mcp_error *err)
{
    struct code_ctx *dead, *c = code_ctx_default(be, sandbox_id, lang, &dead);
    if (c)
        return c;
    if (dead) { /* say so once; the next run starts a fresh one */
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the default %s context %s, and its state is "
                      "gone: run again to start a fresh one",
                      lang->name, dead->died);
        code_ctx_forget(dead);
        return NULL;
    }
    *fresh = true;
    return code_ctx_start(be, sandbox_id, lang, -1, err);
}

static struct code_ctx *pick_ctx(struct backend *be, const char *sandbox_id,
                                 const struct code_request *req, bool *fresh, struct mcp_error *err)
{
    if (req->context_id == NULL || !*req->context_id) {
        const struct code_lang *lang = code_lang_find(req->language, err);
        return lang ? default_ctx(be, sandbox_id, lang, fresh, err) : NULL;
    }
    struct code_ctx *c = code_ctx_by_id(be, sandbox_id, req->context_id);
    if (c == NULL)
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                      "no code context '%s' in this sandbox (a context that was deleted, or "
                      "killed, is gone with its state): list them with run_code action list, "
                      "or leave out context_id",
                      req->context_id);
    else if (c->state == CODE_DEAD)
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the %s context %s %s, and its state is gone: "
                      "create a new one (run_code action create)",
                      c->lang->name, c->id, c->died);
    else if (c->foreign)
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "the context %s is running code that another mcpbox process sent (one "
                      "that ended or restarted with the run in flight): wait for it (run_code "
                      "action get says when it is idle), or interrupt it",
                      c->id);
    else if (c->run)
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "the context %s is running other code: wait for "
                      "it, interrupt it, or use another context",
                      c->id);
    else
        return c;
    return NULL;
}

static int run_now(struct backend *be, const char *sandbox_id, const struct code_request *req,
                   const struct exec_observer *obs, struct mcp_error *err)
{
    bool fresh = false;
    struct code_ctx *c = pick_ctx(be, sandbox_id, req, &fresh, err);
    if (c == NULL)
        return -1;
    struct code_run *r = xcalloc(1, sizeof(*r));
    if (fresh) /* never a fresh state in silence: no default of this language ran in the sandbox */
        r->note = "a fresh default context was started (no earlier one of this language runs in "
                  "this sandbox): names defined by earlier runs, if any, are not here";
    r->obs = *obs;
    r->code = xstrdup(req->code);
    r->results = json_array();
    r->timeout_ms = req->timeout_ms;
    r->started_ms = now_mono_ms();
    c->run = r;
    if (c->state == CODE_IDLE) /* from the loop, so that no callback comes from inside this call */
        uv_timer_start(&c->timer, send_soon_cb, 0, 0);
    return 0; /* else it goes when the driver says hello */
}

/* A run whose context must be looked up in the sandbox first (another process started it). */
struct run_op {
    char *code, *context_id, *language;
    int64_t timeout_ms;
    struct exec_observer obs;
};

static void run_then(void *arg, struct backend *be, const char *sandbox_id)
{
    struct run_op *op = arg;
    struct code_request req = {.language = op->language,
                               .code = op->code,
                               .context_id = op->context_id,
                               .timeout_ms = op->timeout_ms};
    struct mcp_error err;
    if (run_now(be, sandbox_id, &req, &op->obs, &err) < 0)
        op->obs.on_done(op->obs.arg, NULL, &err);
    free(op->code), free(op->context_id), free(op->language), free(op);
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

int code_interp_run(struct backend *be, const char *sandbox_id, const struct code_request *req,
                    const struct exec_observer *obs, struct mcp_error *err)
{
    if (req->code == NULL || strlen(req->code) > CODE_MAX_BYTES) {
        mcp_error_set(err, MCP_ERR_LIMIT, 0,
                      "code is limited to %u bytes: write it to a file "
                      "(write_file) and run that file instead",
                      (unsigned)CODE_MAX_BYTES);
        return -1;
    }
    const struct code_lang *lang = NULL;
    bool by_id = req->context_id && *req->context_id;
    if (!by_id && !(lang = code_lang_find(req->language, err)))
        return -1;
    struct run_op *op = xcalloc(1, sizeof(*op));
    op->code = xstrdup(req->code), op->context_id = dup_or_null(req->context_id);
    op->language = dup_or_null(req->language), op->timeout_ms = req->timeout_ms, op->obs = *obs;
    if (code_prep(be, sandbox_id, by_id ? req->context_id : NULL, lang, false, run_then, op))
        return 0;
    free(op->code), free(op->context_id), free(op->language), free(op);
    return run_now(be, sandbox_id, req, obs, err);
}
