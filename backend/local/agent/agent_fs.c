/* File operations, performed by the agent inside the sandbox with the sandbox's credentials:
 * the host's files are not in this mount namespace at all, so no path or symlink can reach
 * them. Reads accept regular files only and never block (O_NONBLOCK: a FIFO is refused). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/fs.h> /* RENAME_NOREPLACE */
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/local/agent/agent.h"
#include "backend/local/proto.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define FS_PATH_MAX 4096
#define FS_LIST_MAX 10000
#define FS_LIST_DEPTH_MAX 32
#define FS_SEARCH_DEFAULT 1000
#define FS_SEARCH_SCAN_MAX 200000
#define FS_DEFAULT_MODE 0644

static int fs_err(struct mcp_error *err, int e, const char *what, const char *path)
{
    int code = e == ENOENT ? MCP_ERR_NOT_FOUND
               : (e == EACCES || e == EPERM || e == EROFS || e == ELOOP) ? MCP_ERR_DENIED
               : e == EEXIST ? MCP_ERR_CONFLICT
               : (e == ENOSPC || e == EFBIG || e == EDQUOT) ? MCP_ERR_LIMIT
               : MCP_ERR_IO;
    return mcp_error_set(err, code, e, "%s %s", what, path);
}

/* Drops "." components, repeated and trailing slashes in place ("/workspace/./a//b/" ->
 * "/workspace/a/b"), so results name paths as a person would. ".." is kept: lexically removing
 * it would change where a path through a symlink leads. */
static void path_tidy(char *p)
{
    char *w = p;
    const char *r = p;

    while (*r) {
        if (r[0] == '/' && (r[1] == '/' || (r[1] == '.' && (r[2] == '/' || r[2] == '\0')))) {
            r += r[1] == '/' ? 1 : 2;
            continue;
        }
        *w++ = *r++;
    }
    if (w > p + 1 && w[-1] == '/')
        w--;
    if (w == p)
        *w++ = '/';
    *w = '\0';
}

/* Relative paths start at the workspace. The kernel resolves the rest inside this sandbox's
 * root, where `..` cannot climb above "/". */
int agent_resolve(const struct agent *a, const char *in, char *out, size_t out_size,
                  struct mcp_error *err)
{
    if (in == NULL || in[0] == '\0')
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "empty path");
    int n = in[0] == '/' ? snprintf(out, out_size, "%s", in)
                         : snprintf(out, out_size, "%s/%s", a->workdir, in);
    if (n < 0 || (size_t)n >= out_size)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "path too long");
    path_tidy(out);
    return 0;
}

