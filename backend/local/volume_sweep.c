/* What a crash leaves of named volumes (docs/local-backend.md, "Named volumes"): a create makes
 * the volume's directory first and its record last, so a crash between them leaves a
 * <state_dir>/volumes/vol-<random>/ that no record names, holding nothing anyone can reach.
 * The backend's start removes those once they are older than LOCAL_VOLUME_ORPHAN_AGE_S (so as
 * not to race a create under way in another mcpbox process), and reports records whose
 * directory is gone (their files are lost; the record is kept, the owner decides). A directory
 * that a record names is never touched. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define LOG_MODULE "local"
#include "backend/local/local_volume.h"
#include "lib/base/log.h"
#include "lib/store/store_volumes.h"

static bool has_record(const struct store_volume *list, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].id, id) == 0)
            return true;
    return false;
}

/* Removes one directory no record names, if it is old enough to be a crash's. */
static void sweep_orphan(const char *top, const char *id)
{
    char vdir[LOCAL_VOLUME_PATH_MAX];
    struct stat st;
    struct mcp_error err;
    snprintf(vdir, sizeof vdir, "%s/%s", top, id);
    if (lstat(vdir, &st) < 0 || !S_ISDIR(st.st_mode) ||
        time(NULL) - st.st_mtime < LOCAL_VOLUME_ORPHAN_AGE_S)
        return;
    if (local_volume_fs_remove(vdir, &err) < 0)
        log_warn("volume directory %s has no record (a crash during a create) and could not be "
                 "removed: %s; remove it by hand",
                 vdir, err.msg);
    else
        log_info("removed volume directory %s, which no record named (a crash during a create)",
                 vdir);
}

void local_volume_sweep(struct store *st, const char *state_dir)
{
    char top[LOCAL_VOLUME_PATH_MAX], vdir[LOCAL_VOLUME_PATH_MAX];
    struct store_volume *list = NULL;
    size_t n = 0;
    struct mcp_error err;
    struct stat sb;
    if (store_volume_list(st, NULL, &list, &n, &err) < 0)
        return;
    snprintf(top, sizeof top, "%s/" LOCAL_VOLUME_DIR, state_dir);
    DIR *d = opendir(top);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "vol-", 4) == 0 && !has_record(list, n, e->d_name))
            sweep_orphan(top, e->d_name);
    if (d)
        closedir(d);
    for (size_t i = 0; i < n; i++) {
        snprintf(vdir, sizeof vdir, "%s/%s", top, list[i].id);
        if (lstat(vdir, &sb) < 0)
            log_warn("volume %s (owner %s) has a record but no directory at %s: its files are "
                     "gone; delete it (volume tool, action delete) to use the name again",
                     list[i].name, list[i].owner, vdir);
    }
    store_volume_list_free(list, n);
}
