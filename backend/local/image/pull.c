/* The image service (image.h): resolve a reference from the store or pull it.
 *
 * A pull: manifest (an index is resolved to the host's platform) -> config -> the layers not in
 * the store. Each such layer is a job: downloaded into an unnamed temporary file (O_TMPFILE in
 * the store's tmp/, so a crash leaves nothing), its sha256 and size checked against the
 * manifest, then unpacked in a worker thread (unpack.h) and renamed into the store. Downloads
 * of one pull run one after another on the loop while earlier layers unpack in worker threads;
 * a layer that another pull of this process is already fetching is waited for, not fetched
 * twice. */
#define LOG_MODULE "image"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/image.h"
#include "backend/local/image/image_config.h"
#include "backend/local/image/layer_hash.h"
#include "backend/local/image/layer_store.h"
#include "backend/local/image/manifest.h"
#include "backend/local/image/registry.h"
#include "backend/local/image/snapshot_files.h"
#include "backend/local/image/unpack.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define PROGRESS_TICK_MS 250 /* how often a pull under way reports (and polls its unpacks) */
/* A blob download that breaks is resumed (a Range request from the bytes kept) this many
 * times in all, after 250 ms, 0.5 s, 1 s, 2 s. */
#define DOWNLOAD_ATTEMPTS 5
#define DOWNLOAD_BACKOFF_MS 250

struct pull;

struct layer_job {
    struct image_service *svc;
    struct layer_job *next;
    struct oci_descriptor desc;
    size_t index;       /* 1-based in its owner's queue (the layers the owner fetches) */
    char diff_id[72];   /* the config's rootfs.diff_ids entry: the unpacked stream's digest */
    struct pull *owner; /* downloads it */
    struct pull **waiters;
    size_t n_waiters;
    int fd;
    struct layer_hash hash;
    uint64_t received;
    unsigned attempts;         /* downloads started */
    uint64_t retry_at_ms;      /* a broken download resumes then (0: none waiting) */
    struct mcp_error last_err; /* why the last attempt broke */
    uint64_t unpacked; /* blob bytes the unpacker has read (polled from the shared offset) */
    bool unpacking, unpack_done;
    uv_work_t work;
    uint64_t max_bytes;
    struct unpack_result res;
    int rc;
    struct mcp_error err;
};

struct pull {
    struct image_service *svc;
    struct pull *next;
    struct image_ref ref;
    char ref_text[IMAGE_REF_TEXT_MAX];
    bool force;
    image_progress_fn *progress;
    image_done_fn *done;
    void *arg;
    struct registry_client *client;
    char *creds; /* given with the request ("user:password"), or NULL: the files */
    char digest[IMAGE_DIGEST_LEN + 1];          /* of what the reference names */
    char manifest_digest[IMAGE_DIGEST_LEN + 1]; /* of the platform's image manifest */
    struct oci_manifest manifest;
    struct image_config config;
    struct layer_job **queue; /* owned jobs still to download, in order */
    size_t n_queue, next_download;
    struct layer_job *downloading;
    size_t outstanding; /* jobs this pull waits for */
    /* Every layer job it waits for (its own and those other pulls fetch), for progress; an
     * entry is NULL once that job is over. */
    struct layer_job **waits;
    size_t n_waits;
    uint64_t total;          /* compressed bytes of those layers */
    uint64_t completed_size; /* of those over (downloaded and unpacked) */
    size_t n_unpacked;
    uint64_t reported;          /* the work last reported (download + unpack bytes) */
    bool failed, finished;
    struct mcp_error err;
    /* A cache hit answers from the next loop turn; a pull reports its progress on it. */
    uv_timer_t timer;
    json_t *cached;
};

struct image_service {
    uv_loop_t *loop;
    struct httpc *http;
    struct layer_store store;
    image_in_use_fn *in_use;
    void *in_use_arg;
    struct layer_job *jobs;
    struct pull *pulls;
    size_t busy; /* worker-thread unpacks under way */
    struct unpack_userns ns; /* rootless (store.ns points here) */
    bool closing;
};

static void pull_check(struct pull *p);
static void next_download(struct pull *p);
static void resume_download(struct pull *p);

bool image_reference_valid(const char *text)
{
    struct image_ref r;
    struct mcp_error err;
    return image_ref_parse(text, &r, &err) == 0;
}

