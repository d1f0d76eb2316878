/* Apply of copy-on-write mounts: the sandbox's changes written to the host directory.
 *
 * The host side is walked from the mount's source directory with openat2(RESOLVE_NO_SYMLINKS |
 * RESOLVE_BENEATH): a symlink anywhere on the way (planted by the sandbox, or the person's own)
 * is never followed, and the final entry is only ever replaced by rename, unlinked, or chmod'ed
 * through an O_PATH descriptor of the entry itself. Files are written to a temporary name in
 * their directory and renamed over the old entry, so a reader never sees half a file. Symlinks
 * are made as symlinks (symlinkat), never followed. Fifos, sockets and devices are not created.
 * Modes are the sandbox's permission bits without setuid and setgid (a sandbox must not hand the
 * host a set-id program) and without group or other write bits the host entry lacked
 * (ws_applied_mode); the owner is whoever runs this code (the mcpbox process). Holes stay holes
 * (ws_copy_sparse), and the data one apply writes is bounded (o->apply_max_bytes). */
#include "backend/local/workspace_review.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/cleanup.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

struct apply {
    const struct ws_mount *m;
    const struct ws_options *o;
    int src, upper; /* O_PATH directories */
    json_t *journal;
    bool overwrite;
    json_t *results;
    size_t results_bytes; /* ws_list_add */
    json_int_t counts[5]; /* applied, conflicts, skipped, failed, refused */
    uint64_t budget;      /* data bytes this apply may still write */
    uint64_t written;     /* data bytes written so far */
    /* With a review (o->review): what it read, and the digest of the change being applied. */
    const struct ws_record *reviewed;
    const unsigned char *expect;
};

enum outcome { APPLIED, CONFLICT, SKIPPED, FAILED, REFUSED };

/* ---- the journal ---- */

json_t *ws_journal_load(const struct ws_mount *m)
{
    json_t *j = m->journal ? json_load_file(m->journal, 0, NULL) : NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    return j;
}

int ws_journal_save(const struct ws_mount *m, json_t *journal, struct mcp_error *err)
{
    if (m->journal == NULL)
        return 0;
    cleanup_free char *tmp = xasprintf("%s.tmp", m->journal);
    if (json_dump_file(journal, tmp, JSON_COMPACT) < 0 || rename(tmp, m->journal) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot record the applied paths in %s",
                             m->journal);
    return 0;
}

static void journal_note(struct apply *a, int parent, const char *name, const char *rel)
{
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        json_object_set_new(a->journal, rel, json_pack("{s:b}", "absent", 1));
    else
        json_object_set_new(
            a->journal, rel,
            json_pack("{s:I, s:I}", "ino", (json_int_t)st.st_ino, "ctime_ns",
                      (json_int_t)st.st_ctim.tv_sec * 1000000000ll + st.st_ctim.tv_nsec));
}

/* ---- modes and data ---- */

mode_t ws_applied_mode(mode_t mode, mode_t host, bool group_write)
{
    mode_t m = ws_carried_mode(mode);
    mode_t lacked = (mode_t)((S_IWGRP | S_IWOTH) & ~host);
    if (!group_write || S_ISDIR(mode)) /* a writable directory lets anyone swap its files */
        m &= (mode_t)~lacked;
    return m;
}

/* The host entry's mode when it is of the same type as the sandbox's (0: none to compare). */
static mode_t host_mode_of(const struct stat *hs, mode_t nm)
{
    return hs && (hs->st_mode & S_IFMT) == (nm & S_IFMT) ? hs->st_mode : 0;
}

/* The next run of data at or after *pos in a file of size bytes, [*from, *to); false at the end.
 * Where the file system has no SEEK_DATA, the rest is one run. */
static bool next_extent(int fd, off_t size, off_t *pos, off_t *from, off_t *to)
{
    off_t data = *pos < size ? lseek(fd, *pos, SEEK_DATA) : size;
    if (data < 0 && errno == ENXIO)
        return false; /* a hole to the end */
    if (data < 0)
        data = *pos;
    if (data >= size)
        return false;
    off_t hole = lseek(fd, data, SEEK_HOLE);
    *from = data;
    *to = hole > data && hole <= size ? hole : size;
    *pos = *to;
    return true;
}

