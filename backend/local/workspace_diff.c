/* The review of copy-on-write mounts: the scan's changes as JSON, and one git-style unified diff
 * of them ("diff --git a/<sandbox path> b/<sandbox path>", so `git apply -p<depth>` takes it),
 * returned a page at a time like command output. */
#include "backend/local/workspace_review.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/workspace_udiff.h"
#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

char *ws_sandbox_path(const struct ws_mount *m, const char *rel)
{
    size_t tl = strlen(m->target);
    while (tl > 1 && m->target[tl - 1] == '/')
        tl--;
    return xasprintf("%.*s/%s", (int)(tl == 1 ? 0 : tl), m->target, rel);
}

char *ws_host_path(const struct ws_mount *m, const char *rel)
{
    return xasprintf("%s/%s", m->source, rel);
}

/* True if path (a sandbox or host path) is the change's path or a directory above it. */
static bool path_selects(const char *path, const char *full)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    return strncmp(path, full, n) == 0 && (full[n] == '\0' || full[n] == '/' || n == 1);
}

bool ws_list_add(json_t *list, size_t *bytes, json_t *entry)
{
    size_t n = json_dumpb(entry, NULL, 0, JSON_COMPACT) + 1;
    if (json_array_size(list) >= WS_LISTED_MAX || *bytes + n > WS_LISTED_BYTES) {
        json_decref(entry);
        *bytes = WS_LISTED_BYTES + 1; /* full: a later, shorter entry is not listed either */
        return false;
    }
    *bytes += n;
    json_array_append_new(list, entry);
    return true;
}

bool ws_selected(json_t *paths, const struct ws_mount *m, const char *rel)
{
    if (!json_is_array(paths) || json_array_size(paths) == 0)
        return true;
    cleanup_free char *sp = ws_sandbox_path(m, rel);
    cleanup_free char *hp = ws_host_path(m, rel);
    size_t i;
    json_t *p;
    json_array_foreach(paths, i, p)
    {
        const char *s = json_string_value(p);
        if (s && (path_selects(s, sp) || path_selects(s, hp)))
            return true;
    }
    return false;
}

/* git's file modes: 100644, 100755, 120000 (a symlink); a directory, which git does not
 * track, as 040 and its permission bits (040777), for render_dir_mode. */
static unsigned git_mode(mode_t m)
{
    if (S_ISLNK(m))
        return 0120000;
    if (S_ISDIR(m))
        return (unsigned)(S_IFDIR | ws_carried_mode(m));
    return (unsigned)(S_IFREG | (m & 0777));
}

#define WS_DIFF_SIDE_MAX_TEXT "1 MiB" /* WS_DIFF_SIDE_MAX, as the result says it */
#define WS_DIFF_LINES_MAX_TEXT "50000"

static void sha256_of(const void *data, size_t len, unsigned char out[32])
{
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, data, len);
    sha256_final(&h, out);
}

/* One side of a change as the review read it: the bytes it shows and hashes, read once. */
struct side_read {
    int fd;          /* a regular file, open until read (-1: none) */
    struct stat st;  /* of fd */
    struct buf data; /* the contents (a symlink: its target), while at most WS_DIFF_SIDE_MAX */
    bool whole;      /* data holds all of it */
    bool text_head;  /* not whole: its first WS_DIFF_SIDE_MAX bytes looked like text */
    bool readable;
    unsigned char sha[32]; /* of every byte read (the sandbox's side only) */
};

/* Opens a side (mode 0: absent, an empty text; a symlink: its target is read now). */
static void side_open(int dirfd, const char *rel, mode_t mode, struct side_read *s)
{
    *s = (struct side_read){.fd = -1, .whole = true, .readable = true};
    buf_init(&s->data, WS_DIFF_SIDE_MAX);
    if (mode == 0)
        return;
    if (S_ISREG(mode)) {
        s->fd = ws_open_regular(dirfd, rel, &s->st);
        s->readable = s->fd >= 0;
        return;
    }
    s->readable = false;
    if (!S_ISLNK(mode))
        return;
    const char *slash = strrchr(rel, '/');
    cleanup_free char *dir = slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");
    cleanup_close int parent = ws_open_beneath(dirfd, dir, 0, true);
    char target[4096];
    ssize_t n =
        parent >= 0 ? readlinkat(parent, slash ? slash + 1 : rel, target, sizeof target) : -1;
    if (n < 0 || buf_append(&s->data, target, (size_t)n) < 0)
        return;
    s->readable = true;
    sha256_of(target, (size_t)n, s->sha);
}

