/* Layer unpacking (unpack.h). */
#include "backend/local/image/unpack.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/layer_hash.h"
#include "lib/base/util.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define UNPACK_PATH_MAX 4096
#define LAYER_STORE_CAP_ENV_NAME "MCPBOX_IMAGE_STORE_MAX_BYTES" /* layer_store.h */

/* What the child reports through its pipe. */
struct unpack_report {
    int code; /* 0, or an mcp_error code */
    struct unpack_result res;
    char msg[400];
};

int unpack_clean_path(const char *name, char *out, size_t size)
{
    if (name == NULL || name[0] == '/')
        return -1;
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    while (name[0] == '/') /* "./" followed by more slashes */
        name++;
    size_t n = strlen(name);
    if (n >= size)
        return -1;
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        p += len;
        p += *p == '/';
    }
    memcpy(out, name, n + 1);
    while (n > 0 && out[n - 1] == '/')
        out[--n] = '\0';
    if (strcmp(out, ".") == 0)
        out[0] = '\0';
    return 0;
}

static int report(struct unpack_report *r, int code, const char *fmt, const char *a,
                  const char *b)
{
    r->code = code;
    snprintf(r->msg, sizeof r->msg, fmt, a, b ? b : "");
    return -1;
}

/* mkdir -p of a path inside the chroot. */
static void make_parents(char *path)
{
    for (char *p = path; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
}

/* Where no whiteout device may be made (the store on overlayfs, as inside a container): an
 * empty file with user.overlay.whiteout, its directory marked "x" (has such whiteouts; Linux
 * 6.7+), unless that directory is opaque already ("y", which hides everything below anyway). */
static int xattr_whiteout(const char *dir, const char *target, struct unpack_report *r)
{
    char v[4] = "";
    int fd = open(target, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0 || fsetxattr(fd, "user.overlay.whiteout", "y", 1, 0) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return report(r, MCP_ERR_UNSUPPORTED, "cannot make the whiteout '%s': %s", target,
                      strerror(e));
    }
    close(fd);
    if (getxattr(dir, "user.overlay.opaque", v, sizeof v - 1) == 1 && v[0] == 'y')
        return 0;
    if (setxattr(dir, "user.overlay.opaque", "x", 1, 0) < 0)
        return report(r, MCP_ERR_UNSUPPORTED, "cannot mark '%s' as holding whiteouts: %s", dir,
                      strerror(errno));
    return 0;
}

static int apply_whiteout(const char *path, const char *base, struct unpack_report *r)
{
    char dir[UNPACK_PATH_MAX], target[UNPACK_PATH_MAX];
    size_t dlen = (size_t)(base - path);
    snprintf(dir, sizeof dir, "%.*s", (int)(dlen ? dlen - 1 : 0), path);
    const char *d = dir[0] ? dir : ".";
    if (dir[0]) {
        snprintf(target, sizeof target, "%s/", dir);
        make_parents(target);
    }
    if (strcmp(base, WH_OPAQUE) == 0) {
        if (setxattr(d, "user.overlay.opaque", "y", 1, 0) < 0)
            return report(r, MCP_ERR_IO, "cannot mark '%s' opaque: %s", d, strerror(errno));
        return 0;
    }
    const char *name = base + strlen(WH_PREFIX);
    if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return report(r, MCP_ERR_DENIED, "the whiteout '%s' names no file%s", path, NULL);
    snprintf(target, sizeof target, "%s%s%s", dir, dir[0] ? "/" : "", name);
    if (mknod(target, S_IFCHR | 0, makedev(0, 0)) == 0 || errno == EEXIST)
        return 0;
    if (errno != EPERM && errno != EOPNOTSUPP)
        return report(r, MCP_ERR_IO, "cannot make the whiteout '%s': %s", target,
                      strerror(errno));
    return xattr_whiteout(d, target, r);
}

/* The blob's decompressed stream, fed to the tar reader and hashed on the way: rootfs.diff_ids
 * names the sha256 of each uncompressed tar, so the one pass that unpacks also checks it. */
struct plain_feed {
    struct archive *raw; /* the blob through its decompression filter, as one "raw" entry */
    struct layer_hash hash;
    bool failed;
    char err[200];
};

static la_ssize_t feed_read(struct archive *a, void *arg, const void **buf)
{
    (void)a;
    struct plain_feed *f = arg;
    size_t size = 0;
    la_int64_t offset;
    int rc;
    while ((rc = oci_archive.read_data_block(f->raw, buf, &size, &offset)) == ARCHIVE_OK &&
           size == 0) {
    }
    if (rc == ARCHIVE_EOF)
        return 0;
    if (rc < ARCHIVE_WARN) {
        f->failed = true;
        snprintf(f->err, sizeof f->err, "%s", oci_archive.error_string(f->raw));
        return -1;
    }
    layer_hash_update(&f->hash, *buf, size);
    return (la_ssize_t)size;
}

/* What failed in reading: the decompression, if that is where, else the tar reader. */
static const char *read_error(struct archive *a, const struct plain_feed *f)
{
    const char *e = f->failed ? f->err : oci_archive.error_string(a);
    return e ? e : "unknown error";
}

static int copy_data(struct archive *a, struct archive *w, const struct plain_feed *f,
                     struct unpack_report *r)
{
    const void *block;
    size_t size;
    la_int64_t offset;
    for (;;) {
        int rc = oci_archive.read_data_block(a, &block, &size, &offset);
        if (rc == ARCHIVE_EOF)
            return 0;
        if (rc < ARCHIVE_WARN)
            return report(r, MCP_ERR_BACKEND, "the layer is corrupt: %s%s", read_error(a, f),
                          NULL);
        if (oci_archive.write_data_block(w, block, size, offset) < ARCHIVE_WARN)
            return report(r, MCP_ERR_IO, "writing failed: %s%s", oci_archive.error_string(w),
                          NULL);
    }
}

/* One entry: the checks, then whiteout, skip or extract. */
static int apply_entry(struct archive *a, struct archive *w, struct archive_entry *e,
                       uint64_t max_bytes, const struct plain_feed *f, struct unpack_report *r)
{
    char path[UNPACK_PATH_MAX], link[UNPACK_PATH_MAX];
    const char *raw = oci_archive.entry_pathname(e);
    if (unpack_clean_path(raw, path, sizeof path) < 0)
        return report(r, MCP_ERR_DENIED,
                      "the layer has the entry '%.200s', which points outside the layer "
                      "(absolute or with '..')%s",
                      raw ? raw : "(no name)", NULL);
    if (path[0] == '\0')
        return 0; /* the root itself: kept as made */
    const char *hl = oci_archive.entry_hardlink(e);
    if (hl && (unpack_clean_path(hl, link, sizeof link) < 0 || link[0] == '\0'))
        return report(r, MCP_ERR_DENIED,
                      "the layer has a hard link '%.200s' to '%.150s', outside the layer", path,
                      hl);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (strncmp(base, WH_PREFIX, strlen(WH_PREFIX)) == 0)
        return apply_whiteout(path, base, r);
    mode_t type = oci_archive.entry_filetype(e);
    if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
        r->res.skipped++;
        return 0;
    }
    la_int64_t size = oci_archive.entry_size(e);
    if (size > 0 && (r->res.bytes += (uint64_t)size) > max_bytes) {
        char left[32];
        snprintf(left, sizeof left, "%llu", (unsigned long long)max_bytes);
        return report(r, MCP_ERR_LIMIT,
                      "the layer unpacks to more than the %s bytes left under the image store's "
                      "cap (a tar bomb, or the store is full): remove images (`mcpbox image "
                      "prune`) or raise %s",
                      left, LAYER_STORE_CAP_ENV_NAME);
    }
    if (++r->res.entries > UNPACK_MAX_ENTRIES)
        return report(r, MCP_ERR_LIMIT, "the layer has more than a million entries%s%s", "",
                      NULL);
    oci_archive.entry_set_pathname(e, path);
    if (hl)
        oci_archive.entry_set_hardlink(e, link);
    if (oci_archive.write_header(w, e) < ARCHIVE_WARN)
        return report(r, MCP_ERR_DENIED, "the entry '%.200s' was refused: %.150s", path,
                      oci_archive.error_string(w));
    if (size > 0 && copy_data(a, w, f, r) < 0)
        return -1;
    if (oci_archive.write_finish_entry(w) < ARCHIVE_WARN)
        return report(r, MCP_ERR_IO, "finishing '%.200s' failed: %.150s", path,
                      oci_archive.error_string(w));
    return 0;
}

