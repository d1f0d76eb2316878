/* Fuzz target for the server's parse of a small snapshot layer into the list the new sandbox's
 * setup writes (backend/local/snapshot_inline.h): a layer is made by a sandbox, so every byte
 * is hostile. Input: the tar. Whatever the list holds must be whole and inside it, every entry
 * one snap_entry_allowed takes (its name and a hard link's target), with no set-id bit on what
 * is not a directory, and within the bounds; a refusal must say why. Any disagreement aborts. */
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/snapshot_files.h"
#include "backend/local/snapshot_inline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const struct snap_inline_entry *e, size_t room)
{
    size_t need = sizeof *e + (size_t)e->path_len + e->link_len;
    if (e->path_len == 0 || e->link_len == 0 || need > room || e->size > room - need)
        abort();
    const char *path = (const char *)(e + 1), *link = path + e->path_len;
    if (path[e->path_len - 1] != '\0' || link[e->link_len - 1] != '\0' ||
        strlen(path) + 1 != e->path_len || strlen(link) + 1 != e->link_len)
        abort();
    if (!snap_entry_allowed(path, e->type, e->type == 0 ? link : NULL))
        abort();
    if (e->type != S_IFDIR && (e->mode & (S_ISUID | S_ISGID)))
        abort();
    if (e->type != S_IFREG && e->size != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int loaded;
    struct mcp_error err = {0};
    if (!loaded) {
        if (oci_archive_load(&err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            abort();
        }
        loaded = 1;
    }
    if (size > (256u << 10))
        return 0;
    struct snap_inline s;
    int rc = snap_inline_build((const char *)data, size, &s, &err);
    if (rc < 0 && err.msg[0] == '\0')
        abort();
    if (rc != 0)
        return 0;
    if (s.n > SNAP_INLINE_MAX_ENTRIES || s.len > SNAP_INLINE_MAX_BYTES)
        abort();
    size_t off = 0;
    for (size_t i = 0; i < s.n; i++) {
        const struct snap_inline_entry *e = (const struct snap_inline_entry *)(s.buf + off);
        check_entry(e, s.len - off);
        off += (sizeof *e + e->path_len + e->link_len + e->size + 7u) & ~(size_t)7u;
    }
    if (off != s.len)
        abort();
    snap_inline_free(&s);
    return 0;
}