struct image_service *image_service_new(uv_loop_t *loop, const char *state_dir,
                                        const struct unpack_userns *ns, image_in_use_fn *in_use,
                                        void *in_use_arg, struct mcp_error *err)
{
    struct image_service *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    s->in_use = in_use;
    s->in_use_arg = in_use_arg;
    if (ns) {
        s->ns = *ns;
        ns = &s->ns;
    }
    if (layer_store_open(&s->store, state_dir, ns, err) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

static void pull_fail(struct pull *p, const struct mcp_error *e)
{
    if (!p->failed)
        mcp_error_copy(&p->err, e);
    p->failed = true;
}

/* ---- the record ------------------------------------------------------------------------------ */

/* layer_dirs for a record whose layers are all in the store; false if one is missing. */
static bool add_layer_dirs(struct image_service *s, json_t *image)
{
    json_t *dirs = json_array(), *d;
    size_t i;
    json_array_foreach(json_object_get(image, "layers"), i, d) {
        char dir[LAYER_STORE_PATH_MAX + 100];
        if (!json_is_string(d) ||
            !layer_store_lookup(&s->store, json_string_value(d), dir, sizeof dir)) {
            json_decref(dirs);
            return false;
        }
        json_array_append_new(dirs, json_string(dir));
    }
    json_object_set_new(image, "layer_dirs", dirs);
    return json_array_size(dirs) > 0;
}

static json_t *make_record(struct pull *p)
{
    json_t *layers = json_array();
    json_int_t size = 0;
    for (size_t i = 0; i < p->manifest.n_entries; i++) {
        json_array_append_new(layers, json_string(p->manifest.entries[i].digest));
        size += p->manifest.entries[i].size;
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:I, s:I}", "reference", p->ref_text, "digest",
                     p->digest, "manifest_digest", p->manifest_digest, "config",
                     image_config_to_json(&p->config), "layers", layers, "size", size,
                     "pulled_at_ms", (json_int_t)now_wall_ms());
}

/* ---- finishing ------------------------------------------------------------------------------- */

/* A service closed while work was under way is freed by the last piece of that work to end. */
static void service_free_if_closed(struct image_service *s)
{
    if (s->closing && s->pulls == NULL && s->busy == 0)
        free(s);
}

static void pull_free(struct pull *p)
{
    struct image_service *s = p->svc;
    for (struct pull **pp = &s->pulls; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    registry_client_free(p->client);
    if (p->creds)
        explicit_bzero(p->creds, strlen(p->creds));
    free(p->creds);
    oci_manifest_free(&p->manifest);
    image_config_free(&p->config);
    json_decref(p->cached);
    free(p->queue);
    free(p->waits);
    free(p);
    service_free_if_closed(s);
}

static void timer_closed(uv_handle_t *h)
{
    pull_free(h->data);
}

static void pull_finish(struct pull *p)
{
    p->finished = true;
    struct mcp_error err;
    json_t *image = NULL;
    if (!p->failed) {
        image = make_record(p);
        if (layer_store_save_image(&p->svc->store, p->ref_text, image, &err) < 0) {
            pull_fail(p, &err);
        } else if (!add_layer_dirs(p->svc, image)) {
            mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                          "a layer of %s was evicted while it was pulled (the image store is "
                          "too small: raise %s); retry",
                          p->ref_text, LAYER_STORE_CAP_ENV);
            pull_fail(p, &err);
        }
    }
    if (p->failed) {
        json_decref(image);
        p->done(p->arg, NULL, &p->err);
    } else {
        p->done(p->arg, image, NULL);
        json_decref(image);
    }
    uv_close((uv_handle_t *)&p->timer, timer_closed);
}

static void pull_check(struct pull *p)
{
    if (p->finished || p->downloading || p->outstanding > 0)
        return;
    if (p->failed || p->next_download >= p->n_queue)
        pull_finish(p);
}

/* ---- progress -------------------------------------------------------------------------------- */

enum layer_stage { STAGE_DOWNLOADING, STAGE_DOWNLOADED, STAGE_UNPACKING, STAGE_UNPACKED };

/* The work of a pull counts each layer it waits for (its own and those another pull fetches)
 * twice: its compressed bytes as they are downloaded, and again as the unpacker reads them, so
 * that a slow unpack moves too. While a
 * layer unpacks its part stays one byte short: its end is then a step forward, and the
 * protocol shows only steps forward (progress must grow). */
static uint64_t unpack_part(const struct layer_job *j)
{
    uint64_t size = (uint64_t)j->desc.size;
    if (j->unpack_done)
        return size;
    return j->unpacked < size ? j->unpacked : size > 0 ? size - 1 : 0;
}

/* Bytes downloaded of the layers p waits for, and its work (download + unpack). */
static uint64_t downloaded(const struct pull *p)
{
    uint64_t b = p->completed_size;
    for (size_t i = 0; i < p->n_waits; i++)
        if (p->waits[i])
            b += p->waits[i]->received;
    return b;
}

static uint64_t work_done(const struct pull *p)
{
    uint64_t w = downloaded(p) + p->completed_size;
    for (size_t i = 0; i < p->n_waits; i++)
        if (p->waits[i] && p->waits[i]->unpacking)
            w += unpack_part(p->waits[i]);
    return w;
}

/* One note about layer j, the index-th (1-based) that p waits for: "layer 2 of 3
 * (sha256:1a2b3c4d5e6f, 5.0 MB): 1.2 MB downloaded; all: 3.1 of 21.7 MB downloaded, 1 of 3
 * unpacked". Only when work was done since the last one. */
static void report(struct pull *p, const struct layer_job *j, size_t index,
                   enum layer_stage stage)
{
    uint64_t work = work_done(p);
    if (p->progress == NULL || p->finished || work <= p->reported)
        return;
    p->reported = work;
    char what[80], msg[320];
    switch (stage) {
    case STAGE_DOWNLOADING:
        snprintf(what, sizeof what, "%.1f MB downloaded%s", (double)j->received / 1e6,
                 j->owner != p ? " (by another create)" : "");
        break;
    case STAGE_DOWNLOADED:
        snprintf(what, sizeof what, "downloaded, unpacking");
        break;
    case STAGE_UNPACKING:
        snprintf(what, sizeof what, "unpacking, %.1f MB read", (double)j->unpacked / 1e6);
        break;
    case STAGE_UNPACKED:
        snprintf(what, sizeof what, "unpacked");
        break;
    }
    snprintf(msg, sizeof msg,
             "layer %zu of %zu (%.19s, %.1f MB): %s; all: %.1f of %.1f MB downloaded, %zu of %zu "
             "unpacked",
             index, p->n_waits, j->desc.digest, (double)j->desc.size / 1e6, what,
             (double)downloaded(p) / 1e6, (double)p->total / 1e6, p->n_unpacked, p->n_waits);
    p->progress(p->arg, work, 2 * p->total, msg);
}

static size_t wait_index(const struct pull *p, const struct layer_job *j)
{
    for (size_t i = 0; i < p->n_waits; i++)
        if (p->waits[i] == j)
            return i + 1;
    return 0;
}

/* Every PROGRESS_TICK_MS while layers are fetched: how far the downloads and the unpacks are,
 * its own and those of layers other pulls fetch for it too. */
static void pull_tick(uv_timer_t *t)
{
    struct pull *p = t->data;
    size_t moved = 0, fetching = 0;
    for (size_t i = 0; i < p->n_waits; i++) {
        struct layer_job *j = p->waits[i];
        if (j == NULL)
            continue;
        if (j->owner->downloading == j && j->retry_at_ms == 0)
            fetching = i + 1;
        if (!j->unpacking)
            continue;
        /* The unpacker reads the blob through a duplicate of j->fd: the offset is shared. */
        off_t at = lseek(j->fd, 0, SEEK_CUR);
        if (at > 0 && (uint64_t)at > j->unpacked) {
            j->unpacked = (uint64_t)at;
            moved = i + 1;
        }
    }
    if (fetching)
        report(p, p->waits[fetching - 1], fetching, STAGE_DOWNLOADING);
    else if (moved)
        report(p, p->waits[moved - 1], moved, STAGE_UNPACKING);
    resume_download(p);
}

/* ---- layer jobs ------------------------------------------------------------------------------ */

static void job_free(struct layer_job *j)
{
    struct image_service *s = j->svc;
    for (struct layer_job **jj = &s->jobs; *jj; jj = &(*jj)->next)
        if (*jj == j) {
            *jj = j->next;
            break;
        }
    if (j->fd >= 0)
        close(j->fd);
    free(j->waiters);
    free(j);
}

/* The job is over (unpacked, or failed): every pull waiting for it moves on. */
static void job_complete(struct layer_job *j)
{
    struct pull *owner = j->owner;
    if (owner && j->index > 0 && owner->queue[j->index - 1] == j)
        owner->queue[j->index - 1] = NULL; /* freed below */
    j->unpacking = false;
    j->unpack_done = j->rc == 0;
    for (size_t i = 0; i < j->n_waiters; i++) {
        struct pull *w = j->waiters[i];
        size_t at = wait_index(w, j);
        if (at > 0) {
            w->waits[at - 1] = NULL;
            if (j->rc == 0) {
                w->completed_size += (uint64_t)j->desc.size;
                w->n_unpacked++;
                report(w, j, at, STAGE_UNPACKED);
            }
        }
    }
    for (size_t i = 0; i < j->n_waiters; i++) {
        struct pull *w = j->waiters[i];
        if (j->rc < 0)
            pull_fail(w, &j->err);
        w->outstanding--;
    }
    struct pull **waiters = j->waiters;
    size_t n = j->n_waiters;
    j->waiters = NULL;
    job_free(j);
    for (size_t i = 0; i < n; i++)
        pull_check(waiters[i]);
    free(waiters);
}

static void job_add_waiter(struct layer_job *j, struct pull *p)
{
    j->waiters = xrealloc(j->waiters, (j->n_waiters + 1) * sizeof *j->waiters);
    j->waiters[j->n_waiters++] = p;
    p->outstanding++;
    p->waits[p->n_waits++] = j; /* sized for every layer of the manifest (plan_layers) */
    p->total += (uint64_t)j->desc.size;
}

static struct layer_job *job_find(struct image_service *s, const char *digest)
{
    for (struct layer_job *j = s->jobs; j; j = j->next)
        if (strcmp(j->desc.digest, digest) == 0)
            return j;
    return NULL;
}

static void unpack_work(uv_work_t *w)
{
    struct layer_job *j = w->data;
    struct image_service *s = j->svc;
    char tmp[LAYER_STORE_PATH_MAX + 200], root[LAYER_STORE_PATH_MAX + 300];
    j->rc = layer_store_begin(&s->store, j->desc.digest, tmp, sizeof tmp, &j->err);
    if (j->rc < 0)
        return;
    snprintf(root, sizeof root, "%s/root", tmp);
    j->rc = image_unpack(j->fd, j->desc.compression, root, j->max_bytes, s->store.ns, &j->res,
                         &j->err);
    if (j->rc == 0 && strcmp(j->res.diff_id, j->diff_id) != 0)
        j->rc = mcp_error_set(&j->err, MCP_ERR_BACKEND, 0,
                              "its uncompressed content has the digest %s, but the image's "
                              "config (rootfs.diff_ids) says %s: the image is broken or was "
                              "tampered with; nothing of this layer was kept",
                              j->res.diff_id, j->diff_id);
    if (j->rc == 0)
        j->rc = layer_store_commit(&s->store, j->desc.digest, tmp, &j->res, &j->err);
    else
        layer_store_remove(&s->store, tmp);
    if (j->rc < 0)
        mcp_error_prefix(&j->err, "layer %.19s", j->desc.digest);
}

static void unpack_after(uv_work_t *w, int status)
{
    struct layer_job *j = w->data;
    struct image_service *s = j->svc;
    if (status == UV_ECANCELED && j->rc == 0)
        j->rc = mcp_error_set(&j->err, MCP_ERR_UNAVAILABLE, 0, "the pull was cancelled");
    job_complete(j); /* with the job still counted, so s outlives it */
    s->busy--;
    service_free_if_closed(s);
}

static void start_unpack(struct layer_job *j)
{
    struct image_service *s = j->svc;
    uint64_t used = layer_store_usage(&s->store);
    j->max_bytes = s->store.cap_bytes > used ? s->store.cap_bytes - used : 0;
    /* Rewound here, not in the worker: the loop polls this offset for progress. */
    if (lseek(j->fd, 0, SEEK_SET) < 0) {
        j->rc = mcp_error_set(&j->err, MCP_ERR_IO, errno, "rewinding the layer");
        job_complete(j);
        return;
    }
    j->unpacking = true;
    j->work.data = j;
    s->busy++;
    uv_queue_work(s->loop, &j->work, unpack_work, unpack_after);
}

/* The registry ignored the Range of a resumed download and sends the blob from its start. */
static int restart_download(struct layer_job *j)
{
    if (ftruncate(j->fd, 0) < 0 || lseek(j->fd, 0, SEEK_SET) < 0)
        return mcp_error_set(&j->err, MCP_ERR_IO, errno, "restarting the download of %.19s",
                             j->desc.digest);
    layer_hash_init(&j->hash);
    j->received = 0;
    return 0;
}

static int layer_sink(void *arg, uint64_t offset, const char *data, size_t len)
{
    struct layer_job *j = arg;
    if (offset != j->received && (offset != 0 || (j->rc = restart_download(j)) < 0)) {
        if (j->rc == 0)
            j->rc = mcp_error_set(&j->err, MCP_ERR_BACKEND, 0,
                                  "registry sent layer %.19s from byte %llu, not %llu",
                                  j->desc.digest, (unsigned long long)offset,
                                  (unsigned long long)j->received);
        return -1;
    }
    if (j->received + len > (uint64_t)j->desc.size) { /* more than the manifest says: stop now */
        j->rc = mcp_error_set(&j->err, MCP_ERR_BACKEND, 0,
                              "layer %s is corrupt: the registry sent more than the %lld bytes "
                              "the manifest gives; nothing was kept",
                              j->desc.digest, (long long)j->desc.size);
        return -1;
    }
    for (size_t off = 0; off < len;) {
        ssize_t n = write(j->fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            j->rc = mcp_error_set(&j->err, MCP_ERR_LIMIT, errno,
                                  "cannot store the download of layer %.19s: %s (is the disk "
                                  "holding the state directory full?)",
                                  j->desc.digest, strerror(errno));
            return -1;
        }
        off += (size_t)n;
    }
    layer_hash_update(&j->hash, data, len);
    j->received += len;
    return 0;
}

static void verify_layer(struct layer_job *j)
{
    char got[72];
    layer_hash_final(&j->hash, got);
    if (j->received != (uint64_t)j->desc.size || strcmp(got, j->desc.digest) != 0)
        j->rc = mcp_error_set(&j->err, MCP_ERR_BACKEND, 0,
                              "layer %s is corrupt: the registry sent %llu bytes with digest "
                              "%.23s..., the manifest says %lld bytes; nothing was kept, retry "
                              "or report the broken image",
                              j->desc.digest, (unsigned long long)j->received, got,
                              (long long)j->desc.size);
}

static void start_download(struct layer_job *j);

/* A pushed snapshot's layer (a plain tar) is restored from blobs/sha256 as a snapshot's is
 * (local_snapshot_push.c): the downloaded file is kept there too. */
static void keep_snapshot_layer(struct layer_job *j)
{
    struct snap_files f;
    if (j->desc.compression != OCI_TAR ||
        strcmp(j->owner->config.snapshot_layer, j->desc.digest) != 0)
        return;
    snap_files_init(&f, j->svc->store.dir);
    j->rc = snap_files_keep_pulled(&f, j->fd, j->desc.digest, &j->err);
}

/* A download that broke: resumed later (pull_tick) if the failure may pass and attempts are
 * left; else the layer fails, saying how often it was tried. */
static bool retry_later(struct layer_job *j, const struct mcp_error *err)
{
    struct pull *p = j->owner;
    mcp_error_copy(&j->last_err, err);
    if (!registry_retryable(p->client) || p->failed || p->svc->closing)
        return false;
    if (j->attempts < DOWNLOAD_ATTEMPTS) {
        uint64_t wait = (uint64_t)DOWNLOAD_BACKOFF_MS << (j->attempts - 1);
        j->retry_at_ms = now_mono_ms() + wait;
        log_info("layer %.19s of %s: the download broke at %llu of %lld bytes (%s); resuming "
                 "in %llu ms (attempt %u of %d)",
                 j->desc.digest, p->ref_text, (unsigned long long)j->received,
                 (long long)j->desc.size, err->msg, (unsigned long long)wait, j->attempts + 1,
                 DOWNLOAD_ATTEMPTS);
        return true;
    }
    j->rc = mcp_error_set(&j->err, MCP_ERR_UNAVAILABLE, 0,
                          "the download of layer %s broke %u times, the last time with: %s; "
                          "gave up with %.1f of %.1f MB received (each attempt resumed where "
                          "the last stopped); nothing of that layer was kept: retry later",
                          j->desc.digest, j->attempts, err->msg, (double)j->received / 1e6,
                          (double)j->desc.size / 1e6);
    return false;
}

static void download_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct layer_job *j = arg;
    struct pull *p = j->owner;
    (void)resp;
    /* Broken after the last byte came: the digest decides. */
    bool complete = j->received == (uint64_t)j->desc.size && registry_retryable(p->client);
    if (j->rc == 0 && err && !complete && retry_later(j, err))
        return; /* still p->downloading */
    p->downloading = NULL;
    if (j->rc == 0 && err && !complete)
        j->rc = -1, mcp_error_copy(&j->err, err);
    if (j->rc == 0)
        verify_layer(j);
    if (j->rc == 0)
        keep_snapshot_layer(j);
    for (size_t i = 0; j->rc == 0 && i < j->n_waiters; i++)
        report(j->waiters[i], j, wait_index(j->waiters[i], j), STAGE_DOWNLOADED);
    if (j->rc == 0)
        start_unpack(j);
    else
        job_complete(j);
    next_download(p);
    pull_check(p);
}

