/* The pool: sandboxes pre-created for the default spec, so that create only has to hand one over.
 *
 * Most creates ask for the default spec (image "host", no network, default limits). For those,
 * the expensive part of create (clone3 with seven namespaces, the root filesystem, the agent's
 * exec, the cgroup attach) can happen before anyone asks. A pooled sandbox is a complete sandbox
 * with its own uid range (recorded in the store), its own cgroups with the default limits and a
 * fresh /tmp and /workspace, whose record says state "pooled" and owner "". create takes one:
 * it tells the agent the caller's TTL, idle timeout and env (the agent's "config" operation),
 * then rewrites the record (owner, state "running", times, metadata) and replies. The refill
 * starts after that reply; its spawn runs in a worker thread, so the loop stays free.
 *
 * Nothing leaks: an untaken sandbox ends itself after LOCAL_POOL_TTL_S (its agent's TTL), which
 * also drains the pool of a server that went idle; shutdown destroys the ready ones; after a
 * kill -9 the next start's reconcile reaps "pooled" records whose creator is gone (a live
 * creator's pool is left alone). list, get and every operation treat a pooled sandbox as absent.
 *
 * The pool fills only once a process has made its second create, like the spawner threads: a
 * one-shot `mcpbox sandbox create` never pays for one. Refills go one at a time, once creates
 * have paused for LOCAL_POOL_REFILL_IDLE_MS or as soon as a command finishes (its caller is
 * then busy with the answer: an agent that makes sandboxes 20 ms apart still finds one ready).
 * Under a stream of back-to-back creates with no command in between the pool stays empty and
 * creates take the cold path, as with the pool off, rather than compete with refills for the
 * CPU. */
#include <stdlib.h>
#include <string.h>

#define LOG_MODULE "local"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_agent.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

/* A take in flight: the agent is being told the caller's settings. */
struct pool_take {
    struct local_backend *lb;
    struct lsbx *sb;
    backend_cb *cb;
    void *arg;
    struct sandbox_spec spec; /* a copy, for the cold create a failed take falls back to */
    char *owner;
    int64_t expires_ms, idle_s;
    struct cg_limits lim;
    uint64_t disk;
    uint64_t started_ms;
};

/* The spec a pooled sandbox was made with: image host, no network, default limits. */
static bool spec_is_pooled(const struct sandbox_spec *spec, const struct cg_limits *lim,
                           uint64_t disk)
{
    static const struct sandbox_spec defaults;
    struct cg_limits dlim;
    uint64_t ddisk;
    struct mcp_error err;
    if (local_spec_limits(&defaults, &dlim, &ddisk, &err) < 0)
        return false;
    return (spec->image == NULL || strcmp(spec->image, "host") == 0) && !spec->network &&
           spec->network_policy == NULL &&
           spec->snapshot_id == NULL && json_array_size(spec->mounts) == 0 &&
           lim->memory_bytes == dlim.memory_bytes &&
           lim->pids == dlim.pids && lim->cpu == dlim.cpu && disk == ddisk;
}

static struct lsbx *pool_pop(struct local_backend *lb)
{
    while (lb->pool != NULL) {
        struct lsbx *sb = lb->pool;
        lb->pool = sb->pool_next;
        sb->pool_next = NULL;
        if (!sb->gone)
            return sb;
    }
    return NULL;
}

static int pool_count(const struct local_backend *lb)
{
    int n = 0;
    for (const struct lsbx *sb = lb->pool; sb; sb = sb->pool_next)
        n++;
    return n;
}

static void take_free(struct pool_take *t)
{
    free(t->owner);
    json_decref(t->spec.env);
    json_decref(t->spec.metadata);
    free(t);
}

/* The take failed (the agent did not answer, the store refused): that sandbox goes, and the
 * caller gets a cold create instead, or its error. */
static void take_fallback(struct pool_take *t, const struct mcp_error *why)
{
    struct mcp_error err;
    log_warn("pooled sandbox %s unusable (%s); creating one now", t->sb->id, why->msg);
    if (!t->sb->gone)
        local_kill_now(t->sb);
    if (local_create_cold(t->lb, &t->spec, t->cb, t->arg, &err) < 0)
        t->cb(t->arg, NULL, &err);
}