/* Too large to diff: binary or not is told by its head (a character cut at the end of it is
 * allowed for). */
static void side_too_large(struct side_read *s)
{
    const char *d = buf_cstr(&s->data);
    s->whole = false;
    s->text_head = utf8_is_text(d, utf8_complete_prefix(d, s->data.len));
    buf_release(&s->data);
}

/* Zeros up to offset to, as a reader sees a hole (or too large). */
static void side_pad(struct side_read *s, uint64_t to)
{
    static const char zeros[4096];
    while (s->whole && s->data.len < to) {
        size_t n = to - s->data.len < sizeof zeros ? (size_t)(to - s->data.len) : sizeof zeros;
        if (to > WS_DIFF_SIDE_MAX || buf_append(&s->data, zeros, n) < 0)
            side_too_large(s);
    }
}

struct side_feed {
    struct side_read *s;
    struct ws_content_hash *hash; /* NULL: the host's side, not hashed */
};

/* One chunk of data as the review reads it: into the digest, and into the text while it fits. */
static int side_chunk(void *ctx, off_t at, const char *data, size_t len)
{
    struct side_feed *f = ctx;
    struct side_read *s = f->s;
    if (f->hash)
        ws_content_hash_chunk(f->hash, (uint64_t)at, data, len);
    side_pad(s, (uint64_t)at);
    if (s->whole && buf_append(&s->data, data, len) < 0)
        side_too_large(s);
    if (!s->whole && !f->hash) { /* enough to know it is too large to diff */
        errno = ECANCELED;
        return -1;
    }
    return 0;
}

/* Reads an opened file extent by extent, as apply copies it (holes are not read): all of it when
 * hash (the digest covers every byte of data), else until it is too large to diff. */
static void side_read_all(struct side_read *s, bool hash)
{
    if (s->fd < 0)
        return;
    struct ws_content_hash h;
    ws_content_hash_init(&h);
    struct side_feed feed = {.s = s, .hash = hash ? &h : NULL};
    struct stat st;
    if (fstat(s->fd, &st) < 0 ||
        (ws_copy_sparse(s->fd, -1, side_chunk, &feed) < 0 && errno != ECANCELED))
        s->readable = false;
    side_pad(s, (uint64_t)st.st_size);
    if (hash)
        ws_content_hash_final(&h, (uint64_t)st.st_size, s->sha);
    close(s->fd);
    s->fd = -1;
}

static void side_free(struct side_read *s)
{
    if (s->fd >= 0)
        close(s->fd);
    buf_release(&s->data);
}

static size_t count_lines(const struct buf *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->len; i++)
        n += b->data[i] == '\n';
    return n;
}

/* p as the diff names it after prefix ("a/", "b/"): as is, or in git's C-style quotes ("a/x\ny")
 * when p has a control character, a quote, a backslash or a byte that is not UTF-8. The sandbox
 * names its files: unquoted, a newline in a name forged header and hunk lines in the review (a
 * file shown as an edit of another), as `git apply` reads the quoted form back. */
static char *diff_name(const char *prefix, const char *p)
{
    cleanup_free char *name = xasprintf("%s%s", prefix, p);
    return utf8_c_quote(name);
}

static void render_header(struct buf *d, const char *p, const struct ws_change *c)
{
    cleanup_free char *a = diff_name("a/", p);
    cleanup_free char *b = diff_name("b/", p);
    buf_printf(d, "diff --git %s %s\n", a, b);
    unsigned om = git_mode(c->old_mode), nm = git_mode(c->new_mode);
    if (c->old_mode == 0)
        buf_printf(d, "new file mode %06o\n", nm);
    else if (c->new_mode == 0)
        buf_printf(d, "deleted file mode %06o\n", om);
    else if (om != nm)
        buf_printf(d, "old mode %06o\nnew mode %06o\n", om, nm);
}

