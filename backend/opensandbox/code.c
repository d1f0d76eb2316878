/* The code interpreter of Jupyter-enabled images through execd
 * (docs/internals/opensandbox-wire.md §7): contexts
 * (POST /code/context, GET /code/contexts?language=, DELETE /code/contexts/{id}), runs
 * (POST /code streams init, stdout/stderr chunks, execution_count, result, error,
 * execution_complete, pings) and interrupts (DELETE /code?id=).
 *
 * A run without a context id uses the language's first existing context, or creates one: state
 * persists between calls without the agent managing ids. On an image without Jupyter, execd
 * retries its kernel connection for a very long time, so context creation has its own deadline
 * and its failure is reported as "this image has no code interpreter". */
#define LOG_MODULE "opensandbox"

#include <string.h>
#include <strings.h>

#include "backend/opensandbox/osb.h"
#include "backend/opensandbox/sse.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define OSB_CODE_DEFAULT_LANGUAGE "python"
#define OSB_CODE_MAX (1u << 20) /* source text per run */
/* Bytes of result values (compact JSON; images come base64) kept per run, the budget of one
 * output stream at its largest (max_output_bytes' maximum): results past it are counted, not kept. */
#define OSB_CODE_RESULTS_MAX (1u << 20)

struct code_run {
    struct osb_backend *b;
    char *sid, *ctx, *language, *code;
    int64_t timeout_ms;
    struct exec_observer obs;
    struct osb_sse sse;
    struct httpc_req *req;
    struct osb_endpoint ep;   /* copy: the cache entry may be forgotten meanwhile */
    json_t *results, *error;
    int64_t count;            /* -1: no execution_count seen */
    size_t results_bytes;     /* kept so far, <= OSB_CODE_RESULTS_MAX */
    int64_t results_dropped;
    uint64_t started_ms;
    bool starting, start_failed, started, finished, timed_out, has_timer;
    struct mcp_error start_err;
    uv_timer_t timer;         /* timeout -> interrupt */
};

/* ---- errors ---------------------------------------------------------------------------------- */

/* Failures to reach a kernel mean the image has no code interpreter: say so, and what to do. */
static void code_error(const struct code_run *r, const struct mcp_error *err,
                       struct mcp_error *out)
{
    mcp_error_copy(out, err);
    bool no_kernel = err->code == MCP_ERR_TIMEOUT || err->code == MCP_ERR_UNSUPPORTED ||
                     strcasestr(err->msg, "jupyter") != NULL;
    if (strcasestr(err->msg, "context not found") != NULL || strstr(err->msg, "CONTEXT_NOT_FOUND"))
        mcp_error_set(out, MCP_ERR_NOT_FOUND, 0, "no code context %s in sandbox %s; leave "
                      "context_id out (a default one is made) or call run_code with action "
                      "\"list\"", r->ctx ? r->ctx : "", r->sid);
    else if (no_kernel)
        mcp_error_set(out, MCP_ERR_UNSUPPORTED, 0, "sandbox %s cannot run %s code: its image has "
                      "no code interpreter (Jupyter) or it did not answer (%s); create the "
                      "sandbox from a code-interpreter image (opensandbox/code-interpreter), or "
                      "run a script with run_command", r->sid, r->language, err->msg);
}

/* ---- the run --------------------------------------------------------------------------------- */

static void run_closed(uv_handle_t *h)
{
    struct code_run *r = h->data;
    osb_sse_release(&r->sse);
    free(r->sid);
    free(r->ctx);
    free(r->language);
    free(r->code);
    free(r->ep.base);
    json_decref(r->ep.headers);
    json_decref(r->results);
    json_decref(r->error);
    free(r);
}

static void run_free(struct code_run *r)
{
    uv_close((uv_handle_t *)&r->timer, run_closed);
}

static const char *run_status(const struct code_run *r)
{
    const char *ename = json_string_value(json_object_get(r->error, "name"));
    if (r->timed_out)
        return "timed_out";
    if (ename && strcmp(ename, "KeyboardInterrupt") == 0)
        return "interrupted";
    return r->error ? "error" : "ok";
}

