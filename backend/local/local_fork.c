/* snapshot_sandbox {action: "fork"} on the local backend (snapshot.h): the live sandbox's files
 * read once (frozen, like a snapshot), then count restores of that layer at once. Each copy is
 * a sandbox of its own (id, uid slot, cgroups, TTL from now, the source's limits and network
 * policy); nothing of it is shared with the source or another copy once made. */
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
    struct local_backend *lb;
    char source[LOCAL_ID_LEN];
    char *owner;
    int count, pending;
    bool network;
    struct egress_policy *policy;
    json_t *rec;  /* the layer's record (never saved) */
    json_t *made; /* the copies' infos */
    bool failed;
    struct mcp_error err;
    backend_cb *cb;
    void *arg;
};

static void fork_free(struct fork_op *op)
{
    egress_policy_unref(op->policy);
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
    char dir[LOCAL_PATH_MAX + 16];
    struct snap_files f;
    snprintf(dir, sizeof dir, "%s/image-store", op->lb->state_dir);
    snap_files_init(&f, dir);
    snap_files_drop_layer(&f, json_string_value(json_object_get(op->rec, "layer")));
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
        op->cb(op->arg, NULL, &op->err);
    } else {
        json_t *res = json_pack("{s:s, s:O}", "sandbox_id", op->source, "sandboxes", op->made);
        op->cb(op->arg, res, NULL);
        json_decref(res);
    }
    fork_free(op);
}

static void copy_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct fork_op *op = arg;
    if (err != NULL && !op->failed)
        op->failed = true, op->err = *err;
    if (result != NULL) {
        json_t *info = json_deep_copy(result);
        json_object_del(info, "snapshot_id"); /* the fork's layer is no snapshot of record */
        json_object_set_new(info, "forked_from", json_string(op->source));
        json_array_append_new(op->made, info);
    }
    if (--op->pending == 0)
        fork_finish(op);
}

static void snapped(void *arg, json_t *rec, const struct mcp_error *err)
{
    struct fork_op *op = arg;
    if (err != NULL) {
        op->cb(op->arg, NULL, err);
        fork_free(op);
        return;
    }
    op->rec = json_incref(rec);
    op->pending = op->count + 1; /* held until every copy is started */
    for (int i = 0; i < op->count; i++) {
        struct sandbox_spec spec = {
            .owner = op->owner, .network = op->network, .network_policy = op->policy};
        struct mcp_error e;
        if (local_restore_record(&op->lb->base, &spec, rec, copy_done, op, &e) < 0)
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
    struct fork_op *op = xcalloc(1, sizeof *op);
    op->lb = lb, op->count = (int)n, op->cb = cb, op->arg = arg;
    op->owner = owner ? xstrdup(owner) : NULL;
    op->made = json_array();
    snprintf(op->source, sizeof op->source, "%s", id);
    if (source_network(op, err) < 0 ||
        local_snapshot_take(lb, owner, args, false, snapped, op, err) < 0) {
        fork_free(op);
        return -1;
    }
    return 0;
}
