/* Code contexts: each a driver process in the sandbox (exec with stdin open), watched for its
 * frames; create, list, get, delete (one, or all of a language) and interrupt. The runs are in
 * code_run.c. */
#define LOG_MODULE "code"
#include "backend/code_interp-internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

/* The interpreter must be on PATH; a missing one exits 127 before the driver starts. */
#define START(prog, run)                                                                           \
    "command -v " prog " >/dev/null 2>&1 || { echo 'mcpbox: no " prog " on PATH' >&2; exit 127; }" \
    "; exec " run

static const struct code_lang langs[] = {
    {"python", "python3", START("python3", "python3 -c \"$MCPBOX_CODE_DRIVER\""),
     code_driver_python},
    {"bash", "bash", START("bash", "bash -c \"$MCPBOX_CODE_DRIVER\" mcpbox-bash"),
     code_driver_bash},
    {"javascript", "node", START("node", "node -e \"$MCPBOX_CODE_DRIVER\" 3>&1 1>&2"),
     code_driver_node},
};

/* Every context of this process, of every backend (one loop, no locks). */
static struct code_ctx *contexts;

const struct code_lang *code_lang_find(const char *name, struct mcp_error *err)
{
    if (name == NULL || !*name)
        name = "python";
    if (!strcmp(name, "python3"))
        name = "python";
    if (!strcmp(name, "js") || !strcmp(name, "node") || !strcmp(name, "nodejs"))
        name = "javascript";
    if (!strcmp(name, "sh") || !strcmp(name, "shell"))
        name = "bash";
    for (size_t i = 0; i < sizeof(langs) / sizeof(langs[0]); i++)
        if (!strcmp(langs[i].name, name))
            return &langs[i];
    mcp_error_set(err, MCP_ERR_INVALID, 0,
                  "no %s interpreter here: use language python, bash or javascript", name);
    return NULL;
}

static void ctx_free_cb(uv_handle_t *h)
{
    struct code_ctx *c = h->data;
    code_frame_release(&c->fp);
    free(c->sandbox_id);
    free(c);
}

void code_ctx_unref(struct code_ctx *c)
{
    if (--c->refs > 0)
        return;
    uv_close((uv_handle_t *)&c->timer, ctx_free_cb);
}

static void unlink_ctx(struct code_ctx *c)
{
    for (struct code_ctx **p = &contexts; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            code_ctx_unref(c);
            return;
        }
}

static void ignore_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    if (err)
        log_debug("signalling a code driver: %s", err->msg);
}

void code_ctx_signal(struct code_ctx *c, int sig)
{
    struct mcp_error err;
    if (!c->cmd_id[0])
        return;
    if (c->be->ops->command_kill(c->be, c->sandbox_id, c->cmd_id, sig, ignore_cb, NULL, &err) < 0)
        log_debug("signalling a code driver: %s", err.msg);
}

static void fail_create(struct code_ctx *c, const struct mcp_error *err)
{
    backend_cb *cb = c->create_cb;
    c->create_cb = NULL;
    if (cb)
        cb(c->create_arg, NULL, err);
}

void code_ctx_kill(struct code_ctx *c, const char *why)
{
    if (c->state == CODE_DEAD)
        return;
    c->state = CODE_DEAD;
    snprintf(c->died, sizeof(c->died), "%s", why);
    uv_timer_stop(&c->timer);
    struct mcp_error err;
    mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0, "the %s context %s %s", c->lang->name, c->id, why);
    fail_create(c, &err);
    if (c->run)
        code_run_finish(c, "lost", NULL);
    code_ctx_signal(c, SIGKILL);
    if (c->cmd_id[0]) /* it may show as running for a moment yet */
        code_adopt_deleted(c->cmd_id);
}

/* ---- the driver's command ---------------------------------------------------------------------- */

static void drv_started(void *arg, const char *command_id)
{
    struct code_ctx *c = arg;
    snprintf(c->cmd_id, sizeof(c->cmd_id), "%s", command_id);
    code_ctx_of_cmd(command_id, c->id, sizeof(c->id));
    if (c->state == CODE_DEAD) /* deleted before it started */
        code_ctx_signal(c, SIGKILL);
}