/* The blob as one raw entry through its decompression filter. */
static int open_plain(struct archive *raw, int fd, enum oci_compression c)
{
    struct archive_entry *e;
    if (c == OCI_GZIP)
        oci_archive.read_support_filter_gzip(raw);
    else if (c == OCI_ZSTD)
        oci_archive.read_support_filter_zstd(raw);
    else
        oci_archive.read_support_filter_none(raw);
    oci_archive.read_support_format_raw(raw);
    if (oci_archive.read_open_fd(raw, fd, 1 << 17) != ARCHIVE_OK)
        return -1;
    return oci_archive.read_next_header(raw, &e) == ARCHIVE_OK ? 0 : -1;
}

/* The rest of the stream after the tar's end (padding) counts for the digest too. */
static void feed_drain(struct plain_feed *f)
{
    const void *block;
    while (feed_read(NULL, f, &block) > 0) {
    }
}

static void extract_entries(struct archive *a, struct archive *w, uint64_t max_bytes,
                            struct plain_feed *f, struct unpack_report *r)
{
    struct archive_entry *e;
    int rc;
    while ((rc = oci_archive.read_next_header(a, &e)) != ARCHIVE_EOF) {
        if (rc < ARCHIVE_WARN) {
            report(r, MCP_ERR_BACKEND, "the layer is corrupt: %.200s%s", read_error(a, f), NULL);
            return;
        }
        if (apply_entry(a, w, e, max_bytes, f, r) < 0)
            return;
    }
    feed_drain(f);
    if (f->failed)
        report(r, MCP_ERR_BACKEND, "the layer is corrupt after its last entry: %.200s%s", f->err,
               NULL);
    else
        layer_hash_final(&f->hash, r->res.diff_id);
}