static int open2(int dirfd, const char *path, int flags, mode_t mode)
{
    struct open_how how = {.flags = (uint64_t)flags, .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

static const char *type_name(mode_t m)
{
    return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink"
           : S_ISFIFO(m) ? "fifo" : S_ISSOCK(m) ? "socket" : S_ISCHR(m) ? "char_device"
           : S_ISBLK(m) ? "block_device" : "other";
}

/* A name that is not UTF-8 (Linux allows any bytes but NUL and '/') cannot be a JSON string:
 * obj.key gets it as text with U+FFFD for the bad bytes, and obj.<key>_base64 the exact bytes,
 * which every path argument accepts in place of the text (see path_arg). Nothing is left out. */
static void set_path(json_t *obj, const char *key, const char *path)
{
    size_t n = strlen(path);
    json_object_set_new(obj, key, utf8_json_text(path, n));
    if (utf8_is_text(path, n))
        return;
    char name[64], *b64 = xmalloc(base64_encoded_len(n) + 1);
    base64_encode(path, n, b64);
    snprintf(name, sizeof name, "%s_base64", key);
    json_object_set_new(obj, name, json_string(b64));
    free(b64);
}

static json_t *stat_json(const char *path, const struct stat *st)
{
    char t[32];
    format_rfc3339_ms((int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000, t);
    json_t *j = json_pack("{s:s, s:I, s:i, s:s}", "type", type_name(st->st_mode), "size",
                          (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777), "mtime", t);
    set_path(j, "path", path);
    return j;
}

static const char *arg_str(json_t *req, const char *key)
{
    return json_string_value(json_object_get(req, key));
}

/* The path argument key into *in: <key>_base64 (exact bytes, for names that are not UTF-8) if
 * given, else the text (NULL if neither). buf holds the decoded bytes. */
static int path_arg(json_t *req, const char *key, const char **in, char *buf, size_t size,
                    struct mcp_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s_base64", key);
    const char *b64 = arg_str(req, name);
    *in = arg_str(req, key);
    if (b64 == NULL)
        return 0;
    size_t len = strlen(b64), n = 0;
    if (base64_decoded_max(len) >= size ||
        base64_decode(b64, len, (unsigned char *)buf, &n) < 0 || memchr(buf, '\0', n) != NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s is not the base64 of a path (no NUL, at most %zu bytes)", name,
                             size - 1);
    buf[n] = '\0';
    *in = buf;
    return 0;
}

static int resolve_arg(struct agent *a, json_t *req, const char *key, char *out,
                       struct mcp_error *err)
{
    char raw[FS_PATH_MAX];
    const char *in;
    if (path_arg(req, key, &in, raw, sizeof raw, err) < 0)
        return -1;
    return agent_resolve(a, in, out, FS_PATH_MAX, err);
}

static json_t *op_read(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX];
    if (resolve_arg(a, req, "path", path, err) < 0)
        return NULL;
    int fd = open2(AT_FDCWD, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    if (fd < 0) {
        fs_err(err, errno, "cannot open", path);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        mcp_error_set(err, MCP_ERR_INVALID, 0, "%s is not a regular file (%s)", path,
                      type_name(st.st_mode));
        return NULL;
    }
    uint64_t off = (uint64_t)json_integer_value(json_object_get(req, "offset"));
    uint64_t len = (uint64_t)json_integer_value(json_object_get(req, "length"));
    uint64_t size = (uint64_t)st.st_size;
    if (off > size)
        off = size;
    if (len == 0 || len > AGENT_IO_MAX)
        len = AGENT_IO_MAX;
    if (len > size - off)
        len = size - off;
    char *data = xmalloc(len + 1);
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, data + got, len - got, (off_t)(off + got));
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    char *b64 = xmalloc(base64_encoded_len(got) + 1);
    base64_encode(data, got, b64);
    json_t *res = json_pack("{s:s, s:I, s:I, s:i, s:b}", "data", b64, "size", (json_int_t)size,
                            "offset", (json_int_t)off, "mode", (int)(st.st_mode & 07777),
                            "truncated", off + got < size);
    set_path(res, "path", path);
    free(data);
    free(b64);
    return res;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char tmp[FS_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, mode) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static void split_path(const char *path, char *dir, char *base)
{
    const char *slash = strrchr(path, '/');
    size_t dlen = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    snprintf(base, FS_PATH_MAX, "%s", slash + 1);
}

static int hash_file(int dirfd, const char *name, uint64_t *size, char hex[65])
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    char chunk[AGENT_READ_CHUNK];
    ssize_t n;
    *size = 0;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) {
        sha256_update(&ctx, chunk, (size_t)n);
        *size += (uint64_t)n;
    }
    close(fd);
    unsigned char d[32];
    sha256_final(&ctx, d);
    hex_encode(d, 32, hex);
    return 0;
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        data += n, len -= (size_t)n;
    }
    return 0;
}

/* A file changed through the tools must look changed to caches keyed on its mtime. Python's
 * .pyc records the source's mtime in whole seconds (and its size): an edit in the same second
 * that keeps the size left the stale bytecode in use. So when the new mtime falls in the same
 * second as the old one (or before it), it moves to the start of the next second. That works
 * for every mtime cache, whatever its resolution (make, pytest, jest, ...), unlike an
 * environment variable for Python alone; the cost is an mtime up to a second ahead of the
 * clock after quick successive edits. */
static void bump_mtime(int fd, bool existed, const struct stat *old)
{
    struct stat now;
    if (!existed || fstat(fd, &now) < 0 || now.st_mtim.tv_sec > old->st_mtim.tv_sec)
        return;
    struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = old->st_mtim.tv_sec + 1}};
    futimens(fd, times);
}

/* Write: temp file in the same directory, then rename over the target (readers never see a
 * half-written file). Append: O_APPEND on the existing regular file. Both bump the mtime past
 * the old one's second (bump_mtime). */
