/* create_sandbox {snapshot_id} on the local backend (snapshot.h): a create like any other with
 * the snapshot's image, env and limits (what the call names wins), then the snapshot's layer
 * unpacked into the new sandbox's writable space by the helper before the reply. A restore that
 * fails destroys the sandbox it made: the caller gets an error, never a half-restored sandbox.
 * Processes are not restored: the new sandbox starts with no command running. */
#define LOG_MODULE "local"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/layer_hash.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/snapshot.h"
#include "backend/local/snapshot_inline.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

struct restore_op {
    uv_work_t work;
    struct local_backend *lb;
    struct snap_files files;
    json_t *rec;     /* the snapshot's record */
    json_t *env;     /* the snapshot's env under the call's */
    json_t *reply;   /* the create's sandbox info */
    struct lsbx *sb; /* the new sandbox, referenced while the work runs */
    bool load;       /* unpack the layer (a fork's copy: no, fork_stream_run writes it) */
    /* a small layer restored from the loop (restore_small): its helper and what it said */
    struct snap_helper helper;
    uv_poll_t said;
    char msg[1024];
    size_t msg_len;
    /* a small layer written by the new sandbox's setup itself (snapshot_inline.h) */
    struct snap_inline files_inline;
    int rc;
    struct mcp_error err;
    backend_cb *cb;
    void *arg;
};

static void restore_free(struct restore_op *op)
{
    json_decref(op->rec), json_decref(op->env), json_decref(op->reply);
    snap_inline_free(&op->files_inline);
    free(op);
}

/* The layer into the helper, hashed on the way: a layer damaged in the store (a tar has no
 * checksum over file data) is caught by its digest, and the sandbox then destroyed. */
static void feed(int from, int to, struct layer_hash *h)
{
    static _Thread_local char chunk[256 << 10];
    ssize_t r;
    while ((r = read(from, chunk, sizeof chunk)) > 0 || (r < 0 && errno == EINTR)) {
        if (r <= 0)
            continue;
        layer_hash_update(h, chunk, (size_t)r);
        if (write_full(to, chunk, (size_t)r) < 0)
            return; /* the helper stopped reading: its message says why */
    }
}

static void restore_work(uv_work_t *w)
{
    struct restore_op *op = w->data;
    const char *digest = json_string_value(json_object_get(op->rec, "layer"));
    cleanup_close int fd = snap_files_open_layer(&op->files, digest, &op->err);
    cleanup_close int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int p[2] = {-1, -1};
    struct snap_helper h;
    op->rc = -1;
    if (fd < 0 || null < 0 || pipe2(p, O_CLOEXEC) < 0 ||
        snap_helper_start(op->sb->pid, op->sb->pidfd, "load", p[0], null, &h, &op->err) < 0) {
        if (p[0] >= 0)
            close(p[0]), close(p[1]);
        return;
    }
    close(p[0]);
    struct layer_hash hash;
    char got[72];
    layer_hash_init(&hash);
    feed(fd, p[1], &hash);
    close(p[1]);
    layer_hash_final(&hash, got);
    op->rc = snap_helper_finish(&h, &op->err);
    if (op->rc == 0 && strcmp(got, digest) != 0)
        op->rc = mcp_error_set(&op->err, MCP_ERR_BACKEND, 0,
                               "the snapshot's layer is damaged (its bytes no longer match %s); "
                               "delete the snapshot and take it again",
                               digest);
}

static void ignore_destroyed(void *arg, json_t *result, const struct mcp_error *err)
{
    (void)arg, (void)result;
    if (err != NULL)
        log_warn("a sandbox whose restore failed was not destroyed: %s", err->msg);
}

static void restore_done(struct restore_op *op)
{
    struct mcp_error e;
    if (op->rc < 0 && local_destroy(&op->lb->base, op->sb->id, ignore_destroyed, NULL, &e) < 0)
        log_warn("sandbox %s: not destroyed after its failed restore: %s", op->sb->id, e.msg);
    if (op->rc == 0) {
        json_object_set(op->reply, "snapshot_id", json_object_get(op->rec, "snapshot_id"));
        op->cb(op->arg, op->reply, NULL);
        /* after the reply, as a create's own event, before the loop runs anything else */
        local_event(op->lb->base.store, op->sb->id, "restored",
                    json_pack("{s:O}", "snapshot_id", json_object_get(op->rec, "snapshot_id")), &e);
    } else {
        op->cb(op->arg, NULL, &op->err);
    }
    if (!op->files_inline.handed) /* else no helper was used */
        local_snapshot_refill_later(op->lb);
    lsbx_unref(op->sb);
    restore_free(op);
}

static void restore_after(uv_work_t *w, int status)
{
    struct restore_op *op = w->data;
    if (status < 0 && op->rc == 0)
        op->rc = mcp_error_set(&op->err, MCP_ERR_INTERNAL, 0, "the restore was cancelled");
    restore_done(op);
}

/* ---- a small layer, from the loop ----
 * A layer that fits in a pipe is read, checked against its digest and written into the
 * helper's pipe at once, and the helper's answer is awaited on the loop: no worker thread, so
 * two wakeups fewer (the worker's, and the loop's when it is done), and a damaged layer is
 * refused before any file is written. Larger layers stream through a worker (restore_work). */
