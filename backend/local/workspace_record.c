/* What a review read, kept so that an apply writes only that (issue 32, item 4). The sandbox's
 * code may change a file between the review that showed it and the apply that writes it; the
 * review records a digest per change it covered (ws_change_digest), and an apply that names the
 * review compares each entry against it.
 *
 * A record is <workspace dir>/reviews/<token>: "MCPBOXR1", then the entries sorted by key, 48
 * bytes each. The key is a hash of the mount's target and the path, so names that are not UTF-8
 * need no escaping. Kept server-side: the agent holds only the token, which names a file here
 * and nothing else (its form is checked before it becomes a path). */
#include "backend/local/workspace_review.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define RECORD_MAGIC "MCPBOXR1"
#define RECORD_MAGIC_LEN 8

void ws_change_digest(const struct ws_change *c, const unsigned char content[32],
                      unsigned char out[32])
{
    mode_t mode = c->new_mode;
    unsigned char meta[8] = {
        (unsigned char)c->kind,
        (unsigned char)((mode & S_IFMT) >> 12),
        (unsigned char)(ws_carried_mode(mode) >> 8),
        (unsigned char)ws_carried_mode(mode),
        content != NULL,
    };
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, "mcpbox-review-entry-1", 21);
    sha256_update(&h, meta, sizeof meta);
    if (content)
        sha256_update(&h, content, 32);
    sha256_final(&h, out);
}

static void layout_run(struct ws_content_hash *h)
{
    uint64_t run[2] = {h->run_start, h->run_end};
    sha256_update(&h->layout, run, sizeof run);
}

void ws_content_hash_init(struct ws_content_hash *h)
{
    memset(h, 0, sizeof *h);
    sha256_init(&h->data);
    sha256_init(&h->layout);
}

void ws_content_hash_chunk(struct ws_content_hash *h, uint64_t at, const void *data, size_t len)
{
    if (h->in_run && at == h->run_end) {
        h->run_end += len;
    } else { /* chunks of one run come in order: a gap is a hole */
        if (h->in_run)
            layout_run(h);
        h->run_start = at, h->run_end = at + len, h->in_run = true;
    }
    sha256_update(&h->data, data, len);
}

void ws_content_hash_final(struct ws_content_hash *h, uint64_t size, unsigned char out[32])
{
    if (h->in_run)
        layout_run(h);
    sha256_update(&h->layout, &size, sizeof size);
    unsigned char parts[64];
    sha256_final(&h->data, parts);
    sha256_final(&h->layout, parts + 32);
    struct sha256_ctx all;
    sha256_init(&all);
    sha256_update(&all, parts, sizeof parts);
    sha256_final(&all, out);
}

static void record_key(const struct ws_mount *m, const char *rel, unsigned char key[16])
{
    unsigned char full[32];
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, m->target, strlen(m->target) + 1);
    sha256_update(&h, rel, strlen(rel));
    sha256_final(&h, full);
    memcpy(key, full, 16);
}

