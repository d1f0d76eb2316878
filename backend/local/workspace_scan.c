/* The scan of copy-on-write mounts: what the sandbox changed, read off each overlay's upper
 * layer against the host directory (the rules are in workspace_review.h). */
#include "backend/local/workspace_review.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

#define SCAN_DEPTH_MAX 256
#define SCAN_PATH_MAX 4096

struct scan {
    const struct ws_options *o;
    const struct ws_mount *m;
    size_t mount;
    json_t *journal;
    struct ws_changes *out;
    struct mcp_error *err;
    char rel[SCAN_PATH_MAX];
    size_t depth;
};

int ws_open_beneath(int dirfd, const char *rel, int flags, bool dir)
{
    struct open_how how = {
        .flags = (uint64_t)(dir ? O_PATH | O_DIRECTORY | O_CLOEXEC : flags | O_CLOEXEC),
        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    if (!dir && (flags & O_CREAT))
        how.mode = 0600;
    if (rel[0] == '\0')
        rel = ".";
    return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
}

int ws_source_open(const struct ws_mount *m, int flags)
{
    if (m->source_fd < 0) {
        errno = EBADF;
        return -1;
    }
    return openat(m->source_fd, ".", flags | O_DIRECTORY | O_CLOEXEC);
}

int ws_open_regular(int dirfd, const char *rel, struct stat *st)
{
    int fd = ws_open_beneath(dirfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, false);
    if (fd < 0)
        return -1;
    int e = fstat(fd, st) < 0 ? errno : S_ISREG(st->st_mode) ? 0 : EINVAL;
    if (e == 0)
        return fd;
    close(fd);
    errno = e;
    return -1;
}

const char *ws_type_name(mode_t m)
{
    switch (m & S_IFMT) {
    case S_IFREG:
        return "file";
    case S_IFDIR:
        return "directory";
    case S_IFLNK:
        return "symlink";
    case S_IFIFO:
        return "fifo";
    case S_IFSOCK:
        return "socket";
    case S_IFCHR:
        return "char-device";
    case S_IFBLK:
        return "block-device";
    default:
        return "absent";
    }
}

const char *ws_kind_name(enum ws_kind k)
{
    static const char *names[] = {"added", "modified", "deleted", "mode"};
    return names[k];
}

void ws_changes_free(struct ws_changes *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].rel), free(c->v[i].same_as);
    free(c->v);
    memset(c, 0, sizeof *c);
}

mode_t ws_carried_mode(mode_t m)
{
    return (mode_t)(m & (S_ISDIR(m) ? 01777 : 0777));
}

static int64_t ctime_ns(const struct stat *st)
{
    return (int64_t)st->st_ctim.tv_sec * 1000000000ll + st->st_ctim.tv_nsec;
}

bool ws_host_changed(json_t *journal, const char *rel, const struct stat *st, int64_t since_ns)
{
    json_t *seen = json_object_get(journal, rel);
    if (seen) { /* applied before: anything but what the apply left is a host change */
        if (json_is_true(json_object_get(seen, "absent")))
            return st != NULL;
        return st == NULL ||
               (uint64_t)json_integer_value(json_object_get(seen, "ino")) != (uint64_t)st->st_ino ||
               json_integer_value(json_object_get(seen, "ctime_ns")) != ctime_ns(st);
    }
    /* A directory's ctime moves with every entry made or removed in it: its entries are
     * judged one by one instead. */
    return st != NULL && !S_ISDIR(st->st_mode) && ctime_ns(st) >= since_ns - WS_CLOCK_SLACK_NS;
}

