/* snapshot_sandbox {action: "fork"} on the local backend (snapshot.h): count new sandboxes made
 * at once with the source's image, env and limits, then the live sandbox's files read once
 * (frozen, like a snapshot) and written into all of them at once (local_fork_stream.c). Each
 * copy is a sandbox of its own (id, uid slot, cgroups, TTL from now, the source's limits and
 * network policy); nothing of it is shared with the source or another copy once made. */
#define LOG_MODULE "local"
#include <stdlib.h>
#include <string.h>

#include "backend/egress_policy.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/snapshot.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

struct fork_op {
    uv_work_t work;
    struct fork_stream stream; /* the source and the copies referenced while the work runs */
    struct local_backend *lb;
    char source[LOCAL_ID_LEN];
    char *owner;
    int count, pending;
    bool network;
    struct egress_policy *policy;
    json_t *rec;  /* what a snapshot's record would say: image, env, limits */
    json_t *made; /* the copies' infos */
    bool failed;
    struct mcp_error err;
    backend_cb *cb;
    void *arg;
};

static void fork_free(struct fork_op *op)
{
    egress_policy_unref(op->policy);
    if (op->stream.source)
        lsbx_unref(op->stream.source);
    for (int i = 0; i < op->stream.count; i++)
        lsbx_unref(op->stream.copies[i]);
    json_decref(op->rec), json_decref(op->made);
    free(op->owner);
    free(op);
}

static void ignore_destroyed(void *arg, json_t *result, const struct mcp_error *err)
{
    (void)arg, (void)result;
    if (err != NULL)
        log_warn("a copy of a failed fork was not destroyed: %s", err->msg);
}

static void fork_finish(struct fork_op *op)
{
    if (op->failed) { /* all or nothing */
        size_t i;
        json_t *info;
        struct mcp_error e;
        json_array_foreach(op->made, i, info)
        {
            const char *id = json_string_value(json_object_get(info, "sandbox_id"));
            if (local_destroy(&op->lb->base, id, ignore_destroyed, NULL, &e) < 0)
                log_warn("sandbox %s: not destroyed after a failed fork: %s", id, e.msg);
        }
        backend_defer(&op->lb->base, op->cb, op->arg, NULL, &op->err); /* never within the call */
    } else {
        json_t *res = json_pack("{s:s, s:O}", "sandbox_id", op->source, "sandboxes", op->made);
        op->cb(op->arg, res, NULL);
        json_decref(res);
    }
    fork_free(op);
}

static void stream_work(uv_work_t *w)
{
    struct fork_op *op = w->data;
    if (fork_stream_run(&op->stream) < 0)
        op->failed = true, op->err = op->stream.err;
}

static void stream_after(uv_work_t *w, int status)
{
    struct fork_op *op = w->data;
    if (status < 0 && !op->failed)
        op->failed = true,
        mcp_error_set(&op->err, MCP_ERR_INTERNAL, 0, "the fork was cancelled; try again");
    for (int i = 0; i < op->stream.count && !op->failed; i++) {
        struct mcp_error e;
        local_event(op->lb->base.store, op->stream.copies[i]->id, "forked",
                    json_pack("{s:s}", "forked_from", op->source), &e);
    }
    local_snapshot_refill_later(op->lb);
    fork_finish(op);
}

/* Every copy made: their lsbx held, then the files copied in a worker. */
static void copies_made(struct fork_op *op)
{
    size_t i;
    json_t *info;
    json_array_foreach(op->made, i, info)
    {
        struct lsbx *c = lsbx_find(op->lb, json_string_value(json_object_get(info, "sandbox_id")));
        if (c == NULL || c->pidfd < 0) {
            op->failed = true;
            mcp_error_set(&op->err, MCP_ERR_BACKEND, 0, "a copy ended at once; fork again");
            break;
        }
        lsbx_ref(c);
        op->stream.copies[op->stream.count++] = c;
    }
    op->work.data = op;
    if (op->failed || uv_queue_work(op->lb->base.loop, &op->work, stream_work, stream_after) < 0) {
        if (!op->failed)
            op->failed = true,
            mcp_error_set(&op->err, MCP_ERR_INTERNAL, 0, "cannot queue the fork");
        fork_finish(op);
    }
}

static void copy_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct fork_op *op = arg;
    if (err != NULL && !op->failed)
        op->failed = true, op->err = *err;
    if (result != NULL) {
        json_t *info = json_deep_copy(result);
        json_object_set_new(info, "forked_from", json_string(op->source));
        json_array_append_new(op->made, info);
    }
    if (--op->pending > 0)
        return;
    if (op->failed)
        fork_finish(op);
    else
        copies_made(op);
}

/* The copies, made at once with the source's image, env and limits. */
static void make_copies(struct fork_op *op)
{
    op->pending = op->count + 1; /* held until every copy is started */
    for (int i = 0; i < op->count; i++) {
        struct sandbox_spec spec = {
            .owner = op->owner, .network = op->network, .network_policy = op->policy};
        struct mcp_error e;
        if (local_create_copy(&op->lb->base, &spec, op->rec, copy_done, op, &e) < 0)
            copy_done(op, NULL, &e);
    }
    copy_done(op, NULL, NULL);
}

/* The source's network: a policy, or network true/false, as its record keeps them. */
static int source_network(struct fork_op *op, struct mcp_error *err)
{
    struct store_sandbox rec = {0};
    if (store_sandbox_get(op->lb->base.store, op->source, &rec, err) < 0)
        return -1;
    json_t *policy = json_object_get(rec.record, "network_policy");
    op->network = json_is_true(json_object_get(rec.record, "network"));
    if (json_is_object(policy)) {
        op->network = false;
        op->policy = egress_policy_parse(policy, "network_policy", err);
    }
    int rc = json_is_object(policy) && op->policy == NULL ? -1 : 0;
    store_sandbox_release(&rec);
    return rc;
}

int local_fork(struct local_backend *lb, const char *owner, json_t *args, backend_cb *cb, void *arg,
               struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(args, "sandbox_id"));
    json_t *count = json_object_get(args, "count");
    json_int_t n = count ? json_integer_value(count) : 1;
    if (id == NULL || strlen(id) >= LOCAL_ID_LEN)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "action \"fork\" needs sandbox_id");
    if (n < 1 || n > LOCAL_FORK_MAX)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "count must be 1 to %d; fork again for more copies", LOCAL_FORK_MAX);
    struct lsbx *sb = lsbx_for_op(lb, id, false, err);
    if (sb == NULL)
        return -1;
    if (sb->pidfd < 0)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "sandbox %s is not watched by this server; destroy it", id);
    struct fork_op *op = xcalloc(1, sizeof *op);
    op->lb = lb, op->count = (int)n, op->cb = cb, op->arg = arg;
    op->owner = owner ? xstrdup(owner) : NULL;
    op->made = json_array();
    snprintf(op->source, sizeof op->source, "%s", id);
    if (source_network(op, err) < 0 ||
        (op->rec = local_snapshot_record(lb, owner, id, NULL, err)) == NULL) {
        fork_free(op);
        return -1;
    }
    lsbx_ref(sb);
    op->stream.source = sb;
    op->stream.freeze = lb->cg.can_freeze;
    op->stream.max_bytes = SNAP_MAX_BYTES((uint64_t)json_integer_value(
        json_object_get(json_object_get(op->rec, "limits"), "disk_bytes")));
    make_copies(op);
    return 0;
}