uint64_t ws_data_bytes(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return 0;
    uint64_t total = 0;
    off_t pos = 0, from, to;
    while (next_extent(fd, st.st_size, &pos, &from, &to))
        total += (uint64_t)(to - from);
    return total;
}

/* Copies in[from, to) to the same offsets of out, each chunk through chunk first. */
static int copy_extent(int in, int out, off_t from, off_t to, ws_chunk_fn *chunk, void *ctx)
{
    char buf[65536];
    while (from < to) {
        size_t want = (size_t)(to - from) < sizeof buf ? (size_t)(to - from) : sizeof buf;
        ssize_t n = pread(in, buf, want, from);
        if (n <= 0)
            return n < 0 ? -1 : 0; /* shorter than it was: the rest is a hole */
        if (chunk && chunk(ctx, from, buf, (size_t)n) < 0)
            return -1;
        for (ssize_t done = 0; out >= 0 && done < n;) {
            ssize_t w = pwrite(out, buf + done, (size_t)(n - done), from + done);
            if (w < 0)
                return -1;
            done += w;
        }
        from += n;
    }
    return 0;
}

int ws_copy_sparse(int in, int out, ws_chunk_fn *chunk, void *ctx)
{
    struct stat st;
    if (fstat(in, &st) < 0)
        return -1;
    off_t pos = 0, from, to;
    while (next_extent(in, st.st_size, &pos, &from, &to))
        if (copy_extent(in, out, from, to, chunk, ctx) < 0)
            return -1;
    /* a hole at the end, or a file that shrank meanwhile */
    return out >= 0 ? ftruncate(out, st.st_size) : 0;
}

/* What an apply's copy feeds: the limit, and the digest of the bytes as copied (hash NULL:
 * none), which the review computed the same way from what it read (ws_content_hash). */
struct copy_feed {
    struct apply *a;
    struct ws_content_hash *hash;
};

/* The apply's chunk callback: counts the data written against the limit, and hashes it. */
static int count_chunk(void *ctx, off_t at, const char *data, size_t len)
{
    struct copy_feed *f = ctx;
    struct apply *a = f->a;
    if (len > a->budget) {
        errno = EFBIG;
        return -1;
    }
    a->budget -= len;
    a->written += len;
    if (f->hash)
        ws_content_hash_chunk(f->hash, (uint64_t)at, data, len);
    return 0;
}

/* ---- host paths ---- */

/* Gives a new entry (name in parent) to the mount's owner (owner_uid -1: the writer's own ids
 * stay, which is what a server run by the person wants). */
static int chown_entry(const struct apply *a, int parent, const char *name)
{
    if (a->m->owner_uid < 0)
        return 0;
    return fchownat(parent, name, (uid_t)a->m->owner_uid, (gid_t)a->m->owner_gid,
                    AT_SYMLINK_NOFOLLOW);
}

/* chmod of the entry itself (never through a symlink) via an O_PATH descriptor of it. */
static int chmod_entry(int parent, const char *name, mode_t mode)
{
    cleanup_close int fd = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return -1;
    if (S_ISLNK(st.st_mode))
        return 0; /* a symlink's mode means nothing */
    char proc[40];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return chmod(proc, mode);
}

/* Opens the host directory holding rel (made, with the sandbox's modes, when create and
 * missing); *name points into rel at the last component. -1 with errno (ENOENT: missing). */
