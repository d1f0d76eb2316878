/* The runtime directory: where each sandbox's files that need not outlive a reboot live (its
 * root mount point, agent socket, init and pasta pid files). Sandboxes do not outlive a reboot
 * either. It sits on a tmpfs when one is available, because allocating those inodes on ext4
 * was about a fifth of a cold create once many sandboxes had come and gone (perf, see
 * docs/local-backend.md "Performance"). Logs stay in the state directory, on disk.
 *
 * Every mcpbox process on one state directory must find the same runtime directory, and two
 * state directories must never share one: it is derived from the state directory's real path
 * (sha256): <tmpfs>/mcpbox-<euid>/<hash> on the first tmpfs of /run, /dev/shm, else
 * <state_dir>/run. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/local_limits.h"
#include "backend/local/local_egress.h"
#include "runtime_dir.h"

#define LOCAL_RUN_MODE 0700

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
    char root[LOCAL_PATH_MAX];
    int on_tmpfs = local_runtime_path(state_dir, root, sizeof root, out, size);
    if (on_tmpfs < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "state directory %s", state_dir);
    if (strlen(out) + 1 >= size)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "runtime directory path too long: %s", out);
    if (on_tmpfs && local_private_dir(root, err) < 0)
        return -1;
    return local_private_dir(out, err);
}