static int cmp_entries(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

/* "rv-" and 16 lowercase hex digits: the only names a token may give. */
static bool token_ok(const char *t)
{
    if (strlen(t) != WS_REVIEW_TOKEN_LEN - 1 || strncmp(t, "rv-", 3) != 0)
        return false;
    for (const char *p = t + 3; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* Removes all but the newest WS_REVIEWS_KEPT records (by mtime; two reviews at once may each
 * remove one, which is harmless). */
static void prune(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct {
        char name[WS_REVIEW_TOKEN_LEN];
        int64_t mtime_ns;
    } v[4 * WS_REVIEWS_KEPT];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (!token_ok(e->d_name) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        int64_t t = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
        if (n == sizeof v / sizeof v[0]) { /* full: drop the oldest now */
            size_t old = 0;
            for (size_t i = 1; i < n; i++)
                if (v[i].mtime_ns < v[old].mtime_ns)
                    old = i;
            if (t < v[old].mtime_ns) {
                unlinkat(dirfd(d), e->d_name, 0);
                continue;
            }
            unlinkat(dirfd(d), v[old].name, 0);
            v[old] = v[--n];
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", e->d_name);
        v[n++].mtime_ns = t;
    }
    while (n > WS_REVIEWS_KEPT) {
        size_t old = 0;
        for (size_t i = 1; i < n; i++)
            if (v[i].mtime_ns < v[old].mtime_ns)
                old = i;
        unlinkat(dirfd(d), v[old].name, 0);
        v[old] = v[--n];
    }
    closedir(d);
}

int ws_record_save(const char *dir, const struct ws_mount *mounts, const struct ws_changes *ch,
                   char token[WS_REVIEW_TOKEN_LEN], struct mcp_error *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot make %s to record the review", dir);
    size_t n = 0;
    struct ws_record_entry *v = xcalloc(ch->n + 1, sizeof *v);
    for (size_t i = 0; i < ch->n; i++) {
        if (!ch->v[i].digested)
            continue;
        record_key(&mounts[ch->v[i].mount], ch->v[i].rel, v[n].key);
        memcpy(v[n++].digest, ch->v[i].digest, 32);
    }
    qsort(v, n, sizeof *v, cmp_entries);
    random_id(token, WS_REVIEW_TOKEN_LEN, "rv-", 8);
    cleanup_free char *path = xasprintf("%s/%s", dir, token);
    cleanup_free char *tmp = xasprintf("%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write_full(fd, RECORD_MAGIC, RECORD_MAGIC_LEN) == 0 &&
              write_full(fd, v, n * sizeof *v) == 0;
    int e = errno;
    free(v);
    if (fd >= 0 && close(fd) < 0)
        ok = false, e = errno;
    if (!ok || rename(tmp, path) < 0) {
        e = ok ? errno : e;
        unlink(tmp);
        return mcp_error_set(err, MCP_ERR_IO, e, "cannot record the review in %s", dir);
    }
    prune(dir);
    return 0;
}

static int unknown_token(const char *token, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                         "review %s is not one of this sandbox's last %d reviews; call "
                         "review_changes again and apply with the review token it returns",
                         token, WS_REVIEWS_KEPT);
}

int ws_record_load(const char *dir, const char *token, struct ws_record *rec, struct mcp_error *err)
{
    memset(rec, 0, sizeof *rec);
    if (dir == NULL)
        return unknown_token(token, err);
    if (!token_ok(token))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "review must be the token review_changes returned (\"rv-\" and 16 "
                             "hex digits); call review_changes, then apply with its review");
    cleanup_free char *path = xasprintf("%s/%s", dir, token);
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 && errno == ENOENT)
        return unknown_token(token, err);
    if (fd < 0 || fstat(fd, &st) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot read the review record %s", path);
    size_t body = st.st_size > RECORD_MAGIC_LEN ? (size_t)st.st_size - RECORD_MAGIC_LEN : 0;
    char magic[RECORD_MAGIC_LEN];
    if (!S_ISREG(st.st_mode) || st.st_size < RECORD_MAGIC_LEN ||
        body % sizeof(struct ws_record_entry) != 0 ||
        read(fd, magic, sizeof magic) != (ssize_t)sizeof magic ||
        memcmp(magic, RECORD_MAGIC, RECORD_MAGIC_LEN) != 0)
        return unknown_token(token, err);
    rec->n = body / sizeof(struct ws_record_entry);
    rec->v = xcalloc(rec->n + 1, sizeof *rec->v);
    size_t got = 0;
    while (got < body) {
        ssize_t r = read(fd, (char *)rec->v + got, body - got);
        if (r <= 0) {
            ws_record_free(rec);
            return unknown_token(token, err);
        }
        got += (size_t)r;
    }
    return 0;
}

const unsigned char *ws_record_find(const struct ws_record *rec, const struct ws_mount *m,
                                    const char *rel)
{
    struct ws_record_entry key;
    record_key(m, rel, key.key);
    const struct ws_record_entry *e =
        rec->n ? bsearch(&key, rec->v, rec->n, sizeof *rec->v, cmp_entries) : NULL;
    return e ? e->digest : NULL;
}

void ws_record_free(struct ws_record *rec)
{
    free(rec->v);
    memset(rec, 0, sizeof *rec);
}