static int put_file(int dirfd, const char *base, const char *data, size_t len, mode_t mode,
                    bool append, const char *path, struct mcp_error *err)
{
    struct stat st;
    bool exists = fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "%s exists and is a %s, not a file", path,
                             type_name(st.st_mode));
    if (mode == 0)
        mode = exists ? (st.st_mode & 07777) : FS_DEFAULT_MODE;
    if (append) {
        int fd = openat(dirfd, base, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
        if (fd < 0)
            return fs_err(err, errno, "cannot open", path);
        int rc = write_all(fd, data, len);
        int e = errno;
        if (rc == 0)
            bump_mtime(fd, exists, &st);
        close(fd);
        return rc < 0 ? fs_err(err, e, "cannot write", path) : 0;
    }
    char tmp[FS_PATH_MAX + 32], rnd[17];
    random_id(rnd, sizeof rnd, "", 8);
    snprintf(tmp, sizeof tmp, ".%.200s.mcpbox-%s", base, rnd);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return fs_err(err, errno, "cannot create in", path);
    int rc = write_all(fd, data, len);
    int e = errno;
    if (rc == 0 && fchmod(fd, mode) < 0)
        rc = -1, e = errno;
    if (rc == 0)
        bump_mtime(fd, exists, &st);
    close(fd);
    if (rc == 0 && renameat(dirfd, tmp, dirfd, base) < 0)
        rc = -1, e = errno;
    if (rc < 0) {
        unlinkat(dirfd, tmp, 0);
        return fs_err(err, e, "cannot write", path);
    }
    return 0;
}

static json_t *write_common(const char *path, const char *data, size_t len, mode_t mode,
                            bool append, struct mcp_error *err)
{
    char dir[FS_PATH_MAX], base[FS_PATH_MAX];
    split_path(path, dir, base);
    if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "%s names a directory, not a file", path);
        return NULL;
    }
    if (mkdir_p(dir, 0755) < 0) {
        fs_err(err, errno, "cannot create directory", dir);
        return NULL;
    }
    int dirfd = open2(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dirfd < 0) {
        fs_err(err, errno, "cannot open directory", dir);
        return NULL;
    }
    json_t *res = NULL;
    uint64_t size = 0;
    char hex[65];
    if (put_file(dirfd, base, data, len, mode, append, path, err) == 0) {
        if (hash_file(dirfd, base, &size, hex) < 0)
            fs_err(err, errno, "cannot reopen", path);
        else {
            res = json_pack("{s:I, s:s}", "size", (json_int_t)size, "sha256", hex);
            set_path(res, "path", path);
        }
    }
    close(dirfd);
    return res;
}

static json_t *op_write(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX];
    if (resolve_arg(a, req, "path", path, err) < 0)
        return NULL;
    const char *b64 = arg_str(req, "data");
    size_t blen = b64 ? strlen(b64) : 0, len = 0;
    char *data = xmalloc(base64_decoded_max(blen) + 1);
    if (b64 && base64_decode(b64, blen, (unsigned char *)data, &len) < 0) {
        free(data);
        mcp_error_set(err, MCP_ERR_INVALID, 0, "write: data is not base64");
        return NULL;
    }
    json_t *res = write_common(path, data, len, (mode_t)json_integer_value(json_object_get(req, "mode")),
                               json_is_true(json_object_get(req, "append")), err);
    free(data);
    return res;
}

struct walk {
    json_t *out;
    size_t count, scanned, max;
    bool truncated;
    const char *pattern; /* search only */
    const char *root;
};

static void walk_dir(struct walk *w, const char *dir, int depth, int max_depth)
{
    int fd = open2(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL && !w->truncated) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char child[FS_PATH_MAX];
        int cn = snprintf(child, sizeof child, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "",
                          e->d_name);
        if (cn < 0 || (size_t)cn >= sizeof child) {
            w->truncated = true; /* too deep to name: left out, and said so */
            continue;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (++w->scanned > FS_SEARCH_SCAN_MAX || w->count >= w->max) {
            w->truncated = true;
            break;
        }
        if (w->pattern == NULL) {
            json_array_append_new(w->out, stat_json(child, &st));
            w->count++;
        } else {
            const char *rel = child + strlen(w->root) + (strcmp(w->root, "/") ? 1 : 0);
            bool full = strchr(w->pattern, '/') != NULL;
            if (fnmatch(w->pattern, full ? rel : e->d_name, full ? FNM_PATHNAME : 0) == 0) {
                json_t *m = json_object(); /* a plain string unless the name is not UTF-8 */
                set_path(m, "path", child);
                json_array_append_new(w->out, json_object_size(m) == 1
                                                  ? json_incref(json_object_get(m, "path"))
                                                  : json_incref(m));
                json_decref(m);
                w->count++;
            }
        }
        bool skip = strcmp(child, "/proc") == 0 || strcmp(child, "/dev") == 0 ||
                    strcmp(child, "/sys") == 0;
        if (S_ISDIR(st.st_mode) && depth + 1 < max_depth && !skip)
            walk_dir(w, child, depth + 1, max_depth);
    }
    closedir(d);
}

