/* Snapshot records and layers in the image store (snapshot.h). Nothing here trusts a name it is
 * given: ids and digests are checked for their exact shape before they become paths. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/image/snapshot_files.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define SNAP_PATH_MAX 1200
#define SNAP_ORPHAN_AGE_S 600

void snap_files_init(struct snap_files *f, const char *store_dir)
{
    snprintf(f->dir, sizeof f->dir, "%s", store_dir);
}

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[n] == '\0';
}

static bool id_ok(const char *id)
{
    size_t p = strlen(SNAP_ID_PREFIX);
    return id != NULL && strncmp(id, SNAP_ID_PREFIX, p) == 0 && strlen(id) > p &&
           strlen(id) <= p + 32 && all_hex(id + p, strlen(id + p));
}

static bool digest_ok(const char *d)
{
    return d != NULL && strncmp(d, "sha256:", 7) == 0 && strlen(d) == 7 + 64 && all_hex(d + 7, 64);
}

static void layer_path(const struct snap_files *f, const char *digest, char *out, size_t size)
{
    snprintf(out, size, "%s/blobs/sha256/%s", f->dir, digest + 7);
}

static int mkdirs(const struct snap_files *f, struct mcp_error *err)
{
    static const char *const subs[] = {"", "/blobs", "/blobs/sha256", "/snapshots", "/tmp"};
    char path[SNAP_PATH_MAX];
    for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
        snprintf(path, sizeof path, "%s%s", f->dir, subs[i]);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
            return mcp_error_set(err, MCP_ERR_IO, errno, "cannot make %s: %s", path,
                                 strerror(errno));
    }
    return 0;
}

int snap_files_begin(const struct snap_files *f, char *tmp, size_t size, struct mcp_error *err)
{
    if (mkdirs(f, err) < 0)
        return -1;
    char rnd[24];
    random_id(rnd, sizeof rnd, "", 8);
    snprintf(tmp, size, "%s/tmp/snap.%d.%s", f->dir, (int)getpid(), rnd);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot write in %s/tmp: %s", f->dir,
                             strerror(errno));
    return fd;
}

static int sync_dir(const char *dir)
{
    cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd >= 0 ? fsync(fd) : -1;
}

int snap_files_commit_layer(const struct snap_files *f, int fd, const char *tmp, const char *digest,
                            struct mcp_error *err)
{
    char path[SNAP_PATH_MAX], dir[SNAP_PATH_MAX];
    layer_path(f, digest, path, sizeof path);
    if (fsync(fd) < 0) {
        int e = errno;
        unlink(tmp);
        return mcp_error_set(err, e == ENOSPC ? MCP_ERR_LIMIT : MCP_ERR_IO, e,
                             "cannot store the snapshot (%s): free disk space under %s and try "
                             "again",
                             strerror(e), f->dir);
    }
    if (access(path, F_OK) == 0) { /* the same bytes are stored already: share them */
        unlink(tmp);
        return 0;
    }
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return mcp_error_set(err, MCP_ERR_IO, e, "cannot store the snapshot in %s: %s", path,
                             strerror(e));
    }
    snprintf(dir, sizeof dir, "%s/blobs/sha256", f->dir);
    sync_dir(dir);
    return 0;
}

static void record_path(const struct snap_files *f, const char *id, char *out, size_t size)
{
    snprintf(out, size, "%s/snapshots/%s.json", f->dir, id);
}

int snap_files_save(const struct snap_files *f, json_t *rec, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(rec, "snapshot_id"));
    char path[SNAP_PATH_MAX], tmp[SNAP_PATH_MAX + 16], dir[SNAP_PATH_MAX];
    if (!id_ok(id) || mkdirs(f, err) < 0)
        return id_ok(id) ? -1 : mcp_error_set(err, MCP_ERR_INTERNAL, 0, "bad snapshot id");
    record_path(f, id, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    char *text = json_dumps(rec, JSON_COMPACT);
    int rc = fd >= 0 && text && write_full(fd, text, strlen(text)) == 0 && fsync(fd) == 0 &&
                     rename(tmp, path) == 0
                 ? 0
                 : -1;
    int e = errno;
    free(text);
    if (rc < 0) {
        unlink(tmp);
        return mcp_error_set(err, e == ENOSPC ? MCP_ERR_LIMIT : MCP_ERR_IO, e,
                             "cannot record the snapshot in %s (%s): free disk space there and "
                             "try again",
                             f->dir, strerror(e));
    }
    snprintf(dir, sizeof dir, "%s/snapshots", f->dir);
    sync_dir(dir);
    return 0;
}

static json_t *read_record(const struct snap_files *f, const char *id)
{
    char path[SNAP_PATH_MAX];
    record_path(f, id, path, sizeof path);
    json_t *rec = json_load_file(path, 0, NULL);
    if (!json_is_object(rec) || !digest_ok(json_string_value(json_object_get(rec, "layer")))) {
        json_decref(rec);
        return NULL;
    }
    return rec;
}

static bool visible(json_t *rec, const char *owner)
{
    const char *o = json_string_value(json_object_get(rec, "owner"));
    return owner == NULL || (o != NULL && strcmp(o, owner) == 0);
}

