/* The files of a named volume (layout in local_volume.h), and how its size limit holds.
 *
 * As root the volume is an ext4 filesystem in a sparse image file of the limit's size, mounted
 * by mcpbox (loop, nosuid, nodev) under the volume's directory: the kernel refuses a write past
 * the limit with ENOSPC, to every sandbox sharing it, and its size is the filesystem's own
 * count (statfs), never a walk of what the sandboxes wrote. An ordinary user cannot mount a
 * filesystem image, so there the volume is a plain directory, the limit is not enforced while
 * sandboxes write, and the size is a walk that follows no symlink (volume.c refuses a writable
 * mount of a volume at its limit: a soft check, named so). */
#include <dirent.h>
#include <sys/syscall.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/local_volume.h"
#include "lib/base/cleanup.h"
#include "lib/base/rmtree.h"

#define VOLUME_WALK_DEPTH 256      /* deeper directories are not counted */
#define VOLUME_WALK_ENTRIES 200000 /* a walk stops counting after this many entries */

extern char **environ;

const char *local_volume_enforcement(void)
{
    return geteuid() == 0 ? "ext4 image (loop mount)" : LOCAL_VOLUME_WATCHER;
}

static bool as_root(void)
{
    return geteuid() == 0;
}

/* Runs argv (a system tool: mkfs.ext4, mount) with its output discarded; 0 if it exits 0. */
static int run_tool(const char *const argv[], struct mcp_error *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char path[PATH_MAX];
    pid_t pid;
    int rc = -1, status = 0;
    for (const char *const *dir = (const char *const[]){"/usr/sbin", "/sbin", "/usr/bin", NULL};
         *dir && rc != 0; dir++) {
        snprintf(path, sizeof path, "%s/%s", *dir, argv[0]);
        if (access(path, X_OK) == 0)
            rc = posix_spawn(&pid, path, &fa, NULL, (char *const *)argv, environ);
    }
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, rc > 0 ? rc : ENOENT,
                             "cannot run %s, which volumes need as root: install e2fsprogs and "
                             "mount (Debian: apt install e2fsprogs mount)",
                             argv[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    size_t last = 0;
    while (argv[last + 1] != NULL)
        last++;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return mcp_error_set(err, MCP_ERR_IO, 0,
                             "%s failed on %s (exit status %d): is the disk full, or are loop "
                             "devices missing (modprobe loop)?",
                             argv[0], argv[last], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

/* True when path is the root of a mount (the image is mounted there). */
static bool is_mount_root(const char *path)
{
    struct statx sx;
    return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, 0, &sx) == 0 &&
           (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
           (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

static int mount_image(const char *vdir, struct mcp_error *err)
{
    char image[PATH_MAX], mnt[PATH_MAX];
    snprintf(image, sizeof image, "%s/image", vdir);
    snprintf(mnt, sizeof mnt, "%s/mnt", vdir);
    const char *argv[] = {"mount", "-t", "ext4", "-o", "loop,nosuid,nodev", image, mnt, NULL};
    return run_tool(argv, err);
}

/* A sparse file of limit bytes with an empty ext4 in it: no reserved blocks (the whole limit is
 * the sandboxes'), a 4 MiB journal, tables initialized lazily (mkfs takes milliseconds). */
static int make_image(const char *vdir, uint64_t limit, struct mcp_error *err)
{
    char image[PATH_MAX];
    snprintf(image, sizeof image, "%s/image", vdir);
    cleanup_close int fd = open(image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)limit) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "making the volume image %s", image);
    const char *argv[] = {"mkfs.ext4", "-q", "-F",
                          "-m",        "0",  "-J",
                          "size=4",    "-E", "lazy_itable_init=1,lazy_journal_init=1",
                          image,       NULL};
    return run_tool(argv, err);
}

/* Under the volume's lock: mounts the image unless another process has. */
int local_volume_fs_ready(const char *vdir, struct mcp_error *err)
{
    if (!as_root())
        return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/lock", vdir);
    cleanup_close int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "locking the volume at %s", vdir);
    snprintf(path, sizeof path, "%s/mnt", vdir);
    if (is_mount_root(path))
        return 0;
    return mount_image(vdir, err);
}

static int make_root(const char *vdir, uid_t uid, gid_t gid, struct mcp_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/mnt/data", vdir);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", path);
    if (as_root() && lchown(path, uid, gid) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "chown %s", path);
    return 0;
}

int local_volume_fs_make(const char *vdir, uint64_t limit, uid_t uid, gid_t gid,
                         struct mcp_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/mnt", vdir);
    if (mkdir(vdir, 0700) < 0 || mkdir(path, 0755) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "making the volume's directory %s", vdir);
    if ((as_root() && (make_image(vdir, limit, err) < 0 || local_volume_fs_ready(vdir, err) < 0)) ||
        make_root(vdir, uid, gid, err) < 0) {
        struct mcp_error ignored;
        (void)local_volume_fs_remove(vdir, &ignored);
        return -1;
    }
    return 0;
}

uint64_t local_volume_max_entries(uint64_t limit)
{
    uint64_t n = limit / LOCAL_VOLUME_BYTES_PER_ENTRY;
    return n < VOLUME_WALK_ENTRIES ? n : VOLUME_WALK_ENTRIES;
}

bool local_volume_over(const struct local_volume_usage *u, uint64_t limit)
{
    return u->partial || u->bytes >= limit || u->entries > local_volume_max_entries(limit);
}

/* One entry of a walk: counted, and descended into when it is a directory. */
static void walk_entry(int dir, const char *name, int depth, uint64_t budget,
                       struct local_volume_usage *u);

/* Adds what is below the directory fd (closed here) to u, not following any symlink: each entry
 * is looked at with fstatat(AT_SYMLINK_NOFOLLOW) and each directory opened with O_NOFOLLOW from
 * its parent, so a link a sandbox planted is counted as the link it is. What it cannot see (past
 * the entry budget, deeper than VOLUME_WALK_DEPTH, a directory it cannot open) makes u partial:
 * counted as over the limit, never as empty. System calls only (getdents64, no allocation): the
 * guard runs it in a child forked from the threaded server (volume_guard.c). */
static void walk_usage(int fd, int depth, uint64_t budget, struct local_volume_usage *u)
{
    /* times VOLUME_WALK_DEPTH levels: 256 KiB of stack at most */
    _Alignas(struct dirent64) char buf[1024];
    long n = 0;
    while (!u->partial && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
        for (long off = 0; off < n && !u->partial;) {
            struct dirent64 *e = (struct dirent64 *)(void *)(buf + off);
            off += e->d_reclen;
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                walk_entry(fd, e->d_name, depth, budget, u);
        }
    if (n < 0)
        u->partial = true;
    close(fd);
}

static void walk_entry(int dir, const char *name, int depth, uint64_t budget,
                       struct local_volume_usage *u)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return; /* gone meanwhile */
    u->partial = ++u->entries > budget;
    u->bytes += (uint64_t)st.st_blocks * 512;
    if (!S_ISDIR(st.st_mode) || u->partial)
        return;
    int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (depth >= VOLUME_WALK_DEPTH || (sub < 0 && errno != ENOENT))
        u->partial = true;
    if (sub >= 0 && depth >= VOLUME_WALK_DEPTH)
        close(sub);
    else if (sub >= 0)
        walk_usage(sub, depth + 1, budget, u);
}

void local_volume_walk_fd(int fd, uint64_t budget, struct local_volume_usage *u)
{
    *u = (struct local_volume_usage){0};
    walk_usage(fd, 0, budget, u);
}

int local_volume_fs_walk(const char *vdir, uint64_t budget, struct local_volume_usage *u,
                         struct mcp_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/mnt/data", vdir);
    *u = (struct local_volume_usage){0};
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "opening the volume at %s", path);
    walk_usage(fd, 0, budget, u);
    return 0;
}

