/* A small snapshot restored by the new sandbox's own setup (issue 36's speed; docs/benchmarks.md,
 * "Snapshots, restore and fork"): no helper process.
 *
 * The server reads a small layer (its digest checked), parses it with libarchive and checks
 * every entry exactly as the helper does (snap_entry_allowed, set-id bits dropped), into a flat
 * list (snapshot_inline.c). The sandbox's setup child (spawn.c), already the sandbox's root in
 * its user namespace with its mounts made and before any of the sandbox's code exists, writes
 * that list into /workspace, /tmp and /root with system calls only (snapshot_inline_apply.c):
 * every path is walked with openat2 beneath the new root and through no link, so a link the
 * layer made (or a copy-on-write workspace's lower layer holds) is never followed. A failure
 * fails the create, which leaves nothing behind. */
#ifndef MCPBOX_LOCAL_SNAPSHOT_INLINE_H
#define MCPBOX_LOCAL_SNAPSHOT_INLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

/* Bounds of the list (past either the helper restores the layer instead). */
#define SNAP_INLINE_MAX_ENTRIES 4096
#define SNAP_INLINE_MAX_BYTES (1u << 20)

/* One entry, followed by its path (NUL-terminated, cleaned, relative to the new root), its link
 * target (a symlink's, or a hard link's path; NUL-terminated, maybe empty) and its data, the
 * whole padded to 8 bytes. */
struct snap_inline_entry {
    uint32_t type; /* S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, or 0: a hard link */
    uint32_t mode; /* permission bits, set-id dropped as the helper does */
    uint32_t uid, gid;
    int64_t atime_sec, atime_nsec, mtime_sec, mtime_nsec;
    uint32_t path_len, link_len; /* with their NULs */
    uint64_t size;               /* data bytes */
};

struct snap_inline {
    char *buf; /* the entries, back to back */
    size_t len;
    size_t n;
    /* Set by the create that put it into its spawn request (local_create.c): the setup child
     * writes the files. Left false (a pooled sandbox was taken), the helper restores them. */
    bool handed;
};

/* On the loop, libarchive loaded (oci_archive_load). layer (n bytes, its digest checked) into
 * *out: 0; 1 when it exceeds the bounds above or libarchive cannot read it (the helper's
 * stream then decides, with today's errors); -1 with err for an entry no restore takes. */
int snap_inline_build(const char *layer, size_t n, struct snap_inline *out, struct mcp_error *err);
void snap_inline_free(struct snap_inline *s);

/* In the sandbox's setup child, its new root the current directory (system calls only): 0, or
 * -1 with errno, *why a sentence and *failed the path it was writing. */
int snap_inline_apply(const struct snap_inline *s, const char **why, const char **failed);

#endif
