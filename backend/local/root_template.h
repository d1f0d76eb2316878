/* The root directory of a sandbox with the host's /usr (no image): its directories, generated
 * /etc files, mount points and links (root_template.c). Either made by the sandbox's child on its
 * own root tmpfs, or ahead of time in a template directory that the child binds read-only as its
 * root: a few dozen inodes made once instead of at every create (docs/local-backend.md). */
#ifndef MCPBOX_LOCAL_ROOT_TEMPLATE_H
#define MCPBOX_LOCAL_ROOT_TEMPLATE_H

#include <linux/mount.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

#define ROOT_HOSTNAME "sandbox"
#define ROOT_USR_LINKS 6 /* bin, sbin, lib, lib64, lib32, libx32 */
#define ROOT_ETC_BINDS 5 /* public host files shown read-only in /etc */
#define ROOT_DEV_NODES 6 /* null, zero, full, random, urandom, tty */

extern const char *const root_usr_links[ROOT_USR_LINKS];
extern const char *const root_etc_binds[ROOT_ETC_BINDS];
extern const char *const root_dev_nodes[ROOT_DEV_NODES];
/* Generated /etc files an image's root gets too. */
extern const char root_etc_hosts[];
extern const char root_etc_hostname[];
const char *root_resolv_conf(bool network);

/* What this host's root looks like from a sandbox, read once per process: the host's files do
 * not change while mcpbox runs (and a template's name covers them: a new process on a changed
 * host makes a new template). */
struct root_layout {
    char usr_target[ROOT_USR_LINKS][64]; /* symlink target; "" = a directory (bound); "-" = none */
    char etc_kind[ROOT_ETC_BINDS];       /* 'd' directory, 'f' file, 0 absent on the host */
    char name[24];                       /* hex digest of all of the above and the format */
};
const struct root_layout *local_root_layout(void);

/* One host path a host-mode root shows, bound at target (relative to the root). */
struct root_bind {
    char host[72], target[72];
    bool device; /* a device node: bound alone and as it is (exec refuses it anyway); the rest
                  * with their submounts, read-only, nosuid and nodev */
};
#define ROOT_BINDS_MAX (1 + ROOT_USR_LINKS + ROOT_ETC_BINDS + ROOT_DEV_NODES)
/* A template root's mount and every bind but the device nodes. */
#define ROOT_BIND_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
/* The binds of a host-mode root, in the order they are made: /usr, those of /bin, /lib...
 * that are directories on the host (not links into /usr), the public /etc files the host has,
 * the device nodes. Returns how many went to out. */
size_t local_root_binds(const struct root_layout *l, struct root_bind out[ROOT_BINDS_MAX]);

struct root_owner {
    uint32_t uid, gid;
};
/* Makes every entry of the root under dirfd (which must be empty). With an owner, each entry is
 * given to it with exact modes (a template); without, entries are left as the caller's umask
 * makes them. Only system calls: the sandbox's child calls it between clone and exec. -1 with
 * errno set and *failed naming the entry on failure. */
int local_root_entries(int dirfd, const struct root_layout *l, bool network,
                       const struct root_owner *owner, const char **failed);

/* Only the entries of dev/ (its directory exists): an image's /dev, a tmpfs of its own. */
int local_root_dev_entries(int dirfd, const char **failed);

/* <base>/<layout>-<net|nonet>-<uid>-<gid>: a complete root made ahead of time, owned by uid:gid
 * (the host ids of the sandbox's root). Made once (atomically: built aside, then renamed into
 * place; a concurrent maker's copy wins) and shared by every later sandbox with those ids.
 * Its path goes to out. */
int local_root_template(const char *base, bool network, uint32_t uid, uint32_t gid, char *out,
                        size_t size, struct mcp_error *err);

#endif
