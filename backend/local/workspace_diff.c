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
#include "mcp/base/buf.h"
#include "mcp/base/cleanup.h"
#include "mcp/base/utf8.h"
#include "mcp/base/xalloc.h"

int ws_read_all(int dirfd, const char *name, size_t max, char **data, size_t *len)
{
    struct stat st;
    cleanup_close int fd = ws_open_regular(dirfd, name, &st);
    if (fd < 0)
        return -1;
    if ((uint64_t)st.st_size > max) {
        errno = EFBIG;
        return -1;
    }
    struct buf b;
    buf_init(&b, max);
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 || (n > 0 && buf_append(&b, chunk, (size_t)n) < 0)) {
            int e = n < 0 ? errno : EFBIG;
            buf_release(&b);
            errno = e;
            return -1;
        }
        if (n == 0)
            break;
    }
    *len = b.len;
    buf_cstr(&b);
    *data = buf_steal(&b, NULL);
    return 0;
}

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

/* A side's contents for the text diff: a file's bytes or a symlink's target; absent is empty.
 * Returns false when it cannot be diffed as text (binary, too large, unreadable). */
static bool side_text(int dirfd, const char *rel, mode_t mode, char **data, size_t *len)
{
    *data = NULL, *len = 0;
    if (mode == 0)
        return true;
    if (S_ISLNK(mode)) {
        cleanup_close int parent = -1;
        char *slash = strrchr(rel, '/');
        cleanup_free char *dir = slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");
        parent = ws_open_beneath(dirfd, dir, 0, true);
        char target[4096];
        ssize_t n =
            parent >= 0 ? readlinkat(parent, slash ? slash + 1 : rel, target, sizeof target) : -1;
        if (n < 0)
            return false;
        *data = xstrndup(target, (size_t)n), *len = (size_t)n;
        return utf8_is_text(*data, *len);
    }
    if (!S_ISREG(mode))
        return false;
    if (ws_read_all(dirfd, rel, WS_TEXT_MAX, data, len) < 0)
        return false;
    return utf8_is_text(*data, *len);
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

/* Appends the change's section to d; sets c->binary. Special files, and directories whose mode
 * did not change, have no section (they are in the list of changes only). */
static void render_change(struct buf *d, int ufd, int lfd, const struct ws_mount *m,
                          struct ws_change *c)
{
    mode_t om = c->old_mode, nm = c->new_mode;
    if (c->kind == WS_MODE && S_ISDIR(om) && S_ISDIR(nm)) {
        render_dir_mode(d, m, c);
        return;
    }
    bool old_ok = om == 0 || S_ISREG(om) || S_ISLNK(om);
    bool new_ok = nm == 0 || S_ISREG(nm) || S_ISLNK(nm);
    if (!old_ok || !new_ok || (om == 0 && nm == 0))
        return;
    cleanup_free char *sp = ws_sandbox_path(m, c->rel);
    const char *p = sp + 1;
    render_header(d, p, c);
    if (c->kind == WS_MODE)
        return;
    cleanup_free char *a = NULL;
    cleanup_free char *b = NULL;
    size_t al = 0, bl = 0;
    bool text = side_text(lfd, c->rel, om, &a, &al);
    text = side_text(ufd, c->rel, nm, &b, &bl) && text;
    c->binary = !text && (S_ISREG(om) || S_ISREG(nm));
    cleanup_free char *from = om ? diff_name("a/", p) : xstrdup("/dev/null");
    cleanup_free char *to = nm ? diff_name("b/", p) : xstrdup("/dev/null");
    if (!text) { /* with the sizes, which a person would otherwise not see (a sparse file) */
        buf_printf(d, "Binary files %s and %s differ\n", from, to);
        buf_printf(d, "# size: %" PRIu64 " -> %" PRIu64 " bytes\n", c->old_size, c->new_size);
        return;
    }
    buf_printf(d, "--- %s\n+++ %s\n", from, to);
    udiff_hunks(a ? a : "", al, b ? b : "", bl, d, NULL, NULL);
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
    if (c->conflict)
        json_object_set_new(j, "conflict", json_true());
    bool special =
        c->new_mode && !S_ISREG(c->new_mode) && !S_ISDIR(c->new_mode) && !S_ISLNK(c->new_mode);
    if (special)
        json_object_set_new(j, "applicable", json_false());
    return j;
}

/* The page of the diff from offset: at most max bytes, ending after a line when one fits. */
static json_t *diff_page(struct ws_changes *ch, const struct buf *d, uint64_t offset, uint64_t max,
                         json_t *res)
{
    size_t len = d->len;
    size_t start = offset < len ? (size_t)offset : len;
    size_t end = len - start > max ? start + (size_t)max : len;
    if (end < len) {
        const char *nl = NULL;
        for (size_t i = end; i > start; i--)
            if (d->data[i - 1] == '\n') {
                nl = d->data + i;
                break;
            }
        end = nl ? (size_t)(nl - d->data) : start + utf8_page_end(d->data + start, end - start);
    }
    json_object_set_new(res, "diff", utf8_json_text(d->data ? d->data + start : "", end - start));
    json_object_set_new(res, "diff_bytes", json_integer((json_int_t)len));
    json_object_set_new(res, "offset", json_integer((json_int_t)start));
    json_object_set_new(res, "next_offset",
                        end < len ? json_integer((json_int_t)end) : json_null());
    json_object_set_new(res, "truncated", json_boolean(end < len || ch->truncated));
    if (end < len)
        json_object_set_new(res, "note",
                            json_sprintf("diff cut at byte %zu of %zu; call again with offset %zu "
                                         "for the rest, or with paths for some files",
                                         end, len, end));
    if (ch->truncated)
        json_object_set_new(res, "scan_note",
                            json_sprintf("the scan stopped at %d changes; review and apply the "
                                         "rest by paths (a directory at a time)",
                                         WS_CHANGES_MAX));
    return res;
}

json_t *ws_review(const struct ws_mount *mounts, size_t n_mounts, const struct ws_options *o,
                  json_t *paths, uint64_t offset, uint64_t max_bytes, struct mcp_error *err)
{
    struct ws_changes ch;
    struct ws_options scan_opts = *o;
    scan_opts.paths = paths;
    if (ws_scan(mounts, n_mounts, &scan_opts, &ch, err) < 0)
        return NULL;
    struct buf d;
    buf_init(&d, SIZE_MAX);
    json_t *list = json_array();
    int ufd = -1, lfd = -1;
    size_t cur = (size_t)-1, total = 0;
    for (size_t i = 0; i < ch.n; i++) {
        struct ws_change *c = &ch.v[i];
        const struct ws_mount *m = &mounts[c->mount];
        if (!ws_selected(paths, m, c->rel))
            continue;
        if (c->mount != cur) {
            if (ufd >= 0)
                close(ufd), close(lfd);
            ufd = open(m->upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
            lfd = ws_source_open(m, O_PATH);
            cur = c->mount;
        }
        size_t at = d.len;
        render_change(&d, ufd, lfd, m, c);
        if (json_array_size(list) < WS_LISTED_MAX)
            json_array_append_new(list, change_json(m, c, at));
        total++;
    }
    if (ufd >= 0)
        close(ufd), close(lfd);
    json_t *res = json_pack("{s:o, s:I}", "changes", list, "changes_total", (json_int_t)total);
    if (total > json_array_size(list))
        json_object_set_new(res, "changes_note",
                            json_sprintf("%zu changes, the first %d listed; narrow with paths "
                                         "(a directory) to see the others",
                                         total, WS_LISTED_MAX));
    diff_page(&ch, &d, offset, max_bytes ? max_bytes : WS_DIFF_DEFAULT, res);
    buf_release(&d);
    ws_changes_free(&ch);
    return res;
}