/* A directory's mode change, which a person must see (`chmod 777 .git/hooks`) but git has no
 * section for ("diff --git" with mode 040777 makes `git apply` refuse the whole patch): git's
 * old mode/new mode lines after a "#" line, which git apply skips as text between patches. */
static void render_dir_mode(struct buf *d, const struct ws_mount *m, const struct ws_change *c)
{
    cleanup_free char *sp = ws_sandbox_path(m, c->rel);
    cleanup_free char *name = diff_name("", sp + 1);
    buf_printf(d, "# directory %s (git tracks no directories)\nold mode %06o\nnew mode %06o\n",
               name, git_mode(c->old_mode), git_mode(c->new_mode));
}

/* Hard links in the sandbox's layer, by inode: the second path of a file is diffed once (a
 * thousand links to one large file must not cost a thousand diffs). */
struct link_seen {
    dev_t dev, old_dev;
    ino_t ino, old_ino; /* the sandbox's file; the host file it is diffed against (0: none) */
    size_t change;      /* the first change that showed it */
    bool read;          /* sha holds the digest of the contents that change read */
    unsigned char sha[32];
};

struct links {
    struct link_seen *v; /* open addressing on ino; change == SIZE_MAX: free */
    size_t cap, n;
};

static size_t link_slot(const struct links *t, dev_t dev, ino_t ino)
{
    size_t i = (size_t)((uint64_t)ino * 0x9e3779b97f4a7c15ull) & (t->cap - 1);
    while (t->v[i].change != SIZE_MAX && (t->v[i].ino != ino || t->v[i].dev != dev))
        i = (i + 1) & (t->cap - 1);
    return i;
}

/* The entry of the change that already showed this file against the same host file, or NULL
 * (and the file is noted as shown by change). */
static struct link_seen *link_seen_before(struct links *t, const struct stat *us,
                                          const struct stat *old, size_t change)
{
    dev_t old_dev = old ? old->st_dev : 0;
    ino_t old_ino = old ? old->st_ino : 0;
    if (2 * (t->n + 1) > t->cap) {
        struct links bigger = {.cap = t->cap ? 2 * t->cap : 64, .n = t->n};
        bigger.v = xmalloc(bigger.cap * sizeof *bigger.v);
        for (size_t i = 0; i < bigger.cap; i++)
            bigger.v[i].change = SIZE_MAX;
        for (size_t i = 0; i < t->cap; i++)
            if (t->v[i].change != SIZE_MAX)
                bigger.v[link_slot(&bigger, t->v[i].dev, t->v[i].ino)] = t->v[i];
        free(t->v);
        *t = bigger;
    }
    struct link_seen *e = &t->v[link_slot(t, us->st_dev, us->st_ino)];
    if (e->change != SIZE_MAX)
        return e->old_ino == old_ino && e->old_dev == old_dev ? e : NULL;
    *e = (struct link_seen){.dev = us->st_dev,
                            .old_dev = old_dev,
                            .ino = us->st_ino,
                            .old_ino = old_ino,
                            .change = change};
    t->n++;
    return NULL;
}

/* After the first change of a hard-linked file read it: the digest of what it read. */
static void link_note_read(struct links *t, const struct stat *us, size_t change,
                           const unsigned char sha[32])
{
    struct link_seen *e = &t->v[link_slot(t, us->st_dev, us->st_ino)];
    if (e->change == change) {
        e->read = true;
        memcpy(e->sha, sha, sizeof e->sha);
    }
}

/* What a review of all the changes renders: only the page asked for is kept. */
struct render {
    struct ws_changes *ch;
    const struct ws_mount *mounts;
    struct links links;
    struct buf section;  /* one change's text, bounded by WS_DIFF_SIDE_MAX per side */
    struct buf page;     /* the bytes of the whole diff in [start, end) */
    uint64_t start, end; /* the page asked for: [start, end) of the whole diff */
    uint64_t total;      /* the whole diff's length so far */
};

