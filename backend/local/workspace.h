/* Host directories mounted into local sandboxes (issue #13): the on-disk layout and how to
 * enumerate a sandbox's mounts. This header is the contract between the create side (allowlist,
 * mounts at create: workspace.c, spawn.c) and the review/apply side (diffs of copy-on-write
 * mounts), which must not guess paths.
 *
 * Layout, per sandbox that has mounts (made at create, removed with the sandbox's other files
 * by local_release_resources):
 *
 *   <state_dir>/workspaces/<id>/                 mode 0700, owned by the server's euid; nothing
 *                                                inside a sandbox can reach it (it is never
 *                                                mounted whole; only <n>/upper and <n>/work are)
 *   <state_dir>/workspaces/<id>/mounts.json      written once, before the sandbox starts:
 *       {"version": 1, "mounts": [
 *          {"index": 0, "source": "/home/me/proj",  host real path (resolved at create)
 *           "target": "/workspace/proj",           absolute path inside the sandbox
 *           "mode": "copy-on-write",               "ro" | "rw" | "copy-on-write"
 *           "owner_uid": 1000, "owner_gid": 1000,  whose files these are: rw writes land as
 *                                                  them, and so must applied changes
 *           "allow_dir": "/home/me", "rel": "proj",  where it was found (a real path below
 *                                                  the allowed directory), and what it is:
 *           "dev": 2049, "ino": 1234, "handle": "1:0a..",  (workspace_source.c)
 *           "upper": "<state_dir>/workspaces/<id>/0/upper",   copy-on-write only
 *           "work":  "<state_dir>/workspaces/<id>/0/work"},   copy-on-write only
 *          ...]}
 *   <state_dir>/workspaces/<id>/<index>/upper    overlayfs upper layer of mount <index>: what
 *                                                the sandbox changed (live while it runs)
 *   <state_dir>/workspaces/<id>/<index>/work     overlayfs work dir (never read it)
 *
 * The same list is in the sandbox's store record as "mounts" (without upper/work), shown by
 * get_sandbox; mounts.json is what survives a server restart next to the upper dirs and is the
 * one to read here (local_workspace_load). A sandbox without mounts has no directory at all.
 *
 * Reading an upper dir (the overlay is mounted inside the sandbox with the "userxattr" option,
 * no redirect_dir, no metacopy, no index):
 *  - a file or symlink in upper = added or modified (compare with the same path under source);
 *  - a deleted path is a whiteout: a character device 0:0 (st_rdev == 0) of the same name;
 *  - a directory with the xattr "user.overlay.opaque" = "y" replaced the source's directory of
 *    the same name (its source contents are hidden, not merged);
 *  - a directory in upper without that xattr is merged: recurse.
 *  - owners in upper: as root, host uid = the sandbox's "uid_base" (record) + uid inside; as an
 *    ordinary user, everything in upper has that user's uid (commands of a sandbox with a
 *    writable mount run as the user's own uid there, and the overlay is mounted with it as
 *    effective uid: docs/security.md; in single-uid mode the user is the sandbox's root), while
 *    overlayfs's own entries (whiteouts) may carry the subordinate root's gid.
 *  - the sandbox writes upper while it runs: open everything in it with O_NOFOLLOW / openat
 *    walks that never follow a symlink the sandbox planted.
 */
#ifndef MCPBOX_LOCAL_WORKSPACE_H
#define MCPBOX_LOCAL_WORKSPACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

#define LOCAL_WS_DIR "workspaces"   /* under the state directory */
#define LOCAL_WS_META "mounts.json" /* in <state_dir>/workspaces/<id>/ */
#define LOCAL_WS_PATH_MAX 4096
#define LOCAL_WS_MAX_MOUNTS 16      /* per sandbox */
#define LOCAL_WS_HANDLE_HEX 300     /* "type:" + 2 * MAX_HANDLE_SZ hex digits + NUL */

enum local_mount_mode { LOCAL_MOUNT_RO, LOCAL_MOUNT_RW, LOCAL_MOUNT_COW };

struct local_mount {
    unsigned index;
    enum local_mount_mode mode;
    char source[LOCAL_WS_PATH_MAX]; /* host real path (shown; never opened by this path) */
    char target[LOCAL_WS_PATH_MAX]; /* inside the sandbox, absolute */
    uint32_t owner_uid, owner_gid;  /* the person whose files these are */
    char upper[LOCAL_WS_PATH_MAX];  /* copy-on-write only, else "" */
    char work[LOCAL_WS_PATH_MAX];
    /* Which directory it is (workspace_source.c): the allowed directory it was found under, its
     * real path below that, and its identity when it was checked. */
    char allow_dir[LOCAL_WS_PATH_MAX];
    char rel[LOCAL_WS_PATH_MAX];      /* "." for the allowed directory itself */
    char handle[LOCAL_WS_HANDLE_HEX]; /* name_to_handle_at, "type:hex"; "" if unsupported */
    uint64_t dev, ino;
    char volume[64]; /* a named volume's name (local_volume.h), "" for a host directory */
};

/* "ro", "rw", "copy-on-write"; -1 for anything else. */
int local_mount_mode_parse(const char *s);
const char *local_mount_mode_name(enum local_mount_mode m);

/* <state_dir>/workspaces/<id> (out: LOCAL_WS_PATH_MAX bytes). */
void local_workspace_dir(const char *state_dir, const char *sandbox_id, char *out);

/* The mounts of a sandbox, from <state_dir>/workspaces/<id>/mounts.json. *out is malloc'd
 * (free it); *n = 0 and *out = NULL when the sandbox has no mounts (no file). -1 with err on a
 * file that exists but cannot be read or parsed. */
int local_workspace_load(const char *state_dir, const char *sandbox_id, struct local_mount **out,
                         size_t *n, struct mcp_error *err);

/* ---- a mount's source (workspace_source.c) ----
 * A source is checked once, at create, on one descriptor (workspace.c), and that descriptor is
 * what the sandbox gets. Later (review, apply, maybe in another process after a restart) the
 * directory is reached again only by a walk from the allowed directory that follows no symlink
 * at all, and the result is used only if it is the very directory that was checked: its file
 * handle (inode and generation) and device match the ones recorded. */

/* Fills m's allow_dir, rel, handle, dev, ino and source from the checked descriptor fd. */
int local_source_identify(int fd, const char *allow_dir, struct local_mount *m,
                          struct mcp_error *err);
/* True if fd is the directory m records (device, inode and, where known, file handle). */
bool local_source_is(int fd, const struct local_mount *m);
/* The recorded directory as an O_PATH descriptor, or -1 with err saying that it moved, was
 * replaced or is gone (nothing is read or written then). */
int local_source_open(const struct local_mount *m, struct mcp_error *err);
/* Why walking rel from the allowed directory dirfd left it: names the ".." or the symlink
 * found (out: a sentence fragment such as "\"..\" (a parent directory)" or "x is a symlink to
 * /etc"). inner_links: walk through symlinks that stay where they are (a create may), to name
 * the one that leads out; else the first symlink is the culprit (a recorded real path has
 * none). */
void local_source_why_out(int dirfd, const char *rel, bool inner_links, char *out, size_t size);

/* The copy-on-write mount of a sandbox that contains `path` (a path inside the sandbox), or
 * NULL; *rel gets the path relative to its target ("" for the target itself). */
const struct local_mount *local_workspace_find(const struct local_mount *m, size_t n,
                                               const char *path, const char **rel);

#endif
