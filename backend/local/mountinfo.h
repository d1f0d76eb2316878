/* One line of /proc/PID/mountinfo (proc(5)), as the volume watcher reads a sandbox's
 * (volume_guard.c). The mount point is a path the sandbox chose (the kernel escapes only space,
 * tab, newline and backslash in it, as \ooo): the parser trusts nothing else about it. */
#ifndef MCPBOX_LOCAL_MOUNTINFO_H
#define MCPBOX_LOCAL_MOUNTINFO_H

#include <stdbool.h>

#define LOCAL_MOUNTINFO_PATH_MAX 4096

struct local_mountinfo {
    int id;                               /* the mount id (statx's stx_mnt_id) */
    unsigned maj, min;                    /* the filesystem's device */
    bool ro;                              /* the mount's own options begin with "ro" */
    char point[LOCAL_MOUNTINFO_PATH_MAX]; /* the mount point, its escapes undone */
};

/* Parses line (without its newline) into m: 0, or -1 when it is not a mountinfo line or its
 * mount point is too long. No allocation and no library state (it runs in a child forked from
 * the threaded server). */
int local_mountinfo_parse(const char *line, struct local_mountinfo *m);

#endif
