/* The content-addressed layer store (layer_store.h). */
#define _XOPEN_SOURCE 700
#include "backend/local/image/layer_store.h"
#include "backend/local/image/snapshot_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/image/manifest.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

static const char *hex_of(const char *digest)
{
    return strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;
}

static int make_dir(const char *path, struct mcp_error *err)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot create %s", path);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
    return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int layer_store_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(path, remove_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

int layer_store_remove(const struct layer_store *s, const char *path)
{
    if (s->ns) {
        char root[LAYER_STORE_PATH_MAX + 400];
        struct mcp_error err;
        snprintf(root, sizeof root, "%s/root", path);
        image_clear_in_userns(root, s->ns, &err);
    }
    return layer_store_remove_tree(path);
}

/* tmp/<hex>.<pid>.<rand>: removed when <pid> is gone. */
static void sweep_tmp(const struct layer_store *s, const char *tmp)
{
    DIR *d = opendir(tmp);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *dot = strchr(e->d_name, '.');
        if (e->d_name[0] == '.' || dot == NULL)
            continue;
        long pid = strtol(dot + 1, NULL, 10);
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            continue;
        char path[LAYER_STORE_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
        layer_store_remove(s, path);
    }
    closedir(d);
}

int layer_store_open(struct layer_store *s, const char *state_dir, const struct unpack_userns *ns,
                     struct mcp_error *err)
{
    memset(s, 0, sizeof *s);
    s->ns = ns;
    int n = snprintf(s->dir, sizeof s->dir, "%s/image-store", state_dir);
    if (n < 0 || (size_t)n >= sizeof s->dir - 200)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "state directory path too long");
    const char *cap = getenv(LAYER_STORE_CAP_ENV);
    s->cap_bytes = cap && *cap ? strtoull(cap, NULL, 10) : LAYER_STORE_DEFAULT_CAP;
    char path[LAYER_STORE_PATH_MAX + 16];
    if (make_dir(s->dir, err) < 0)
        return -1;
    static const char *const subdirs[] = {"layers", "images", "tmp"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", s->dir, subdirs[i]);
        if (make_dir(path, err) < 0)
            return -1;
    }
    snprintf(path, sizeof path, "%s/tmp", s->dir);
    sweep_tmp(s, path);
    return 0;
}

bool layer_store_lookup(const struct layer_store *s, const char *digest, char *out, size_t size)
{
    char meta[LAYER_STORE_PATH_MAX + 100];
    snprintf(meta, sizeof meta, "%s/layers/%s/meta.json", s->dir, hex_of(digest));
    if (access(meta, F_OK) < 0)
        return false;
    snprintf(out, size, "%s/layers/%s/root", s->dir, hex_of(digest));
    snprintf(meta, sizeof meta, "%s/layers/%s", s->dir, hex_of(digest));
    utimensat(AT_FDCWD, meta, NULL, 0); /* last use, for the LRU */
    return true;
}

bool layer_store_diff_id(const struct layer_store *s, const char *digest, char *out,
                         size_t size)
{
    char meta[LAYER_STORE_PATH_MAX + 100];
    snprintf(meta, sizeof meta, "%s/layers/%s/meta.json", s->dir, hex_of(digest));
    json_t *m = json_load_file(meta, 0, NULL);
    const char *d = json_string_value(json_object_get(m, "diff_id"));
    if (d)
        snprintf(out, size, "%s", d);
    json_decref(m);
    return d != NULL;
}