static void page_add(struct render *r, const struct buf *sec)
{
    uint64_t lo = r->total > r->start ? r->total : r->start;
    uint64_t hi = r->total + sec->len < r->end ? r->total + sec->len : r->end;
    if (lo < hi)
        buf_append(&r->page, sec->data + (lo - r->total), (size_t)(hi - lo));
    r->total += sec->len;
}

/* The one cut after which the diff is still shown, in part. */
static const char cut_work[] = "the line diff reached its work limit: some unchanged lines are "
                               "shown as removed and added";

/* The diff of two text sides into d, or the reason it was cut. */
static const char *render_text(struct buf *d, const char *from, const char *to, struct side_read *a,
                               struct side_read *b, struct ws_change *c)
{
    if (!a->readable || !b->readable)
        return "a side could not be read";
    if ((!a->whole && !a->text_head) || (!b->whole && !b->text_head)) {
        c->binary = S_ISREG(c->old_mode) || S_ISREG(c->new_mode);
        return NULL;
    }
    if (!a->whole || !b->whole)
        return "a side is larger than " WS_DIFF_SIDE_MAX_TEXT;
    if (count_lines(&a->data) > WS_DIFF_LINES_MAX || count_lines(&b->data) > WS_DIFF_LINES_MAX)
        return "a side has more than " WS_DIFF_LINES_MAX_TEXT " lines";
    if (!utf8_is_text(buf_cstr(&a->data), a->data.len) ||
        !utf8_is_text(buf_cstr(&b->data), b->data.len)) {
        c->binary = S_ISREG(c->old_mode) || S_ISREG(c->new_mode);
        return NULL;
    }
    buf_printf(d, "--- %s\n+++ %s\n", from, to);
    if (udiff_hunks_capped(buf_cstr(&a->data), a->data.len, buf_cstr(&b->data), b->data.len, d,
                           NULL, NULL))
        return cut_work;
    return NULL;
}

/* The change's section into r->section, and its digest (what an apply must find). Special
 * files, and directories whose mode did not change, have no section (they are in the list of
 * changes only). */
static void render_change(struct render *r, int ufd, int lfd, size_t idx)
{
    struct ws_change *c = &r->ch->v[idx];
    const struct ws_mount *m = &r->mounts[c->mount];
    mode_t om = c->old_mode, nm = c->new_mode;
    if (c->kind == WS_MODE && S_ISDIR(om) && S_ISDIR(nm))
        render_dir_mode(&r->section, m, c);
    bool old_ok = om == 0 || S_ISREG(om) || S_ISLNK(om);
    bool new_ok = nm == 0 || S_ISREG(nm) || S_ISLNK(nm);
    bool content = (S_ISREG(nm) || S_ISLNK(nm)) && c->kind != WS_MODE;
    bool section = old_ok && new_ok && (om || nm);
    cleanup_free char *sp = ws_sandbox_path(m, c->rel);
    const char *p = sp + 1;
    if (section)
        render_header(&r->section, p, c);
    if (!content || c->kind == WS_MODE) {
        ws_change_digest(c, NULL, c->digest);
        c->digested = true;
        if (!section || c->kind == WS_MODE || nm != 0)
            return;
    }
    struct side_read a, b;
    side_open(lfd, c->rel, section ? om : 0, &a);
    side_open(ufd, c->rel, nm, &b);
    bool linked = b.fd >= 0 && b.st.st_nlink > 1;
    const struct link_seen *first =
        linked ? link_seen_before(&r->links, &b.st, a.fd >= 0 ? &a.st : NULL, idx) : NULL;
    cleanup_free char *to = nm ? diff_name("b/", p) : xstrdup("/dev/null");
    if (first) { /* the same file as a change above: the bytes it read, this change's digest */
        const struct ws_change *f = &r->ch->v[first->change];
        c->same_as = ws_sandbox_path(&r->mounts[f->mount], f->rel);
        c->binary = f->binary, c->cut = f->cut;
        c->digested = content && first->read;
        if (c->digested)
            ws_change_digest(c, first->sha, c->digest);
        cleanup_free char *fp = diff_name("b/", c->same_as + 1);
        buf_printf(&r->section, "Same file as %s (a hard link): shown above\n", fp);
        side_free(&a), side_free(&b);
        return;
    }
    side_read_all(&a, false);
    side_read_all(&b, true);
    if (content && b.readable) {
        ws_change_digest(c, b.sha, c->digest);
        c->digested = true;
        if (linked)
            link_note_read(&r->links, &b.st, idx, b.sha);
    }
    if (section) {
        cleanup_free char *from = om ? diff_name("a/", p) : xstrdup("/dev/null");
        c->cut = render_text(&r->section, from, to, &a, &b, c);
        if (c->binary)
            buf_printf(&r->section, "Binary files %s and %s differ\n", from, to);
        else if (c->cut)
            buf_printf(&r->section, "Files %s and %s differ (not diffed: %s)\n", from, to, c->cut);
        /* with the sizes, which a person would otherwise not see (a sparse file) */
        if (c->binary || (c->cut && c->cut != cut_work))
            buf_printf(&r->section, "# size: %" PRIu64 " -> %" PRIu64 " bytes\n", c->old_size,
                       c->new_size);
    }
    side_free(&a), side_free(&b);
}

