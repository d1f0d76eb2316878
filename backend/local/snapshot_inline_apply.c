/* The setup child's half of a restore by the sandbox's setup (snapshot_inline.h): the checked
 * list written into the new root with system calls only (the child is a copy of, or shares the
 * memory of, a multithreaded server: no malloc, no locks). Every parent directory is opened
 * with openat2 beneath the new root and through no link (RESOLVE_NO_SYMLINKS covers each
 * component, the last one too); the entry itself is then made in it by name, never through a
 * link either. Directories get their owner, mode and times after every entry is in place, so a
 * read-only one does not stop what goes below it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/local/image/snapshot_files.h"
#include "backend/local/snapshot_inline.h"

#define BENEATH (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

struct walk {
    int root; /* the new root, O_PATH */
    const char *why, *failed;
    /* The last parent opened (a tar lists a directory's entries together): kept open. Nothing
     * else runs in the sandbox meanwhile, so it stays the directory it was when opened. */
    char last[4096];
    int last_fd;
};

static const char *entry_path(const struct snap_inline_entry *e)
{
    return (const char *)(e + 1);
}

static const char *entry_link(const struct snap_inline_entry *e)
{
    return entry_path(e) + e->path_len;
}

static const struct snap_inline_entry *entry_next(const struct snap_inline_entry *e)
{
    size_t len = sizeof *e + e->path_len + e->link_len + e->size;
    return (const struct snap_inline_entry *)((const char *)e + ((len + 7u) & ~(size_t)7u));
}

static int open_beneath(const struct walk *w, const char *path, uint64_t flags)
{
    struct open_how how = {.flags = flags | O_CLOEXEC | O_NOFOLLOW, .resolve = BENEATH};
    return (int)syscall(SYS_openat2, w->root, path, &how, sizeof how);
}

/* path's parent directory, opened beneath the root; *base its last component (in path). */
static int open_parent(const struct walk *w, const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash == NULL) {
        *base = path;
        return open_beneath(w, ".", O_PATH | O_DIRECTORY);
    }
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, n);
    dir[n] = '\0';
    *base = slash + 1;
    return open_beneath(w, dir, O_PATH | O_DIRECTORY);
}

/* Whatever is at base goes first (a later entry of a layer replaces an earlier one, and a
 * copy-on-write workspace's lower layer may hold the name), unless both are directories. */
static int make_room(int dir, const char *base, bool for_dir)
{
    struct stat st;
    if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode))
        return for_dir ? 1 : unlinkat(dir, base, AT_REMOVEDIR);
    return unlinkat(dir, base, 0);
}

