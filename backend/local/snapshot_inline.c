/* The server's half of a restore by the sandbox's setup (snapshot_inline.h): a small layer
 * parsed and checked into the flat list the setup child writes. The checks are the helper's
 * own (snap_entry_allowed, snap_entry_mode); the list holds nothing else. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/snapshot_files.h"
#include "backend/local/image/unpack.h"
#include "backend/local/snapshot_inline.h"
#include "lib/base/xalloc.h"

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)

/* Room for one more entry of these sizes: its place in s->buf, or NULL past the bounds. */
static struct snap_inline_entry *entry_room(struct snap_inline *s, size_t path, size_t link,
                                            uint64_t size)
{
    size_t need = ALIGN8(sizeof(struct snap_inline_entry) + path + link + size);
    if (s->n >= SNAP_INLINE_MAX_ENTRIES || size > SNAP_INLINE_MAX_BYTES ||
        s->len + need > SNAP_INLINE_MAX_BYTES)
        return NULL;
    struct snap_inline_entry *e = (struct snap_inline_entry *)(s->buf + s->len);
    memset(e, 0, need);
    s->len += need, s->n++;
    return e;
}

/* The entry's data after its names: 0, or -1 if the tar is short or holds more than it said. */
static int read_data(struct archive *r, char *to, uint64_t size)
{
    const void *block;
    size_t got;
    la_int64_t offset;
    int rc;
    while ((rc = oci_archive.read_data_block(r, &block, &got, &offset)) == ARCHIVE_OK) {
        if (offset < 0 || (uint64_t)offset > size || got > size - (uint64_t)offset)
            return -1;
        memcpy(to + offset, block, got);
    }
    return rc == ARCHIVE_EOF ? 0 : -1;
}

static void set_times(struct snap_inline_entry *e, struct archive_entry *a)
{
    e->mtime_sec = oci_archive.entry_mtime(a), e->mtime_nsec = oci_archive.entry_mtime_nsec(a);
    bool atime = oci_archive.entry_atime_is_set(a);
    e->atime_sec = atime ? oci_archive.entry_atime(a) : e->mtime_sec;
    e->atime_nsec = atime ? oci_archive.entry_atime_nsec(a) : e->mtime_nsec;
}

/* One entry into s: 0, 1 (past the bounds, or unreadable), -1 with err (refused). */
static int add_entry(struct archive *r, struct archive_entry *a, struct snap_inline *s,
                     struct mcp_error *err)
{
    const char *name = oci_archive.entry_pathname(a), *hard = oci_archive.entry_hardlink(a);
    unsigned type = oci_archive.entry_filetype(a);
    if (!snap_entry_allowed(name, type, hard))
        return mcp_error_set(err, MCP_ERR_BACKEND, 0, "%s: %s", SNAP_ENTRY_REFUSED,
                             name ? name : "(no name)");
    static char path[4096], link[4096]; /* the loop's: one build at a time */
    const char *target = hard ? hard : type == AE_IFLNK ? oci_archive.entry_symlink(a) : "";
    if (unpack_clean_path(name, path, sizeof path) < 0 || path[0] == '\0' || target == NULL ||
        (hard ? unpack_clean_path(hard, link, sizeof link) : (int)strlen(target) >= 4096) < 0)
        return 1;
    if (!hard)
        snprintf(link, sizeof link, "%s", target);
    bool data = type == AE_IFREG && !hard;
    la_int64_t size = data ? oci_archive.entry_size(a) : 0;
    struct snap_inline_entry *e =
        size < 0 ? NULL : entry_room(s, strlen(path) + 1, strlen(link) + 1, (uint64_t)size);
    if (e == NULL)
        return 1;
    e->type = hard ? 0 : type;
    e->mode = snap_entry_mode(type, oci_archive.entry_mode(a)) & 07777;
    e->uid = (uint32_t)oci_archive.entry_uid(a), e->gid = (uint32_t)oci_archive.entry_gid(a);
    set_times(e, a);
    e->path_len = (uint32_t)strlen(path) + 1, e->link_len = (uint32_t)strlen(link) + 1;
    e->size = (uint64_t)size;
    char *p = (char *)(e + 1);
    memcpy(p, path, e->path_len), memcpy(p + e->path_len, link, e->link_len);
    return data && read_data(r, p + e->path_len + e->link_len, e->size) < 0 ? 1 : 0;
}

int snap_inline_build(const char *layer, size_t n, struct snap_inline *out, struct mcp_error *err)
{
    *out = (struct snap_inline){.buf = xmalloc(SNAP_INLINE_MAX_BYTES)};
    struct archive *r = oci_archive.read_new();
    oci_archive.read_support_format_tar(r);
    struct archive_entry *a;
    int rc = oci_archive.read_open_memory(r, layer, n) == ARCHIVE_OK ? 0 : 1, next = ARCHIVE_OK;
    while (rc == 0 && (next = oci_archive.read_next_header(r, &a)) == ARCHIVE_OK)
        rc = add_entry(r, a, out, err);
    if (rc == 0 && next != ARCHIVE_EOF)
        rc = 1; /* damaged: the helper's stream says so */
    oci_archive.read_free(r);
    if (rc != 0)
        snap_inline_free(out);
    return rc;
}

void snap_inline_free(struct snap_inline *s)
{
    free(s->buf);
    *s = (struct snap_inline){0};
}