/* A replay counts the log's bytes (both streams) until it has caught up. */
static void adopt_progress(struct code_ctx *c, size_t len)
{
    if (!c->adopting)
        return;
    c->adopt_left = c->adopt_left > len ? c->adopt_left - len : 0;
    if (c->adopt_left == 0) {
        c->adopting = false;
        code_adopt_settled(c);
    }
}

static void keep_err_tail(struct code_ctx *c, const char *data, size_t len)
{
    if (len >= CODE_STDERR_TAIL) {
        data += len - (CODE_STDERR_TAIL - 1);
        len = CODE_STDERR_TAIL - 1;
    }
    if (c->err_len + len >= CODE_STDERR_TAIL) {
        size_t drop = c->err_len + len - (CODE_STDERR_TAIL - 1);
        memmove(c->err_tail, c->err_tail + drop, c->err_len - drop);
        c->err_len -= drop;
    }
    memcpy(c->err_tail + c->err_len, data, len);
    c->err_len += len;
    c->err_tail[c->err_len] = '\0';
}

static void drv_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct code_ctx *c = arg;
    if (c->state == CODE_DEAD)
        return;
    if (stream == EXEC_STDERR) { /* the driver's own stderr, never frames (on a replay too) */
        keep_err_tail(c, data, len);
        if (c->run && c->run->sent && !c->foreign && c->run->obs.on_output)
            c->run->obs.on_output(c->run->obs.arg, EXEC_STDERR, data, len);
        adopt_progress(c, len);
        return;
    }
    struct code_frame_sink sink = code_frame_sink_of_ctx;
    sink.arg = c;
    if (code_frame_feed(&c->fp, data, len, &sink) < 0) {
        char why[200];
        snprintf(why, sizeof(why),
                 c->adopting ? "was stopped: its log could not be read back (%s; a log keeps "
                               "64 MiB), so its state could not be taken up"
                             : "was stopped: its driver broke the frame protocol (%s)",
                 c->fp.broken);
        code_ctx_kill(c, why);
        return;
    }
    adopt_progress(c, len);
}

void code_death_reason(json_t *res, char *out, size_t size)
{
    const char *status = json_string_value(json_object_get(res, "status"));
    json_t *code = json_object_get(res, "exit_code");
    if (status && !strcmp(status, "oom_killed"))
        snprintf(out, size, "died: the kernel's OOM killer ended it (the sandbox's memory limit)");
    else if (status && !strcmp(status, "exited") && json_is_integer(code))
        snprintf(out, size, "died: the interpreter exited with code %lld",
                 (long long)json_integer_value(code));
    else
        snprintf(out, size, "died: the interpreter was %s (signal %lld)", status ? status : "lost",
                 (long long)json_integer_value(json_object_get(res, "signal")));
}

static void no_interpreter(struct code_ctx *c, struct mcp_error *err)
{
    mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                  "this sandbox's image has no %s on PATH, which %s contexts need: use an image "
                  "that carries it (create_sandbox image), or install it in the sandbox",
                  c->lang->program, c->lang->name);
}

static void drv_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct code_ctx *c = arg;
    c->h = NULL;
    if (c->state == CODE_STARTING) {
        struct mcp_error e;
        json_t *code = json_object_get(result, "exit_code");
        if (err)
            e = *err;
        else if (json_integer_value(code) == 127 && strstr(c->err_tail, "mcpbox: no "))
            no_interpreter(c, &e);
        else
            mcp_error_set(&e, MCP_ERR_UNAVAILABLE, 0,
                          "the %s interpreter ended before it was "
                          "ready (exit code %lld): %s",
                          c->lang->name, (long long)json_integer_value(code), c->err_tail);
        c->state = CODE_DEAD;
        snprintf(c->died, sizeof(c->died), "could not start");
        fail_create(c, &e);
        code_run_finish(c, "lost", &e);
        unlink_ctx(c); /* a context that never started is not listed */
    } else if (c->state != CODE_DEAD) {
        char why[200];
        code_death_reason(result, why, sizeof(why));
        code_ctx_kill(c, why);
    }
    if (c->adopting) {
        c->adopting = false;
        code_adopt_settled(c);
    }
    code_ctx_unref(c); /* the watch's reference */
}