static json_t *op_list(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX], raw[FS_PATH_MAX];
    const char *in;
    if (path_arg(req, "path", &in, raw, sizeof raw, err) < 0 ||
        agent_resolve(a, in ? in : ".", path, sizeof path, err) < 0)
        return NULL;
    json_int_t depth = json_integer_value(json_object_get(req, "depth"));
    if (depth <= 0)
        depth = 1;
    if (depth > FS_LIST_DEPTH_MAX)
        depth = FS_LIST_DEPTH_MAX;
    struct stat st;
    if (stat(path, &st) < 0) {
        fs_err(err, errno, "cannot list", path);
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "%s is not a directory", path);
        return NULL;
    }
    struct walk w = {.out = json_array(), .max = FS_LIST_MAX, .root = path};
    walk_dir(&w, path, 0, (int)depth);
    json_t *res = json_pack("{s:o, s:b}", "entries", w.out, "truncated", w.truncated);
    set_path(res, "path", path);
    return res;
}

static json_t *op_search(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX];
    const char *pattern = arg_str(req, "pattern");
    if (pattern == NULL) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "search: pattern missing");
        return NULL;
    }
    if (resolve_arg(a, req, "path", path, err) < 0)
        return NULL;
    json_int_t max = json_integer_value(json_object_get(req, "max_results"));
    struct walk w = {.out = json_array(), .max = max > 0 ? (size_t)max : FS_SEARCH_DEFAULT,
                     .pattern = pattern, .root = path};
    walk_dir(&w, path, 0, FS_LIST_DEPTH_MAX);
    json_t *res = json_pack("{s:s, s:o, s:b}", "pattern", pattern, "matches", w.out,
                            "truncated", w.truncated);
    set_path(res, "path", path);
    return res;
}

static char *slurp(const char *path, size_t *len, mode_t *mode, struct mcp_error *err)
{
    int fd = open2(AT_FDCWD, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    if (fd < 0) {
        fs_err(err, errno, "cannot open", path);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > AGENT_IO_MAX) {
        close(fd);
        mcp_error_set(err, MCP_ERR_INVALID, 0, "%s is not a regular file of at most %u bytes", path,
                      AGENT_IO_MAX);
        return NULL;
    }
    char *data = xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    ssize_t n;
    while (got < (size_t)st.st_size && (n = read(fd, data + got, (size_t)st.st_size - got)) > 0)
        got += (size_t)n;
    close(fd);
    data[got] = '\0';
    *len = got;
    *mode = st.st_mode & 07777;
    return data;
}

static json_t *op_replace(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX];
    const char *old = arg_str(req, "old"), *new = arg_str(req, "new");
    json_int_t max = json_integer_value(json_object_get(req, "count"));
    if (old == NULL || old[0] == '\0' || new == NULL) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "replace: old (non-empty) and new needed");
        return NULL;
    }
    if (resolve_arg(a, req, "path", path, err) < 0)
        return NULL;
    size_t len;
    mode_t mode;
    char *data = slurp(path, &len, &mode, err);
    if (data == NULL)
        return NULL;
    size_t olen = strlen(old), hits = 0;
    if (json_is_true(json_object_get(req, "unique"))) {
        for (const char *h = data; (h = memmem(h, (size_t)(data + len - h), old, olen)) != NULL;
             h += olen)
            hits++;
        if (hits > 1) {
            free(data);
            mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                          "'%.80s' occurs %zu times in %s; "
                          "include more of the surrounding text so it matches once, or "
                          "pass all: true to replace every occurrence",
                          old, hits, path);
            return NULL;
        }
    }
    struct buf out;
    buf_init(&out, (size_t)AGENT_IO_MAX);
    size_t done = 0;
    const char *p = data, *end = data + len;
    while (p < end && (max <= 0 || done < (size_t)max)) {
        const char *hit = memmem(p, (size_t)(end - p), old, olen);
        if (hit == NULL)
            break;
        if (buf_append(&out, p, (size_t)(hit - p)) < 0 || buf_append_str(&out, new) < 0)
            break;
        p = hit + olen;
        done++;
    }
    json_t *res = NULL;
    if (done == 0)
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "'%.80s' does not occur in %s", old, path);
    else if (buf_append(&out, p, (size_t)(end - p)) < 0)
        mcp_error_set(err, MCP_ERR_LIMIT, 0, "result would exceed %u bytes", AGENT_IO_MAX);
    else if ((res = write_common(path, out.data ? out.data : "", out.len, mode, false, err)))
        json_object_set_new(res, "replacements", json_integer((json_int_t)done));
    buf_release(&out);
    free(data);
    return res;
}

