/* Which entries of a snapshot's layer a restore takes (snapshot_files.h). */
#include <archive_entry.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/local/image/snapshot_files.h"
#include "backend/local/image/unpack.h"

static const char *const snap_dirs[] = SNAP_DIRS;

/* A name below one of snap_dirs (or one of them), without ".." or a leading "/". */
static bool name_allowed(const char *name)
{
    char clean[4096];
    if (name == NULL || unpack_clean_path(name, clean, sizeof clean) < 0)
        return false;
    size_t n = strcspn(clean, "/");
    for (size_t i = 0; i < sizeof snap_dirs / sizeof snap_dirs[0]; i++)
        if (strlen(snap_dirs[i]) == n && strncmp(clean, snap_dirs[i], n) == 0)
            return true;
    return false;
}

bool snap_entry_allowed(const char *name, unsigned type, const char *hardlink)
{
    /* a hard link read back from a tar may carry no type of its own */
    bool hard_untyped = type == 0 && hardlink != NULL;
    if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO &&
        !hard_untyped)
        return false;
    return name_allowed(name) && (hardlink == NULL || name_allowed(hardlink));
}

unsigned snap_entry_mode(unsigned type, unsigned mode)
{
    return type == AE_IFDIR ? mode : mode & ~(unsigned)(S_ISUID | S_ISGID);
}
