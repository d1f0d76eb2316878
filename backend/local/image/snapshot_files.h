/* Snapshot records and layers in the image store (backend/local/snapshot.h says what a
 * snapshot is). Here: the files, in the image store's library so that its usage, listing and
 * prune count them.
 *
 *   blobs/sha256/<hex>       a snapshot's layer (a plain tar), content addressed
 *   snapshots/<id>.json      {snapshot_id, owner, sandbox_id, name, state, created_at, layer,
 *                             size_bytes, image, env, limits, frozen}
 *
 * Both are written aside, fsynced and renamed into place: a record is listed only once its
 * layer is complete, so no half-written snapshot is ever "ready". */
#ifndef MCPBOX_IMAGE_SNAPSHOT_FILES_H
#define MCPBOX_IMAGE_SNAPSHOT_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

#define SNAP_ID_PREFIX "snap-"
/* What a snapshot holds: these directories of the sandbox's root (its data tmpfs). */
#define SNAP_DIRS                                                                                  \
    {                                                                                              \
        "workspace", "tmp", "root"                                                                 \
    }

/* An entry of a snapshot's layer may be restored (snapshot_entry.c): a directory, regular file,
 * symlink or FIFO (type: AE_IF*; 0 for a hard link, as a tar's reads back), named below one of SNAP_DIRS (or one of them) without ".." or
 * a leading "/", a hard link's target (hardlink, or NULL) likewise. A layer is hostile input:
 * the sandbox that made it chose every name. */
bool snap_entry_allowed(const char *name, unsigned type, const char *hardlink);
/* The mode an allowed entry is restored with: setuid and setgid dropped but on a directory. */
unsigned snap_entry_mode(unsigned type, unsigned mode);
/* What a restore says of an entry snap_entry_allowed refuses (then its name). */
#define SNAP_ENTRY_REFUSED                                                                         \
    "the snapshot has an entry outside /workspace, /tmp and /root, or of a kind not restored; "    \
    "delete that snapshot"
/* What a restore says when the files do not fit in the new sandbox's disk. */
#define SNAP_NO_ROOM                                                                               \
    "the snapshot's files do not fit in the new sandbox's disk: give create_sandbox a larger "     \
    "disk (or leave disk out for the snapshot's)"

/* Blocking, small. */
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
/* Bytes of every stored layer; and layers no record names, older than ten minutes (a crash's;
 * a younger one may be a fork's at work), removed ({removed, freed_bytes}). */
uint64_t snap_files_usage(const struct snap_files *f);
json_t *snap_files_prune(const struct snap_files *f);

/* A pushed snapshot's layer as a pull downloaded it (fd: its O_TMPFILE, digest verified),
 * linked into blobs/sha256/<hex> for the restore that follows (one there already is kept). */
int snap_files_keep_pulled(const struct snap_files *f, int fd, const char *digest,
                           struct mcp_error *err);

/* Removes a layer no record names (a fork's, once its copies are made). */
void snap_files_drop_layer(const struct snap_files *f, const char *digest);

#endif