/* The caller's record: what create would have written, plus the pooled sandbox's init, slot,
 * uid range and cgroups. */
static int take_record(struct pool_take *t, struct store_sandbox *rec, struct mcp_error *err)
{
    struct store *st = t->lb->base.store;
    if (store_sandbox_get(st, t->sb->id, rec, err) < 0)
        return -1;
    json_t *fresh = local_make_record(&t->spec, &t->lim, t->disk);
    json_object_update(rec->record, fresh);
    json_decref(fresh);
    free(rec->owner);
    free(rec->state);
    rec->owner = xstrdup(t->owner);
    rec->state = xstrdup("running");
    rec->created_at_ms = rec->last_active_ms = now_wall_ms();
    rec->expires_at_ms = t->expires_ms;
    rec->idle_timeout_s = t->idle_s;
    return store_sandbox_update(st, rec, err);
}

static void on_take_config(void *arg, json_t *reply, const struct mcp_error *e)
{
    struct pool_take *t = arg;
    struct local_backend *lb = t->lb;
    struct lsbx *sb = t->sb;
    struct store_sandbox rec = {0};
    struct mcp_error err;
    if (lb->closing) {
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0, "the local backend is shutting down");
        local_kill_now(sb); /* nobody's yet: it goes with the pool */
        t->cb(t->arg, NULL, &err);
    } else if (e != NULL || sb->gone || take_record(t, &rec, &err) < 0) {
        if (e == NULL && sb->gone)
            mcp_error_set(&err, MCP_ERR_BACKEND, 0, "it ended");
        take_fallback(t, e ? e : &err);
    } else {
        sb->pooled = false; /* an ordinary live sandbox from here on */
        json_t *info = local_info(&rec);
        t->cb(t->arg, info, NULL);
        json_decref(info);
        local_event(lb->base.store, sb->id, "created",
                    json_pack("{s:i, s:I, s:s, s:b}", "init_pid", (int)sb->pid, "create_ms",
                              (json_int_t)(now_mono_ms() - t->started_ms), "cgroups",
                              cg_layout_name(lb->cg.layout), "pooled", 1), &err);
    }
    store_sandbox_release(&rec);
    lsbx_unref(sb);
    take_free(t);
    local_pool_refill(lb); /* after the reply: off the critical path */
}

static struct pool_take *take_new(struct local_backend *lb, struct lsbx *sb,
                                  const struct sandbox_spec *spec, backend_cb *cb, void *arg)
{
    struct pool_take *t = xcalloc(1, sizeof *t);
    t->lb = lb, t->sb = sb, t->cb = cb, t->arg = arg;
    t->started_ms = now_mono_ms();
    t->spec = *spec;
    t->owner = xstrdup(spec->owner ? spec->owner : "");
    t->spec.owner = t->owner;
    t->spec.image = NULL;
    t->spec.env = json_is_object(spec->env) ? json_deep_copy(spec->env) : NULL;
    t->spec.metadata = json_is_object(spec->metadata) ? json_deep_copy(spec->metadata) : NULL;
    t->expires_ms = local_ttl_ms(spec->timeout_seconds);
    t->idle_s = local_idle_s(spec);
    return t;
}

int local_pool_take(struct local_backend *lb, const struct sandbox_spec *spec, backend_cb *cb,
                    void *arg, struct mcp_error *err)
{
    struct cg_limits lim;
    uint64_t disk;
    struct mcp_error ignored;
    if (!lb->pool_started || lb->pool == NULL ||
        local_spec_limits(spec, &lim, &disk, &ignored) < 0 || !spec_is_pooled(spec, &lim, disk))
        return 0; /* the cold path handles it (and reports a bad spec) */
    struct lsbx *sb = pool_pop(lb);
    struct agent_conn *conn = sb ? lsbx_conn(sb, &ignored) : NULL;
    if (conn == NULL) {
        if (sb != NULL)
            local_kill_now(sb);
        return 0;
    }
    struct pool_take *t = take_new(lb, sb, spec, cb, arg);
    t->lim = lim, t->disk = disk;
    json_t *msg = json_pack("{s:s, s:I, s:I, s:o}", "op", "config", "expires_at_ms",
                            (json_int_t)t->expires_ms, "idle_timeout_s", (json_int_t)t->idle_s,
                            "env", t->spec.env ? json_incref(t->spec.env) : json_object());
    lsbx_ref(sb);
    if (agent_call(conn, msg, on_take_config, t, &ignored) < 0) {
        lsbx_unref(sb);
        take_free(t);
        local_kill_now(sb);
        return 0;
    }
    return 1;
}

