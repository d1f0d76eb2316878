/* Fuzz target for the checks on each entry of a snapshot's layer (snapshot_files.h: a layer is
 * made by a sandbox, so every name in it is hostile). Input: a type byte, then the entry's name,
 * a NUL, and a hard link's target (none when there is no NUL). Whatever is allowed must be of an
 * allowed type, relative, free of ".." components, and below workspace/, tmp/ or root/ (or one
 * of them), its link target too. Any disagreement aborts. */
#include <archive_entry.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/local/image/snapshot_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned types[] = {AE_IFREG, AE_IFDIR, AE_IFLNK,  AE_IFIFO,
                                 AE_IFCHR, AE_IFBLK, AE_IFSOCK, 0};

/* The independent statement of the rule, on the raw name. */
static void check_name(const char *name)
{
    const char *p = name;
    while (strncmp(p, "./", 2) == 0)
        p += 2;
    if (*p == '/' || strstr(name, "..") == name || strstr(name, "/../") != NULL)
        abort();
    size_t len = strlen(name);
    if (len >= 3 && strcmp(name + len - 3, "/..") == 0)
        abort();
    size_t n = strcspn(p, "/");
    if (!((n == 9 && strncmp(p, "workspace", 9) == 0) || (n == 3 && strncmp(p, "tmp", 3) == 0) ||
          (n == 4 && strncmp(p, "root", 4) == 0)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    unsigned type = types[data[0] % (sizeof types / sizeof types[0])];
    char *text = malloc(size + 1);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    size_t name_len = strlen(text);
    const char *link = name_len < size - 1 ? text + name_len + 1 : NULL;
    if (snap_entry_allowed(text, type, link)) {
        if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO &&
            !(type == 0 && link != NULL))
            abort();
        check_name(text);
        if (link != NULL)
            check_name(link);
    }
    free(text);
    return 0;
}