static int open_tmpfile(struct image_service *s, struct mcp_error *err)
{
    char dir[LAYER_STORE_PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s/tmp", s->store.dir);
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot create a temporary file in %s",
                             dir);
    return fd;
}

static void next_download(struct pull *p)
{
    while (!p->downloading && p->next_download < p->n_queue) {
        struct layer_job *j = p->queue[p->next_download++];
        if (p->failed) {
            j->rc = -1, mcp_error_copy(&j->err, &p->err);
            job_complete(j);
            continue;
        }
        j->fd = open_tmpfile(p->svc, &j->err);
        if (j->fd < 0) {
            j->rc = -1;
            job_complete(j);
            continue;
        }
        layer_hash_init(&j->hash);
        p->downloading = j;
        start_download(j);
    }
}

static void start_download(struct layer_job *j)
{
    j->attempts++;
    j->retry_at_ms = 0;
    registry_get_blob(j->owner->client, j->desc.digest, j->received, layer_sink, download_done,
                      j);
}

/* pull_tick: a broken download whose time has come resumes, unless the pull failed meanwhile. */
static void resume_download(struct pull *p)
{
    struct layer_job *j = p->downloading;
    if (j == NULL || j->retry_at_ms == 0 || now_mono_ms() < j->retry_at_ms)
        return;
    if (!p->failed && !p->svc->closing) {
        start_download(j);
        return;
    }
    p->downloading = NULL;
    j->rc = -1;
    mcp_error_copy(&j->err, p->failed ? &p->err : &j->last_err);
    job_complete(j);
    next_download(p);
    pull_check(p);
}

