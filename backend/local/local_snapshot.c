/* snapshot_sandbox on the local backend, and create_sandbox {snapshot_id} (snapshot.h;
 * docs/local-backend.md, "Snapshots and forks"). The loop checks and answers; the freeze, the
 * helper and the disk writes run in a libuv worker thread. */
#define LOG_MODULE "local"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/layer_hash.h"
#include "backend/local/image/layer_store.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/snapshot.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define SNAP_FREEZE_WAIT_MS 2000

struct snap_op {
    uv_work_t work;
    struct lsbx *sb; /* referenced while the work runs */
    struct snap_files files;
    json_t *rec; /* the snapshot's record, completed by the work */
    bool freeze; /* the host has a freezer this server may use */
    bool frozen; /* ... and the sandbox was frozen while its files were read */
    uint64_t used, cap; /* the image store's usage before, and its cap */
    uint64_t max_bytes; /* SNAP_MAX_BYTES of the sandbox's disk */
    int rc;
    struct mcp_error err;
    backend_cb *cb;
    void *arg;
};

static void files_of(const struct local_backend *lb, struct snap_files *f)
{
    char dir[LOCAL_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/image-store", lb->state_dir);
    snap_files_init(f, dir);
}

/* cgroup.freeze only asks: the freeze is done when cgroup.events says "frozen 1" (v1:
 * freezer.state FROZEN rather than FREEZING). */
static bool wait_frozen(const struct cg_sandbox *cg)
{
    char path[LOCAL_PATH_MAX + 32], text[512];
    const char *want = cg->v2[0] ? "frozen 1" : "FROZEN";
    snprintf(path, sizeof path, "%s/%s", cg->v2[0] ? cg->v2 : cg->freezer,
             cg->v2[0] ? "cgroup.events" : "freezer.state");
    for (int waited = 0; waited < SNAP_FREEZE_WAIT_MS; waited++) {
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
        text[n > 0 ? n : 0] = '\0';
        if (strstr(text, want) != NULL)
            return true;
        usleep(1000);
    }
    return false;
}

bool local_snapshot_freeze(struct lsbx *sb, bool can)
{
    struct mcp_error ferr;
    return can && cg_freeze(&sb->cg, true, &ferr) == 0 && wait_frozen(&sb->cg);
}

void local_snapshot_thaw(struct lsbx *sb, bool can)
{
    struct mcp_error ferr;
    if (can && cg_freeze(&sb->cg, false, &ferr) < 0)
        log_warn("sandbox %s: thaw after its files were read failed: %s", sb->id, ferr.msg);
}

/* The room left under the image store's cap (pulled layers and snapshots together). */
static int store_room(struct snap_op *op)
{
    struct layer_store s;
    if (layer_store_open(&s, op->sb->be->state_dir, NULL, &op->err) < 0)
        return -1;
    op->used = layer_store_usage(&s);
    op->cap = s.cap_bytes;
    return 0;
}

static int over_cap(struct snap_op *op, uint64_t bytes, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                         "the image store is full (%llu of %llu bytes used, the snapshot needs "
                         "more than %llu): delete snapshots you no longer need (snapshot_sandbox "
                         "delete), run `mcpbox image prune`, or raise " LAYER_STORE_CAP_ENV,
                         (unsigned long long)op->used, (unsigned long long)op->cap,
                         (unsigned long long)bytes);
}

/* The helper's tar from pipe into the layer file, hashed on the way, up to the room under the
 * cap and max_bytes: a sandbox can make its tar far larger than its disk (a sparse file is
 * stored whole), and it stops there, with the pipe closed on the helper. */
static int drain(struct snap_op *op, int from, int to, struct layer_hash *h, uint64_t *bytes,
                 struct mcp_error *err)
{
    static _Thread_local char chunk[256 << 10];
    ssize_t r;
    while ((r = read(from, chunk, sizeof chunk)) > 0 || (r < 0 && errno == EINTR)) {
        if (r <= 0)
            continue;
        *bytes += (uint64_t)r;
        if (op->used + *bytes > op->cap)
            return over_cap(op, *bytes, err);
        if (*bytes > op->max_bytes)
            return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                                 "the snapshot would pass %llu bytes, twice the sandbox's disk: "
                                 "sparse files are stored whole; remove them (or copy the data "
                                 "out) and take the snapshot again",
                                 (unsigned long long)op->max_bytes);
        layer_hash_update(h, chunk, (size_t)r);
        if (write_full(to, chunk, (size_t)r) < 0)
            return mcp_error_set(err, errno == ENOSPC ? MCP_ERR_LIMIT : MCP_ERR_IO, errno,
                                 "cannot store the snapshot (%s); free disk space under the "
                                 "state directory and try again",
                                 strerror(errno));
    }
    return 0;
}