static int open_parent(struct apply *a, const char *rel, bool create, const char **name)
{
    const char *slash = strrchr(rel, '/');
    *name = slash ? slash + 1 : rel;
    int fd = fcntl(a->src, F_DUPFD_CLOEXEC, 3);
    if (slash == NULL)
        return fd;
    cleanup_free char *dir = xstrndup(rel, (size_t)(slash - rel));
    for (char *comp = dir, *next; comp && fd >= 0; comp = next) {
        next = strchr(comp, '/');
        if (next)
            *next++ = '\0';
        int sub = ws_open_beneath(fd, comp, 0, true);
        if (sub < 0 && errno == ENOENT && create) {
            /* the sandbox's mode for it, from the upper layer (the prefix of rel so far) */
            struct stat us;
            size_t upto = (size_t)(comp - dir) + strlen(comp);
            cleanup_free char *uprel = xstrndup(rel, upto);
            cleanup_close int ud = ws_open_beneath(a->upper, uprel, 0, true);
            mode_t mode = ud >= 0 && fstat(ud, &us) == 0
                              ? ws_applied_mode(us.st_mode, 0, a->o->group_write)
                              : 0755;
            if (mkdirat(fd, comp, 0700) == 0 || errno == EEXIST) {
                chown_entry(a, fd, comp);
                chmod_entry(fd, comp, mode);
                sub = ws_open_beneath(fd, comp, 0, true);
            }
        }
        int e = errno;
        close(fd);
        fd = sub;
        errno = e;
    }
    return fd;
}

/* ---- one change ---- */

static json_t *mode_text(mode_t m)
{
    return json_sprintf("%o", (unsigned)(m & 07777));
}

/* What apply did to the entry's mode, for its result: old_mode and mode when they differ, and
 * held_back, the bits of the sandbox's mode it did not give the host. */
static json_t *mode_note(mode_t old, mode_t got, mode_t wanted)
{
    json_t *r = json_object();
    if ((old & 07777) != got) {
        if (old)
            json_object_set_new(r, "old_mode", mode_text(old));
        json_object_set_new(r, "mode", mode_text(got));
    }
    if (wanted & ~got)
        json_object_set_new(r, "held_back", mode_text(wanted & ~got));
    return r;
}

/* Counts the outcome and lists it (ws_list_add) with its reason and the fields of extra (taken;
 * NULL: none). */
static int record_noted(struct apply *a, const struct ws_change *c, enum outcome o,
                        const char *why, json_t *extra)
{
    static const char *names[] = {"applied", "conflict", "skipped", "failed", "refused"};
    a->counts[o]++;
    if (a->results_bytes > WS_LISTED_BYTES) {
        json_decref(extra);
        return 0; /* counted only: the list is full (ws_list_add) */
    }
    cleanup_free char *sp = ws_sandbox_path(a->m, c->rel);
    /* a name that is not UTF-8 is shown as review_changes shows it (json_pack's "s" refused it,
     * and the result went unlisted) */
    json_t *r = json_pack("{s:o, s:s, s:s}", "path", utf8_json_text(sp, strlen(sp)), "change",
                          ws_kind_name(c->kind), "status", names[o]);
    if (why)
        json_object_set_new(r, "reason", json_string(why));
    if (extra)
        json_object_update_new(r, extra);
    ws_list_add(a->results, &a->results_bytes, r);
    return 0;
}

static int record(struct apply *a, const struct ws_change *c, enum outcome o, const char *why)
{
    return record_noted(a, c, o, why, NULL);
}

static int fail_errno(struct apply *a, const struct ws_change *c, const char *what)
{
    char why[256];
    snprintf(why, sizeof why, "%s: %s", what, strerror(errno));
    record(a, c, FAILED, why);
    return -1; /* recorded */
}

/* Copies the upper file rel into a new temporary file in parent; its name goes to tmp. Each
 * chunk written is added to hash (NULL: none), and the digest of the copy goes to digest: the
 * bytes checked are the bytes copied. */
static int write_temp(struct apply *a, const char *rel, int parent, mode_t mode, char *tmp,
                      size_t tmp_size, struct ws_content_hash *hash, unsigned char digest[32])
{
    struct stat st;
    cleanup_close int in = ws_open_regular(a->upper, rel, &st);
    if (in < 0)
        return -1;
    char rnd[17];
    random_id(rnd, sizeof rnd, "", 8);
    snprintf(tmp, tmp_size, ".mcpbox-apply-%s", rnd);
    cleanup_close int out =
        openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return -1;
    /* No fsync: the rename already keeps readers from half a file, and a thousand fsyncs made a
     * large apply take seconds (git does not sync its checkouts either). */
    struct copy_feed feed = {.a = a, .hash = hash};
    struct stat os;
    if (ws_copy_sparse(in, out, count_chunk, &feed) < 0 || fstat(out, &os) < 0)
        goto fail;
    if (hash)
        ws_content_hash_final(hash, (uint64_t)os.st_size, digest);
    if (chown_entry(a, parent, tmp) < 0 || fchmod(out, mode) < 0)
        goto fail;
    return 0;
fail:;
    int e = errno;
    unlinkat(parent, tmp, 0);
    errno = e;
    return -1;
}