/* ---- create ------------------------------------------------------------------------------------- */

size_t code_ctx_count(struct backend *be, const char *sandbox_id)
{
    size_t n = 0;
    for (struct code_ctx *c = contexts; c; c = c->next)
        n += c->be == be && !strcmp(c->sandbox_id, sandbox_id);
    return n;
}

int code_ctx_free_slot(struct backend *be, const char *sandbox_id)
{
    unsigned used = 0;
    for (struct code_ctx *c = contexts; c; c = c->next)
        if (c->be == be && !strcmp(c->sandbox_id, sandbox_id) && c->slot >= 0)
            used |= 1u << c->slot;
    for (int s = 0; s < CODE_CONTEXTS_MAX; s++)
        if (!(used & (1u << s)))
            return s;
    return CODE_CONTEXTS_MAX;
}

struct code_ctx *code_ctx_by_cmd(struct backend *be, const char *sandbox_id, const char *cmd_id)
{
    for (struct code_ctx *c = contexts; c; c = c->next)
        if (c->be == be && !strcmp(c->sandbox_id, sandbox_id) && !strcmp(c->cmd_id, cmd_id))
            return c;
    return NULL;
}

struct exec_observer code_ctx_observer(struct code_ctx *c)
{
    return (struct exec_observer){drv_started, drv_output, drv_done, c};
}

void code_ctx_link(struct code_ctx *c)
{
    c->next = contexts;
    contexts = c;
}

struct code_ctx *code_ctx_new(struct backend *be, const char *sandbox_id,
                              const struct code_lang *lang, int slot)
{
    struct code_ctx *c = xcalloc(1, sizeof(*c));
    c->be = be;
    c->lang = lang;
    c->sandbox_id = xstrdup(sandbox_id);
    c->is_default = slot < 0;
    c->slot = slot;
    code_frame_init(&c->fp);
    uv_timer_init(be->loop, &c->timer);
    c->timer.data = c;
    c->refs = 2; /* the list and the driver's watch */
    return c;
}

struct code_ctx *code_ctx_start(struct backend *be, const char *sandbox_id,
                                const struct code_lang *lang, int slot, struct mcp_error *err)
{
    if (code_ctx_count(be, sandbox_id) >= CODE_CONTEXTS_MAX || slot >= CODE_CONTEXTS_MAX) {
        mcp_error_set(err, MCP_ERR_LIMIT, 0,
                      "this sandbox has %d code contexts already: delete "
                      "one (run_code action delete) first",
                      CODE_CONTEXTS_MAX);
        return NULL;
    }
    struct code_ctx *c = code_ctx_new(be, sandbox_id, lang, slot);
    char label[BACKEND_LABEL_MAX + 1];
    code_label(lang, slot, label, sizeof(label));
    json_t *env =
        json_pack("{s:s, s:s}", "MCPBOX_CODE_DRIVER", lang->source, "PYTHONUNBUFFERED", "1");
    struct exec_request req = {
        .command = lang->start, .env = env, .stdin_open = true, .label = label};
    struct exec_observer obs = code_ctx_observer(c);
    int rc = be->ops->exec(be, sandbox_id, &req, &obs, &c->h, err);
    json_decref(env);
    if (rc < 0) {
        c->refs = 1;
        code_ctx_unref(c);
        return NULL;
    }
    code_ctx_link(c);
    return c;
}

/* ---- list, get, delete, interrupt ---------------------------------------------------------------- */

static const char *state_name(enum code_state s)
{
    return s == CODE_STARTING  ? "starting"
           : s == CODE_IDLE    ? "idle"
           : s == CODE_RUNNING ? "running"
                               : "dead";
}