/* A layer this image shares with the store or another pull must have been verified against
 * the same uncompressed digest: one blob cannot unpack to two different things. */
static int same_diff_id(struct pull *p, size_t i, const char *known, const char *where)
{
    const char *want = p->config.diff_ids[i];
    if (known[0] == '\0' || strcmp(known, want) == 0)
        return 0;
    struct mcp_error e;
    mcp_error_set(&e, MCP_ERR_BACKEND, 0,
                  "layer %zu of %s (%s) unpacks to %s (%s), but this image's config "
                  "(rootfs.diff_ids) says %s: the image is broken or was tampered with; refused",
                  i + 1, p->ref_text, p->manifest.entries[i].digest, known, where, want);
    pull_fail(p, &e);
    return -1;
}

/* Every layer: in the store, being fetched by another pull, or a new job of ours. */
static void plan_layers(struct pull *p)
{
    struct image_service *s = p->svc;
    uint64_t need = 0;
    p->queue = xcalloc(p->manifest.n_entries, sizeof *p->queue);
    p->waits = xcalloc(p->manifest.n_entries, sizeof *p->waits);
    for (size_t i = 0; i < p->manifest.n_entries && !p->failed; i++) {
        const struct oci_descriptor *d = &p->manifest.entries[i];
        char dir[LAYER_STORE_PATH_MAX + 100], known[72] = "";
        struct layer_job *j = job_find(s, d->digest);
        if (j) {
            if (same_diff_id(p, i, j->diff_id, "as another image being pulled says") == 0)
                job_add_waiter(j, p);
            continue;
        }
        if (layer_store_lookup(&s->store, d->digest, dir, sizeof dir)) {
            layer_store_diff_id(&s->store, d->digest, known, sizeof known);
            same_diff_id(p, i, known, "verified when it was stored");
            continue;
        }
        j = xcalloc(1, sizeof *j);
        j->svc = s, j->desc = *d, j->owner = p, j->fd = -1, j->index = p->n_queue + 1;
        memcpy(j->diff_id, p->config.diff_ids[i], sizeof j->diff_id);
        j->next = s->jobs;
        s->jobs = j;
        job_add_waiter(j, p);
        p->queue[p->n_queue++] = j;
        need += (uint64_t)d->size;
    }
    struct mcp_error err;
    json_t *in_use = s->in_use ? s->in_use(s->in_use_arg, &err) : json_array();
    if (in_use == NULL)
        log_warn("which layers sandboxes use is unknown (%s): no layer is evicted for %s",
                 err.msg, p->ref_text);
    /* Layers of this image count as in use too. */
    for (size_t i = 0; in_use && i < p->manifest.n_entries; i++)
        json_array_append_new(in_use, json_string(p->manifest.entries[i].digest));
    if (need > 0 && !p->failed && layer_store_make_room(&s->store, need, in_use, &err) < 0)
        pull_fail(p, &err);
    json_decref(in_use);
    if (p->progress && p->n_waits > 0)
        p->progress(p->arg, 0, 2 * p->total, "downloading layers");
    if (p->n_waits > 0)
        uv_timer_start(&p->timer, pull_tick, PROGRESS_TICK_MS, PROGRESS_TICK_MS);
    next_download(p);
    pull_check(p);
}