#define RESTORE_SMALL_MAX (256u << 10)

static void said_closed(uv_handle_t *h)
{
    struct restore_op *op = h->data;
    close(op->helper.err_fd);
    op->msg[op->msg_len] = '\0';
    op->rc = snap_helper_result(&op->helper, op->msg, op->msg_len, &op->err);
    restore_done(op);
}

static void on_said(uv_poll_t *p, int status, int events)
{
    struct restore_op *op = p->data;
    (void)events;
    ssize_t r = 0;
    while (status == 0 && op->msg_len < sizeof op->msg - 1 &&
           (r = read(op->helper.err_fd, op->msg + op->msg_len, sizeof op->msg - 1 - op->msg_len)) >
               0)
        op->msg_len += (size_t)r;
    if (status == 0 && r < 0 && (errno == EAGAIN || errno == EINTR))
        return; /* more to come */
    uv_poll_stop(p);
    uv_close((uv_handle_t *)p, said_closed); /* the end of its stderr: it is done or gone */
}

static ssize_t read_all(int fd, char *buf, size_t max)
{
    size_t n = 0;
    ssize_t r = 0;
    while (n < max && ((r = read(fd, buf + n, max - n)) > 0 || (r < 0 && errno == EINTR)))
        n += r > 0 ? (size_t)r : 0;
    return r < 0 ? -1 : (ssize_t)n;
}

/* The whole layer (at most RESTORE_SMALL_MAX) into buf, checked: its size, or -1 with op->err
 * (a damaged layer), or -2: not small, stream it. */
static ssize_t read_small(struct restore_op *op, int fd, char *buf)
{
    const char *digest = json_string_value(json_object_get(op->rec, "layer"));
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size > (off_t)RESTORE_SMALL_MAX)
        return -2;
    ssize_t n = read_all(fd, buf, (size_t)st.st_size + 1);
    if (n != (ssize_t)st.st_size)
        return -2; /* changed under us: the stream's own check decides */
    struct layer_hash hash;
    char got[72];
    layer_hash_init(&hash);
    layer_hash_update(&hash, buf, (size_t)n);
    layer_hash_final(&hash, got);
    if (strcmp(got, digest) != 0)
        return mcp_error_set(&op->err, MCP_ERR_BACKEND, 0,
                             "the snapshot's layer is damaged (its bytes no longer match %s); "
                             "delete the snapshot and take it again",
                             digest);
    return n;
}

/* The helper on the new sandbox with the layer already in its pipe: 0, or -1 with op->err. */
static int start_small(struct restore_op *op, const char *buf, size_t n)
{
    cleanup_close int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int p[2];
    if (null < 0 || pipe2(p, O_CLOEXEC) < 0)
        return mcp_error_set(&op->err, MCP_ERR_IO, errno, "cannot make a pipe for the restore");
    /* room for all of it: the write below must not block the loop (default 64 KiB) */
    if ((n > 0 && fcntl(p[1], F_SETPIPE_SZ, (int)n) < (int)n) || write_full(p[1], buf, n) < 0) {
        close(p[0]), close(p[1]);
        return 1; /* stream it instead */
    }
    close(p[1]);
    int rc =
        snap_helper_start(op->sb->pid, op->sb->pidfd, "load", p[0], null, &op->helper, &op->err);
    close(p[0]);
    return rc;
}

/* 0: the restore goes on from the loop (restore_done will answer); 1: not small, stream it. */
static int restore_small(struct restore_op *op)
{
    const char *digest = json_string_value(json_object_get(op->rec, "layer"));
    struct mcp_error e;
    cleanup_close int fd = snap_files_open_layer(&op->files, digest, &e);
    cleanup_free char *buf = fd >= 0 ? xmalloc(RESTORE_SMALL_MAX + 1) : NULL;
    ssize_t n = fd >= 0 ? read_small(op, fd, buf) : -2;
    int rc = n == -2 ? 1 : n < 0 ? -1 : start_small(op, buf, (size_t)n);
    if (rc == 0 && (fcntl(op->helper.err_fd, F_SETFL, O_NONBLOCK) < 0 ||
                    uv_poll_init(op->lb->base.loop, &op->said, op->helper.err_fd) < 0)) {
        op->rc = snap_helper_finish(&op->helper, &op->err); /* wait for it here, then */
        restore_done(op);
        return 0;
    }
    if (rc != 0) {
        if (rc < 0)
            op->rc = -1, restore_done(op);
        return rc < 0 ? 0 : 1;
    }
    op->said.data = op;
    uv_poll_start(&op->said, UV_READABLE | UV_DISCONNECT, on_said);
    return 0;
}

