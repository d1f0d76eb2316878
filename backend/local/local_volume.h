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
/* How the size limit holds on this host: "ext4 image (loop mount)" as root, NULL as a user. */
const char *local_volume_enforcement(void);
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

#endif