static json_t *op_move(struct agent *a, json_t *req, struct mcp_error *err)
{
    char src[FS_PATH_MAX], dst[FS_PATH_MAX];
    if (resolve_arg(a, req, "source", src, err) < 0 ||
        resolve_arg(a, req, "destination", dst, err) < 0)
        return NULL;
    unsigned flags = json_is_true(json_object_get(req, "overwrite")) ? 0 : RENAME_NOREPLACE;
    /* The raw call: musl (which the agent may be built with) has no renameat2 wrapper. */
    if (syscall(SYS_renameat2, AT_FDCWD, src, AT_FDCWD, dst, flags) < 0) {
        fs_err(err, errno, "cannot move", src);
        return NULL;
    }
    json_t *res = json_object();
    set_path(res, "source", src);
    set_path(res, "destination", dst);
    return res;
}

static int remove_tree(int parent, const char *name)
{
    if (unlinkat(parent, name, 0) == 0)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            remove_tree(dirfd(d), e->d_name);
    closedir(d);
    return unlinkat(parent, name, AT_REMOVEDIR);
}

static json_t *op_delete(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX], dir[FS_PATH_MAX], base[FS_PATH_MAX];
    if (resolve_arg(a, req, "path", path, err) < 0)
        return NULL;
    split_path(path, dir, base);
    if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "refusing to delete %s", path);
        return NULL;
    }
    struct stat st;
    if (lstat(path, &st) < 0) {
        fs_err(err, errno, "cannot delete", path);
        return NULL;
    }
    int dfd = open2(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dfd < 0) {
        fs_err(err, errno, "cannot open directory", dir);
        return NULL;
    }
    int rc;
    if (S_ISDIR(st.st_mode) && json_is_true(json_object_get(req, "recursive")))
        rc = remove_tree(dfd, base);
    else
        rc = unlinkat(dfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
    int e = errno;
    close(dfd);
    if (rc < 0) {
        fs_err(err, e,
               S_ISDIR(st.st_mode) ? "cannot delete directory (recursive?)" : "cannot delete",
               path);
        return NULL;
    }
    json_t *res = json_pack("{s:b}", "deleted", 1);
    set_path(res, "path", path);
    return res;
}

static json_t *op_mkdir(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX];
    if (resolve_arg(a, req, "path", path, err) < 0)
        return NULL;
    json_int_t mode = json_integer_value(json_object_get(req, "mode"));
    mode_t m = mode > 0 ? (mode_t)(mode & 07777) : 0755;
    struct stat st;
    bool existed = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    int rc = json_is_true(json_object_get(req, "parents")) ? mkdir_p(path, m) : mkdir(path, m);
    if (rc < 0) {
        fs_err(err, errno, "cannot create directory", path);
        return NULL;
    }
    json_t *res = json_pack("{s:b}", "created", !existed);
    set_path(res, "path", path);
    return res;
}

static json_t *op_stat(struct agent *a, json_t *req, struct mcp_error *err)
{
    char path[FS_PATH_MAX];
    if (resolve_arg(a, req, "path", path, err) < 0)
        return NULL;
    struct stat st;
    if (lstat(path, &st) < 0) {
        fs_err(err, errno, "cannot stat", path);
        return NULL;
    }
    json_t *j = stat_json(path, &st);
    if (S_ISLNK(st.st_mode)) {
        char target[FS_PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = '\0';
            set_path(j, "target", target);
        }
    }
    return j;
}

json_t *agent_fs_op(struct agent *a, const char *op, json_t *req, struct mcp_error *err)
{
    static const struct {
        const char *name;
        json_t *(*fn)(struct agent *, json_t *, struct mcp_error *);
    } ops[] = {{"read", op_read},       {"write", op_write}, {"list", op_list},
               {"search", op_search},   {"replace", op_replace}, {"move", op_move},
               {"delete", op_delete},   {"mkdir", op_mkdir}, {"stat", op_stat}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(op, ops[i].name) == 0)
            return ops[i].fn(a, req, err);
    return NULL;
}
