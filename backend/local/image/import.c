/* A registered root filesystem directory as a one-layer image of the store (image.h,
 * image_service_import_dir): where the directory cannot be mounted idmapped (overlayfs, NFS,
 * ...), it is copied once into the store with its owners shifted into the shared mapping, as
 * pulled layers are unpacked there (docs/images.md, Ownership).
 *
 * The copy is keyed by a fingerprint of the directory's metadata (every entry's path, type,
 * mode, owners, size, mtime and ctime): a change in the directory makes a new copy at the next
 * create; the old one is evicted or pruned like any layer no sandbox uses. */
#define LOG_MODULE "image"
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/image.h"
#include "backend/local/image/layer_store.h"
#include "backend/local/image/unpack.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

struct import_job {
    struct image_service *svc;
    char name[256];
    char dir[LAYER_STORE_PATH_MAX];
    uint32_t shift_uid, shift_gid;
    uint64_t max_bytes;
    char key[IMAGE_DIGEST_LEN + 1];
    char layer_dir[LAYER_STORE_PATH_MAX + 100];
    uv_work_t work;
    int rc;
    struct mcp_error err;
    image_done_fn *done;
    void *arg;
};

/* nftw has no argument for its callback: the walk of this thread. */
static _Thread_local struct sha256_ctx *walk_hash;
static _Thread_local size_t walk_skip; /* length of the directory's own path */

static int fingerprint_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag, (void)ftw;
    char line[LAYER_STORE_PATH_MAX + 200];
    int n = snprintf(line, sizeof line, "%s\n%o %u %u %lld %lld.%09ld %lld.%09ld\n",
                     path + walk_skip, (unsigned)st->st_mode, (unsigned)st->st_uid,
                     (unsigned)st->st_gid, (long long)st->st_size, (long long)st->st_mtim.tv_sec,
                     st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
    sha256_update(walk_hash, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : sizeof line);
    return 0;
}

/* "sha256:..." of the directory's metadata, its path and the ids it is shifted by. */
static int fingerprint(struct import_job *j)
{
    struct sha256_ctx h;
    unsigned char d[32];
    char head[LAYER_STORE_PATH_MAX + 64];
    sha256_init(&h);
    int n = snprintf(head, sizeof head, "mcpbox-import-1 %s %u %u\n", j->dir,
                     (unsigned)j->shift_uid, (unsigned)j->shift_gid);
    sha256_update(&h, head, (size_t)n);
    walk_hash = &h;
    walk_skip = strlen(j->dir);
    if (nftw(j->dir, fingerprint_entry, 64, FTW_PHYS | FTW_MOUNT) < 0)
        return mcp_error_set(&j->err, MCP_ERR_IO, errno, "reading the image directory %s",
                             j->dir);
    sha256_final(&h, d);
    memcpy(j->key, "sha256:", 7);
    for (int i = 0; i < 32; i++)
        snprintf(j->key + 7 + 2 * i, 3, "%02x", d[i]);
    return 0;
}

static void import_work(uv_work_t *w)
{
    struct import_job *j = w->data;
    struct layer_store *st = image_service_store(j->svc);
    char tmp[LAYER_STORE_PATH_MAX + 200], root[LAYER_STORE_PATH_MAX + 300];
    struct unpack_result res;
    memset(&res, 0, sizeof res);
    if ((j->rc = fingerprint(j)) < 0 ||
        layer_store_lookup(st, j->key, j->layer_dir, sizeof j->layer_dir))
        return;
    if ((j->rc = layer_store_begin(st, j->key, tmp, sizeof tmp, &j->err)) < 0)
        return;
    snprintf(root, sizeof root, "%s/root", tmp);
    j->rc = image_import_dir(j->dir, root, j->shift_uid, j->shift_gid, j->max_bytes, &res,
                             &j->err);
    if (j->rc == 0)
        j->rc = layer_store_commit(st, j->key, tmp, &res, &j->err);
    else
        layer_store_remove(st, tmp);
    if (j->rc == 0 && !layer_store_lookup(st, j->key, j->layer_dir, sizeof j->layer_dir))
        j->rc = mcp_error_set(&j->err, MCP_ERR_IO, 0, "the copy of %s vanished", j->dir);
    if (j->rc == 0)
        log_info("image directory %s copied into the store as %.19s (%llu bytes, %llu entries): "
                 "its filesystem cannot be mounted idmapped",
                 j->dir, j->key, (unsigned long long)res.bytes,
                 (unsigned long long)res.entries);
}

static void import_after(uv_work_t *w, int status)
{
    struct import_job *j = w->data;
    if (status == UV_ECANCELED && j->rc == 0)
        j->rc = mcp_error_set(&j->err, MCP_ERR_UNAVAILABLE, 0, "the server is stopping");
    if (j->rc < 0) {
        mcp_error_prefix(&j->err, "image %s", j->name);
        j->done(j->arg, NULL, &j->err);
    } else {
        json_t *image = json_pack("{s:s, s:s, s:[s], s:[s], s:{s:{}, s:s, s:s}, s:s}",
                                  "reference", j->name, "digest", j->key, "layers", j->key,
                                  "layer_dirs", j->layer_dir, "config", "env", "workdir", "",
                                  "user", "", "imported_from", j->dir);
        j->done(j->arg, image, NULL);
        json_decref(image);
    }
    struct image_service *s = j->svc;
    free(j);
    image_service_hold(s, -1); /* last: it frees a service closed while this ran */
}

int image_service_import_dir(struct image_service *s, const char *name, const char *dir,
                             uint32_t shift_uid, uint32_t shift_gid, image_done_fn *done,
                             void *arg, struct mcp_error *err)
{
    if (oci_archive_load(err) < 0)
        return -1;
    struct import_job *j = xcalloc(1, sizeof *j);
    j->svc = s, j->done = done, j->arg = arg;
    j->shift_uid = shift_uid, j->shift_gid = shift_gid;
    snprintf(j->name, sizeof j->name, "%s", name);
    char real[PATH_MAX];
    snprintf(j->dir, sizeof j->dir, "%s", realpath(dir, real) ? real : dir); /* walk the target */
    const struct layer_store *st = image_service_store(s);
    uint64_t used = layer_store_usage(st);
    j->max_bytes = st->cap_bytes > used ? st->cap_bytes - used : 0;
    j->work.data = j;
    image_service_hold(s, 1);
    uv_queue_work(image_service_loop(s), &j->work, import_work, import_after);
    return 0;
}