/* ---- manifest and config --------------------------------------------------------------------- */

static void on_config(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct pull *p = arg;
    struct mcp_error e;
    char got[IMAGE_DIGEST_LEN + 1];
    if (err) {
        pull_fail(p, err);
    } else {
        oci_digest_of(resp->body.data, resp->body.len, got);
        if (strcmp(got, p->manifest.config.digest) != 0 ||
            (int64_t)resp->body.len != p->manifest.config.size)
            pull_fail(p, (mcp_error_set(&e, MCP_ERR_BACKEND, 0,
                                        "the config blob of %s is corrupt (digest or size does "
                                        "not match the manifest): refused",
                                        p->ref_text), &e));
        else if (image_config_parse(resp->body.data, resp->body.len, &p->config, &e) < 0)
            pull_fail(p, &e);
        else if (p->config.n_diff_ids != p->manifest.n_entries)
            pull_fail(p, (mcp_error_set(&e, MCP_ERR_BACKEND, 0,
                                        "the image %s is broken: its config lists %zu "
                                        "rootfs.diff_ids for the %zu layers of its manifest; "
                                        "rebuild it or pick another tag",
                                        p->ref_text, p->config.n_diff_ids,
                                        p->manifest.n_entries),
                          &e));
    }
    if (p->failed)
        pull_check(p);
    else
        plan_layers(p);
}