static int write_all(int fd, const char *data, uint64_t size)
{
    while (size > 0) {
        ssize_t w = write(fd, data, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        data += w, size -= (uint64_t)w;
    }
    return 0;
}

static void entry_times(const struct snap_inline_entry *e, struct timespec ts[2])
{
    ts[0] = (struct timespec){.tv_sec = e->atime_sec, .tv_nsec = e->atime_nsec};
    ts[1] = (struct timespec){.tv_sec = e->mtime_sec, .tv_nsec = e->mtime_nsec};
}

/* A regular file: made with its mode (no umask meanwhile, and no set-id bit for the chown to
 * clear), filled, owned (ids this namespace lacks stay its root's, as the helper's libarchive
 * leaves them), its times set. */
static int make_file(const struct snap_inline_entry *e, int dir, const char *base)
{
    int fd = openat(dir, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e->mode);
    if (fd < 0)
        return -1;
    struct timespec ts[2];
    entry_times(e, ts);
    int rc = write_all(fd, entry_link(e) + e->link_len, e->size);
    if (rc == 0)
        (void)!fchown(fd, e->uid, e->gid);
    if (rc == 0 && futimens(fd, ts) < 0)
        rc = -1;
    close(fd);
    return rc;
}

/* A symlink, FIFO or hard link, by name in dir. */
static int make_other(const struct walk *w, const struct snap_inline_entry *e, int dir,
                      const char *base)
{
    struct timespec ts[2];
    entry_times(e, ts);
    if (e->type == 0) { /* a hard link: its target's parent opened beneath the root too */
        const char *tbase;
        int tdir = open_parent(w, entry_link(e), &tbase);
        int rc = tdir < 0 ? -1 : linkat(tdir, tbase, dir, base, 0);
        if (tdir >= 0)
            close(tdir);
        return rc;
    }
    if (e->type == S_IFLNK ? symlinkat(entry_link(e), dir, base) < 0
                           : mknodat(dir, base, S_IFIFO | e->mode, 0) < 0)
        return -1;
    (void)!fchownat(dir, base, e->uid, e->gid, AT_SYMLINK_NOFOLLOW);
    return utimensat(dir, base, ts, AT_SYMLINK_NOFOLLOW);
}

/* open_parent through the walk's last parent: not to be closed by the caller. */
static int cached_parent(struct walk *w, const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (w->last_fd >= 0 && n < sizeof w->last && strncmp(w->last, path, n) == 0 &&
        w->last[n] == '\0') {
        *base = slash ? slash + 1 : path;
        return w->last_fd;
    }
    int fd = open_parent(w, path, base);
    if (fd < 0 || n >= sizeof w->last)
        return fd; /* a name that long: not kept (the caller closes what is not last_fd) */
    if (w->last_fd >= 0)
        close(w->last_fd);
    memcpy(w->last, path, n);
    w->last[n] = '\0';
    return w->last_fd = fd;
}

static int make_entry(struct walk *w, const struct snap_inline_entry *e)
{
    const char *base;
    int dir = cached_parent(w, entry_path(e), &base);
    if (dir < 0)
        return -1;
    int room = make_room(dir, base, e->type == S_IFDIR);
    int rc = room < 0 ? -1 : 0;
    if (rc == 0 && e->type == S_IFDIR)
        rc = room == 1 ? 0 : mkdirat(dir, base, 0700);
    else if (rc == 0)
        rc = e->type == S_IFREG ? make_file(e, dir, base) : make_other(w, e, dir, base);
    if (dir != w->last_fd)
        close(dir);
    return rc;
}

/* A directory's owner, mode and times, once everything below it is made. */
static int finish_dir(struct walk *w, const struct snap_inline_entry *e)
{
    int fd = open_beneath(w, entry_path(e), O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    struct timespec ts[2];
    entry_times(e, ts);
    (void)!fchown(fd, e->uid, e->gid);
    int rc = fchmod(fd, e->mode) < 0 || futimens(fd, ts) < 0 ? -1 : 0;
    close(fd);
    return rc;
}

static int fail(struct walk *w, const struct snap_inline_entry *e)
{
    w->why = errno == ENOSPC ? SNAP_NO_ROOM "; at"
             : errno == ELOOP || errno == ENOTDIR || errno == EXDEV
                 ? "restoring the snapshot failed: it writes through a link or a file, which is "
                   "never followed; delete that snapshot. At"
                 : "restoring the snapshot failed at";
    w->failed = entry_path(e);
    return -1;
}

int snap_inline_apply(const struct snap_inline *s, const char **why, const char **failed)
{
    struct walk w = {.root = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC), .last_fd = -1};
    mode_t umask_was = umask(0); /* the agent's, given back below */
    const struct snap_inline_entry *e = (const struct snap_inline_entry *)s->buf;
    int rc = w.root < 0 ? -1 : 0;
    for (size_t i = 0; rc == 0 && i < s->n; i++, e = entry_next(e))
        if (make_entry(&w, e) < 0)
            rc = fail(&w, e);
    e = (const struct snap_inline_entry *)s->buf;
    for (size_t i = 0; rc == 0 && i < s->n; i++, e = entry_next(e))
        if (e->type == S_IFDIR && finish_dir(&w, e) < 0)
            rc = fail(&w, e);
    int saved = errno;
    umask(umask_was);
    if (w.last_fd >= 0)
        close(w.last_fd);
    if (w.root >= 0)
        close(w.root);
    *why = w.why ? w.why : "restoring the snapshot failed: cannot open", *failed = w.failed;
    errno = saved;
    return rc;
}