json_t *snap_files_load(const struct snap_files *f, const char *id, const char *owner,
                        struct mcp_error *err)
{
    json_t *rec = id_ok(id) ? read_record(f, id) : NULL;
    if (rec != NULL && visible(rec, owner))
        return rec;
    json_decref(rec); /* another owner's is reported exactly like a missing one */
    mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                  "no snapshot %s; snapshot_sandbox {\"action\": \"list\"} shows yours",
                  id ? id : "(none)");
    return NULL;
}

static int newest_first(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *cx = json_string_value(json_object_get(x, "created_at"));
    const char *cy = json_string_value(json_object_get(y, "created_at"));
    return strcmp(cy ? cy : "", cx ? cx : "");
}

/* Every readable record (owner NULL: all), in a C array of new references. */
static json_t **all_records(const struct snap_files *f, const char *owner, size_t *n)
{
    char dir[SNAP_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/snapshots", f->dir);
    json_t **v = NULL;
    size_t cap = 0;
    *n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        char id[64];
        size_t len = strlen(de->d_name);
        if (len < 6 || len - 5 >= sizeof id || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        snprintf(id, sizeof id, "%.*s", (int)(len - 5), de->d_name);
        json_t *rec = id_ok(id) ? read_record(f, id) : NULL;
        if (rec == NULL || !visible(rec, owner)) {
            json_decref(rec);
            continue;
        }
        if (*n == cap)
            v = xrealloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
        v[(*n)++] = rec;
    }
    if (d != NULL)
        closedir(d);
    if (*n > 1)
        qsort(v, *n, sizeof *v, newest_first);
    return v;
}

json_t *snap_files_list(const struct snap_files *f, const char *owner)
{
    size_t n;
    json_t **v = all_records(f, owner, &n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    free(v);
    return arr;
}

static bool layer_named(const struct snap_files *f, const char *digest)
{
    size_t n;
    json_t **v = all_records(f, NULL, &n);
    bool named = false;
    for (size_t i = 0; i < n; i++) {
        named = named || strcmp(json_string_value(json_object_get(v[i], "layer")), digest) == 0;
        json_decref(v[i]);
    }
    free(v);
    return named;
}

int snap_files_delete(const struct snap_files *f, const char *id, struct mcp_error *err)
{
    json_t *rec = snap_files_load(f, id, NULL, err);
    if (rec == NULL)
        return -1;
    char path[SNAP_PATH_MAX];
    record_path(f, id, path, sizeof path);
    if (unlink(path) < 0) {
        json_decref(rec);
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot remove %s: %s", path, strerror(errno));
    }
    const char *digest = json_string_value(json_object_get(rec, "layer"));
    if (!layer_named(f, digest)) {
        layer_path(f, digest, path, sizeof path);
        unlink(path);
    }
    json_decref(rec);
    return 0;
}

int snap_files_open_layer(const struct snap_files *f, const char *digest, struct mcp_error *err)
{
    char path[SNAP_PATH_MAX];
    if (!digest_ok(digest))
        return mcp_error_set(err, MCP_ERR_BACKEND, 0, "the snapshot's record is damaged");
    layer_path(f, digest, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, errno,
                             "the snapshot's layer %s is missing from %s; delete the snapshot "
                             "and take it again",
                             digest, f->dir);
    return fd;
}

/* Each stored layer: its size added to *bytes; removed when remove is set and no record
 * names it. */
static size_t walk_layers(const struct snap_files *f, bool remove, uint64_t *bytes)
{
    char dir[SNAP_PATH_MAX], path[SNAP_PATH_MAX + 80], digest[80];
    snprintf(dir, sizeof dir, "%s/blobs/sha256", f->dir);
    size_t removed = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    struct stat st;
    while (d != NULL && (de = readdir(d)) != NULL) {
        snprintf(digest, sizeof digest, "sha256:%s", de->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!digest_ok(digest) || lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        /* a layer of no record younger than SNAP_ORPHAN_AGE_S may be a fork's at work */
        bool old = st.st_mtime + SNAP_ORPHAN_AGE_S < time(NULL);
        if (remove && old && !layer_named(f, digest) && unlink(path) == 0) {
            removed++;
            *bytes += (uint64_t)st.st_size;
        } else if (!remove) {
            *bytes += (uint64_t)st.st_size;
        }
    }
    if (d != NULL)
        closedir(d);
    return removed;
}

uint64_t snap_files_usage(const struct snap_files *f)
{
    uint64_t bytes = 0;
    walk_layers(f, false, &bytes);
    return bytes;
}

json_t *snap_files_prune(const struct snap_files *f)
{
    uint64_t freed = 0;
    size_t removed = walk_layers(f, true, &freed);
    return json_pack("{s:I, s:I}", "removed", (json_int_t)removed, "freed_bytes",
                     (json_int_t)freed);
}

void snap_files_drop_layer(const struct snap_files *f, const char *digest)
{
    char path[SNAP_PATH_MAX];
    if (!digest_ok(digest) || layer_named(f, digest))
        return;
    layer_path(f, digest, path, sizeof path);
    unlink(path);
}

int snap_files_keep_pulled(const struct snap_files *f, int fd, const char *digest,
                           struct mcp_error *err)
{
    char path[SNAP_PATH_MAX], proc[64];
    if (!digest_ok(digest) || mkdirs(f, err) < 0)
        return -1;
    layer_path(f, digest, path, sizeof path);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (fsync(fd) < 0 ||
        (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST))
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot keep the snapshot layer %s: %s", path,
                             strerror(errno));
    return 0;
}