int layer_store_begin(const struct layer_store *s, const char *digest, char *tmp_dir,
                      size_t size, struct mcp_error *err)
{
    char rnd[24];
    random_id(rnd, sizeof rnd, "", 8);
    snprintf(tmp_dir, size, "%s/tmp/%s.%d.%s", s->dir, hex_of(digest), (int)getpid(), rnd);
    char root[LAYER_STORE_PATH_MAX + 200];
    snprintf(root, sizeof root, "%s/root", tmp_dir);
    if (mkdir(tmp_dir, 0700) < 0 || mkdir(root, 0755) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot create %s", root);
    return 0;
}

int layer_store_commit(const struct layer_store *s, const char *digest, const char *tmp_dir,
                       const struct unpack_result *res, struct mcp_error *err)
{
    char path[LAYER_STORE_PATH_MAX + 200], final[LAYER_STORE_PATH_MAX + 100];
    snprintf(path, sizeof path, "%s/meta.json", tmp_dir);
    json_t *meta = json_pack("{s:s, s:s, s:I, s:I}", "digest", digest, "diff_id", res->diff_id,
                             "bytes", (json_int_t)res->bytes, "entries",
                             (json_int_t)res->entries);
    int rc = json_dump_file(meta, path, JSON_COMPACT);
    json_decref(meta);
    if (rc < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot write %s", path);
    snprintf(path, sizeof path, "%s/root", tmp_dir);
    chmod(path, 0755); /* rootless unpacks open it to the namespace's root (unpack.c) */
    snprintf(final, sizeof final, "%s/layers/%s", s->dir, hex_of(digest));
    if (rename(tmp_dir, final) == 0)
        return 0;
    int e = errno;
    if (e == EEXIST || e == ENOTEMPTY) { /* another pull of the same layer won */
        layer_store_remove(s, tmp_dir);
        return 0;
    }
    layer_store_remove(s, tmp_dir);
    return mcp_error_set(err, MCP_ERR_IO, e, "cannot move the layer into %s", final);
}

struct layer_info {
    char digest[IMAGE_DIGEST_LEN + 1];
    uint64_t bytes;
    struct timespec used;
};

/* Every complete layer with its size and last use; *n set. */
static struct layer_info *read_layers(const struct layer_store *s, size_t *n)
{
    char path[LAYER_STORE_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/layers", s->dir);
    *n = 0;
    DIR *d = opendir(path);
    if (d == NULL)
        return NULL;
    size_t cap = 16;
    struct layer_info *v = xcalloc(cap, sizeof *v);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strlen(e->d_name) != 64)
            continue;
        struct stat st;
        snprintf(path, sizeof path, "%s/layers/%s/meta.json", s->dir, e->d_name);
        json_t *meta = json_load_file(path, 0, NULL);
        snprintf(path, sizeof path, "%s/layers/%s", s->dir, e->d_name);
        if (meta == NULL || stat(path, &st) < 0) {
            json_decref(meta);
            continue;
        }
        if (*n == cap)
            v = xrealloc(v, (cap *= 2) * sizeof *v);
        snprintf(v[*n].digest, sizeof v[*n].digest, "sha256:%s", e->d_name);
        v[*n].bytes = (uint64_t)json_integer_value(json_object_get(meta, "bytes"));
        v[*n].used = st.st_mtim;
        json_decref(meta);
        (*n)++;
    }
    closedir(d);
    return v;
}

uint64_t layer_store_usage(const struct layer_store *s)
{
    size_t n;
    struct layer_info *v = read_layers(s, &n);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += v[i].bytes;
    free(v);
    struct snap_files f; /* snapshots count under the same cap (not evicted: they are kept) */
    snap_files_init(&f, s->dir);
    return total + snap_files_usage(&f);
}

static bool named(json_t *in_use, const char *digest)
{
    size_t i;
    json_t *d;
    json_array_foreach(in_use, i, d) {
        if (json_is_string(d) && strcmp(json_string_value(d), digest) == 0)
            return true;
    }
    return false;
}

static int by_last_use(const void *a, const void *b)
{
    const struct layer_info *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

int layer_store_make_room(const struct layer_store *s, uint64_t need, json_t *in_use,
                          struct mcp_error *err)
{
    size_t n;
    struct layer_info *v = read_layers(s, &n);
    uint64_t total = 0, pinned = 0;
    for (size_t i = 0; i < n; i++)
        total += v[i].bytes;
    qsort(v, n, sizeof *v, by_last_use);
    for (size_t i = 0; i < n && total + need > s->cap_bytes; i++) {
        if (in_use == NULL || named(in_use, v[i].digest)) {
            pinned += v[i].bytes;
            continue;
        }
        char path[LAYER_STORE_PATH_MAX + 100];
        snprintf(path, sizeof path, "%s/layers/%s", s->dir, v[i].digest + 7);
        if (layer_store_remove(s, path) == 0)
            total -= v[i].bytes;
    }
    free(v);
    if (total + need <= s->cap_bytes)
        return 0;
    return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                         "the image store is full: %llu bytes needed, %llu of the cap of %llu "
                         "bytes are in use (%llu by layers of live sandboxes): destroy sandboxes "
                         "or remove images (`mcpbox image rm`, `mcpbox image prune`), or raise "
                         "the cap with %s",
                         (unsigned long long)need, (unsigned long long)total,
                         (unsigned long long)s->cap_bytes, (unsigned long long)pinned,
                         LAYER_STORE_CAP_ENV);
}

static void image_path(const struct layer_store *s, const char *ref_text, char *out, size_t size)
{
    char hex[65];
    sha256_hex(ref_text, strlen(ref_text), hex);
    snprintf(out, size, "%s/images/%s.json", s->dir, hex);
}

int layer_store_save_image(const struct layer_store *s, const char *ref_text, json_t *image,
                           struct mcp_error *err)
{
    char path[LAYER_STORE_PATH_MAX + 100], tmp[LAYER_STORE_PATH_MAX + 120];
    image_path(s, ref_text, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    if (json_dump_file(image, tmp, JSON_COMPACT) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return mcp_error_set(err, MCP_ERR_IO, e, "cannot write %s", path);
    }
    return 0;
}

json_t *layer_store_load_image(const struct layer_store *s, const char *ref_text)
{
    char path[LAYER_STORE_PATH_MAX + 100];
    image_path(s, ref_text, path, sizeof path);
    json_t *j = json_load_file(path, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int layer_store_remove_image(const struct layer_store *s, const char *ref_text,
                             struct mcp_error *err)
{
    char path[LAYER_STORE_PATH_MAX + 100];
    image_path(s, ref_text, path, sizeof path);
    if (unlink(path) < 0)
        return mcp_error_set(err, errno == ENOENT ? MCP_ERR_NOT_FOUND : MCP_ERR_IO, errno,
                             "image '%s' is not in the store (see `mcpbox image ls`)", ref_text);
    return 0;
}

json_t *layer_store_list_images(const struct layer_store *s)
{
    json_t *out = json_array();
    char path[LAYER_STORE_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/images", s->dir);
    DIR *d = opendir(path);
    if (d == NULL)
        return out;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0)
            continue;
        snprintf(path, sizeof path, "%s/images/%s", s->dir, e->d_name);
        json_t *j = json_load_file(path, 0, NULL);
        if (json_is_object(j))
            json_array_append_new(out, j);
        else
            json_decref(j);
    }
    closedir(d);
    return out;
}
