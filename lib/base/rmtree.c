/* rmtree: removes a directory tree, as `rm -rf` would, without a shell (rmtree.h). */
#include "lib/base/rmtree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A directory of ours we may not read (a copy-on-write overlay's work/work is mode 000), made
 * readable (it is going anyway) and opened; -1 if it cannot be. The sandbox's root owns such
 * directories and may swap the name for a symlink at any moment, so the chmod goes through an
 * O_PATH descriptor of the directory itself (its /proc/self/fd link reaches that inode only),
 * never by name, which would follow the symlink; the open is relative to that descriptor too. */
static int open_unreadable_dir(int parent, const char *name)
{
    int path_fd = openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (path_fd < 0)
        return -1;
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", path_fd);
    int fd = -1;
    if (fchmodat(AT_FDCWD, self, 0700, 0) == 0) /* fchmod refuses O_PATH descriptors */
        fd = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(path_fd);
    return fd;
}

/* Removes an emptied directory, or whatever took its name meanwhile that is not one (a symlink
 * is removed itself, never followed). */
static void remove_entry(int parent, const char *name)
{
    if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno == ENOTDIR)
        unlinkat(parent, name, 0);
}

static void rmtree_at(int parent, const char *name)
{
    if (unlinkat(parent, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
        return;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES)
        fd = open_unreadable_dir(parent, name);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        /* An empty directory we may not read (a copy-on-write overlay's work/work, mode 000,
         * of the sandbox's root) can still be removed from a parent we own. */
        remove_entry(parent, name);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            rmtree_at(dirfd(d), e->d_name);
    closedir(d);
    remove_entry(parent, name);
}

int rmtree(const char *dir)
{
    rmtree_at(AT_FDCWD, dir);
    struct stat st;
    return lstat(dir, &st) < 0 && errno == ENOENT ? 0 : -1;
}
