/* Where a state directory's runtime directory is (runtime_dir.c makes and checks it; mcpbox
 * doctor only reports it, so the derivation is here, shared, and creates nothing). */
#ifndef MCPBOX_LOCAL_RUNTIME_DIR_H
#define MCPBOX_LOCAL_RUNTIME_DIR_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "lib/base/util.h"

#define LOCAL_RUN_HASH_HEX 16    /* hex digits of sha256(real state dir path) */
#define LOCAL_RUN_FALLBACK "run" /* <state_dir>/run when no tmpfs is usable */

static inline bool local_run_on_tmpfs(const char *path)
{
    struct statfs s;
    return statfs(path, &s) == 0 && s.f_type == TMPFS_MAGIC;
}

/* Where this euid's runtime directories live, on a tmpfs; "" when there is none (1 / 0).
 *  - root: /run/mcpbox-0 (/run is root-only writable), else /dev/shm/mcpbox-0;
 *  - anyone else (/run is not writable): /run/user/<euid>/mcpbox when /run/user/<euid> is a
 *    tmpfs directory of that user with no access for others (what pam_systemd makes, and
 *    $XDG_RUNTIME_DIR names: derived from the uid, not read from the environment, so that two
 *    processes with different environments agree), else /dev/shm/mcpbox-<euid>.
 * /dev/shm is world-writable with the sticky bit, so a directory made there by someone else is
 * refused (local_private_dir), never used. */
static inline int local_run_root(char *root, size_t root_size)
{
    unsigned uid = (unsigned)geteuid();
    char user_run[64];
    struct stat st;
    snprintf(user_run, sizeof user_run, "/run/user/%u", uid);
    if (uid == 0 && local_run_on_tmpfs("/run")) {
        snprintf(root, root_size, "/run/mcpbox-0");
        return 1;
    }
    if (uid != 0 && lstat(user_run, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
        (st.st_mode & 077) == 0 && local_run_on_tmpfs(user_run)) {
        snprintf(root, root_size, "%s/mcpbox", user_run);
        return 1;
    }
    if (local_run_on_tmpfs("/dev/shm")) {
        snprintf(root, root_size, "/dev/shm/mcpbox-%u", uid);
        return 1;
    }
    root[0] = '\0';
    return 0;
}

/* On a tmpfs: root is local_run_root's, out <root>/<hash>, and 1 is returned; else root is "",
 * out <real state dir>/run, and 0. -1 (errno set) if the state directory has no real path. */
static inline int local_runtime_path(const char *state_dir, char *root, size_t root_size,
                                     char *out, size_t size)
{
    char real[PATH_MAX], hash[65];
    if (realpath(state_dir, real) == NULL)
        return -1;
    sha256_hex(real, strlen(real), hash);
    hash[LOCAL_RUN_HASH_HEX] = '\0';
    if (local_run_root(root, root_size)) {
        snprintf(out, size, "%s/%s", root, hash);
        return 1;
    }
    snprintf(out, size, "%s/" LOCAL_RUN_FALLBACK, real);
    return 0;
}

#endif