/* The sandbox's files into the layer file fd (frozen meanwhile where the host can). */
static int read_sandbox(struct snap_op *op, int fd, char digest[72], uint64_t *bytes)
{
    struct lsbx *sb = op->sb;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return mcp_error_set(&op->err, MCP_ERR_IO, errno, "pipe");
    op->frozen = local_snapshot_freeze(sb, op->freeze);
    struct snap_helper h;
    int rc = snap_helper_start(sb->pid, sb->pidfd, "save", -1, p[1], &h, &op->err);
    close(p[1]);
    struct layer_hash hash;
    layer_hash_init(&hash);
    struct mcp_error derr = {0};
    int drc = rc == 0 ? drain(op, p[0], fd, &hash, bytes, &derr) : 0;
    close(p[0]); /* a helper stopped early gets EPIPE */
    if (rc == 0)
        rc = snap_helper_finish(&h, &op->err);
    local_snapshot_thaw(sb, op->freeze);
    if (drc < 0) /* the cause: the helper's own failure is its consequence */
        op->err = derr, rc = -1;
    layer_hash_final(&hash, digest);
    return rc;
}

static void create_work(uv_work_t *w)
{
    struct snap_op *op = w->data;
    char tmp[1200], digest[72];
    uint64_t bytes = 0;
    op->rc = -1;
    cleanup_close int fd = snap_files_begin(&op->files, tmp, sizeof tmp, &op->err);
    if (fd < 0)
        return;
    if (store_room(op) < 0 || read_sandbox(op, fd, digest, &bytes) < 0) {
        unlink(tmp);
        return;
    }
    if (snap_files_commit_layer(&op->files, fd, tmp, digest, &op->err) < 0)
        return;
    json_object_set_new(op->rec, "layer", json_string(digest));
    json_object_set_new(op->rec, "size_bytes", json_integer((json_int_t)bytes));
    json_object_set_new(op->rec, "frozen", json_boolean(op->frozen));
    json_object_set_new(op->rec, "state", json_string("ready"));
    op->rc = snap_files_save(&op->files, op->rec, &op->err);
}

/* What a caller sees of a record: everything but the owner. */
static json_t *snap_info(json_t *rec)
{
    json_t *info = json_deep_copy(rec);
    json_object_del(info, "owner");
    return info;
}

static void refill_work(uv_work_t *w)
{
    (void)w;
    snap_helper_refill();
}

static void refill_done(uv_work_t *w, int status)
{
    (void)status;
    free(w);
}

void local_snapshot_refill_later(struct local_backend *lb)
{
    uv_work_t *w = xcalloc(1, sizeof *w);
    if (uv_queue_work(lb->base.loop, w, refill_work, refill_done) < 0)
        free(w); /* the next helper starts cold */
}

static void create_after(uv_work_t *w, int status)
{
    struct snap_op *op = w->data;
    if (status < 0 && op->rc == 0)
        op->rc = mcp_error_set(&op->err, MCP_ERR_INTERNAL, 0, "the snapshot was cancelled");
    if (op->rc == 0) {
        json_t *info = snap_info(op->rec);
        struct mcp_error e;
        local_event(op->sb->be->base.store, op->sb->id, "snapshot",
                    json_pack("{s:O}", "snapshot_id", json_object_get(op->rec, "snapshot_id")), &e);
        op->cb(op->arg, info, NULL);
        json_decref(info);
    } else {
        op->cb(op->arg, NULL, &op->err);
    }
    local_snapshot_refill_later(op->sb->be);
    lsbx_unref(op->sb);
    json_decref(op->rec);
    free(op);
}

/* The new record: what the sandbox was made with, from its store record. */
json_t *local_snapshot_record(struct local_backend *lb, const char *owner, const char *id,
                              const char *name, struct mcp_error *err)
{
    struct store_sandbox rec = {0};
    if (store_sandbox_get(lb->base.store, id, &rec, err) < 0)
        return NULL;
    char snap_id[48], at[32];
    random_id(snap_id, sizeof snap_id, SNAP_ID_PREFIX, 8);
    format_rfc3339_ms(now_wall_ms(), at);
    json_t *r = rec.record;
    json_t *out =
        json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:O?, s:O?, s:O?}", "snapshot_id", snap_id,
                  "owner", owner ? owner : rec.owner, "sandbox_id", id, "name", name, "state",
                  "creating", "created_at", at, "image", json_object_get(r, "image"), "env",
                  json_object_get(r, "env"), "limits", json_object_get(r, "limits"));
    if (json_object_get(out, "name") == NULL)
        json_object_set_new(out, "name", json_null());
    store_sandbox_release(&rec);
    return out;
}