static void created(void *arg, json_t *result, const struct mcp_error *err)
{
    struct restore_op *op = arg;
    const char *id = json_string_value(json_object_get(result, "sandbox_id"));
    struct lsbx *sb = err == NULL && id ? lsbx_find(op->lb, id) : NULL;
    if (sb == NULL || sb->pidfd < 0) {
        struct mcp_error e;
        if (err == NULL)
            mcp_error_set(&e, MCP_ERR_BACKEND, 0, "the restored sandbox ended at once; try again");
        op->cb(op->arg, NULL, err ? err : &e);
        restore_free(op);
        return;
    }
    if (!op->load) {
        op->cb(op->arg, result, NULL);
        restore_free(op);
        return;
    }
    op->reply = json_incref(result);
    op->sb = sb;
    lsbx_ref(sb);
    if (op->files_inline.handed) { /* its setup wrote the files before the agent started */
        op->rc = 0;
        restore_done(op);
        return;
    }
    if (restore_small(op) == 0)
        return;
    op->work.data = op;
    if (uv_queue_work(op->lb->base.loop, &op->work, restore_work, restore_after) < 0) {
        op->rc = mcp_error_set(&op->err, MCP_ERR_INTERNAL, 0, "cannot queue the restore");
        restore_after(&op->work, 0);
    }
}

static uint64_t limit_of(json_t *rec, const char *key)
{
    return (uint64_t)json_integer_value(json_object_get(json_object_get(rec, "limits"), key));
}

/* spec with the snapshot's image, env and limits where the call names none. */
static void spec_from_snapshot(struct sandbox_spec *s, struct restore_op *op)
{
    json_t *limits = json_object_get(op->rec, "limits");
    s->snapshot_id = NULL;
    s->image = json_string_value(json_object_get(op->rec, "image"));
    op->env = json_deep_copy(json_object_get(op->rec, "env"));
    if (!json_is_object(op->env))
        json_decref(op->env), op->env = json_object();
    if (json_is_object(s->env))
        json_object_update(op->env, s->env);
    s->env = op->env;
    if (s->cpu <= 0)
        s->cpu = json_number_value(json_object_get(limits, "cpu"));
    if (s->memory_bytes == 0)
        s->memory_bytes = limit_of(op->rec, "memory_bytes");
    if (s->disk_bytes == 0)
        s->disk_bytes = limit_of(op->rec, "disk_bytes");
    if (s->pids == 0)
        s->pids = (uint32_t)limit_of(op->rec, "pids");
}

/* A small layer for the new sandbox's setup to write (snapshot_inline.h), read and checked
 * before the create: 0 (op->files_inline set, or not: the helper then restores it), or -1 with
 * err (a damaged layer, or an entry no restore takes: refused before any sandbox is made). */
static int prepare_inline(struct restore_op *op, struct mcp_error *err)
{
    const char *digest = json_string_value(json_object_get(op->rec, "layer"));
    struct mcp_error e;
    cleanup_close int fd = snap_files_open_layer(&op->files, digest, &e);
    cleanup_free char *buf = fd >= 0 ? xmalloc(RESTORE_SMALL_MAX + 1) : NULL;
    ssize_t n = fd >= 0 ? read_small(op, fd, buf) : -2;
    if (n == -1) {
        mcp_error_copy(err, &op->err);
        return -1;
    }
    return n < 0 ? 0 : snap_inline_build(buf, (size_t)n, &op->files_inline, err) < 0 ? -1 : 0;
}

static int restore_start(struct backend *be, const struct sandbox_spec *spec, json_t *rec,
                         json_t *image, bool load, backend_cb *cb, void *arg,
                         struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct restore_op *op = xcalloc(1, sizeof *op);
    char dir[LOCAL_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/image-store", lb->state_dir);
    snap_files_init(&op->files, dir);
    op->rec = json_incref(rec);
    op->lb = lb, op->cb = cb, op->arg = arg, op->load = load;
    if (oci_archive_load(err) < 0) { /* on the loop: it also gives the hash its fast code */
        restore_free(op);
        return -1;
    }
    if (load && prepare_inline(op, err) < 0) {
        restore_free(op);
        return -1;
    }
    struct sandbox_spec s = *spec;
    spec_from_snapshot(&s, op);
    s.local_restore = op->files_inline.buf ? &op->files_inline : NULL;
    if ((image ? local_create_on_image(lb, &s, image, created, op, err)
               : local_create(be, &s, created, op, err)) < 0) {
        restore_free(op);
        return -1;
    }
    return 0;
}

int local_create_from_snapshot(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb,
                               void *arg, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct snap_files f;
    char dir[LOCAL_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/image-store", lb->state_dir);
    snap_files_init(&f, dir);
    json_t *rec = snap_files_load(&f, spec->snapshot_id, spec->owner, err);
    if (rec == NULL)
        return -1;
    int rc = restore_start(be, spec, rec, NULL, true, cb, arg, err);
    json_decref(rec);
    return rc;
}

int local_create_copy(struct backend *be, const struct sandbox_spec *spec, json_t *rec,
                      backend_cb *cb, void *arg, struct mcp_error *err)
{
    return restore_start(be, spec, rec, NULL, false, cb, arg, err);
}

int local_restore_onto(struct backend *be, const struct sandbox_spec *spec, json_t *rec,
                       json_t *image, backend_cb *cb, void *arg, struct mcp_error *err)
{
    return restore_start(be, spec, rec, image, true, cb, arg, err);
}