static json_t *run_result(struct code_run *r, const char *status)
{
    return json_pack("{s:s,s:s,s:s,s:o,s:O,s:I,s:O,s:I}", "context_id", r->ctx ? r->ctx : "",
                     "language", r->language, "status", status, "execution_count",
                     r->count >= 0 ? json_integer(r->count) : json_null(), "results",
                     r->results, "results_dropped", (json_int_t)r->results_dropped, "error",
                     r->error ? r->error : json_null(), "duration_ms",
                     (json_int_t)(now_mono_ms() - r->started_ms));
}

/* Ends the run (once). Inside osb_code_run (starting) an error is returned instead. */
static void run_finish(struct code_run *r, const char *status, const struct mcp_error *err)
{
    if (r->finished)
        return;
    r->finished = true;
    uv_timer_stop(&r->timer);
    if (r->req != NULL)
        httpc_cancel(r->req); /* execd holds the stream open a while after the end */
    if (err != NULL && r->starting) {
        r->start_failed = true;
        mcp_error_copy(&r->start_err, err);
        return;
    }
    json_t *res = err ? NULL : run_result(r, status);
    r->obs.on_done(r->obs.arg, res, err);
    json_decref(res);
}

static void run_fail(struct code_run *r, const struct mcp_error *err)
{
    struct mcp_error e;
    code_error(r, err, &e);
    run_finish(r, NULL, &e);
}

static void error_event(struct code_run *r, json_t *ev)
{
    json_t *e = json_object_get(ev, "error");
    json_t *tb = json_object_get(e, "traceback");
    const char *name = json_string_value(json_object_get(e, "ename"));
    const char *value = json_string_value(json_object_get(e, "evalue"));
    json_decref(r->error);
    r->error = json_pack("{s:s,s:s,s:o}", "name", name ? name : "Error", "value",
                         value ? value : "", "traceback",
                         json_is_array(tb) ? json_incref(tb) : json_array());
}

/* Keeps a result while the run's results fit OSB_CODE_RESULTS_MAX; counts the others. */
static void keep_result(struct code_run *r, json_t *res)
{
    if (!json_is_object(res))
        return;
    size_t n = json_dumpb(res, NULL, 0, JSON_COMPACT);
    if (n > OSB_CODE_RESULTS_MAX - r->results_bytes) {
        r->results_dropped++;
        return;
    }
    r->results_bytes += n;
    json_array_append(r->results, res);
}

static int run_event(void *arg, json_t *ev)
{
    struct code_run *r = arg;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *text = json_string_value(json_object_get(ev, "text"));
    if (type == NULL || r->finished)
        return 0;
    if (strcmp(type, "init") == 0 && !r->started) {
        r->started = true;
        if (r->obs.on_started)
            r->obs.on_started(r->obs.arg, r->ctx);
    } else if ((strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) && text) {
        if (r->obs.on_output)
            r->obs.on_output(r->obs.arg, type[3] == 'o' ? EXEC_STDOUT : EXEC_STDERR, text,
                             strlen(text));
    } else if (strcmp(type, "execution_count") == 0) {
        json_t *c = json_object_get(ev, "execution_count");
        if (json_is_integer(c))
            r->count = json_integer_value(c);
    } else if (strcmp(type, "result") == 0) {
        keep_result(r, json_object_get(ev, "results"));
    } else if (strcmp(type, "error") == 0) {
        error_event(r, ev); /* authoritative even if execution_complete follows */
        run_finish(r, run_status(r), NULL);
    } else if (strcmp(type, "execution_complete") == 0) {
        run_finish(r, run_status(r), NULL);
    } /* ping, status and newer types: ignored */
    return 0;
}

static int run_sink(void *arg, const char *data, size_t len)
{
    struct code_run *r = arg;
    return osb_sse_feed(&r->sse, data, len) == 0 || r->finished ? 0 : -1;
}