/* A snapshot of the sandbox, recorded and listed; its info to cb. */
static int local_snapshot_take(struct local_backend *lb, const char *owner, json_t *args,
                        backend_cb *cb, void *arg, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(args, "sandbox_id"));
    if (id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "action \"create\" needs sandbox_id");
    struct lsbx *sb = lsbx_for_op(lb, id, false, err);
    if (sb == NULL || oci_archive_load(err) < 0) /* on the loop: also the hash's fast code */
        return -1;
    if (sb->pidfd < 0)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "sandbox %s is not watched by this server; destroy it", id);
    json_t *rec =
        local_snapshot_record(lb, owner, id, json_string_value(json_object_get(args, "name")), err);
    if (rec == NULL)
        return -1;
    struct snap_op *op = xcalloc(1, sizeof *op);
    op->work.data = op, op->sb = sb, op->rec = rec, op->cb = cb, op->arg = arg;
    op->freeze = lb->cg.can_freeze;
    op->max_bytes = SNAP_MAX_BYTES((uint64_t)json_integer_value(
        json_object_get(json_object_get(rec, "limits"), "disk_bytes")));
    files_of(lb, &op->files);
    lsbx_ref(sb);
    if (uv_queue_work(lb->base.loop, &op->work, create_work, create_after) < 0) {
        lsbx_unref(sb);
        json_decref(rec);
        free(op);
        return mcp_error_set(err, MCP_ERR_INTERNAL, 0, "cannot queue the snapshot");
    }
    return 0;
}

static int snap_answer(struct local_backend *lb, json_t *res, backend_cb *cb, void *arg)
{
    backend_defer(&lb->base, cb, arg, res, NULL);
    json_decref(res);
    return 0;
}

static json_t *list_infos(json_t *recs, const char *sandbox_id, const char *state)
{
    json_t *out = json_array();
    size_t i;
    json_t *rec;
    json_array_foreach(recs, i, rec)
    {
        const char *sid = json_string_value(json_object_get(rec, "sandbox_id"));
        const char *st = json_string_value(json_object_get(rec, "state"));
        if ((sandbox_id && (!sid || strcmp(sid, sandbox_id) != 0)) ||
            (state && (!st || strcmp(st, state) != 0)))
            continue;
        json_array_append_new(out, snap_info(rec));
    }
    return out;
}

int local_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                   backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct snap_files f;
    files_of(lb, &f);
    const char *snap_id = json_string_value(json_object_get(args, "snapshot_id"));
    if (strcmp(action, "create") == 0)
        return local_snapshot_take(lb, owner, args, cb, arg, err);
    if (strcmp(action, "fork") == 0)
        return local_fork(lb, owner, args, cb, arg, err);
    if (strcmp(action, "push") == 0)
        return local_snapshot_push(lb, &f, owner, args, cb, arg, err);
    if (strcmp(action, "list") == 0) {
        json_t *recs = snap_files_list(&f, owner);
        json_t *res =
            json_pack("{s:o}", "snapshots",
                      list_infos(recs, json_string_value(json_object_get(args, "sandbox_id")),
                                 json_string_value(json_object_get(args, "state"))));
        json_decref(recs);
        return snap_answer(lb, res, cb, arg);
    }
    if (strcmp(action, "get") != 0 && strcmp(action, "delete") != 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "unknown action \"%s\"; use create, list, get, delete, fork or push",
                             action);
    if (snap_id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "action \"%s\" needs snapshot_id", action);
    json_t *rec = snap_files_load(&f, snap_id, owner, err);
    if (rec == NULL)
        return -1;
    json_t *res = strcmp(action, "get") == 0 ? snap_info(rec) : NULL;
    json_decref(rec);
    if (res == NULL && snap_files_delete(&f, snap_id, err) < 0)
        return -1;
    if (res == NULL)
        res = json_pack("{s:s, s:b}", "snapshot_id", snap_id, "deleted", 1);
    return snap_answer(lb, res, cb, arg);
}
