/* A host-mode root as one detached mount tree, made by a spawner thread while its set waits
 * (root mode): the root template, read-only, with /usr, the public /etc files and the device
 * nodes bound on it, the sandbox's data tmpfs (its workspace, tmp and root directories) and its
 * /dev/shm. The sandbox's child then attaches the whole tree with one move_mount instead of
 * making about 25 mounts itself (docs/local-backend.md, "The root's tree"). Building on a
 * detached tree needs Linux 6.15; an older kernel refuses it, and the child mounts as before.
 *
 * The tree is made in mcpbox's own mount namespace and belongs to no namespace until the child
 * attaches it in its own: nothing shows on the host, and a tree never attached (a set given
 * back, a create that wanted another root) goes when its descriptor is closed. Its tmpfs
 * superblocks belong to the host's user namespace rather than the sandbox's, which changes
 * nothing a sandbox can do: it holds no capability after the drop either way, and ownership
 * comes from the sandbox root's host ids (uid= and gid=, as the child's uid=0 meant). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/local/local_spawn.h"
#include "backend/local/root_template.h"

static int clone_tree(int dirfd, const char *path, bool recursive)
{
    return (int)syscall(SYS_open_tree, dirfd, path,
                        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
}

static int set_attrs(int tree, uint64_t attrs, bool recursive)
{
    struct mount_attr attr = {.attr_set = attrs};
    return (int)syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                        &attr, sizeof attr);
}

/* Attaches sub at target in the tree, and closes sub. */
static int attach(int tree, int sub, const char *target)
{
    int rc = sub < 0 ? -1
                     : (int)syscall(SYS_move_mount, sub, "", tree, target, MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    if (sub >= 0)
        close(sub);
    errno = e;
    return rc;
}

/* One host path, as the child would bind it. */
static int attach_bind(int tree, const struct root_bind *b)
{
    int sub = clone_tree(AT_FDCWD, b->host, !b->device);
    if (sub >= 0 && !b->device && set_attrs(sub, ROOT_BIND_ATTRS, true) < 0) {
        close(sub);
        return -1;
    }
    return attach(tree, sub, b->target);
}

/* A new tmpfs (nosuid, nodev) owned by the sandbox's root; its mount, detached. */
static int new_tmpfs(const struct root_tree_plan *plan, uint64_t bytes, const char *mode)
{
    char size[24], uid[16], gid[16];
    snprintf(size, sizeof size, "%llu", (unsigned long long)bytes);
    snprintf(uid, sizeof uid, "%u", (unsigned)plan->uid);
    snprintf(gid, sizeof gid, "%u", (unsigned)plan->gid);
    int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return -1;
    const char *opts[][2] = {{"source", "tmpfs"}, {"size", size}, {"mode", mode}, {"uid", uid},
                             {"gid", gid}};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof opts / sizeof opts[0]; i++)
        rc = (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, opts[i][0], opts[i][1], 0);
    if (rc == 0)
        rc = (int)syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
    int mnt = rc < 0 ? -1
                     : (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    int e = errno;
    close(fs);
    errno = e;
    return mnt;
}

/* One tmpfs of disk_bytes holds workspace, tmp and root (so "disk" caps them together): its
 * directories are bound at the root's mount points, and the tmpfs itself is in no tree. */
static int add_data(int tree, const struct root_tree_plan *plan)
{
    static const char *const sub[] = {"workspace", "tmp", "root"};
    int data = new_tmpfs(plan, plan->disk_bytes, "755");
    if (data < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < 3; i++) {
        rc = mkdirat(data, sub[i], 0755);
        if (rc == 0)
            rc = fchownat(data, sub[i], plan->uid, plan->gid, 0);
        if (rc == 0 && i == 1)
            rc = fchmodat(data, sub[i], 01777, 0);
        if (rc == 0)
            rc = attach(tree, clone_tree(data, sub[i], false), sub[i]);
    }
    int e = errno;
    close(data);
    errno = e;
    return rc;
}

int local_root_tree(const struct root_tree_plan *plan, const char **failed)
{
    *failed = plan->template_root;
    int tree = clone_tree(AT_FDCWD, plan->template_root, false);
    if (tree < 0)
        return -1;
    struct root_bind b[ROOT_BINDS_MAX];
    size_t n = local_root_binds(local_root_layout(), b);
    int rc = set_attrs(tree, ROOT_BIND_ATTRS, false);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if ((rc = attach_bind(tree, &b[i])) < 0)
            *failed = b[i].host;
    if (rc == 0 && (rc = add_data(tree, plan)) < 0)
        *failed = "the data tmpfs";
    if (rc == 0 && (rc = attach(tree, new_tmpfs(plan, plan->shm_bytes, "1777"), "dev/shm")) < 0)
        *failed = "/dev/shm";
    if (rc == 0)
        return tree;
    int e = errno;
    close(tree);
    errno = e;
    return -1;
}