static json_t *mode_json(mode_t m)
{
    if (m == 0)
        return json_null();
    char s[8];
    snprintf(s, sizeof s, "%o", (unsigned)(m & 07777));
    return json_string(s);
}

static json_t *change_json(const struct ws_mount *m, const struct ws_change *c, size_t offset)
{
    cleanup_free char *sp = ws_sandbox_path(m, c->rel);
    cleanup_free char *hp = ws_host_path(m, c->rel);
    mode_t cur = c->new_mode ? c->new_mode : c->old_mode;
    json_t *j = json_pack("{s:o, s:o, s:s, s:s, s:o, s:o, s:I, s:I, s:I}", "path",
                          utf8_json_text(sp, strlen(sp)), "host_path",
                          utf8_json_text(hp, strlen(hp)), "change", ws_kind_name(c->kind), "type",
                          ws_type_name(cur), "mode", mode_json(c->new_mode), "old_mode",
                          mode_json(c->old_mode), "size", (json_int_t)c->new_size, "old_size",
                          (json_int_t)c->old_size, "diff_offset", (json_int_t)offset);
    if (c->old_mode && c->new_mode && (c->old_mode & S_IFMT) != (c->new_mode & S_IFMT))
        json_object_set_new(j, "old_type", json_string(ws_type_name(c->old_mode)));
    if (c->binary)
        json_object_set_new(j, "binary", json_true());
    if (c->cut)
        json_object_set_new(j, "diff_cut", json_string(c->cut));
    if (c->same_as)
        json_object_set_new(j, "same_as", utf8_json_text(c->same_as, strlen(c->same_as)));
    if (c->conflict)
        json_object_set_new(j, "conflict", json_true());
    bool special =
        c->new_mode && !S_ISREG(c->new_mode) && !S_ISDIR(c->new_mode) && !S_ISLNK(c->new_mode);
    if (special)
        json_object_set_new(j, "applicable", json_false());
    return j;
}

/* The page of the diff from offset: at most max bytes, ending after a line when one fits.
 * r->page holds the bytes from r->start on (at most max), r->total the whole length. */