/* Makes the sandbox's symlink rel as a new temporary symlink in parent; digest (NULL: none)
 * gets the sha256 of the target it was made with. */
static int make_symlink_temp(struct apply *a, const char *rel, int parent, char *tmp,
                             size_t tmp_size, unsigned char digest[32])
{
    const char *slash = strrchr(rel, '/');
    cleanup_free char *dir = slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");
    cleanup_close int ud = ws_open_beneath(a->upper, dir, 0, true);
    char target[4096];
    ssize_t n = ud >= 0 ? readlinkat(ud, slash ? slash + 1 : rel, target, sizeof target - 1) : -1;
    if (n < 0)
        return -1;
    target[n] = '\0';
    if (digest) {
        struct sha256_ctx h;
        sha256_init(&h);
        sha256_update(&h, target, (size_t)n);
        sha256_final(&h, digest);
    }
    char rnd[17];
    random_id(rnd, sizeof rnd, "", 8);
    snprintf(tmp, tmp_size, ".mcpbox-apply-%s", rnd);
    if (symlinkat(target, parent, tmp) < 0)
        return -1;
    if (chown_entry(a, parent, tmp) < 0) {
        int e = errno;
        unlinkat(parent, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}

static int refuse_changed(struct apply *a, const struct ws_change *c)
{
    char why[256];
    snprintf(why, sizeof why,
             "not what review %s read: it changed in the sandbox since; call review_changes "
             "again, then apply with its review",
             a->o->review);
    return record(a, c, REFUSED, why);
}

/* With a review: true if what was copied (content: its digest; NULL for none) is what the
 * review read. */
static bool as_reviewed(const struct apply *a, const struct ws_change *c,
                        const unsigned char *content)
{
    if (a->expect == NULL)
        return true;
    unsigned char digest[32];
    ws_change_digest(c, content, digest);
    return memcmp(digest, a->expect, sizeof digest) == 0;
}

/* Puts the sandbox's file or symlink at name (replacing whatever the host has there). */
static int put_entry(struct apply *a, const struct ws_change *c, int parent, const char *name,
                     const struct stat *hs, mode_t mode)
{
    char tmp[64];
    struct ws_content_hash hash;
    ws_content_hash_init(&hash);
    unsigned char content[32];
    bool check = a->expect != NULL;
    int rc =
        S_ISLNK(c->new_mode)
            ? make_symlink_temp(a, c->rel, parent, tmp, sizeof tmp, check ? content : NULL)
            : write_temp(a, c->rel, parent, mode, tmp, sizeof tmp, check ? &hash : NULL, content);
    if (rc < 0 && errno == EFBIG)
        return fail_errno(a, c,
                          "the apply's limit on data written was reached (the file grew in the "
                          "sandbox since the apply began); apply it again");
    if (rc < 0)
        return fail_errno(a, c, "cannot copy it from the sandbox");
    if (!as_reviewed(a, c, check ? content : NULL)) { /* on the copy, before it takes the name */
        unlinkat(parent, tmp, 0);
        refuse_changed(a, c);
        return -1;
    }
    /* A host directory it replaces was emptied by the deletions listed before it. */
    if (hs && S_ISDIR(hs->st_mode) && unlinkat(parent, name, AT_REMOVEDIR) < 0) {
        int e = errno;
        unlinkat(parent, tmp, 0);
        errno = e;
        return fail_errno(a, c,
                          "cannot replace the host directory (entries below it were "
                          "not applied)");
    }
    if (renameat(parent, tmp, parent, name) < 0) {
        int e = errno;
        unlinkat(parent, tmp, 0);
        errno = e;
        return fail_errno(a, c, "cannot move it into place");
    }
    return 0;
}

static int put_dir(struct apply *a, const struct ws_change *c, int parent, const char *name,
                   const struct stat *hs, mode_t mode)
{
    if (hs && !S_ISDIR(hs->st_mode) && unlinkat(parent, name, 0) < 0)
        return fail_errno(a, c, "cannot remove the host entry it replaces");
    bool made = !hs || !S_ISDIR(hs->st_mode);
    if (made && mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
        return fail_errno(a, c, "cannot make the directory");
    if (made && chown_entry(a, parent, name) < 0)
        return fail_errno(a, c, "cannot give it to the mount's owner");
    if (chmod_entry(parent, name, mode) < 0)
        return fail_errno(a, c, "cannot set its mode");
    return 0;
}

static int remove_entry(struct apply *a, const struct ws_change *c, int parent, const char *name,
                        const struct stat *hs)
{
    if (hs == NULL)
        return 0; /* already gone */
    if (unlinkat(parent, name, S_ISDIR(hs->st_mode) ? AT_REMOVEDIR : 0) < 0)
        return fail_errno(a, c,
                          errno == ENOTEMPTY ? "cannot remove the directory (the host "
                                               "has entries below it the sandbox did not "
                                               "delete, or some were not applied)"
                                             : "cannot remove it");
    return 0;
}

/* The result of an entry written: the mode it got, and why not the sandbox's when it differs. */
static int record_applied(struct apply *a, const struct ws_change *c, const struct stat *hs,
                          mode_t mode)
{
    mode_t nm = c->new_mode;
    if (nm == 0 || S_ISLNK(nm))
        return record(a, c, APPLIED, NULL);
    mode_t wanted = ws_carried_mode(nm);
    bool setid = (nm & 06000) != 0, held = (wanted & ~mode) != 0;
    const char *held_why = !held ? ""
                           : S_ISDIR(nm)
                               ? "group/other write bits held back: a sandbox never makes a host "
                                 "directory writable by others"
                               : "group/other write bits held back: the host entry lacked them "
                                 "(`mcpbox sandbox apply --group-write` allows them for files)";
    char why[256];
    snprintf(why, sizeof why, "%s%s%s", held_why, held && setid ? "; " : "",
             setid ? "setuid/setgid bits dropped" : "");
    record_noted(a, c, APPLIED, why[0] ? why : NULL,
                 mode_note(hs ? hs->st_mode : 0, mode, wanted));
    return 0;
}

static int apply_one(struct apply *a, const struct ws_change *c)
{
    mode_t nm = c->new_mode;
    if (nm && !S_ISREG(nm) && !S_ISDIR(nm) && !S_ISLNK(nm))
        return record(a, c, SKIPPED,
                      "special files (fifos, sockets, devices) are not created "
                      "on the host");
    if (a->reviewed) {
        a->expect = ws_record_find(a->reviewed, a->m, c->rel);
        if (a->expect == NULL) {
            char why[300];
            snprintf(why, sizeof why,
                     "review %s did not cover it (it changed or appeared after that review, or "
                     "lay outside its paths); call review_changes again, then apply with its "
                     "review",
                     a->o->review);
            return record(a, c, REFUSED, why);
        }
    }
    const char *name;
    cleanup_close int parent = open_parent(a, c->rel, c->kind != WS_DELETED, &name);
    if (parent < 0 && errno == ENOENT && c->kind == WS_DELETED)
        return record(a, c, APPLIED, "already absent on the host");
    if (parent < 0)
        return fail_errno(a, c,
                          errno == ELOOP ? "its host directory is reached through a "
                                           "symlink, which apply never follows"
                                         : "cannot open its host directory");
    struct stat hs;
    bool exists = fstatat(parent, name, &hs, AT_SYMLINK_NOFOLLOW) == 0;
    bool dir_only = (!exists || S_ISDIR(hs.st_mode)) && (!nm || S_ISDIR(nm));
    if (!dir_only && !a->overwrite &&
        ws_host_changed(a->journal, c->rel, exists ? &hs : NULL, a->o->since_ns))
        return record(a, c, CONFLICT,
                      "changed on the host since the sandbox saw it; review "
                      "both, then apply with overwrite to replace it");
    bool copies = c->kind != WS_DELETED && !S_ISDIR(nm) &&
                  !(c->kind == WS_MODE && exists && S_ISREG(hs.st_mode));
    if (!copies && !as_reviewed(a, c, NULL))
        return refuse_changed(a, c);
    int rc;
    mode_t mode = ws_applied_mode(nm, host_mode_of(exists ? &hs : NULL, nm), a->o->group_write);
    if (c->kind == WS_DELETED)
        rc = remove_entry(a, c, parent, name, exists ? &hs : NULL);
    else if (S_ISDIR(nm))
        rc = put_dir(a, c, parent, name, exists ? &hs : NULL, mode);
    else if (c->kind == WS_MODE && exists && S_ISREG(hs.st_mode))
        rc = chmod_entry(parent, name, mode) < 0 ? fail_errno(a, c, "cannot set its mode") : 0;
    else
        rc = put_entry(a, c, parent, name, exists ? &hs : NULL, mode);
    if (rc < 0)
        return -1; /* recorded as failed */
    if (!dir_only)
        journal_note(a, parent, name, c->rel);
    return record_applied(a, c, exists ? &hs : NULL, mode);
}

static json_t *apply_locked(const struct ws_mount *mounts, size_t n_mounts,
                            const struct ws_options *o, json_t *paths, bool overwrite,
                            struct mcp_error *err);

/* The data (not holes) of the regular file a change would write, read off the upper layer. */
static uint64_t change_data_bytes(int upper, const struct ws_change *c)
{
    if (c->kind == WS_DELETED || c->kind == WS_MODE || !S_ISREG(c->new_mode))
        return 0;
    struct stat st;
    cleanup_close int fd = ws_open_regular(upper, c->rel, &st);
    return fd >= 0 ? ws_data_bytes(fd) : 0;
}

/* Refuses, before anything is written, an apply whose files hold more data than max (the copy
 * counts again, for a file that grows meanwhile). */
static int check_data_limit(const struct ws_mount *mounts, const struct ws_changes *ch,
                            json_t *paths, uint64_t max, struct mcp_error *err)
{
    uint64_t total = 0, largest = 0;
    const struct ws_change *big = NULL;
    int upper = -1;
    size_t cur = (size_t)-1;
    for (size_t i = 0; i < ch->n; i++) {
        const struct ws_change *c = &ch->v[i];
        if (!ws_selected(paths, &mounts[c->mount], c->rel))
            continue;
        if (c->mount != cur) {
            if (upper >= 0)
                close(upper);
            upper = open(mounts[c->mount].upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
            cur = c->mount;
        }
        uint64_t n = upper >= 0 ? change_data_bytes(upper, c) : 0;
        total += n;
        if (n > largest)
            largest = n, big = c;
    }
    if (upper >= 0)
        close(upper);
    if (total <= max)
        return 0;
    cleanup_free char *sp = ws_sandbox_path(&mounts[big->mount], big->rel);
    cleanup_free char *name = utf8_c_quote(sp);
    return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                         "nothing was applied: this apply would write %" PRIu64
                         " bytes of file data (%s alone holds %" PRIu64
                         "), more than the limit of %" PRIu64
                         " bytes per apply. Apply fewer paths at a time, or ask the person to "
                         "raise the limit (mcpbox serve --apply-max-bytes BYTES, or mcpbox "
                         "sandbox apply --max-bytes BYTES)",
                         total, name, largest, max);
}

/* One apply of a mount at a time, across processes too (two servers of one user): an exclusive
 * flock on <journal>.lock, held until the apply ends (closing the fd releases it). */
static int lock_mounts(const struct ws_mount *mounts, size_t n, int *fds, struct mcp_error *err)
{
    for (size_t m = 0; m < n; m++) {
        fds[m] = -1;
        if (mounts[m].journal == NULL)
            continue;
        cleanup_free char *lock = xasprintf("%s.lock", mounts[m].journal);
        fds[m] = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fds[m] < 0 || flock(fds[m], LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            for (size_t k = 0; k <= m; k++)
                if (fds[k] >= 0)
                    close(fds[k]);
            return e == EWOULDBLOCK
                       ? mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                                       "another apply of this sandbox is running; wait for its "
                                       "result, then call review_changes to see what is left")
                       : mcp_error_set(err, MCP_ERR_IO, e, "cannot lock %s", lock);
        }
    }
    return 0;
}

static void unlock_mounts(int *fds, size_t n)
{
    for (size_t m = 0; m < n; m++)
        if (fds[m] >= 0)
            close(fds[m]);
    free(fds);
}

json_t *ws_apply(const struct ws_mount *mounts, size_t n_mounts, const struct ws_options *o,
                 json_t *paths, bool overwrite, struct mcp_error *err)
{
    int *locks = xcalloc(n_mounts + 1, sizeof *locks);
    if (lock_mounts(mounts, n_mounts, locks, err) < 0) {
        free(locks);
        return NULL;
    }
    json_t *res = apply_locked(mounts, n_mounts, o, paths, overwrite, err);
    unlock_mounts(locks, n_mounts);
    return res;
}

static json_t *apply_locked(const struct ws_mount *mounts, size_t n_mounts,
                            const struct ws_options *o, json_t *paths, bool overwrite,
                            struct mcp_error *err)
{
    struct ws_changes ch;
    struct ws_options scan_opts = *o;
    scan_opts.paths = paths;
    if (ws_scan(mounts, n_mounts, &scan_opts, &ch, err) < 0)
        return NULL;
    if (ch.truncated) { /* applying a part of "all" silently would be worse than refusing */
        ws_changes_free(&ch);
        mcp_error_set(err, MCP_ERR_LIMIT, 0,
                      "more than %d changes: apply them in parts, with paths (a directory at a "
                      "time)",
                      WS_CHANGES_MAX);
        return NULL;
    }
    uint64_t max = o->apply_max_bytes ? o->apply_max_bytes : WS_APPLY_BYTES_DEFAULT;
    struct ws_record rec = {0};
    if (check_data_limit(mounts, &ch, paths, max, err) < 0 ||
        (o->review && ws_record_load(o->reviews_dir, o->review, &rec, err) < 0)) {
        ws_changes_free(&ch);
        return NULL;
    }
    struct apply a = {.o = o,
                      .overwrite = overwrite,
                      .results = json_array(),
                      .src = -1,
                      .upper = -1,
                      .budget = max,
                      .reviewed = o->review ? &rec : NULL};
    int rc = 0;
    for (size_t m = 0; m < n_mounts && rc == 0; m++) {
        a.m = &mounts[m];
        a.src = ws_source_open(a.m, O_PATH);
        a.upper = open(a.m->upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
        a.journal = ws_journal_load(a.m);
        if (a.src < 0 || a.upper < 0)
            rc = mcp_error_set(err, MCP_ERR_IO, errno, "cannot open %s",
                               a.src < 0 ? a.m->source : a.m->upper);
        for (size_t i = 0; rc == 0 && i < ch.n; i++)
            if (ch.v[i].mount == m && ws_selected(paths, a.m, ch.v[i].rel))
                apply_one(&a, &ch.v[i]);
        if (rc == 0)
            rc = ws_journal_save(a.m, a.journal, err);
        json_decref(a.journal);
        if (a.src >= 0)
            close(a.src);
        if (a.upper >= 0)
            close(a.upper);
    }
    ws_changes_free(&ch);
    ws_record_free(&rec);
    if (rc < 0) {
        json_decref(a.results);
        return NULL;
    }
    json_int_t listed = (json_int_t)json_array_size(a.results);
    json_int_t total = a.counts[APPLIED] + a.counts[CONFLICT] + a.counts[SKIPPED] +
                       a.counts[FAILED] + a.counts[REFUSED];
    json_t *res = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I}", "results", a.results, "applied",
                            a.counts[APPLIED], "conflicts", a.counts[CONFLICT], "skipped",
                            a.counts[SKIPPED], "failed", a.counts[FAILED], "refused",
                            a.counts[REFUSED], "bytes", (json_int_t)a.written);
    if (total > listed)
        json_object_set_new(res, "results_note",
                            json_sprintf("%lld results, the first %lld listed; the counts are "
                                         "complete (review_changes shows what is left)",
                                         (long long)total, (long long)listed));
    return res;
}