static void on_pool_timer(uv_timer_t *t)
{
    local_pool_refill(t->data);
}

static bool pool_wants_refill(const struct local_backend *lb)
{
    return lb->pool_started && !lb->closing && lb->pool_filling == 0 &&
           pool_count(lb) < lb->pool_size;
}

static void refill_now(struct local_backend *lb)
{
    struct mcp_error err;
    lb->pool_filling++;
    if (local_create_pooled(lb, &err) < 0) {
        lb->pool_filling--;
        log_warn("pool refill: %s", err.msg);
    }
}

static void on_pool_timer(uv_timer_t *t);

static void pool_timer_start(struct local_backend *lb, uv_timer_cb cb, uint64_t ms)
{
    if (lb->pool_timer == NULL) {
        lb->pool_timer = xcalloc(1, sizeof *lb->pool_timer);
        uv_timer_init(lb->base.loop, lb->pool_timer);
        lb->pool_timer->data = lb;
    }
    uv_timer_start(lb->pool_timer, cb, ms, 0);
}

static void on_exec_timer(uv_timer_t *t)
{
    struct local_backend *lb = t->data;
    if (pool_wants_refill(lb))
        refill_now(lb);
}

/* A few milliseconds later, not at once: a request that follows the answer right away (a
 * destroy, the next command) does not wait behind the refill's part on the loop (its record and
 * cgroups, 0.3 ms and more while cgroup_mutex is busy). */
void local_pool_after_exec(struct local_backend *lb)
{
    if (pool_wants_refill(lb))
        pool_timer_start(lb, on_exec_timer, LOCAL_POOL_AFTER_EXEC_MS);
}

void local_pool_refill(struct local_backend *lb)
{
    if (!pool_wants_refill(lb))
        return;
    uint64_t quiet = now_mono_ms() - lb->last_create_ms;
    if (quiet < lb->pool_idle_ms) {
        pool_timer_start(lb, on_pool_timer, lb->pool_idle_ms - quiet);
        return;
    }
    refill_now(lb);
}

static void pool_timer_closed(uv_handle_t *h)
{
    free(h);
}

void local_pool_filled(struct local_backend *lb, struct lsbx *sb)
{
    lb->pool_filling--;
    if (lb->closing) {
        local_kill_now(sb);
        return;
    }
    struct mcp_error err;
    if (lsbx_conn(sb, &err) == NULL) /* connected now: the take only sends */
        log_warn("pooled sandbox %s: %s", sb->id, err.msg);
    sb->pool_next = lb->pool;
    lb->pool = sb;
    local_pool_refill(lb);
}

void local_pool_fill_failed(struct local_backend *lb, const struct mcp_error *e)
{
    lb->pool_filling--;
    log_warn("pooled create failed: %s", e->msg);
    /* No retry here: the next create tries again. */
}

void local_pool_forget(struct lsbx *sb)
{
    for (struct lsbx **pp = &sb->be->pool; *pp; pp = &(*pp)->pool_next)
        if (*pp == sb) {
            *pp = sb->pool_next;
            break;
        }
    sb->pool_next = NULL;
}

void local_pool_drain(struct local_backend *lb)
{
    struct lsbx *sb;
    lb->closing = true;
    if (lb->pool_timer != NULL && !uv_is_closing((uv_handle_t *)lb->pool_timer))
        uv_close((uv_handle_t *)lb->pool_timer, pool_timer_closed);
    lb->pool_timer = NULL;
    while ((sb = pool_pop(lb)) != NULL)
        local_kill_now(sb);
}