static void on_manifest(void *arg, struct httpc_response *resp, const struct mcp_error *err);

/* The digest of what was fetched must be the one asked for (a digest reference, or the
 * descriptor chosen from an index). */
static int check_manifest_digest(struct pull *p, const struct httpc_response *resp,
                                 const char *want, int64_t want_size, struct mcp_error *err)
{
    char got[IMAGE_DIGEST_LEN + 1];
    oci_digest_of(resp->body.data ? resp->body.data : "", resp->body.len, got);
    if (p->digest[0] == '\0')
        memcpy(p->digest, got, sizeof got);
    memcpy(p->manifest_digest, got, sizeof got);
    if ((want && strcmp(got, want) != 0) ||
        (want_size >= 0 && (int64_t)resp->body.len != want_size))
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "the manifest the registry sent for %s has the digest %s, not the "
                             "%s asked for: it is corrupt or was tampered with; refused",
                             p->ref_text, got, want);
    return 0;
}

static void on_manifest(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct pull *p = arg;
    struct mcp_error e;
    bool from_index = p->manifest_digest[0] != '\0';
    const char *want = from_index ? p->manifest_digest : p->ref.digest[0] ? p->ref.digest : NULL;
    int64_t want_size = from_index ? p->manifest.config.size : -1; /* see below */
    if (err) {
        pull_fail(p, err);
    } else if (check_manifest_digest(p, resp, want, want_size, &e) < 0) {
        pull_fail(p, &e);
    } else if (oci_manifest_parse(resp->body.data, resp->body.len, resp->content_type,
                                  &p->manifest, &e) < 0) {
        pull_fail(p, &e);
    } else if (p->manifest.is_index && from_index) {
        pull_fail(p, (mcp_error_set(&e, MCP_ERR_UNSUPPORTED, 0,
                                    "the index of %s points at another index: not supported",
                                    p->ref_text), &e));
    } else if (p->manifest.is_index) {
        const char *os, *arch, *variant;
        oci_host_platform(&os, &arch, &variant);
        const struct oci_descriptor *d = oci_index_choose(&p->manifest, os, arch, variant, &e);
        if (d == NULL) {
            pull_fail(p, &e);
        } else {
            char path[IMAGE_DIGEST_LEN + 16];
            snprintf(path, sizeof path, "manifests/%s", d->digest);
            snprintf(p->manifest_digest, sizeof p->manifest_digest, "%s", d->digest);
            int64_t size = d->size;
            oci_manifest_free(&p->manifest);
            p->manifest.config.size = size; /* carried to the check above */
            registry_get(p->client, path, OCI_MANIFEST_ACCEPT, OCI_MANIFEST_MAX, NULL,
                         on_manifest, p);
            return;
        }
    } else {
        char path[IMAGE_DIGEST_LEN + 8];
        snprintf(path, sizeof path, "blobs/%s", p->manifest.config.digest);
        if (p->progress)
            p->progress(p->arg, 0, 0, "fetching the image config");
        registry_get(p->client, path, NULL, OCI_CONFIG_MAX, NULL, on_config, p);
        return;
    }
    pull_check(p);
}