static void extract(int fd, enum oci_compression c, uint64_t max_bytes, struct unpack_report *r)
{
    struct plain_feed f = {.raw = oci_archive.read_new()};
    struct archive *a = oci_archive.read_new();
    struct archive *w = oci_archive.write_disk_new();
    layer_hash_init(&f.hash);
    oci_archive.read_support_format_tar(a);
    oci_archive.read_support_filter_none(a);
    oci_archive.write_disk_set_options(
        w, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
               ARCHIVE_EXTRACT_XATTR | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
               ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
    if (open_plain(f.raw, fd, c) < 0)
        report(r, MCP_ERR_BACKEND, "the layer is corrupt (cannot be decompressed): %.200s%s",
               oci_archive.error_string(f.raw), NULL);
    else if (oci_archive.read_open(a, &f, NULL, feed_read, NULL) != ARCHIVE_OK)
        report(r, MCP_ERR_BACKEND, "the layer is corrupt (not a readable tar stream): %.200s%s",
               read_error(a, &f), NULL);
    else
        extract_entries(a, w, max_bytes, &f, r);
    if (oci_archive.write_free(w) < ARCHIVE_WARN && r->code == 0) /* directory fix-ups */
        report(r, MCP_ERR_IO, "finishing the layer failed%s%s", "", NULL);
    oci_archive.read_free(a);
    oci_archive.read_free(f.raw);
}

/* What a child does once it is in place: unpack, or clear a directory. */
struct child_job {
    int fd;
    enum oci_compression compression;
    const char *root;
    uint64_t max_bytes;
    bool clear;             /* remove everything below root instead */
    const char *import_src; /* copy this directory into root instead (image_import_dir) */
    uint32_t shift_uid, shift_gid;
};

/* ---- a registered directory copied into the store, owners shifted ---------------------------- */

/* "./a/b" of the source as "<root>/a/b"; "" for the source's top. */
static int import_name(const char *name, const char *root, char *out, size_t size)
{
    char clean[UNPACK_PATH_MAX];
    if (unpack_clean_path(name, clean, sizeof clean) < 0)
        return -1;
    if (clean[0] == '\0') {
        out[0] = '\0';
        return 0;
    }
    return snprintf(out, size, "%s/%s", root, clean) < (int)size ? 0 : -1;
}

/* One entry of the source: owners shifted into the shared mapping (ids past 65535, which it
 * cannot show, become 65534, nobody), device nodes and sockets skipped. */
static int import_entry(struct archive *d, struct archive *w, struct archive_entry *e,
                        const struct child_job *job, struct unpack_report *r)
{
    char path[UNPACK_PATH_MAX], link[UNPACK_PATH_MAX];
    const char *name = oci_archive.entry_pathname(e);
    if (import_name(name, job->root, path, sizeof path) < 0)
        return report(r, MCP_ERR_INVALID, "cannot copy '%.200s' of the image directory%s",
                      name ? name : "?", NULL);
    if (path[0] == '\0')
        return 0;
    mode_t type = oci_archive.entry_filetype(e);
    if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
        r->res.skipped++;
        return 0;
    }
    const char *hl = oci_archive.entry_hardlink(e);
    if (hl && import_name(hl, job->root, link, sizeof link) < 0)
        return report(r, MCP_ERR_INVALID, "cannot copy the hard link '%.200s'%s", path, NULL);
    la_int64_t uid = oci_archive.entry_uid(e), gid = oci_archive.entry_gid(e);
    oci_archive.entry_set_uid(e, (la_int64_t)job->shift_uid + (uid >= 0 && uid < 65536 ? uid : 65534));
    oci_archive.entry_set_gid(e, (la_int64_t)job->shift_gid + (gid >= 0 && gid < 65536 ? gid : 65534));
    oci_archive.entry_set_pathname(e, path);
    if (hl)
        oci_archive.entry_set_hardlink(e, link);
    la_int64_t size = oci_archive.entry_size(e);
    if (type == AE_IFREG && size > 0 && (r->res.bytes += (uint64_t)size) > job->max_bytes)
        return report(r, MCP_ERR_LIMIT,
                      "the image directory is larger than the room left under the image "
                      "store's cap: remove images (`mcpbox image prune`) or raise %s%s",
                      LAYER_STORE_CAP_ENV_NAME, NULL);
    if (++r->res.entries > UNPACK_MAX_ENTRIES)
        return report(r, MCP_ERR_LIMIT, "the image directory has more than a million entries%s%s",
                      "", NULL);
    if (oci_archive.write_header(w, e) < ARCHIVE_WARN)
        return report(r, MCP_ERR_IO, "copying '%.200s' failed: %.150s", path,
                      oci_archive.error_string(w));
    const void *block;
    size_t n;
    la_int64_t off;
    int rc;
    while (type == AE_IFREG && !hl &&
           (rc = oci_archive.read_data_block(d, &block, &n, &off)) != ARCHIVE_EOF) {
        if (rc < ARCHIVE_WARN || oci_archive.write_data_block(w, block, n, off) < ARCHIVE_WARN)
            return report(r, MCP_ERR_IO, "copying '%.200s' failed: %.150s", path,
                          oci_archive.error_string(rc < ARCHIVE_WARN ? d : w));
    }
    return oci_archive.write_finish_entry(w) < ARCHIVE_WARN
               ? report(r, MCP_ERR_IO, "finishing '%.200s' failed: %.150s", path,
                        oci_archive.error_string(w))
               : 0;
}

