/* Named volumes of the local backend (issue 36): storage in mcpbox's state directory that
 * outlives sandboxes and server restarts, shared by the sandboxes of one owner. Internal to the
 * local backend; docs/local-backend.md "Named volumes" describes the design.
 *
 * Layout, per volume (the record, with owner, name and limit, is in the store:
 * lib/store/store_volumes.h):
 *
 *   <state_dir>/volumes/<id>/         mode 0700, the server's; <id> is random, never the name
 *   <state_dir>/volumes/<id>/image    as root: a sparse ext4 image of the size limit
 *   <state_dir>/volumes/<id>/mnt/     as root: where the image is mounted (loop, nosuid,
 *                                     nodev); as a user: a plain directory
 *   <state_dir>/volumes/<id>/mnt/data the volume's root, owned by the owner's uid: what a
 *                                     sandbox mounts (like a host mount whose allowed
 *                                     directory is mnt/)
 *   <state_dir>/volumes/<id>/lock     flock'd while the image is mounted or checked, so that
 *                                     two mcpbox processes never mount one image twice */
#ifndef MCPBOX_LOCAL_VOLUME_H
#define MCPBOX_LOCAL_VOLUME_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "backend/local/local_mounts.h"
#include "lib/base/error.h"

#define LOCAL_VOLUME_DIR "volumes" /* under the state directory */
#define LOCAL_VOLUME_MIN_BYTES (16ull << 20)
#define LOCAL_VOLUME_MAX_BYTES (1ull << 40)
#define LOCAL_VOLUME_DEFAULT_BYTES (1ull << 30)

/* The backend's volume op (backend.h has the shapes). */
int local_volume(struct backend *be, const char *owner, const char *action, json_t *args,
                 backend_cb *cb, void *arg, struct mcp_error *err);

/* 0 if name is a volume name (1 to 63 of letters, digits, '-', '_', '.', starting with a letter
 * or digit, no ".."), else -1 with err saying what a name may be. */
int local_volume_name_check(const char *name, struct mcp_error *err);

/* Mount i of a create names a volume (item: {volume, target, mode, create_if_missing?,
 * size_bytes?}): finds owner's volume (making it when create_if_missing says so and there is
 * none; mounting its image when it is not), checks it may be mounted (writable: rw), and fills
 * wm (wm->m.volume, source, allow_dir, rel, owner ids) the way a host mount is filled. Returns
 * the O_PATH fd of its root, or -1 with err. */
int local_volume_resolve(const struct local_ws_check *c, json_t *item, bool writable, unsigned i,
                         struct local_ws_mount *wm, struct mcp_error *err);

/* ---- the files (volume_fs.c) ---- */
/* How the size limit holds on this host: "ext4 image (loop mount)" as root, LOCAL_VOLUME_WATCHER
 * as a user (volume_guard.c). */
#define LOCAL_VOLUME_WATCHER "usage watcher (read-only at the limit)"
#define LOCAL_VOLUME_WATCHER_NOTE                                                                  \
    "an ordinary user cannot mount a filesystem image, so the volume is a plain directory that "   \
    "mcpbox measures every 0.5 s (less often for one of many files); at its limit (bytes, or one " \
    "entry per 16 KiB) it is made read-only in every sandbox mounting it (a process holding a "   \
    "file there open for writing is killed) until usage falls back: a sandbox can overshoot by "  \
    "what it writes between two measures"
const char *local_volume_enforcement(void);
/* As a user a volume also holds at most one entry per LOCAL_VOLUME_BYTES_PER_ENTRY of its limit
 * (ext4's default inode ratio, which the root mode's image gets), and at most 200,000. */
#define LOCAL_VOLUME_BYTES_PER_ENTRY 16384u
struct local_volume_usage {
    uint64_t bytes;   /* st_blocks of every entry, links counted as links */
    uint64_t entries; /* files, directories, links... */
    bool partial;     /* the walk could not see everything: counted as over the limit */
};
uint64_t local_volume_max_entries(uint64_t limit);
/* Walks the volume's root (no link followed; at most budget entries, then partial). */
int local_volume_fs_walk(const char *vdir, uint64_t budget, struct local_volume_usage *u,
                         struct mcp_error *err);
/* The same walk of the directory fd (closed here), with system calls only (for a child forked
 * from the threaded server). */
void local_volume_walk_fd(int fd, uint64_t budget, struct local_volume_usage *u);
/* At or over the limit (bytes or entries), or not fully seen. */
bool local_volume_over(const struct local_volume_usage *u, uint64_t limit);
/* Makes the volume's directory and root (and, as root, its image, mounted); data owned by
 * uid:gid. -1 with err, leaving nothing behind. */
int local_volume_fs_make(const char *vdir, uint64_t limit, uid_t uid, gid_t gid,
                         struct mcp_error *err);
/* Mounts the image if it is not (as root; nothing as a user). */
int local_volume_fs_ready(const char *vdir, struct mcp_error *err);
/* Bytes used, and available (UINT64_MAX when the filesystem does not say: as a user). Never
 * follows a link the sandboxes planted. */
int local_volume_fs_usage(const char *vdir, uint64_t *used, uint64_t *avail, struct mcp_error *err);
/* Unmounts and removes everything. -1 with err if something stayed. */
int local_volume_fs_remove(const char *vdir, struct mcp_error *err);

/* ---- what a crash left (volume_sweep.c) ---- */
#define LOCAL_VOLUME_PATH_MAX 4200
#define LOCAL_VOLUME_ORPHAN_AGE_S 600 /* a create takes milliseconds; another process may be in one */
struct store;
/* At the backend's start: removes volume directories no record names (older than the age
 * above), logs records whose directory is gone. Never removes a directory a record names. */
void local_volume_sweep(struct store *st, const char *state_dir);

/* ---- the watcher (volume_guard.c): as a user, the limit held from outside the sandboxes ---- */
struct local_backend;
struct local_volume_guard;
/* Starts the watcher (as a user only; NULL as root, where the image holds the limit). */
struct local_volume_guard *local_volume_guard_start(struct local_backend *lb);
/* Stops and frees it (NULL: nothing). Volumes it made read-only stay so in their sandboxes. */
void local_volume_guard_stop(struct local_volume_guard *g);

#endif