/* ---- entry points ---------------------------------------------------------------------------- */

static void cached_answer(uv_timer_t *t)
{
    struct pull *p = t->data;
    p->finished = true;
    p->done(p->arg, p->cached, NULL);
    uv_close((uv_handle_t *)&p->timer, timer_closed);
}

static int start_pull(struct pull *p, struct mcp_error *err)
{
    struct image_service *s = p->svc;
    if (s->http == NULL && (s->http = httpc_new(s->loop, err)) == NULL)
        return -1;
    if (oci_archive_load(err) < 0 || registry_check_reference(&p->ref, err) < 0)
        return -1;
    p->client = registry_client_new(s->loop, s->http, &p->ref);
    if (p->creds)
        registry_client_set_credentials(p->client, p->creds);
    char path[IMAGE_REF_TAG_MAX + IMAGE_DIGEST_LEN + 16];
    snprintf(path, sizeof path, "manifests/%s", image_ref_manifest_ref(&p->ref));
    if (p->progress)
        p->progress(p->arg, 0, 0, "fetching the manifest");
    registry_get(p->client, path, OCI_MANIFEST_ACCEPT, OCI_MANIFEST_MAX, NULL, on_manifest, p);
    return 0;
}

static int resolve(struct image_service *s, const char *reference, bool force, const char *creds,
                   image_progress_fn *progress, image_done_fn *done, void *arg,
                   struct mcp_error *err)
{
    struct pull *p = xcalloc(1, sizeof *p);
    if (image_ref_parse(reference, &p->ref, err) < 0) {
        free(p);
        return -1;
    }
    p->svc = s, p->force = force, p->progress = progress, p->done = done, p->arg = arg;
    p->creds = creds ? xstrdup(creds) : NULL;
    image_ref_format(&p->ref, p->ref_text, sizeof p->ref_text);
    uv_timer_init(s->loop, &p->timer);
    p->timer.data = p;
    p->next = s->pulls;
    s->pulls = p;
    p->cached = force ? NULL : layer_store_load_image(&s->store, p->ref_text);
    if (p->cached && add_layer_dirs(s, p->cached)) {
        uv_timer_start(&p->timer, cached_answer, 0, 0);
        return 0;
    }
    json_decref(p->cached);
    p->cached = NULL;
    if (start_pull(p, err) < 0) {
        uv_close((uv_handle_t *)&p->timer, timer_closed);
        return -1;
    }
    return 0;
}