/* In the source directory (the cwd): every entry, not following symlinks nor crossing mounts,
 * written below job->root as the server (root). */
static void import_tree(const struct child_job *job, struct unpack_report *r)
{
    struct archive *d = oci_archive.read_disk_new();
    struct archive *w = oci_archive.write_disk_new();
    struct archive_entry *e = oci_archive.entry_new();
    /* Hard links stay links: the second name of a file becomes a link to the first. */
    struct archive_entry_linkresolver *links = oci_archive.entry_linkresolver_new();
    oci_archive.entry_linkresolver_set_strategy(links, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    oci_archive.read_disk_set_symlink_physical(d);
    oci_archive.read_disk_set_behavior(d, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
    oci_archive.write_disk_set_options(w, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
                                              ARCHIVE_EXTRACT_TIME |
                                              ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                              ARCHIVE_EXTRACT_SECURE_NODOTDOT);
    int rc = oci_archive.read_disk_open(d, ".");
    while (rc == ARCHIVE_OK && (rc = oci_archive.read_next_header2(d, e)) != ARCHIVE_EOF) {
        if (rc < ARCHIVE_WARN)
            break;
        oci_archive.read_disk_descend(d);
        struct archive_entry *entry = e, *spare = NULL;
        oci_archive.entry_linkify(links, &entry, &spare); /* tar: entry stays e, no spare */
        if (import_entry(d, w, e, job, r) < 0)
            break;
        rc = ARCHIVE_OK;
    }
    if (rc < ARCHIVE_WARN && r->code == 0)
        report(r, MCP_ERR_IO, "reading the image directory failed: %.200s%s",
               oci_archive.error_string(d), NULL);
    if (oci_archive.write_free(w) < ARCHIVE_WARN && r->code == 0)
        report(r, MCP_ERR_IO, "finishing the copy failed%s%s", "", NULL);
    oci_archive.entry_linkresolver_free(links);
    oci_archive.entry_free(e);
    oci_archive.read_free(d);
}

static int clear_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    if (ftw->level == 0)
        return 0; /* root itself: its owner removes it */
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

/* In a fresh user namespace (rootless): wait for the parent to write its maps, then become the
 * namespace's root, so that files get the ids of the sandboxes' mapping. */
static int enter_userns(int ready_w, int go_r, struct unpack_report *r)
{
    char b = 'r';
    if (unshare(CLONE_NEWUSER) < 0)
        return report(r, MCP_ERR_UNSUPPORTED, "cannot make a user namespace: %s%s",
                      strerror(errno), NULL);
    if (write(ready_w, &b, 1) != 1 || read(go_r, &b, 1) != 1)
        return report(r, MCP_ERR_UNSUPPORTED, "no uid map was written%s%s", "", NULL);
    /* Raw calls: glibc's wrappers would signal threads this forked child does not have. */
    if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
        return report(r, MCP_ERR_UNSUPPORTED, "cannot become root of the user namespace: %s%s",
                      strerror(errno), NULL);
    return 0;
}

__attribute__((noreturn)) static void child(const struct child_job *job, int out, int ready_w,
                                            int go_r)
{
    struct unpack_report r;
    memset(&r, 0, sizeof r);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    umask(0);
    /* Into the directory first, as the server's user: rootless, the namespace's root may not
     * search the user's 0700 state directory on the way. */
    if (job->import_src)
        chdir(job->import_src) < 0
            ? report(&r, MCP_ERR_IO, "cannot enter %s: %s", job->import_src, strerror(errno))
            : (import_tree(job, &r), 0);
    else if (chdir(job->root) < 0)
        report(&r, MCP_ERR_IO, "cannot enter %s: %s", job->root, strerror(errno));
    else if (ready_w >= 0 && enter_userns(ready_w, go_r, &r) < 0)
        ;
    else if (job->clear)
        nftw(".", clear_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0
            ? 0
            : report(&r, MCP_ERR_IO, "cannot remove what is in %s: %s", job->root,
                     strerror(errno));
    else if (chroot(".") < 0 || chdir("/") < 0)
        report(&r, MCP_ERR_IO, "cannot enter %s: %s", job->root, strerror(errno));
    else
        extract(job->fd, job->compression, job->max_bytes, &r);
    ssize_t n = write(out, &r, sizeof r);
    _exit(n == (ssize_t)sizeof r ? 0 : 1);
}

/* The parent's side of the user namespace hand-shake: maps written, then go. */
static int release_child(const struct unpack_userns *ns, pid_t pid, int ready_r, int go_w,
                         struct mcp_error *err)
{
    char b;
    if (read(ready_r, &b, 1) != 1)
        return 0; /* the child failed before: its report says why */
    if (ns->write_maps(ns->arg, pid, err) < 0)
        return -1; /* go_w closes: the child gives up */
    return write(go_w, "g", 1) == 1 ? 0 : mcp_error_set(err, MCP_ERR_IO, errno, "release");
}

/* The child's fds after exec. */
enum { FD_BLOB = 3, FD_OUT, FD_READY, FD_GO };

/* Between fork and exec only async-signal-safe calls: the parent has other threads, and a lock
 * one of them held at fork time (the allocator's, under sanitizers) would never be released in
 * the child. So the child execs this same executable afresh (image_unpack_child_main). */
__attribute__((noreturn)) static void exec_child(const struct child_job *job, int out,
                                                 int ready_w, int go_r, char *const *argv)
{
    int fds[4] = {job->clear || job->import_src ? -1 : job->fd, out, ready_w, go_r};
    for (int i = 0; i < 4; i++) /* first out of the way of 3..6, then into place */
        if (fds[i] >= 0 && fds[i] <= FD_GO)
            fds[i] = fcntl(fds[i], F_DUPFD, FD_GO + 1);
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            dup2(fds[i], FD_BLOB + i);
    execv("/proc/self/exe", argv);
    _exit(127);
}

int image_unpack_child_main(int argc, char **argv)
{
    if (argc != 7 && argc != 9)
        return 2;
    struct mcp_error err;
    struct child_job job = {.fd = FD_BLOB, .compression = (enum oci_compression)atoi(argv[3]),
                            .root = argv[2], .max_bytes = strtoull(argv[4], NULL, 10),
                            .clear = strcmp(argv[5], "clear") == 0};
    if (argc == 9 && strcmp(argv[5], "import") == 0) { /* ... import SRC UID:GID */
        job.import_src = argv[7];
        job.shift_uid = (uint32_t)strtoul(argv[8], NULL, 10);
        job.shift_gid = (uint32_t)strtoul(strchr(argv[8], ':') ? strchr(argv[8], ':') + 1 : "0",
                                          NULL, 10);
    }
    bool ns = strcmp(argv[6], "ns") == 0;
    if (!job.clear && oci_archive_load(&err) < 0) {
        struct unpack_report r;
        memset(&r, 0, sizeof r);
        report(&r, err.code, "%s%s", err.msg, NULL);
        ssize_t n = write(FD_OUT, &r, sizeof r);
        return n == (ssize_t)sizeof r ? 0 : 1;
    }
    child(&job, FD_OUT, ns ? FD_READY : -1, ns ? FD_GO : -1);
}

static int run_child(const struct child_job *job, const struct unpack_userns *ns,
                     struct unpack_report *r, struct mcp_error *err)
{
    int p[2], ready[2] = {-1, -1}, go[2] = {-1, -1};
    if (pipe2(p, O_CLOEXEC) < 0 || (ns && (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)))
        return mcp_error_set(err, MCP_ERR_IO, errno, "pipe");
    char comp[16], max[32], shift[32];
    snprintf(comp, sizeof comp, "%d", (int)job->compression);
    snprintf(max, sizeof max, "%llu", (unsigned long long)job->max_bytes);
    snprintf(shift, sizeof shift, "%u:%u", (unsigned)job->shift_uid, (unsigned)job->shift_gid);
    const char *mode = job->clear ? "clear" : job->import_src ? "import" : "unpack";
    char *argv[] = {(char *)"mcpbox", (char *)IMAGE_UNPACK_ARGV1, (char *)job->root, comp, max,
                    (char *)mode, (char *)(ns ? "ns" : "-"), (char *)job->import_src, shift, NULL};
    if (job->import_src == NULL)
        argv[7] = NULL;
    pid_t pid = fork();
    if (pid == 0)
        exec_child(job, p[1], ns ? ready[1] : -1, ns ? go[0] : -1, argv);
    close(p[1]);
    int rc = 0;
    if (ns) {
        close(ready[1]), close(go[0]);
        rc = pid > 0 ? release_child(ns, pid, ready[0], go[1], err) : 0;
        close(ready[0]), close(go[1]);
    }
    memset(r, 0, sizeof *r);
    ssize_t n = pid < 0 ? -1 : read(p[0], r, sizeof *r);
    close(p[0]);
    int status = 0;
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    if (pid < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "fork for unpacking failed");
    if (rc < 0)
        return -1;
    if (n != (ssize_t)sizeof *r)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "the unpacker died (status %d) on this layer: it is corrupt or "
                             "hostile",
                             status);
    if (r->code != 0)
        return mcp_error_set(err, r->code, 0, "%s", r->msg);
    return 0;
}

int image_unpack(int blob_fd, enum oci_compression compression, const char *root,
                 uint64_t max_bytes, const struct unpack_userns *ns, struct unpack_result *res,
                 struct mcp_error *err)
{
    struct child_job job = {.fd = blob_fd, .compression = compression, .root = root,
                            .max_bytes = max_bytes};
    struct unpack_report r;
    /* Rootless: the namespace's root is not the directory's owner (the user is not mapped):
     * it may write there only through the mode. Put back by the caller's commit. */
    if (ns && chmod(root, 0777) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "chmod %s", root);
    if (run_child(&job, ns, &r, err) < 0)
        return -1;
    *res = r.res;
    return 0;
}

int image_import_dir(const char *src, const char *root, uint32_t shift_uid, uint32_t shift_gid,
                     uint64_t max_bytes, struct unpack_result *res, struct mcp_error *err)
{
    struct child_job job = {.fd = -1, .root = root, .max_bytes = max_bytes, .import_src = src,
                            .shift_uid = shift_uid, .shift_gid = shift_gid};
    struct unpack_report r;
    if (run_child(&job, NULL, &r, err) < 0)
        return -1;
    *res = r.res;
    return 0;
}

int image_clear_in_userns(const char *dir, const struct unpack_userns *ns, struct mcp_error *err)
{
    struct child_job job = {.root = dir, .clear = true};
    struct unpack_report r;
    if (chmod(dir, 0777) < 0)
        return errno == ENOENT ? 0 : mcp_error_set(err, MCP_ERR_IO, errno, "chmod %s", dir);
    return run_child(&job, ns, &r, err);
}