int local_volume_fs_usage(const char *vdir, uint64_t *used, uint64_t *avail, struct mcp_error *err)
{
    if (as_root()) {
        char path[PATH_MAX];
        struct statfs sf;
        if (local_volume_fs_ready(vdir, err) < 0)
            return -1;
        snprintf(path, sizeof path, "%s/mnt", vdir);
        if (statfs(path, &sf) < 0)
            return mcp_error_set(err, MCP_ERR_IO, errno, "statfs %s", path);
        *used = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
        *avail = (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize;
        return 0;
    }
    struct local_volume_usage u;
    if (local_volume_fs_walk(vdir, VOLUME_WALK_ENTRIES, &u, err) < 0)
        return -1;
    *used = u.bytes;
    *avail = UINT64_MAX;
    return 0;
}

int local_volume_fs_remove(const char *vdir, struct mcp_error *err)
{
    char mnt[PATH_MAX];
    snprintf(mnt, sizeof mnt, "%s/mnt", vdir);
    /* Detached: a process of the host with a file open there keeps the filesystem (and its
     * loop device, freed with it) until it lets go; no new sandbox can reach it. */
    if (as_root() && is_mount_root(mnt) && umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "unmounting the volume at %s", mnt);
    if (rmtree(vdir) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno,
                             "some of the volume's files at %s could not be removed", vdir);
    return 0;
}
