/* Snapshots of local sandboxes (issue 36; docs/local-backend.md, "Snapshots and forks").
 *
 * A snapshot is the sandbox's writable space (/workspace, /tmp and /root, the data tmpfs) as
 * one tar layer, plus what its create asked for (image, env, limits). It lives in the image
 * store, beside the pulled layers and counted under the same cap (image/snapshot_files.h). */
#ifndef MCPBOX_LOCAL_SNAPSHOT_H
#define MCPBOX_LOCAL_SNAPSHOT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/local/image/snapshot_files.h"
#include "lib/base/error.h"

struct local_backend;

/* ---- the helper process (snapshot_helper.c) ---- */

/* The helper is a fresh exec of the mcpbox executable ("mcpbox __snapshot-helper save|load"),
 * handed to snap_helper_main by mcpbox's main (backends_helper, cli/backends.c). It joins the
 * sandbox's user namespace (fd 3), takes the sandbox's root (fd 4) as its own and, as the
 * sandbox's root, writes the writable space as a tar on stdout (save) or unpacks one from stdin
 * into it (load). A message on stderr and a non-zero exit on failure. */
#define SNAP_HELPER_ARGV1 "__snapshot-helper"
int snap_helper_main(int argc, char **argv);

/* Blocking (a worker thread). Starts the helper on the sandbox whose init is pid (pidfd its
 * descriptor, which proves the pid still names it): "save" writes the layer to out_fd, "load"
 * reads it from in_fd. finish waits for it: 0, or -1 with err carrying the helper's message. */
struct snap_helper {
    int pid;
    int err_fd;
};
int snap_helper_start(int pid, int pidfd, const char *mode, int in_fd, int out_fd,
                      struct snap_helper *h, struct mcp_error *err);
int snap_helper_finish(struct snap_helper *h, struct mcp_error *err);
/* finish's verdict once all of the helper's stderr (msg, len bytes, NUL-terminated) was read and
 * its err_fd closed: for a caller that read it on the loop (local_snapshot_restore.c). */
int snap_helper_result(struct snap_helper *h, const char *msg, size_t len, struct mcp_error *err);
/* What a helper that succeeded writes last on its stderr (then closes it, then exits). */
#define SNAP_HELPER_DONE "\x06"
/* A helper that said it is done, to be reaped by the next snap_helper_refill: 0, or -1 when the
 * list is full (the caller waits for it then). */
int snap_helper_reap_later(int pid);
/* The helper's exec, want[0..4] its fds 0..4 (a forked child; async-signal-safe). */
__attribute__((noreturn)) void snap_helper_exec(const int want[5], const char *mode);
/* The spare helper (snapshot_helper_spare.c): a helper exec'd ahead ("wait" mode) handed this
 * job (io: the tar's pipe end; the fds are the caller's still) and h set; -1 when there is none.
 * refill (blocking: a fork of the server, about 0.6 ms) reaps the helpers that finished and
 * starts a spare if there is none; local_snapshot_refill_later runs it on the threadpool after
 * the answer, off the caller's path. In the spare: its job's fds put in place, 'l' or 's', or
 * -1. */
int snap_helper_take_spare(const char *mode, int io, int pidfd, int root, struct snap_helper *h);
void snap_helper_refill(void);
void local_snapshot_refill_later(struct local_backend *lb);
int snap_helper_wait_job(void);

/* ---- the backend operation (local_snapshot.c) ---- */

int local_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                   backend_cb *cb, void *arg, struct mcp_error *err);
/* create_sandbox {snapshot_id}: the snapshot's image, env and limits under what spec asks,
 * then its layer unpacked into the new sandbox before the reply. */
int local_create_from_snapshot(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb,
                               void *arg, struct mcp_error *err);

/* local_create.c: a create on an OCI image record already resolved (image borrowed). */
int local_create_on_image(struct local_backend *lb, const struct sandbox_spec *spec,
                          json_t *image, backend_cb *cb, void *arg, struct mcp_error *err);
/* The same onto an image record already resolved (image borrowed; NULL: rec's image by name, as
 * create_sandbox {snapshot_id}): a pushed snapshot's, whose own layers are its base. */
int local_restore_onto(struct backend *be, const struct sandbox_spec *spec, json_t *rec,
                       json_t *image, backend_cb *cb, void *arg, struct mcp_error *err);

/* ---- push (local_snapshot_push.c) ----
 * snapshot "push" {snapshot_id, reference} -> {snapshot_id, reference, digest, blobs_uploaded,
 * blobs_present, bytes_uploaded}: the snapshot as an OCI image under reference's tag (push.h),
 * with the person's registry credentials. */
int local_snapshot_push(struct local_backend *lb, const struct snap_files *f, const char *owner,
                        json_t *args, backend_cb *cb, void *arg, struct mcp_error *err);

/* create_sandbox {image} of an image a push made (its config's "snapshot": {layer, image, id}):
 * a restore of that layer (kept in blobs/sha256 by the pull), as create_sandbox {snapshot_id}
 * would, onto the host image ("host") or onto the image's own layers below it (an OCI base,
 * which the push carried). */
void local_create_from_pushed(struct local_backend *lb, const struct sandbox_spec *spec,
                              json_t *image, backend_cb *cb, void *arg);

/* ---- fork (local_fork.c) ----
 * snapshot "fork" {sandbox_id, count, timeout_seconds?} -> {sandbox_id, sandboxes:[info...]}:
 * count new sandboxes from the live one's current files, each with the source's image, env,
 * limits and network (policy included) and a TTL of its own; the source keeps running. All or
 * nothing: if one copy fails, those made are destroyed. The layer is not kept as a snapshot. */
#define LOCAL_FORK_MAX 16
int local_fork(struct local_backend *lb, const char *owner, json_t *args, backend_cb *cb, void *arg,
               struct mcp_error *err);

/* ---- fork's pieces (issue 36's speed: docs/benchmarks.md) ---- */
struct lsbx;
/* A tar of the writable space is about its disk's size; past twice that plus room for many
 * small files' headers, it is holes stored whole (a sandbox's doing). */
#define SNAP_MAX_BYTES(disk) (2 * (disk) + (256ull << 20))
/* Blocking. Freezes sb where the host lets this server (can) and waits for it: true once
 * frozen. thaw undoes it. */
bool local_snapshot_freeze(struct lsbx *sb, bool can);
void local_snapshot_thaw(struct lsbx *sb, bool can);
/* The record a snapshot of sandbox id would have (image, env, limits; state "creating"). */
json_t *local_snapshot_record(struct local_backend *lb, const char *owner, const char *id,
                              const char *name, struct mcp_error *err);
/* create_sandbox with rec's image, env and limits under what spec asks, no layer loaded: a
 * fork's copy, its files to come from fork_stream_run (local_snapshot_restore.c). */
int local_create_copy(struct backend *be, const struct sandbox_spec *spec, json_t *rec,
                      backend_cb *cb, void *arg, struct mcp_error *err);
/* Blocking (a worker thread; local_fork_stream.c): the source's files read once by a save
 * helper, frozen meanwhile, and written into every copy at once by a load helper each, through
 * pipes: no layer file, no hash, the source frozen only while its files are read. 0, or -1 with
 * err (the first cause). */
struct fork_stream {
    struct lsbx *source;
    struct lsbx *copies[LOCAL_FORK_MAX];
    int count;
    bool freeze;        /* the host has a freezer this server may use */
    uint64_t max_bytes; /* SNAP_MAX_BYTES of the source's disk */
    struct mcp_error err;
};
int fork_stream_run(struct fork_stream *fs);

#endif