static void add_change(struct scan *s, enum ws_kind kind, const struct stat *ls,
                       const struct stat *us)
{
    struct ws_changes *c = s->out;
    if (!ws_selected(s->o->paths, s->m, s->rel))
        return;
    if (c->n >= WS_CHANGES_MAX) {
        c->truncated = true;
        return;
    }
    if (c->n == c->cap)
        c->v = xrealloc(c->v, (c->cap = c->cap ? 2 * c->cap : 64) * sizeof *c->v);
    struct ws_change *ch = &c->v[c->n++];
    memset(ch, 0, sizeof *ch);
    ch->rel = xstrdup(s->rel);
    ch->mount = s->mount;
    ch->kind = kind;
    if (ls)
        ch->old_mode = ls->st_mode, ch->old_size = (uint64_t)ls->st_size;
    if (us)
        ch->new_mode = us->st_mode, ch->new_size = (uint64_t)us->st_size;
    /* A directory's ctime moves with every entry made in it: only its entries conflict. */
    bool dir_only = (!ls || S_ISDIR(ls->st_mode)) && (!us || S_ISDIR(us->st_mode));
    ch->conflict = !dir_only && ws_host_changed(s->journal, s->rel, ls, s->o->since_ns);
}

static bool is_whiteout(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(const struct scan *s, int dirfd)
{
    char name[64], v[4];
    snprintf(name, sizeof name, "%sopaque", s->o->xattr_prefix);
    ssize_t n = fgetxattr(dirfd, name, v, sizeof v);
    return n == 1 && v[0] == 'y';
}

/* Appends "/name" to s->rel; returns the old length to restore. */
static int push_name(struct scan *s, const char *name, size_t *old)
{
    size_t len = strlen(s->rel), nl = strlen(name);
    if (len + nl + 2 > sizeof s->rel)
        return mcp_error_set(s->err, MCP_ERR_LIMIT, ENAMETOOLONG, "path too long below %s", s->rel);
    *old = len;
    if (len)
        s->rel[len++] = '/';
    memcpy(s->rel + len, name, nl + 1);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in a directory (without . and ..); NULL with err set on failure. */
static char **list_names(struct scan *s, int dirfd, size_t *n)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        mcp_error_set(s->err, MCP_ERR_IO, errno, "cannot list %s", s->rel[0] ? s->rel : ".");
        return NULL;
    }
    size_t cap = 16;
    char **v = xmalloc(cap * sizeof *v);
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (*n == cap)
            v = xrealloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = xstrdup(e->d_name);
    }
    closedir(d);
    qsort(v, *n, sizeof *v, cmp_names);
    return v;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int open_dir(int dirfd, const char *name)
{
    return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int emit_deleted(struct scan *s, int lfd, const char *name, const struct stat *ls);

/* A tree deeper than SCAN_DEPTH_MAX: the error shows where (the path cut short: a sandbox can
 * make it thousands of bytes long) and what to do. */
static int too_deep(struct scan *s)
{
    return mcp_error_set(s->err, MCP_ERR_LIMIT, 0,
                         "%.120s%s is nested more than %d directories deep, beyond what a review "
                         "or an apply walks: remove or flatten it in the sandbox, then call again",
                         s->rel, strlen(s->rel) > 120 ? "..." : "", SCAN_DEPTH_MAX);
}

/* The entries below a host directory the sandbox deleted or replaced, deepest first (s->rel
 * names the directory). */
static int emit_deleted_below(struct scan *s, int lfd, const char *name)
{
    cleanup_close int sub = open_dir(lfd, name);
    if (sub < 0)
        return mcp_error_set(s->err, MCP_ERR_IO, errno, "cannot open %s", s->rel);
    if (s->depth >= SCAN_DEPTH_MAX)
        return too_deep(s);
    size_t n = 0;
    char **names = list_names(s, sub, &n);
    if (names == NULL)
        return -1;
    int rc = 0;
    s->depth++;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct stat st;
        if (fstatat(sub, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
            rc = emit_deleted(s, sub, names[i], &st);
    }
    s->depth--;
    free_names(names, n);
    return rc;
}

/* A host entry the sandbox deleted (a directory: its entries first). */
static int emit_deleted(struct scan *s, int lfd, const char *name, const struct stat *ls)
{
    size_t old = 0; /* set by push_name; gcc -O2 cannot tell */
    if (push_name(s, name, &old) < 0)
        return -1;
    int rc = S_ISDIR(ls->st_mode) ? emit_deleted_below(s, lfd, name) : 0;
    if (rc == 0)
        add_change(s, WS_DELETED, ls, NULL);
    s->rel[old] = '\0';
    return rc;
}

/* Equal contents of two regular files of equal size. */
static bool same_contents(int ufd, const char *name, int lfd)
{
    cleanup_close int a = openat(ufd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    cleanup_close int b = openat(lfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sa, sb;
    /* non-blocking and checked again: the sandbox may have put a fifo there since the lstat */
    if (a < 0 || b < 0 || fstat(a, &sa) < 0 || fstat(b, &sb) < 0 || !S_ISREG(sa.st_mode) ||
        !S_ISREG(sb.st_mode))
        return false;
    /* Per call: concurrent reviews run this on several worker threads at once. */
    enum { CHUNK = 65536 };
    cleanup_free char *x = xmalloc(CHUNK);
    cleanup_free char *y = xmalloc(CHUNK);
    for (;;) {
        ssize_t n = read(a, x, CHUNK);
        if (n < 0)
            return false;
        if (n == 0)
            return read(b, y, 1) == 0;
        for (ssize_t got = 0; got < n;) {
            ssize_t m = read(b, y + got, (size_t)(n - got));
            if (m <= 0)
                return false;
            got += m;
        }
        if (memcmp(x, y, (size_t)n) != 0)
            return false;
    }
}

static bool same_target(int ufd, int lfd, const char *name)
{
    char a[SCAN_PATH_MAX], b[SCAN_PATH_MAX];
    ssize_t na = readlinkat(ufd, name, a, sizeof a);
    ssize_t nb = readlinkat(lfd, name, b, sizeof b);
    return na >= 0 && na == nb && memcmp(a, b, (size_t)na) == 0;
}

/* What a non-directory in upper is to the host entry (ls NULL: none); -1: no change. */
static int compare_entry(int ufd, int lfd, const char *name, const struct stat *us,
                         const struct stat *ls)
{
    if (ls == NULL)
        return WS_ADDED;
    if ((us->st_mode & S_IFMT) != (ls->st_mode & S_IFMT))
        return WS_MODIFIED;
    bool same_mode = ws_carried_mode(us->st_mode) == ws_carried_mode(ls->st_mode);
    if (S_ISLNK(us->st_mode))
        return same_target(ufd, lfd, name) ? -1 : WS_MODIFIED;
    if (S_ISREG(us->st_mode)) {
        if (us->st_size != ls->st_size || !same_contents(ufd, name, lfd))
            return WS_MODIFIED;
        return same_mode ? -1 : WS_MODE;
    }
    /* fifos, sockets, devices: never applied, shown when they differ */
    return same_mode && us->st_rdev == ls->st_rdev ? -1 : WS_MODIFIED;
}

static int scan_dir(struct scan *s, int ufd, int lfd, bool opaque);

static int scan_subdir(struct scan *s, int ufd, int lfd, const char *name, const struct stat *us,
                       const struct stat *ls, bool opaque)
{
    cleanup_close int usub = open_dir(ufd, name);
    if (usub < 0)
        return mcp_error_set(s->err, MCP_ERR_IO, errno, "cannot open %s in the sandbox's layer",
                             s->rel);
    bool sub_opaque = opaque || is_opaque(s, usub);
    cleanup_close int lsub = -1;
    if (ls && S_ISDIR(ls->st_mode)) {
        if (ws_carried_mode(us->st_mode) != ws_carried_mode(ls->st_mode))
            add_change(s, WS_MODE, ls, us);
        lsub = open_dir(lfd, name);
    } else {
        add_change(s, ls ? WS_MODIFIED : WS_ADDED, ls, us);
    }
    if (s->depth >= SCAN_DEPTH_MAX)
        return too_deep(s);
    s->depth++;
    int rc = scan_dir(s, usub, lsub, sub_opaque);
    s->depth--;
    return rc;
}

/* One name of a directory: in upper (us) and/or in lower (ls; NULL: not there). */
static int scan_entry(struct scan *s, int ufd, int lfd, const char *name, const struct stat *us,
                      const struct stat *ls, bool opaque)
{
    if (us == NULL) /* hidden by an opaque directory */
        return emit_deleted(s, lfd, name, ls);
    if (is_whiteout(us))
        return ls ? emit_deleted(s, lfd, name, ls) : 0;
    size_t old = 0; /* set by push_name; gcc -O2 cannot tell */
    if (push_name(s, name, &old) < 0)
        return -1;
    int rc = 0;
    if (S_ISDIR(us->st_mode)) {
        /* A directory that replaced a host file: the file goes (listed as a type change). */
        rc = scan_subdir(s, ufd, lfd, name, us, ls, opaque);
    } else {
        if (ls && S_ISDIR(ls->st_mode)) /* a file that replaced a host directory */
            rc = emit_deleted_below(s, lfd, name);
        int kind = compare_entry(ufd, lfd, name, us, ls);
        if (rc == 0 && kind >= 0)
            add_change(s, (enum ws_kind)kind, ls, us);
    }
    s->rel[old] = '\0';
    return rc;
}

static int scan_dir(struct scan *s, int ufd, int lfd, bool opaque)
{
    size_t nu = 0, nl = 0;
    char **un = list_names(s, ufd, &nu);
    if (un == NULL)
        return -1;
    /* An opaque directory hides the host's: its entries that upper lacks are deleted. */
    char **ln = opaque && lfd >= 0 ? list_names(s, lfd, &nl) : NULL;
    if (opaque && lfd >= 0 && ln == NULL) {
        free_names(un, nu);
        return -1;
    }
    int rc = 0;
    size_t i = 0, j = 0;
    while (rc == 0 && (i < nu || j < nl)) {
        int c = i == nu ? 1 : j == nl ? -1 : strcmp(un[i], ln[j]);
        const char *name = c <= 0 ? un[i] : ln[j];
        struct stat us, ls;
        bool in_upper = c <= 0 && fstatat(ufd, name, &us, AT_SYMLINK_NOFOLLOW) == 0;
        bool in_lower = lfd >= 0 && fstatat(lfd, name, &ls, AT_SYMLINK_NOFOLLOW) == 0;
        if (in_upper || in_lower)
            rc =
                scan_entry(s, ufd, lfd, name, in_upper ? &us : NULL, in_lower ? &ls : NULL, opaque);
        i += c <= 0;
        j += c >= 0;
    }
    free_names(un, nu);
    if (ln)
        free_names(ln, nl);
    return rc;
}

int ws_scan(const struct ws_mount *mounts, size_t n_mounts, const struct ws_options *o,
            struct ws_changes *out, struct mcp_error *err)
{
    memset(out, 0, sizeof *out);
    for (size_t m = 0; m < n_mounts; m++) {
        cleanup_close int ufd = open(mounts[m].upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cleanup_close int lfd = ws_source_open(&mounts[m], O_RDONLY);
        if (ufd < 0 || lfd < 0) {
            mcp_error_set(err, MCP_ERR_IO, errno, "cannot open %s",
                          ufd < 0 ? mounts[m].upper : mounts[m].source);
            ws_changes_free(out);
            return -1;
        }
        struct scan s = {.o = o,
                         .m = &mounts[m],
                         .mount = m,
                         .journal = ws_journal_load(&mounts[m]),
                         .out = out,
                         .err = err};
        int rc = scan_dir(&s, ufd, lfd, is_opaque(&s, ufd));
        json_decref(s.journal);
        if (rc < 0) {
            ws_changes_free(out);
            return -1;
        }
    }
    return 0;
}