static json_t *ctx_json(const struct code_ctx *c)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:b}", "context_id", c->id, "language",
                          c->lang->name, "state", state_name(c->state), "execution_count",
                          (json_int_t)c->count, "default", c->is_default);
    if (c->state == CODE_DEAD)
        json_object_set_new(j, "error", json_sprintf("the context %s", c->died));
    else if (c->foreign)
        json_object_set_new(j, "note",
                            json_string("running code that another mcpbox process "
                                        "sent (one that ended or restarted)"));
    return j;
}

static struct code_ctx *ctx_find(struct backend *be, const char *sandbox_id, const char *id)
{
    for (struct code_ctx *c = contexts; c; c = c->next)
        if (c->be == be && !strcmp(c->sandbox_id, sandbox_id) && id && *id && !strcmp(c->id, id))
            return c;
    return NULL;
}

static struct code_ctx *ctx_find_or_fail(struct backend *be, const char *sandbox_id, json_t *args,
                                         struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(args, "context_id"));
    struct code_ctx *c = ctx_find(be, sandbox_id, id);
    if (c == NULL)
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                      "no code context '%s' in this sandbox (a context that was deleted, or "
                      "killed, is gone with its state): list them with run_code action list, "
                      "or make one with action create",
                      id ? id : "");
    return c;
}

static json_t *ctx_list(struct backend *be, const char *sandbox_id, const char *language)
{
    json_t *arr = json_array();
    for (struct code_ctx *c = contexts; c; c = c->next)
        if (c->be == be && !strcmp(c->sandbox_id, sandbox_id) &&
            (!language || !strcmp(language, c->lang->name)))
            json_array_append_new(arr, ctx_json(c));
    return json_pack("{s:o}", "contexts", arr);
}

static void ctx_delete(struct code_ctx *c)
{
    code_ctx_kill(c, "was deleted");
    unlink_ctx(c);
}

static json_t *delete_language(struct backend *be, const char *sandbox_id,
                               const struct code_lang *lang)
{
    int n = 0;
    for (struct code_ctx *c = contexts, *next; c; c = next) {
        next = c->next;
        if (c->be == be && !strcmp(c->sandbox_id, sandbox_id) && c->lang == lang) {
            ctx_delete(c);
            n++;
        }
    }
    return json_pack("{s:s, s:i}", "language", lang->name, "deleted", n);
}

static void interrupt_grace_cb(uv_timer_t *t)
{
    struct code_ctx *c = t->data;
    if (c->state == CODE_RUNNING)
        code_ctx_kill(c, "was killed: it did not stop within 2 s of an interrupt");
}

/* SIGINT to the driver's process group, then SIGKILL if the run has not ended in time. */
static void ctx_interrupt(struct code_ctx *c)
{
    if (c->state != CODE_RUNNING)
        return;
    code_ctx_signal(c, SIGINT);
    uv_timer_start(&c->timer, interrupt_grace_cb, CODE_KILL_GRACE_MS, 0);
}

static json_t *ctx_action(struct backend *be, const char *sandbox_id, const char *action,
                          json_t *args, struct mcp_error *err)
{
    const char *language = json_string_value(json_object_get(args, "language"));
    if (!strcmp(action, "list")) {
        const struct code_lang *lang = language ? code_lang_find(language, err) : NULL;
        return language && !lang ? NULL : ctx_list(be, sandbox_id, lang ? lang->name : NULL);
    }
    if (!strcmp(action, "delete") && !json_object_get(args, "context_id") && language) {
        const struct code_lang *lang = code_lang_find(language, err);
        return lang ? delete_language(be, sandbox_id, lang) : NULL;
    }
    struct code_ctx *c = ctx_find_or_fail(be, sandbox_id, args, err);
    if (c == NULL)
        return NULL;
    if (!strcmp(action, "get"))
        return ctx_json(c);
    if (!strcmp(action, "interrupt")) {
        ctx_interrupt(c);
        return json_pack("{s:s, s:b}", "context_id", c->id, "interrupted", true);
    }
    json_t *res = json_pack("{s:s, s:b}", "context_id", c->id, "deleted", true);
    ctx_delete(c);
    return res;
}