static void run_stream_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct code_run *r = arg;
    r->req = NULL;
    if (!r->finished && resp->status >= 200 && resp->status < 300)
        osb_sse_finish(&r->sse);
    if (!r->finished) {
        struct mcp_error e;
        if (err == NULL)
            mcp_error_set(&e, MCP_ERR_BACKEND, 0, "execd closed the code stream without a final "
                          "event");
        if (r->started) {
            json_decref(r->error);
            r->error = json_pack("{s:s,s:s,s:[]}", "name", "StreamLost", "value",
                                 err ? err->msg : e.msg, "traceback");
            run_finish(r, "lost", NULL);
        } else {
            run_fail(r, err ? err : &e);
        }
    }
    run_free(r);
}

static void interrupt_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    if (err != NULL)
        log_info("interrupting code after its timeout: %s", err->msg);
}

static void interrupt_request(struct osb_backend *b, const struct osb_endpoint *ep,
                              const char *sid, const char *ctx, osb_call_fn *done, void *arg,
                              struct mcp_error *err, bool *ok)
{
    cleanup_free char *ectx = osb_escape(ctx);
    cleanup_free char *path = xasprintf("/code?id=%s", ectx);
    struct osb_call_opts o = {.method = "DELETE", .what = "interrupting the code",
                              .sandbox_id = sid, .retry = HTTPC_RETRY_IDEMPOTENT};
    *ok = osb_execd_call(b, ep, path, &o, done, arg, err) != NULL;
}

static void run_timeout(uv_timer_t *t)
{
    struct code_run *r = t->data;
    struct mcp_error e;
    bool ok;
    if (r->finished)
        return;
    r->timed_out = true;
    interrupt_request(r->b, &r->ep, r->sid, r->ctx, interrupt_done, NULL, &e, &ok);
    if (!ok)
        log_info("interrupting code after its timeout: %s", e.msg);
}

static void run_post(struct code_run *r)
{
    cleanup_json json_t *body = json_pack("{s:{s:s,s:s},s:s}", "context", "id", r->ctx,
                                          "language", r->language, "code", r->code);
    uint64_t d = r->timeout_ms > 0 ? (uint64_t)r->timeout_ms + 2ull * r->b->t.request_timeout_ms
                                   : 0;
    struct osb_call_opts o = {.method = "POST", .what = "running code", .sandbox_id = r->sid,
                              .json = body, .retry = HTTPC_RETRY_SAFE, .stream = true,
                              .sink = run_sink, .deadline_ms = d < UINT32_MAX ? (uint32_t)d : 0};
    struct mcp_error e;
    r->req = osb_execd_call(r->b, &r->ep, "/code", &o, run_stream_done, r, &e);
    if (r->req == NULL) {
        run_fail(r, &e);
        run_free(r);
        return;
    }
    if (r->timeout_ms > 0)
        uv_timer_start(&r->timer, run_timeout, (uint64_t)r->timeout_ms, 0);
}

/* ---- finding or making the context ----------------------------------------------------------- */

static void context_created(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct code_run *r = arg;
    struct mcp_error e;
    cleanup_json json_t *j = NULL;
    const char *id = err ? NULL : json_string_value(osb_resp_member(
                                      resp, "creating a code context", "id", JSON_STRING, &j, &e));
    if (id == NULL) {
        run_fail(r, err ? err : &e);
        run_free(r);
        return;
    }
    r->ctx = xstrdup(id);
    run_post(r);
}

static void context_create(struct code_run *r)
{
    cleanup_json json_t *body = json_pack("{s:s}", "language", r->language);
    struct osb_call_opts o = {.method = "POST", .what = "creating a code context",
                              .sandbox_id = r->sid, .json = body, .retry = HTTPC_RETRY_SAFE};
    struct mcp_error e;
    if (osb_execd_call(r->b, &r->ep, "/code/context", &o, context_created, r, &e) == NULL) {
        run_fail(r, &e);
        run_free(r);
    }
}

