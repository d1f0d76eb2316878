/* Snapshots of local sandboxes (issue 36; docs/local-backend.md, "Snapshots and forks").
 *
 * A snapshot is the sandbox's writable space (/workspace, /tmp and /root, the data tmpfs) as
 * one tar layer, plus what its create asked for (image, env, limits). It lives in the image
 * store (layer_store.h), beside the pulled layers and counted under the same cap:
 *
 *   blobs/sha256/<hex>       the layer, content addressed: identical snapshots share it
 *   snapshots/<id>.json      {snapshot_id, owner, sandbox_id, name, state, created_at,
 *                             layer, size, image, env, limits, frozen}
 *
 * Both are written aside, fsynced and renamed into place: a record is listed only once its
 * layer is complete, so no half-written snapshot is ever "ready". */
#ifndef MCPBOX_LOCAL_SNAPSHOT_H
#define MCPBOX_LOCAL_SNAPSHOT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

struct local_backend;
#include "lib/base/error.h"

#define SNAP_ID_PREFIX "snap-"

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

/* ---- the records and layers (snapshot_files.c); blocking, small ---- */

struct snap_files {
    char dir[1024]; /* <image store> */
};

void snap_files_init(struct snap_files *f, const char *store_dir);
/* A new tmp file for a layer under way (path into tmp, fd returned), or -1 with err. */
int snap_files_begin(const struct snap_files *f, char *tmp, size_t size, struct mcp_error *err);
/* fsyncs fd, renames tmp to blobs/sha256/<hex of digest> (an identical one there already is
 * kept, ours dropped). */
int snap_files_commit_layer(const struct snap_files *f, int fd, const char *tmp, const char *digest,
                            struct mcp_error *err);
/* Writes snapshots/<id>.json aside, fsyncs, renames. */
int snap_files_save(const struct snap_files *f, json_t *rec, struct mcp_error *err);
/* The record of id if owner may see it (owner NULL: anyone), else NULL with MCP_ERR_NOT_FOUND. */
json_t *snap_files_load(const struct snap_files *f, const char *id, const char *owner,
                        struct mcp_error *err);
/* Every record owner may see, newest first. */
json_t *snap_files_list(const struct snap_files *f, const char *owner);
/* Removes the record, and its layer when no other record names it. */
int snap_files_delete(const struct snap_files *f, const char *id, struct mcp_error *err);
/* The layer's path, opened read-only (-1 with err if it is missing). */
int snap_files_open_layer(const struct snap_files *f, const char *digest, struct mcp_error *err);
/* Bytes of every stored layer, and layers no record names removed ({removed, freed_bytes}). */
uint64_t snap_files_usage(const struct snap_files *f);
json_t *snap_files_prune(const struct snap_files *f);

/* ---- the backend operation (local_snapshot.c) ---- */

int local_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                   backend_cb *cb, void *arg, struct mcp_error *err);
/* create_sandbox {snapshot_id}: the snapshot's image, env and limits under what spec asks,
 * then its layer unpacked into the new sandbox before the reply. */
int local_create_from_snapshot(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb,
                               void *arg, struct mcp_error *err);
/* The same from a record in hand (rec borrowed): a fork's, which is never saved. */
int local_restore_record(struct backend *be, const struct sandbox_spec *spec, json_t *rec,
                         backend_cb *cb, void *arg, struct mcp_error *err);

/* ---- fork (local_fork.c) ----
 * snapshot "fork" {sandbox_id, count, timeout_seconds?} -> {sandbox_id, sandboxes:[info...]}:
 * count new sandboxes from the live one's current files, each with the source's image, env,
 * limits and network (policy included) and a TTL of its own; the source keeps running. All or
 * nothing: if one copy fails, those made are destroyed. The layer is not kept as a snapshot. */
#define LOCAL_FORK_MAX 16
int local_fork(struct local_backend *lb, const char *owner, json_t *args, backend_cb *cb, void *arg,
               struct mcp_error *err);
/* For local_fork: a snapshot of the sandbox without a record (keep false), its info to cb. */
int local_snapshot_take(struct local_backend *lb, const char *owner, json_t *args, bool keep,
                        backend_cb *cb, void *arg, struct mcp_error *err);
/* Removes a layer no record names (a fork's, once its copies are made). */
void snap_files_drop_layer(const struct snap_files *f, const char *digest);

#endif
