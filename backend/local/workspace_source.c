/* A host mount's source directory: what identifies it, and how it is reached again after the
 * create (workspace.h, "a mount's source").
 *
 * The create checks the source on one descriptor and hands the sandbox that descriptor's tree,
 * never a path looked up again. Review and apply come later, perhaps in another process (the
 * CLI, a restarted server), so they cannot hold that descriptor; and a sandbox with an rw mount
 * of a directory above the source can rename things there or plant symlinks meanwhile. So they
 * walk the recorded path again, from the allowed directory, refusing every symlink
 * (RESOLVE_NO_SYMLINKS) and any way out of it (RESOLVE_BENEATH), and then compare what they got
 * with the identity recorded at create: the device, the inode and the file handle, which holds
 * the inode's generation, so an inode number reused by a new directory does not match either.
 * Whatever the sandbox did, the result is the very directory that was checked, or a refusal. */
#include "backend/local/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/base/cleanup.h"

/* The file handle of fd as "type:hex", or "" where its filesystem has none (EOPNOTSUPP). */
static void handle_hex(int fd, char out[LOCAL_WS_HANDLE_HEX])
{
    union {
        struct file_handle fh;
        char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } h;
    int mount_id;
    out[0] = '\0';
    h.fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0)
        return;
    size_t used = (size_t)snprintf(out, LOCAL_WS_HANDLE_HEX, "%d:", h.fh.handle_type);
    for (unsigned i = 0; i < h.fh.handle_bytes && used + 3 <= LOCAL_WS_HANDLE_HEX; i++)
        used += (size_t)snprintf(out + used, LOCAL_WS_HANDLE_HEX - used, "%02x",
                                 (unsigned char)h.fh.f_handle[i]);
}

int local_source_identify(int fd, const char *allow_dir, struct local_mount *m,
                          struct mcp_error *err)
{
    char proc[64];
    struct stat st;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, m->source, sizeof m->source - 1);
    if (n <= 0 || fstat(fd, &st) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mounts[%u].source: cannot resolve it",
                             m->index);
    m->source[n] = '\0';
    /* The real path below the allowed directory (which is a real path itself): the walk that
     * reaches it again then has no symlink to take. */
    size_t an = strlen(allow_dir);
    const char *rel = strcmp(allow_dir, "/") == 0 ? m->source + 1 : m->source + an;
    if (strcmp(allow_dir, "/") != 0 &&
        (strncmp(m->source, allow_dir, an) != 0 || (*rel != '\0' && *rel != '/')))
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "mounts[%u].source resolved to %s, outside the allowed directory %s; "
                             "name a directory inside it",
                             m->index, m->source, allow_dir);
    while (*rel == '/')
        rel++;
    snprintf(m->allow_dir, sizeof m->allow_dir, "%s", allow_dir);
    snprintf(m->rel, sizeof m->rel, "%s", *rel ? rel : ".");
    handle_hex(fd, m->handle);
    m->dev = (uint64_t)st.st_dev;
    m->ino = (uint64_t)st.st_ino;
    return 0;
}

bool local_source_is(int fd, const struct local_mount *m)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || (uint64_t)st.st_dev != m->dev ||
        (uint64_t)st.st_ino != m->ino)
        return false;
    if (m->handle[0] == '\0')
        return true;
    char now[LOCAL_WS_HANDLE_HEX];
    handle_hex(fd, now);
    return strcmp(now, m->handle) == 0;
}

static int open_no_symlinks(int dirfd, const char *path, uint64_t resolve)
{
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | resolve};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int local_source_open(const struct local_mount *m, struct mcp_error *err)
{
    if (m->allow_dir[0] == '\0' || m->rel[0] == '\0' || m->ino == 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the mount of %s at %s was made by an older mcpbox that did not "
                             "record which directory it is, so its changes cannot be applied "
                             "safely; read them with read_file, or create a new sandbox",
                             m->source, m->target);
    cleanup_close int allowed = open_no_symlinks(AT_FDCWD, m->allow_dir, 0);
    int fd = allowed < 0 ? -1 : open_no_symlinks(allowed, m->rel, RESOLVE_BENEATH);
    if (fd >= 0 && local_source_is(fd, m))
        return fd;
    int e = errno;
    if (fd >= 0)
        close(fd);
    char why[LOCAL_WS_PATH_MAX + 64] = "it is not the directory that was mounted";
    if (fd < 0 && (e == ELOOP || e == EXDEV) && allowed >= 0)
        local_source_why_out(allowed, m->rel, false, why, sizeof why);
    else if (fd < 0)
        snprintf(why, sizeof why, "%s", e == ENOENT ? "it is gone" : strerror(e));
    return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                         "the host directory %s, mounted at %s, was moved or replaced since the "
                         "sandbox was created (%s), perhaps by a sandbox that can write above "
                         "it; nothing was read or written there. Put the directory back, or read "
                         "the changes with read_file and write them yourself",
                         m->source, m->target, why);
}

/* A symlink a create may walk through: relative and with no ".." (it stays below the directory
 * it is in), so the one that leads out is further on. */
static bool link_stays_inside(const char *target)
{
    return target[0] != '/' && strncmp(target, "..", 2) != 0 && strstr(target, "/..") == NULL;
}

void local_source_why_out(int dirfd, const char *rel, bool inner_links, char *out, size_t size)
{
    char path[LOCAL_WS_PATH_MAX];
    snprintf(out, size, "the path leads out of its allowed directory");
    if (snprintf(path, sizeof path, "%s", rel) >= (int)sizeof path)
        return;
    if (path[0] == '/') {
        snprintf(out, size, "it is an absolute path, not one below the allowed directory");
        return;
    }
    cleanup_close int at = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    char *save = NULL;
    for (char *c = strtok_r(path, "/", &save); c && at >= 0; c = strtok_r(NULL, "/", &save)) {
        char target[LOCAL_WS_PATH_MAX];
        ssize_t n;
        if (strcmp(c, "..") == 0) {
            snprintf(out, size, "it has a \"..\" (parent directory) component");
            return;
        }
        bool link = (n = readlinkat(at, c, target, sizeof target - 1)) >= 0;
        if (link)
            target[n] = '\0';
        if (link && !(inner_links && link_stays_inside(target))) {
            snprintf(out, size, "\"%s\" on the way is a symlink (to %s)", c, target);
            return;
        }
        int next = openat(at, c, O_PATH | O_DIRECTORY | (link ? 0 : O_NOFOLLOW) | O_CLOEXEC);
        close(at);
        at = next;
    }
}