static void contexts_listed(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct code_run *r = arg;
    struct mcp_error e;
    cleanup_json json_t *j = err ? NULL : osb_resp_json(resp, "listing code contexts", &e);
    if (j == NULL) {
        run_fail(r, err ? err : &e);
        run_free(r);
        return;
    }
    size_t i;
    json_t *c;
    json_array_foreach(j, i, c) {
        const char *id = json_string_value(json_object_get(c, "id"));
        if (id != NULL) {
            r->ctx = xstrdup(id);
            run_post(r);
            return;
        }
    }
    context_create(r);
}

static void run_with_endpoint(void *arg, const struct osb_endpoint *ep, const struct mcp_error *err)
{
    struct code_run *r = arg;
    if (err != NULL) {
        run_fail(r, err);
        run_free(r);
        return;
    }
    r->ep.base = xstrdup(ep->base);
    r->ep.headers = json_incref(ep->headers);
    if (r->ctx != NULL) {
        run_post(r);
        return;
    }
    cleanup_free char *lang = osb_escape(r->language);
    cleanup_free char *path = xasprintf("/code/contexts?language=%s", lang);
    struct osb_call_opts o = {.method = "GET", .what = "listing code contexts",
                              .sandbox_id = r->sid, .retry = HTTPC_RETRY_IDEMPOTENT};
    struct mcp_error e;
    if (osb_execd_call(r->b, &r->ep, path, &o, contexts_listed, r, &e) == NULL) {
        run_fail(r, &e);
        run_free(r);
    }
}

int osb_code_run(struct backend *be, const char *sandbox_id, const struct code_request *req,
                 const struct exec_observer *obs, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    if (req->code == NULL || strlen(req->code) > OSB_CODE_MAX)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "code is required and limited to %u bytes; "
                             "write longer programs to a file and run them", OSB_CODE_MAX);
    struct code_run *r = xcalloc(1, sizeof(*r));
    r->b = b;
    r->sid = xstrdup(sandbox_id);
    r->language = xstrdup(req->language && *req->language ? req->language
                                                          : OSB_CODE_DEFAULT_LANGUAGE);
    r->ctx = req->context_id && *req->context_id ? xstrdup(req->context_id) : NULL;
    r->code = xstrdup(req->code);
    r->timeout_ms = req->timeout_ms;
    r->obs = *obs;
    r->count = -1;
    r->results = json_array();
    r->started_ms = now_mono_ms();
    r->starting = true;
    osb_sse_init(&r->sse, run_event, r);
    uv_timer_init(b->base.loop, &r->timer);
    r->timer.data = r;
    int rc = osb_endpoint_resolve(b, sandbox_id, run_with_endpoint, r, err);
    r->starting = false;
    if (rc != 0 || r->start_failed) {
        if (rc == 0)
            mcp_error_copy(err, &r->start_err);
        else
            run_free(r);
        return -1;
    }
    return 0;
}

/* ---- contexts: create, list, delete, interrupt ----------------------------------------------- */

struct ctx_op {
    struct osb_backend *b;
    char *sid, *action, *ctx, *language;
    backend_cb *cb;
    void *arg;
};

static void ctx_free(struct ctx_op *c)
{
    free(c->sid);
    free(c->action);
    free(c->ctx);
    free(c->language);
    free(c);
}

static json_t *ctx_list_result(json_t *j, const char *language)
{
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(j, i, c) {
        const char *id = json_string_value(json_object_get(c, "id"));
        const char *lang = json_string_value(json_object_get(c, "language"));
        if (id != NULL)
            json_array_append_new(out, json_pack("{s:s,s:s}", "context_id", id, "language",
                                                 lang ? lang : language));
    }
    return json_pack("{s:o}", "contexts", out);
}