static json_t *diff_page(const struct ws_changes *ch, const struct render *r, uint64_t max,
                         json_t *res)
{
    uint64_t len = r->total;
    uint64_t start = r->start < len ? r->start : len;
    const char *w = r->page.data ? r->page.data : "";
    size_t n = len - start > max ? (size_t)max : (size_t)(len - start);
    uint64_t end = start + n;
    if (end < len) {
        size_t cut = 0;
        for (size_t i = n; i > 0; i--)
            if (w[i - 1] == '\n') {
                cut = i;
                break;
            }
        n = cut ? cut : utf8_page_end(w, n);
        end = start + n;
    }
    json_object_set_new(res, "diff", utf8_json_text(w, n));
    json_object_set_new(res, "diff_bytes", json_integer((json_int_t)len));
    json_object_set_new(res, "offset", json_integer((json_int_t)start));
    json_object_set_new(res, "next_offset",
                        end < len ? json_integer((json_int_t)end) : json_null());
    json_object_set_new(res, "truncated", json_boolean(end < len || ch->truncated));
    if (end < len)
        json_object_set_new(res, "note",
                            json_sprintf("diff cut at byte %llu of %llu; call again with offset "
                                         "%llu for the rest, or with paths for some files",
                                         (unsigned long long)end, (unsigned long long)len,
                                         (unsigned long long)end));
    if (ch->truncated)
        json_object_set_new(res, "scan_note",
                            json_sprintf("the scan stopped at %d changes; review and apply the "
                                         "rest by paths (a directory at a time)",
                                         WS_CHANGES_MAX));
    return res;
}

/* Renders every selected change, keeping only the page's bytes; lists the first ones
 * (ws_list_add). */
static json_t *render_all(struct render *r, json_t *paths, size_t *total)
{
    json_t *list = json_array();
    size_t listed_bytes = 0;
    int ufd = -1, lfd = -1;
    size_t cur = (size_t)-1;
    *total = 0;
    for (size_t i = 0; i < r->ch->n; i++) {
        struct ws_change *c = &r->ch->v[i];
        const struct ws_mount *m = &r->mounts[c->mount];
        if (!ws_selected(paths, m, c->rel))
            continue;
        if (c->mount != cur) {
            if (ufd >= 0)
                close(ufd), close(lfd);
            ufd = open(m->upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
            lfd = ws_source_open(m, O_PATH);
            cur = c->mount;
        }
        uint64_t at = r->total;
        buf_reset(&r->section);
        render_change(r, ufd, lfd, i);
        page_add(r, &r->section);
        if (listed_bytes <= WS_LISTED_BYTES)
            ws_list_add(list, &listed_bytes, change_json(m, c, (size_t)at));
        (*total)++;
    }
    if (ufd >= 0)
        close(ufd), close(lfd);
    return list;
}

json_t *ws_review(const struct ws_mount *mounts, size_t n_mounts, const struct ws_options *o,
                  json_t *paths, uint64_t offset, uint64_t max_bytes, struct mcp_error *err)
{
    struct ws_changes ch;
    struct ws_options scan_opts = *o;
    scan_opts.paths = paths;
    if (ws_scan(mounts, n_mounts, &scan_opts, &ch, err) < 0)
        return NULL;
    uint64_t max = max_bytes ? max_bytes : WS_DIFF_DEFAULT;
    if (max > WS_DIFF_MAX)
        max = WS_DIFF_MAX;
    struct render r = {.ch = &ch, .mounts = mounts, .start = offset, .end = offset + max};
    buf_init(&r.section, SIZE_MAX); /* bounded by what render_change reads */
    buf_init(&r.page, (size_t)max);
    size_t total = 0;
    json_t *list = render_all(&r, paths, &total);
    buf_release(&r.section);
    free(r.links.v);
    json_t *res = json_pack("{s:o, s:I}", "changes", list, "changes_total", (json_int_t)total);
    if (total > json_array_size(list))
        json_object_set_new(res, "changes_note",
                            json_sprintf("%zu changes, the first %zu listed; narrow with paths "
                                         "(a directory) to see the others",
                                         total, json_array_size(list)));
    diff_page(&ch, &r, max, res);
    buf_release(&r.page);
    char token[WS_REVIEW_TOKEN_LEN];
    if (o->reviews_dir && ws_record_save(o->reviews_dir, mounts, &ch, token, err) < 0) {
        json_decref(res);
        res = NULL;
    } else if (o->reviews_dir) {
        json_object_set_new(res, "review", json_string(token));
    }
    ws_changes_free(&ch);
    return res;
}