int image_service_resolve(struct image_service *s, const char *reference, bool force,
                          image_progress_fn *progress, image_done_fn *done, void *arg,
                          struct mcp_error *err)
{
    return resolve(s, reference, force, NULL, progress, done, arg, err);
}

int image_service_resolve_auth(struct image_service *s, const char *reference, const char *creds,
                               image_progress_fn *progress, image_done_fn *done, void *arg,
                               struct mcp_error *err)
{
    return resolve(s, reference, false, creds, progress, done, arg, err);
}

struct layer_store *image_service_store(struct image_service *s)
{
    return &s->store;
}

uv_loop_t *image_service_loop(struct image_service *s)
{
    return s->loop;
}

struct httpc *image_service_http(struct image_service *s, struct mcp_error *err)
{
    if (s->http == NULL)
        s->http = httpc_new(s->loop, err);
    return s->http;
}

void image_service_hold(struct image_service *s, int delta)
{
    s->busy = (size_t)((long)s->busy + delta);
    service_free_if_closed(s);
}

void image_service_free(struct image_service *s)
{
    if (s == NULL)
        return;
    s->closing = true;
    for (struct pull *p = s->pulls; p; p = p->next)
        if (p->client)
            registry_cancel(p->client);
    if (s->http)
        httpc_free(s->http);
    /* Pulls and jobs still under way end through their callbacks while the loop closes, and
     * the last of them frees the service. */
    service_free_if_closed(s);
}

json_t *image_service_list(struct image_service *s)
{
    json_t *images = layer_store_list_images(&s->store);
    struct snap_files f;
    snap_files_init(&f, s->store.dir);
    return json_pack("{s:o, s:o, s:I, s:I, s:s}", "images", images, "snapshots",
                     snap_files_list(&f, NULL), "store_bytes",
                     (json_int_t)layer_store_usage(&s->store), "cap_bytes",
                     (json_int_t)s->store.cap_bytes, "store", s->store.dir);
}

int image_service_remove(struct image_service *s, const char *reference, struct mcp_error *err)
{
    struct image_ref r;
    char text[IMAGE_REF_TEXT_MAX];
    if (image_ref_parse(reference, &r, err) < 0)
        return -1;
    image_ref_format(&r, text, sizeof text);
    return layer_store_remove_image(&s->store, text, err);
}

json_t *image_service_prune(struct image_service *s, struct mcp_error *err)
{
    json_t *keep = s->in_use ? s->in_use(s->in_use_arg, err) : json_array();
    if (keep == NULL) {
        mcp_error_prefix(err, "nothing pruned: which layers sandboxes use is unknown");
        return NULL;
    }
    json_t *images = layer_store_list_images(&s->store), *img, *d;
    size_t i, k;
    json_array_foreach(images, i, img) {
        json_array_foreach(json_object_get(img, "layers"), k, d) json_array_append(keep, d);
    }
    json_decref(images);
    for (struct layer_job *j = s->jobs; j; j = j->next)
        json_array_append_new(keep, json_string(j->desc.digest));
    uint64_t before = layer_store_usage(&s->store);
    uint64_t cap = s->store.cap_bytes;
    s->store.cap_bytes = 0; /* make room for everything: removes all that keep does not name */
    layer_store_make_room(&s->store, 0, keep, err);
    s->store.cap_bytes = cap;
    json_decref(keep);
    struct snap_files f; /* snapshots stay; layers of none (a crash's, a fork's) go */
    snap_files_init(&f, s->store.dir);
    json_decref(snap_files_prune(&f));
    uint64_t after = layer_store_usage(&s->store);
    return json_pack("{s:I, s:I}", "freed_bytes", (json_int_t)(before - after), "store_bytes",
                     (json_int_t)after);
}