static void ctx_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct ctx_op *c = arg;
    struct mcp_error e;
    json_t *res = NULL;
    if (err != NULL) {
        struct code_run r = {.sid = c->sid, .ctx = c->ctx, .language = c->language};
        code_error(&r, err, &e);
        c->cb(c->arg, NULL, &e);
        ctx_free(c);
        return;
    }
    if (strcmp(c->action, "create") == 0) {
        cleanup_json json_t *j = NULL;
        const char *id = json_string_value(
            osb_resp_member(resp, "creating a code context", "id", JSON_STRING, &j, &e));
        res = id ? json_pack("{s:s,s:s}", "context_id", id, "language", c->language) : NULL;
    } else if (strcmp(c->action, "list") == 0) {
        cleanup_json json_t *j = osb_resp_json(resp, "listing code contexts", &e);
        if (j != NULL && !json_is_array(j))
            mcp_error_set(&e, MCP_ERR_BACKEND, 0, "listing code contexts: execd's answer is not "
                          "an array");
        res = json_is_array(j) ? ctx_list_result(j, c->language) : NULL;
    } else {
        res = json_pack("{s:s,s:b}", "context_id", c->ctx,
                        strcmp(c->action, "delete") == 0 ? "deleted" : "interrupted", 1);
    }
    c->cb(c->arg, res, res ? NULL : &e);
    json_decref(res);
    ctx_free(c);
}

static void ctx_with_endpoint(void *arg, const struct osb_endpoint *ep, const struct mcp_error *err)
{
    struct ctx_op *c = arg;
    struct mcp_error e;
    bool ok = false;
    if (err != NULL) {
        backend_defer(&c->b->base, c->cb, c->arg, NULL, err);
        ctx_free(c);
        return;
    }
    if (strcmp(c->action, "interrupt") == 0) {
        interrupt_request(c->b, ep, c->sid, c->ctx, ctx_done, c, &e, &ok);
    } else if (strcmp(c->action, "create") == 0) {
        cleanup_json json_t *body = json_pack("{s:s}", "language", c->language);
        struct osb_call_opts o = {.method = "POST", .what = "creating a code context",
                                  .sandbox_id = c->sid, .json = body, .retry = HTTPC_RETRY_SAFE};
        ok = osb_execd_call(c->b, ep, "/code/context", &o, ctx_done, c, &e) != NULL;
    } else {
        cleanup_free char *q = osb_escape(c->ctx ? c->ctx : c->language);
        cleanup_free char *path = c->ctx ? xasprintf("/code/contexts/%s", q)
                                         : xasprintf("/code/contexts?language=%s", q);
        struct osb_call_opts o = {.method = c->ctx ? "DELETE" : "GET", .sandbox_id = c->sid,
                                  .what = c->ctx ? "deleting the code context"
                                                 : "listing code contexts",
                                  .retry = HTTPC_RETRY_IDEMPOTENT};
        ok = osb_execd_call(c->b, ep, path, &o, ctx_done, c, &e) != NULL;
    }
    if (!ok) {
        backend_defer(&c->b->base, c->cb, c->arg, NULL, &e);
        ctx_free(c);
    }
}

int osb_code_context(struct backend *be, const char *sandbox_id, const char *action, json_t *args,
                     backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    bool list = strcmp(action, "list") == 0 || strcmp(action, "create") == 0; /* no id */
    const char *ctx = json_string_value(json_object_get(args, "context_id"));
    const char *lang = json_string_value(json_object_get(args, "language"));
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    if (!list && strcmp(action, "delete") != 0 && strcmp(action, "interrupt") != 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "unknown code context action \"%s\"; "
                             "use create, list, delete or interrupt", action);
    if (!list && (ctx == NULL || *ctx == '\0'))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "action \"%s\" needs context_id (run_code "
                             "returns it; action \"list\" lists them)", action);
    struct ctx_op *c = xcalloc(1, sizeof(*c));
    *c = (struct ctx_op){b, xstrdup(sandbox_id), xstrdup(action), list ? NULL : xstrdup(ctx),
                         xstrdup(lang && *lang ? lang : OSB_CODE_DEFAULT_LANGUAGE), cb, arg};
    if (osb_endpoint_resolve(b, sandbox_id, ctx_with_endpoint, c, err) != 0) {
        ctx_free(c);
        return -1;
    }
    return 0;
}