/* An action waiting for the contexts it names to be known here (code_prep). */
struct ctx_op {
    char action[16];
    json_t *args;
    const struct code_lang *lang; /* create's */
    backend_cb *cb;
    void *arg;
};

static void ctx_op_then(void *arg, struct backend *be, const char *sandbox_id)
{
    struct ctx_op *op = arg;
    struct mcp_error err = {0};
    json_t *res = NULL;
    if (!strcmp(op->action, "create")) {
        struct code_ctx *c =
            code_ctx_start(be, sandbox_id, op->lang, code_ctx_free_slot(be, sandbox_id), &err);
        if (c != NULL) {
            c->create_cb = op->cb; /* answered at the driver's hello */
            c->create_arg = op->arg;
        } else {
            backend_defer(be, op->cb, op->arg, NULL, &err);
        }
    } else {
        res = ctx_action(be, sandbox_id, op->action, op->args, &err);
        backend_defer(be, op->cb, op->arg, res, res ? NULL : &err);
    }
    json_decref(res);
    json_decref(op->args);
    free(op);
}

int code_interp_context(struct backend *be, const char *sandbox_id, const char *action,
                        json_t *args, backend_cb *cb, void *arg, struct mcp_error *err)
{
    if (strcmp(action, "create") && strcmp(action, "list") && strcmp(action, "get") &&
        strcmp(action, "delete") && strcmp(action, "interrupt")) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "unknown code context action '%s': use create, "
                      "list, get, delete or interrupt",
                      action);
        return -1;
    }
    const char *language = json_string_value(json_object_get(args, "language"));
    const struct code_lang *lang = NULL;
    if ((language || !strcmp(action, "create")) && !(lang = code_lang_find(language, err)))
        return -1;
    struct ctx_op *op = xcalloc(1, sizeof(*op));
    snprintf(op->action, sizeof(op->action), "%s", action);
    op->args = json_is_object(args) ? json_incref(args) : json_object();
    op->lang = lang, op->cb = cb, op->arg = arg;
    /* by id for one context; else every context (of the language): create counts them all */
    const char *id = json_string_value(json_object_get(op->args, "context_id"));
    bool by_id = strcmp(action, "list") && strcmp(action, "create") && id;
    if (!code_prep(be, sandbox_id, by_id ? id : NULL,
                   by_id || !strcmp(action, "create") ? NULL : lang, !by_id, ctx_op_then, op))
        ctx_op_then(op, be, sandbox_id); /* answers through backend_defer: still later */
    return 0;
}

/* The drivers live on in their sandboxes: a later process takes them up (code_adopt.c). */
void code_interp_release(struct backend *be)
{
    for (struct code_ctx *c = contexts, *next; c; c = next) {
        next = c->next;
        if (c->be != be)
            continue;
        struct mcp_error err;
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                      "mcpbox is stopping: the context %s lives on in the sandbox (a run in "
                      "flight goes on there); run_code again after mcpbox restarts",
                      c->id);
        fail_create(c, &err);
        code_run_finish(c, "lost", &err); /* whoever waits is told, and frees what it holds */
        if (c->adopting) {
            c->adopting = false;
            code_adopt_settled(c);
        }
        c->state = CODE_DEAD;
        if (c->h) {
            be->ops->exec_detach(c->h);
            c->h = NULL;
            code_ctx_unref(c); /* the watch's */
        }
        unlink_ctx(c);
    }
}

struct code_ctx *code_ctx_default(struct backend *be, const char *sandbox_id,
                                  const struct code_lang *lang, struct code_ctx **dead)
{
    *dead = NULL;
    for (struct code_ctx *c = contexts; c; c = c->next)
        if (c->be == be && c->is_default && c->lang == lang && !strcmp(c->sandbox_id, sandbox_id)) {
            if (c->state != CODE_DEAD)
                return c;
            *dead = c;
        }
    return NULL;
}

struct code_ctx *code_ctx_by_id(struct backend *be, const char *sandbox_id, const char *id)
{
    return ctx_find(be, sandbox_id, id);
}

void code_ctx_forget(struct code_ctx *c)
{
    unlink_ctx(c);
}
