/* The runtime directory: where each sandbox's files that need not outlive a reboot live (its
 * root mount point, agent socket, init and pasta pid files). Sandboxes do not outlive a reboot
 * either. It sits on a tmpfs when one is available, because allocating those inodes on ext4
 * was about a fifth of a cold create once many sandboxes had come and gone (perf, see
 * docs/local-backend.md "Performance"). Logs stay in the state directory, on disk.
 *
 * Every mcpbox process on one state directory must find the same runtime directory, and two
 * state directories must never share one: it is derived from the state directory's real path
 * (sha256): <root>/mcpbox-<euid>/<hash> under the first tmpfs of run_roots, else
 * <state_dir>/run. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "local_internal.h"
#include "mcp/base/util.h"

#define LOCAL_RUN_NAME "mcpbox-"       /* <root>/mcpbox-<euid>/<hash> */
#define LOCAL_RUN_FALLBACK "run"       /* <state_dir>/run when no tmpfs is usable */
#define LOCAL_RUN_HASH_HEX 16          /* hex digits of sha256(real state dir path) */
#define LOCAL_RUN_MODE 0700

/* /run first (root-only writable); /dev/shm is world-writable with the sticky bit, so a
 * directory made there by someone else is refused below, never used. */
static const char *const run_roots[] = {"/run", "/dev/shm"};

static bool on_tmpfs(const char *path)
{
    struct statfs s;
    return statfs(path, &s) == 0 && s.f_type == TMPFS_MAGIC;
}

/* Makes dir (0700) if missing, then refuses anything we would not have made ourselves: a
 * symlink or other non-directory, another owner, any access for group or others. */
int local_private_dir(const char *dir, struct mcp_error *err)
{
    if (mkdir(dir, LOCAL_RUN_MODE) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "runtime directory %s: mkdir", dir);
    struct stat st;
    if (lstat(dir, &st) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "runtime directory %s", dir);
    if (!S_ISDIR(st.st_mode))
        return mcp_error_set(err, MCP_ERR_DENIED, ENOTDIR,
                             "runtime directory %s exists and is not a directory (a symlink?); "
                             "refusing it: remove it", dir);
    if (st.st_uid != geteuid())
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "runtime directory %s belongs to uid %u, not to mcpbox (uid %u); "
                             "refusing it: remove it", dir, (unsigned)st.st_uid,
                             (unsigned)geteuid());
    if ((st.st_mode & 077) != 0)
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "runtime directory %s has mode %03o, not 700; refusing it: remove "
                             "it or chmod 700 it", dir, (unsigned)(st.st_mode & 0777));
    return 0;
}

int local_runtime_dir(const char *state_dir, char *out, size_t size, struct mcp_error *err)
{
    char real[PATH_MAX], hash[65], root[LOCAL_PATH_MAX];
    if (realpath(state_dir, real) == NULL)
        return mcp_error_set(err, MCP_ERR_IO, errno, "state directory %s", state_dir);
    sha256_hex(real, strlen(real), hash);
    hash[LOCAL_RUN_HASH_HEX] = '\0';
    for (size_t i = 0; i < sizeof run_roots / sizeof run_roots[0]; i++) {
        if (!on_tmpfs(run_roots[i]))
            continue;
        snprintf(root, sizeof root, "%s/" LOCAL_RUN_NAME "%u", run_roots[i], (unsigned)geteuid());
        if (local_private_dir(root, err) < 0)
            return -1;
        if ((size_t)snprintf(out, size, "%s/%s", root, hash) >= size)
            return mcp_error_set(err, MCP_ERR_INVALID, 0, "runtime directory path too long");
        return local_private_dir(out, err);
    }
    if ((size_t)snprintf(out, size, "%s/" LOCAL_RUN_FALLBACK, real) >= size)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "state directory path too long: %s", real);
    return local_private_dir(out, err);
}
