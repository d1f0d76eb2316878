/* Where a state directory's runtime directory is (runtime_dir.c makes and checks it; mcpbox
 * doctor only reports it, so the derivation is here, shared, and creates nothing). */
#ifndef MCPBOX_LOCAL_RUNTIME_DIR_H
#define MCPBOX_LOCAL_RUNTIME_DIR_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "mcp/base/util.h"

#define LOCAL_RUN_HASH_HEX 16    /* hex digits of sha256(real state dir path) */
#define LOCAL_RUN_FALLBACK "run" /* <state_dir>/run when no tmpfs is usable */

static inline bool local_run_on_tmpfs(const char *path)
{
    struct statfs s;
    return statfs(path, &s) == 0 && s.f_type == TMPFS_MAGIC;
}

/* /run first (root-only writable); /dev/shm is world-writable with the sticky bit, so a
 * directory made there by someone else is refused, never used. On a tmpfs: root gets
 * <tmpfs>/mcpbox-<euid>, out <root>/<hash>, and 1 is returned; else root is "", out
 * <real state dir>/run, and 0. -1 (errno set) if the state directory has no real path. */
static inline int local_runtime_path(const char *state_dir, char *root, size_t root_size,
                                     char *out, size_t size)
{
    static const char *const tmpfs_roots[] = {"/run", "/dev/shm"};
    char real[PATH_MAX], hash[65];
    if (realpath(state_dir, real) == NULL)
        return -1;
    sha256_hex(real, strlen(real), hash);
    hash[LOCAL_RUN_HASH_HEX] = '\0';
    for (size_t i = 0; i < sizeof tmpfs_roots / sizeof tmpfs_roots[0]; i++) {
        if (!local_run_on_tmpfs(tmpfs_roots[i]))
            continue;
        snprintf(root, root_size, "%s/mcpbox-%u", tmpfs_roots[i], (unsigned)geteuid());
        snprintf(out, size, "%s/%s", root, hash);
        return 1;
    }
    root[0] = '\0';
    snprintf(out, size, "%s/" LOCAL_RUN_FALLBACK, real);
    return 0;
}

#endif
