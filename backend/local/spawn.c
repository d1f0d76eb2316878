/* Spawning a sandbox: clone3 into fresh user, pid, mount, net, uts, ipc and cgroup namespaces
 * (the network namespace may be one a spawner thread made ahead of time: spawner.c), build the
 * root filesystem, drop every privilege, load the precompiled seccomp filter and exec
 * the agent from its sealed memfd as PID 1.
 *
 * The child is a copy of a (possibly multi-threaded) process, or on x86-64 runs in that
 * process's own memory (clone_shared.c): between clone3 and execveat it only makes system calls
 * and formats into stack buffers; everything it needs was computed by the parent in struct
 * child_plan. Failures travel back over a CLOEXEC pipe as text; EOF on
 * that pipe means the agent was exec'd. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_mounts.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"
#include "backend/local/proto.h"
#include "backend/local/root_template.h"
#include "backend/local/snapshot_inline.h"
#include "lib/base/xalloc.h"

#define CHILD_FD_BASE 100          /* where the child parks its fds before renumbering */
#define CHILD_NOFILE 65536

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

static const char *const proc_ro[] = {"proc/sys", "proc/irq", "proc/bus", "proc/sysrq-trigger",
                                      "proc/fs"};
#define PROC_MASKED 14
static const char *const proc_masked[PROC_MASKED] = {
    "proc/kcore",      "proc/keys",       "proc/timer_list",   "proc/sched_debug",
    "proc/kallsyms",   "proc/latency_stats", "proc/timer_stats", "proc/kmsg",
    "proc/config.gz",  "proc/vmallocinfo", "proc/kpagecount",  "proc/kpageflags",
    "proc/kpagecgroup", "proc/pagetypeinfo"};
static const char *const proc_masked_dirs[] = {"proc/acpi", "proc/scsi", "proc/driver"};

struct child_plan {
    const struct spawn_request *req;
    char rootfs[LOCAL_PATH_MAX];
    char datadir[LOCAL_PATH_MAX]; /* <dir>/data: where the data tmpfs is mounted (host mode) */
    char data_opts[128], shm_opts[128];
    int data_fd;                  /* child: O_PATH of the data tmpfs (host mode) */
    const struct root_layout *layout;
    /* A root template (root_template.c) bound read-only as the root; "": a tmpfs instead, on
     * which the child makes the root's entries itself. */
    char template_root[LOCAL_PATH_MAX];
    char *agent_argv[2];
    char *agent_env;          /* MCPBOX_AGENT_CONFIG=<json> (malloc'd by the parent) */
    int sync_fd, err_fd, listen_fd, logdir_fd, exe_fd;
    int root_tree; /* the whole root as a detached tree, made ahead (local_root_tree), or -1 */
    int image_fds[LOCAL_MAX_IMAGE_LAYERS]; /* child: the idmapped layers from the parent */
    unsigned n_image_fds;                  /* 0: none received */
    int ws_tree[LOCAL_WS_MAX_MOUNTS];      /* host mounts: the detached source trees */
    int ws_layers[LOCAL_WS_MAX_MOUNTS];    /* copy-on-write: detached <n>/ (upper + work) */
    int parent_sync_fd, parent_err_fd; /* the parent's ends: the child closes them first */
    /* A shared child is cloned on its parent thread's CPU (pin_to_this_cpu); it gets the
     * thread's own CPUs back before the exec. */
    bool pinned;
    cpu_set_t cpus;
    const bool *proc_mask; /* which of proc_masked[] need covering (plan_proc_masks) */
};

/* ---- child side --------------------------------------------------------------------------- */

/* The child makes its network namespace itself, right after the clone, while the parent writes
 * its maps (a user's newuidmap and newgidmap take 1-2 ms): clone3 spent 0.5-0.6 ms making it
 * first. Unless a spawner made one ahead (netns_ready), or the parent sets the netns up before
 * the release (pasta, egress rules), which needs it to exist as soon as clone3 returns. It is
 * the same namespace either way: new, and owned by the sandbox's user namespace. */
static bool child_makes_netns(const struct spawn_request *req)
{
    return !req->netns_ready && !req->network && !req->egress;
}

__attribute__((noreturn)) static void child_fail(int fd, const char *step, const char *arg)
{
    char msg[512];
    int e = errno;
    int n = snprintf(msg, sizeof msg, "%s%s%s: %s", step, arg ? " " : "", arg ? arg : "",
                     strerror(e));
    if (n > 0) {
        ssize_t w = write(fd, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w;
    }
    _exit(127);
}

#define CHECK(cond, step, arg)                                                                     \
    do {                                                                                           \
        if (!(cond))                                                                               \
            child_fail(p->err_fd, step, arg);                                                      \
    } while (0)

/* Root mode: the parent opens and idmaps the host mounts' trees (an idmapped mount of a host
 * filesystem needs privilege over it); a user's child opens them itself, plain. */
static bool ws_by_parent(const struct spawn_request *req)
{
    return req->ws && req->ws->n > 0 && req->ident->mode == LOCAL_ID_SLICES;
}

static int set_attr(const char *path, uint64_t set, unsigned flags)
{
    struct mount_attr attr = {.attr_set = set};
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof attr);
}

static void put(const struct child_plan *p, const char *path, const char *text)
{
    cleanup_close int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "create", path);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write", path);
}

/* /usr, the host's public /etc files and its device nodes, on the mount points
 * local_root_entries made (unless they came with the root's tree: local_root_tree). */
static void bind_host_paths(const struct child_plan *p)
{
    struct root_bind b[ROOT_BINDS_MAX];
    size_t n = local_root_binds(p->layout, b);
    for (size_t i = 0; i < n; i++) {
        CHECK(mount(b[i].host, b[i].target, NULL, MS_BIND | (b[i].device ? 0 : MS_REC), NULL) == 0,
              "bind", b[i].host);
        CHECK(b[i].device || set_attr(b[i].target, ROOT_BIND_ATTRS, AT_RECURSIVE) == 0,
              "read-only", b[i].target);
    }
}

/* The host's device nodes (only: an image's /dev), on the mount points in dev/. */
static void bind_dev_nodes(const struct child_plan *p)
{
    struct root_bind b[ROOT_BINDS_MAX];
    size_t n = local_root_binds(p->layout, b);
    for (size_t i = 0; i < n; i++)
        CHECK(!b[i].device || mount(b[i].host, b[i].target, NULL, MS_BIND, NULL) == 0, "bind",
              b[i].host);
}

/* A devpts of its own, on the mount point in dev/. */
static void mount_devpts(const struct child_plan *p)
{
    CHECK(mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=620") == 0, "mount", "/dev/pts");
}

static void mount_shm(const struct child_plan *p)
{
    CHECK(mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, p->shm_opts) == 0, "mount",
          "/dev/shm");
}

/* An image's /dev: a tmpfs over the image's own, with the same entries as a host-mode root's. */
static void make_image_dev(const struct child_plan *p)
{
    CHECK(mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755") == 0,
          "mount", "/dev");
    const char *failed = NULL;
    CHECK(local_root_dev_entries(AT_FDCWD, &failed) == 0, "make /dev", failed);
    bind_dev_nodes(p);
    mount_devpts(p);
    mount_shm(p);
}

/* proc must be mounted before pivot_root: the kernel only allows a new proc mount in a mount
 * namespace that already shows a fully visible one (mount_too_revealing). */
static void make_proc(const struct child_plan *p, const char *empty_ro_dir)
{
    CHECK(mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0, "mount",
          "/proc");
    /* An entry this kernel does not have fails with ENOENT and needs no cover. */
    for (size_t i = 0; i < sizeof proc_ro / sizeof proc_ro[0]; i++) {
        if (mount(proc_ro[i], proc_ro[i], NULL, MS_BIND | MS_REC, NULL) < 0 && errno == ENOENT)
            continue;
        CHECK(set_attr(proc_ro[i], MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                       MOUNT_ATTR_NOEXEC, AT_RECURSIVE) == 0, "read-only", proc_ro[i]);
    }
    for (size_t i = 0; i < PROC_MASKED; i++)
        CHECK(!p->proc_mask[i] || mount("dev/null", proc_masked[i], NULL, MS_BIND, NULL) == 0 ||
                  errno == ENOENT,
              "mask", proc_masked[i]);
    /* Masked directories: binds of an empty directory on a read-only mount (a bind keeps its
     * source's read-only flag), else an empty read-only tmpfs each (three superblocks). */
    for (size_t i = 0; i < sizeof proc_masked_dirs / sizeof proc_masked_dirs[0]; i++)
        CHECK((empty_ro_dir ? mount(empty_ro_dir, proc_masked_dirs[i], NULL, MS_BIND, NULL)
                            : mount("tmpfs", proc_masked_dirs[i], "tmpfs", MS_RDONLY, "size=0")) ==
                      0 ||
                  errno == ENOENT,
              "mask", proc_masked_dirs[i]);
}

/* The user commands run as (an image's User, or the person's id: spawn_request) owns the
 * workspace and home; done on the data tmpfs before any host directory is mounted over them. */
static void own_workspace(const struct child_plan *p, int dirfd, const char *ws, const char *home)
{
    if (p->req->run_uid == 0 && p->req->run_gid == 0)
        return;
    CHECK(fchownat(dirfd, ws, p->req->run_uid, p->req->run_gid, 0) == 0, "chown", "/workspace");
    if (p->req->person_id)
        CHECK(fchownat(dirfd, home, p->req->run_uid, p->req->run_gid, 0) == 0, "chown", "/root");
}

/* One tmpfs of disk_bytes holds /workspace, /tmp and /root, so "disk" caps them together.
 * enter_root mounted it at <dir>/data, outside the new root: its three subdirectories are bound
 * into the new root here, and the tmpfs itself goes with the old root when pivot_root's detach
 * drops it (a separate detach would wait out an RCU grace period of its own: 45 us median, up
 * to 0.5 ms). The subdirectories are reached through data_fd because <dir> is not walkable by
 * the sandbox's root. */
static void make_data(const struct child_plan *p)
{
    static const char *const sub[] = {"workspace", "tmp", "root"};
    for (size_t i = 0; i < 3; i++) {
        CHECK(mkdirat(p->data_fd, sub[i], 0755) == 0, "mkdir", sub[i]);
        if (i == 1)
            CHECK(fchmodat(p->data_fd, sub[i], 01777, 0) == 0, "chmod", sub[i]);
        cleanup_close int tree = (int)syscall(SYS_open_tree, p->data_fd, sub[i],
                                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        CHECK(tree >= 0, "bind", sub[i]);
        CHECK(syscall(SYS_move_mount, tree, "", AT_FDCWD, sub[i], MOVE_MOUNT_F_EMPTY_PATH) == 0,
              "bind", sub[i]);
    }
    own_workspace(p, p->data_fd, "workspace", "root");
}

/* A detached copy of the directory tree at fd (or path), with mount attributes set. */
static int detached_tree(const struct child_plan *p, int dirfd, const char *path, uint64_t attrs,
                         const char *what)
{
    int fd = (int)syscall(SYS_open_tree, dirfd, path,
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                              (path[0] ? 0 : AT_EMPTY_PATH));
    CHECK(fd >= 0, "open mount source", what);
    struct mount_attr attr = {.attr_set = attrs};
    CHECK(syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) == 0,
          "mount attributes", what);
    return fd;
}

/* The host mounts' trees, opened while the child may still walk the server's directories (as
 * host root, or as the user). A user's child cannot clone the parent's checked descriptor (it
 * belongs to the parent's mount namespace), so it walks from the allowed directory again with
 * RESOLVE_BENEATH, in its own copy of the same mounts, and takes the result only if it is the
 * very directory the parent checked and still holds open (same device and inode, so no
 * rename or swap in between can substitute another); the copy-on-write layers' directory is
 * the server's own. Detached trees: nothing is made in this namespace yet. */
static void open_ws_trees(struct child_plan *p)
{
    const struct local_ws *ws = p->req->ws;
    for (size_t i = 0; ws && i < ws->n; i++) {
        const struct local_ws_mount *w = &ws->m[i];
        uint64_t ro = w->m.mode == LOCAL_MOUNT_RW ? 0 : MOUNT_ATTR_RDONLY;
        if (!ws_by_parent(p->req)) {
            cleanup_close int src = local_ws_open_beneath(w->m.allow_dir, w->m.rel);
            CHECK(src >= 0, "open mount source", w->m.source);
            errno = ESTALE;
            CHECK(local_source_is(src, &w->m),
                  "mount source moved or replaced since it was checked (nothing mounted; try "
                  "again)",
                  w->m.source);
            p->ws_tree[i] = detached_tree(p, src, "", ro | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                          w->m.source);
        }
        if (w->m.mode == LOCAL_MOUNT_COW) {
            char dir[LOCAL_WS_PATH_MAX];
            size_t n = strlen(w->m.upper);
            memcpy(dir, w->m.upper, n - strlen("/upper"));
            dir[n - strlen("/upper")] = '\0';
            p->ws_layers[i] = detached_tree(p, AT_FDCWD, dir, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                            dir);
        }
    }
}

/* mkdir -p of a relative path that never follows a symlink: each component must be a directory
 * (made when missing); a symlink or a file on the way fails the create. Until pivot_root the
 * child still sees the host's tree, so a symlink here (an image's /etc -> /tmp/x, a host
 * directory mounted above with a link in it) would send mkdir, the generated /etc files and the
 * mount itself to a host path. Returns an O_PATH descriptor of the last directory, to mount on. */
static int real_dir(const struct child_plan *p, const char *path, const char *shown)
{
    char buf[LOCAL_WS_PATH_MAX];
    size_t n = strlen(path);
    CHECK(n > 0 && n < sizeof buf, "mount target", path);
    memcpy(buf, path, n + 1);
    cleanup_close int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(fd >= 0, "open", "the root tmpfs");
    for (char *comp = buf, *next; comp && *comp; comp = next) {
        next = strchr(comp, '/');
        if (next)
            *next++ = '\0';
        int sub = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 && errno == ENOENT && (mkdirat(fd, comp, 0755) == 0 || errno == EEXIST))
            sub = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(steal_fd(&fd)); /* the next component's directory takes its place */
        CHECK(sub >= 0, "the image or a mount above has a symlink or file (never followed) on the way "
                        "to", shown);
        fd = sub;
    }
    return steal_fd(&fd);
}

static void make_path(const struct child_plan *p, const char *path, const char *shown)
{
    close(real_dir(p, path, shown)); /* made; nothing to mount on it here */
}

static void attach(const struct child_plan *p, int fd, const char *dir)
{
    CHECK(syscall(SYS_move_mount, fd, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH) == 0,
          "attach mount", dir);
    close(fd);
}

/* attach onto a directory opened by real_dir (no path lookup left to follow a symlink). */
static void attach_at(const struct child_plan *p, int fd, int at, const char *what)
{
    CHECK(syscall(SYS_move_mount, fd, "", at, "",
                  MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0,
          "attach mount", what);
    close(fd);
}

/* With the user's own id mapped (person_id), the overlay is mounted as that id, keeping every
 * capability: overlayfs does its own work (work/work, whiteouts, copy-ups) with its mounter's
 * credentials, so all it leaves in <n>/ then belongs to the user, who can remove it, instead of
 * to the subordinate root. Only the effective uid changes (the permitted set stays), and the
 * effective set is raised again from it; back to 0 afterwards. */
static void as_person(const struct child_plan *p, bool on)
{
    if (p->req->person_id == 0)
        return;
    CHECK(syscall(SYS_setresuid, -1, on ? p->req->person_id : 0, -1) == 0, "seteuid",
          "mount as the user");
    if (!on)
        return; /* euid 0 again: the kernel copied permitted into effective */
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    CHECK(syscall(SYS_capget, &hdr, data) == 0, "capget", NULL);
    data[0].effective = data[0].permitted, data[1].effective = data[1].permitted;
    CHECK(syscall(SYS_capset, &hdr, data) == 0, "capset", "mount as the user");
}

/* The host mounts, at their targets under `root` (relative to the cwd, the root tmpfs: "" or
 * ".root/"), in the order given (the parent sorted them so that a mount's parent target comes
 * first). ro and rw are the trees themselves. Copy-on-write is an overlay with the tree as its
 * lower layer and the sandbox's own upper and work directories: those are staged in the data
 * tmpfs (`stage_fd`, `stage`: <dir>/data through data_fd on the host image, .data/ in the root
 * tmpfs for an image), the overlay is mounted there and moved to its target. The staging mounts
 * are never detached one by one (each detach waits out an RCU grace period): they go with the
 * old root at pivot_root, outside the sandbox's view. */
/* A small snapshot's files (snapshot_inline.h), the new root the current directory, every
 * mount in place: where the helper would write them, as the same user. */
static void restore_files(const struct child_plan *p)
{
    const char *why = NULL, *failed = NULL;
    if (p->req->restore && snap_inline_apply(p->req->restore, &why, &failed) < 0)
        child_fail(p->err_fd, why, failed);
}

static void make_mounts(const struct child_plan *p, const char *root, int stage_fd,
                        const char *stage)
{
    const struct local_ws *ws = p->req->ws;
    cleanup_close int root_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(root_fd >= 0, "open", "the root tmpfs");
    for (size_t i = 0; ws && i < ws->n; i++) {
        const struct local_mount *m = &ws->m[i].m;
        char target[LOCAL_WS_PATH_MAX + 16], dir[64], sub[80], opts[200];
        snprintf(target, sizeof target, "%s%s", root, m->target + 1);
        cleanup_close int at = real_dir(p, target, m->target);
        if (m->mode != LOCAL_MOUNT_COW) {
            attach_at(p, p->ws_tree[i], at, m->target);
            continue;
        }
        CHECK(stage_fd == AT_FDCWD || fchdir(stage_fd) == 0, "chdir", "the data tmpfs");
        snprintf(dir, sizeof dir, "%s.ws%zu", stage, i);
        static const char *const parts[] = {"", "/l", "/d", "/m"};
        for (size_t k = 0; k < 4; k++) {
            snprintf(sub, sizeof sub, "%s%s", dir, parts[k]);
            CHECK(mkdir(sub, 0700) == 0, "mkdir", sub);
        }
        snprintf(sub, sizeof sub, "%s/l", dir);
        attach(p, p->ws_tree[i], sub);
        snprintf(sub, sizeof sub, "%s/d", dir);
        attach(p, p->ws_layers[i], sub);
        snprintf(opts, sizeof opts, "lowerdir=%s/l,upperdir=%s/d/upper,workdir=%s/d/work,userxattr",
                 dir, dir, dir);
        snprintf(sub, sizeof sub, "%s/m", dir);
        as_person(p, true);
        CHECK(mount("overlay", sub, "overlay", MS_NOSUID | MS_NODEV, opts) == 0,
              "mount copy-on-write overlay at", m->target);
        as_person(p, false);
        CHECK(syscall(SYS_move_mount, AT_FDCWD, sub, at, "", MOVE_MOUNT_T_EMPTY_PATH) == 0,
              "move overlay to", m->target);
        CHECK(fchdir(root_fd) == 0, "chdir", "the root tmpfs");
    }
}

/* Runs while the child is still host kuid 0 (before setresuid): only then may it walk the
 * root-only state directory to reach its mount point. The tmpfs is owned by the sandbox's root
 * (uid=0 is read in the new user namespace). */
static void enter_root(struct child_plan *p)
{
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make / private", NULL);
    if (p->root_tree >= 0) { /* the root, made ahead: one attach */
        CHECK(syscall(SYS_move_mount, p->root_tree, "", AT_FDCWD, p->rootfs,
                      MOVE_MOUNT_F_EMPTY_PATH) == 0, "attach", "the root's tree");
    } else if (p->template_root[0]) {
        CHECK(mount(p->template_root, p->rootfs, NULL, MS_BIND, NULL) == 0, "bind",
              p->template_root);
        CHECK(set_attr(p->rootfs, ROOT_BIND_ATTRS, 0) == 0, "read-only", "root template");
    } else {
        CHECK(mount("tmpfs", p->rootfs, "tmpfs", MS_NOSUID | MS_NODEV, LOCAL_ROOT_TMPFS) == 0,
              "mount", "root tmpfs");
    }
    CHECK(chdir(p->rootfs) == 0, "chdir", p->rootfs);
    /* host mode: the data tmpfs (make_data), unless it came with the root's tree */
    if (p->req->n_image_dirs == 0 && p->root_tree < 0) {
        CHECK(mount("tmpfs", p->datadir, "tmpfs", MS_NOSUID | MS_NODEV, p->data_opts) == 0,
              "mount", "data tmpfs");
        p->data_fd = open(p->datadir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(p->data_fd >= 0, "open", p->datadir);
    }
    /* Rootless: an unprivileged user cannot make idmapped mounts of a host filesystem, so each
     * layer is bound as it is (root-owned files show as nobody), now, while the child may still
     * walk the user's state directory. The trees are detached (no inode is made: the user's uid
     * is not mapped in this namespace, so a mkdir would fail with EOVERFLOW) and attached in
     * make_image_root like the parent's idmapped ones. */
    for (size_t i = 0; p->n_image_fds == 0 && i < p->req->n_image_dirs &&
                       i < LOCAL_MAX_IMAGE_LAYERS; i++) {
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                              MOUNT_ATTR_NODEV};
        int fd = (int)syscall(SYS_open_tree, AT_FDCWD, p->req->image_dirs[i],
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        CHECK(fd >= 0, "open image layer", p->req->image_dirs[i]);
        CHECK(syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                      sizeof attr) == 0, "read-only", "image");
        p->image_fds[i] = fd;
        if (i + 1 == p->req->n_image_dirs || i + 1 == LOCAL_MAX_IMAGE_LAYERS)
            p->n_image_fds = (unsigned)(i + 1);
    }
    open_ws_trees(p);
}

/* One generated file in the image's /etc. Rootless, an image's /etc is usually not writable by
 * the sandbox's root (root-owned host files show as nobody in its user namespace, so overlay
 * refuses the copy-up): the file is then written on the data tmpfs and bound over the image's
 * own, or left out where the image has none. */
static void put_image_etc(const struct child_plan *p, const char *name, const char *text)
{
    char path[64], gen[64];
    snprintf(path, sizeof path, "etc/%s", name);
    cleanup_close int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EACCES && errno != EPERM)
        CHECK(0, "create", path);
    if (fd >= 0) {
        CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write", path);
        return;
    }
    snprintf(gen, sizeof gen, "../.data/etc-%s", name);
    put(p, gen, text);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
        CHECK(mount(gen, path, NULL, MS_BIND, NULL) == 0, "bind", path);
}

static void bind_egress_bundle(const struct child_plan *p);

/* Image mode: the registered rootfs, idmapped by the parent so that its root-owned files belong
 * to the sandbox's root, is the lower layer of an overlay whose upper lives on the data tmpfs
 * (so `disk` also caps changes to the image). The generated hosts/hostname/resolv.conf replace
 * the image's. */
static void make_image_root(const struct child_plan *p)
{
    static const char *const dirs[] = {".data/upper", ".data/work", ".data/workspace",
                                       ".data/tmp", ".data/root"};
    CHECK(mkdir(".data", 0700) == 0, "mkdir", ".data");
    CHECK(mount("tmpfs", ".data", "tmpfs", MS_NOSUID | MS_NODEV, p->data_opts) == 0, "mount",
          "data tmpfs");
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        CHECK(mkdir(dirs[i], 0755) == 0, "mkdir", dirs[i]);
    chmod(".data/tmp", 01777);
    own_workspace(p, AT_FDCWD, ".data/workspace", ".data/root");
    CHECK(mkdir(".lower", 0755) == 0, "mkdir", ".lower");
    for (unsigned i = 0; i < p->n_image_fds; i++) {
        char dir[24];
        snprintf(dir, sizeof dir, ".lower/%u", i);
        CHECK(mkdir(dir, 0755) == 0, "mkdir", dir);
        CHECK(syscall(SYS_move_mount, p->image_fds[i], "", AT_FDCWD, dir,
                      MOVE_MOUNT_F_EMPTY_PATH) == 0, "attach image layer", dir);
    }
    CHECK(mkdir(".root", 0755) == 0, "mkdir", ".root");
    /* lowerdir lists the top layer first: .lower/<n-1>:...:.lower/0 */
    unsigned n = p->n_image_fds;
    char opts[LOCAL_MAX_IMAGE_LAYERS * 12 + 80], *o = opts;
    o += sprintf(o, "lowerdir=");
    for (unsigned i = n; i-- > 0;)
        o += sprintf(o, ".lower/%u%s", i, i ? ":" : "");
    sprintf(o, ",upperdir=.data/upper,workdir=.data/work,userxattr");
    CHECK(mount("overlay", ".root", "overlay", MS_NOSUID | MS_NODEV, opts) == 0,
          "mount overlay", NULL);
    static const char *const binds[][2] = {{".data/workspace", ".root/workspace"},
                                           {".data/tmp", ".root/tmp"},
                                           {".data/root", ".root/root"}};
    for (size_t i = 0; i < 3; i++) {
        make_path(p, binds[i][1], binds[i][1] + 5); /* the image's own, never through a link */
        CHECK(mount(binds[i][0], binds[i][1], NULL, MS_BIND, NULL) == 0, "bind", binds[i][1]);
    }
    make_mounts(p, ".root/", AT_FDCWD, ".data/");
    CHECK(chdir(".root") == 0, "chdir", ".root");
    restore_files(p);
    static const char *const own[] = {"/etc", "/dev", "/proc"}; /* written or mounted on below */
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        make_path(p, own[i] + 1, own[i]);
    static const char *const gen[] = {"etc/hostname", "etc/hosts", "etc/resolv.conf"};
    for (size_t i = 0; i < 3; i++)
        unlink(gen[i]); /* never write through an image's symlink */
    put_image_etc(p, "hostname", root_etc_hostname);
    put_image_etc(p, "hosts", root_etc_hosts);
    put_image_etc(p, "resolv.conf", root_resolv_conf(p->req->network || p->req->egress));
    make_image_dev(p);
    make_proc(p, NULL);
    CHECK(syscall(SYS_pivot_root, ".", ".") == 0, "pivot_root", NULL);
    CHECK(umount2(".", MNT_DETACH) == 0, "detach old root", NULL);
    CHECK(chdir("/") == 0, "chdir", "/");
    set_attr("/dev", MOUNT_ATTR_RDONLY, 0);
    bind_egress_bundle(p); /* after pivot_root: the image's links resolve inside it */
}

/* The system CA bundles of the usual distributions (Debian/Ubuntu/Alpine, Alpine and BSD-style,
 * Fedora/RHEL, openSUSE, RHEL's older name), relative to the root being made. */
static const char *const system_bundles[] = {"etc/ssl/certs/ca-certificates.crt",
                                             "etc/ssl/cert.pem", "etc/pki/tls/certs/ca-bundle.crt",
                                             "etc/ssl/ca-bundle.pem", "etc/pki/tls/cacert.pem"};

#define BUNDLE_MAX (16u << 20)

/* path opened if it is a bundle: a non-empty regular file of at most BUNDLE_MAX on no /proc
 * (an image's link to /proc/self/environ must not copy this process's environment into a file
 * the sandbox reads; /proc's files show size 0 anyway). -1 else. */
static int open_bundle(const char *path, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct statfs fs;
    if (fd >= 0 && fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_size > 0 &&
        st->st_size <= (off_t)BUNDLE_MAX && fstatfs(fd, &fs) == 0 && fs.f_type != PROC_SUPER_MAGIC)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* The first system bundle there is, copied to out; false when there is none. */
static bool copy_system_bundle(int out)
{
    for (size_t i = 0; i < sizeof system_bundles / sizeof system_bundles[0]; i++) {
        struct stat st;
        cleanup_close int in = open_bundle(system_bundles[i], &st);
        if (in < 0)
            continue;
        char buf[4096];
        ssize_t n;
        off_t left = st.st_size; /* no more than it said: a file growing meanwhile is cut */
        while (left > 0 &&
               (n = read(in, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf)) > 0) {
            if (write(out, buf, (size_t)n) != n)
                return false;
            left -= n;
        }
        return write(out, "\n", 1) == 1; /* a bundle without a final newline */
    }
    return false;
}

/* Secrets over TLS: the system bundle the sandbox sees, with mcpbox's egress CA appended, in a
 * file of its own /tmp bound read-only over each system bundle there is (the env vars point to
 * the same file). For an image this runs after pivot_root, so the image's links resolve inside
 * it; the stored image is not changed (the bind lives in the sandbox's mount namespace). Best
 * effort: a bundle left as it is only makes TLS to the bound hosts fail. */
static void bind_egress_bundle(const struct child_plan *p)
{
    static const char copy[] = "tmp/.mcpbox-egress/ca-bundle.pem";
    if (p->req->egress_ca == NULL)
        return;
    mkdir("tmp/.mcpbox-egress", 0755);
    cleanup_close int out = open(copy, O_CREAT | O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    size_t len = strlen(p->req->egress_ca);
    struct stat cs;
    if (out < 0 || !copy_system_bundle(out) || write(out, p->req->egress_ca, len) != (ssize_t)len ||
        fstat(out, &cs) < 0) {
        if (out >= 0)
            unlink(copy); /* the agent then writes its own, from what it finds */
        return;
    }
    for (size_t i = 0; i < sizeof system_bundles / sizeof system_bundles[0]; i++) {
        struct stat st; /* a link to a bundle bound already now leads to the copy: skipped */
        cleanup_close int fd = open_bundle(system_bundles[i], &st);
        if (fd < 0 || (st.st_dev == cs.st_dev && st.st_ino == cs.st_ino))
            continue;
        if (mount(copy, system_bundles[i], NULL, MS_BIND, NULL) == 0)
            set_attr(system_bundles[i], ROOT_BIND_ATTRS, 0);
    }
}

static void make_root(const struct child_plan *p)
{
    if (p->n_image_fds > 0) {
        make_image_root(p);
        return;
    }
    if (!p->template_root[0]) {
        const char *failed = NULL;
        CHECK(local_root_entries(AT_FDCWD, p->layout, p->req->network || p->req->egress, NULL,
                                 &failed) == 0,
              "make", failed);
    }
    if (p->root_tree < 0) { /* else they came with the root's tree */
        bind_host_paths(p);
        mount_shm(p);
        make_data(p);
    }
    mount_devpts(p);
    make_mounts(p, "", p->data_fd, "");
    restore_files(p);
    bind_egress_bundle(p);
    /* The root (/etc, /dev, the mount points) is read-only from here on; a template's is
     * already. "run" is then the empty read-only directory /proc's masks need. */
    CHECK(p->template_root[0] || set_attr(".", ROOT_BIND_ATTRS, 0) == 0, "read-only", "/");
    make_proc(p, "run");
    CHECK(syscall(SYS_pivot_root, ".", ".") == 0, "pivot_root", NULL);
    CHECK(umount2(".", MNT_DETACH) == 0, "detach old root", NULL);
    CHECK(chdir("/") == 0, "chdir", "/");
}

static void loopback_up(const struct child_plan *p)
{
    cleanup_close int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0, "socket", "lo");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    CHECK(ioctl(s, SIOCGIFFLAGS, &ifr) == 0, "get flags", "lo");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    CHECK(ioctl(s, SIOCSIFFLAGS, &ifr) == 0, "up", "lo");
}

static void drop_privileges(const struct child_plan *p)
{
    /* EINVAL: past the kernel's last capability (the rest would be EINVAL too). */
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL)
                break;
            child_fail(p->err_fd, "drop bounding cap", NULL);
        }
    /* An image's User: the agent (and so every command) runs as it, as under `docker run`.
     * Leaving uid 0 clears the remaining capabilities by itself. */
    if (p->req->run_uid || p->req->run_gid) {
        CHECK(syscall(SYS_setresgid, p->req->run_gid, p->req->run_gid, p->req->run_gid) == 0,
              "setresgid", "image user");
        CHECK(syscall(SYS_setresuid, p->req->run_uid, p->req->run_uid, p->req->run_uid) == 0,
              "setresuid", "image user");
    }
    CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0 || errno == EINVAL,
          "clear ambient caps", NULL);
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    CHECK(syscall(SYS_capset, &hdr, data) == 0, "capset", NULL);
    CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs", NULL);
}

/* Limits can only be lowered here (raising needs CAP_SYS_RESOURCE in the initial namespace). */
static void lower_limit(const struct child_plan *p, int res, rlim_t value, const char *name)
{
    struct rlimit cur;
    CHECK(getrlimit(res, &cur) == 0, "getrlimit", name);
    rlim_t v = cur.rlim_max != RLIM_INFINITY && cur.rlim_max < value ? cur.rlim_max : value;
    struct rlimit lim = {v, v};
    CHECK(setrlimit(res, &lim) == 0, "rlimit", name);
}

static void set_limits(const struct child_plan *p)
{
    lower_limit(p, RLIMIT_NOFILE, CHILD_NOFILE, "NOFILE");
    lower_limit(p, RLIMIT_CORE, 0, "CORE");
    /* pids.max is the limit; without a pids cgroup this is. */
    lower_limit(p, RLIMIT_NPROC, (rlim_t)p->req->pids + (p->req->pids_by_rlimit ? 0 : 64),
                "NPROC");
}

/* Moves the fds the agent keeps to 3, 4 and 5 and everything else out at exec. */
static void arrange_fds(struct child_plan *p)
{
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    CHECK(devnull >= 0, "open", "/dev/null");
    for (int fd = 0; fd < 3; fd++)
        CHECK(dup2(devnull, fd) == fd, "dup2", "stdio");
    CHECK(dup2(p->listen_fd, AGENT_LISTEN_FD) == AGENT_LISTEN_FD, "dup2", "listen");
    CHECK(dup2(p->logdir_fd, AGENT_LOGDIR_FD) == AGENT_LOGDIR_FD, "dup2", "logdir");
    CHECK(dup2(p->exe_fd, AGENT_EXE_FD) == AGENT_EXE_FD, "dup2", "agent");
    CHECK(syscall(SYS_close_range, AGENT_EXE_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) == 0,
          "close_range", NULL);
}

/* Moves the child's fds up, out of the way of the agent's fixed numbers, sync_fd below err_fd.
 * The order matters at the exec: close-on-exec closes fds from the lowest up, and the kernel
 * runs the deferred releases in the reverse order. err_fd's release, which wakes the loop to
 * answer the create, then comes first; sync_fd's wakes the spawner thread on this CPU, which
 * preempted the new agent for 20-40 us before it had released err_fd. */
static void park_fds(struct child_plan *p)
{
    int *fds[] = {&p->sync_fd, &p->err_fd, &p->listen_fd, &p->logdir_fd, &p->exe_fd};
    int from[5];
    for (size_t i = 0; i < 5; i++) {
        int fd = fcntl(*fds[i], F_DUPFD_CLOEXEC, CHILD_FD_BASE);
        if (fd < 0)
            _exit(126);
        from[i] = *fds[i];
        *fds[i] = fd;
    }
    for (size_t i = 0; i < 5; i++) /* after all the dups: no number freed here is reused */
        close(from[i]);
}

static void receive_go(struct child_plan *p)
{
    char go, ctl[CMSG_SPACE(sizeof(int) * LOCAL_MAX_TREES)];
    int fds[LOCAL_MAX_TREES];
    struct iovec iov = {.iov_base = &go, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                         .msg_controllen = sizeof ctl};
    CHECK(recvmsg(p->sync_fd, &msg, MSG_CMSG_CLOEXEC) == 1, "wait for uid map", NULL);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    unsigned n = 0, n_ws = ws_by_parent(p->req) ? (unsigned)p->req->ws->n : 0;
    p->n_image_fds = 0;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        n = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(fds, CMSG_DATA(c), n * sizeof(int));
    }
    CHECK(n >= n_ws && n - n_ws <= LOCAL_MAX_IMAGE_LAYERS, "receive trees", NULL);
    p->n_image_fds = n - n_ws; /* the image's layers first, then the host mounts' sources */
    memcpy(p->image_fds, fds, p->n_image_fds * sizeof(int));
    for (unsigned i = 0; i < n_ws; i++)
        p->ws_tree[i] = fds[p->n_image_fds + i];
}

__attribute__((noreturn)) static void child_main(struct child_plan *p)
{
    /* Without this the child would hold the parent's end of the sync socket itself and never see
     * EOF if the parent dies before releasing it: it would wait forever. */
    close(p->parent_sync_fd);
    close(p->parent_err_fd);
    park_fds(p);
    if (child_makes_netns(p->req))
        CHECK(unshare(CLONE_NEWNET) == 0, "unshare", "network namespace");
    receive_go(p); /* the parent wrote the maps (and sent the image tree, if any) */
    enter_root(p);
    /* Raw system calls: glibc's wrappers broadcast to every thread glibc believes the process
     * has (setxid). This child of a multithreaded mcpbox has one thread, and if another thread
     * was half-created at clone time the wrapper waits for it forever. */
    /* Single-uid mode: setgroups is denied (the kernel requires it for an unprivileged
     * gid_map), so the user's supplementary groups stay (docs/security.md). */
    if (p->req->ident->mode != LOCAL_ID_SINGLE)
        CHECK(syscall(SYS_setgroups, 0, NULL) == 0, "setgroups", NULL);
    CHECK(syscall(SYS_setresgid, 0, 0, 0) == 0, "setresgid", NULL);
    /* Rootless on v1 cgroups, the parent may move this child only while one of its uids is the
     * user's (v1 compares the writer's euid with the target's uid and saved uid): the saved uid
     * stays the user's (-1: unchanged, although unmapped here) until the parent says the attach
     * is done, so the root is built meanwhile instead of after it. */
    bool attach_pending = p->req->hold && !p->req->network && !p->req->egress;
    CHECK(syscall(SYS_setresuid, 0, 0, attach_pending ? -1 : 0) == 0, "setresuid", NULL);
    make_root(p);
    if (!p->req->netns_ready) /* a pre-made one has lo up already (and is not ours to change) */
        loopback_up(p);
    const char *failed = NULL;
    if (p->req->network && local_block_private_routes(&failed) < 0)
        child_fail(p->err_fd, "route", failed);
    if (p->req->egress && local_egress_default_route(&failed) < 0)
        child_fail(p->err_fd, "route", failed);
    CHECK(sethostname(ROOT_HOSTNAME, strlen(ROOT_HOSTNAME)) == 0, "sethostname", NULL);
    set_limits(p);
    arrange_fds(p);
    if (attach_pending) {
        char b;
        CHECK(recv(p->sync_fd, &b, 1, 0) == 1, "wait for the cgroup attach", NULL);
        CHECK(syscall(SYS_setresuid, -1, -1, 0) == 0, "setresuid", "saved uid");
    }
    drop_privileges(p);
    CHECK(!p->pinned || sched_setaffinity(0, sizeof p->cpus, &p->cpus) == 0, "sched_setaffinity",
          "mcpbox's CPUs");
    struct sock_fprog prog = {.len = p->req->seccomp->len, .filter = p->req->seccomp->filter};
    CHECK(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0, "seccomp", NULL);
    char *envp[] = {p->agent_env, NULL};
    syscall(SYS_execveat, AGENT_EXE_FD, "", p->agent_argv, envp, AT_EMPTY_PATH);
    child_fail(p->err_fd, "exec agent", NULL);
}

/* ---- parent side -------------------------------------------------------------------------- */

/* <dir>/init = "<pid> <start time>", written before the child is released: if mcpbox dies
 * before the record holds the init's pid, reconcile still finds (and kills) a released child
 * that runs outside the sandbox's cgroups (CLONE_INTO_CGROUP refused). */
static int note_init(const char *dir, pid_t pid, uint64_t *start, struct mcp_error *err)
{
    char path[LOCAL_PATH_MAX + 16], text[64];
    snprintf(path, sizeof path, "%s/" LOCAL_INIT_FILE, dir);
    *start = local_proc_starttime(pid);
    int n = snprintf(text, sizeof text, "%d %llu\n", (int)pid, (unsigned long long)*start);
    cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, (size_t)n) != n)
        return mcp_error_set(err, MCP_ERR_IO, errno, "writing %s", path);
    return 0;
}

/* The filesystems seen refusing idmapped mounts (docs/images.md, Ownership). */
static const char *fs_name(const char *dir)
{
    struct statfs fs;
    if (statfs(dir, &fs) < 0)
        return "unknown";
    switch ((unsigned long)fs.f_type) {
    case 0x794c7630UL: return "overlayfs";
    case 0x6969UL: return "NFS";
    case 0x2fc12fc1UL: return "ZFS";
    case 0x65735546UL: return "FUSE";
    case 0xff534d42UL: return "CIFS";
    default: return "a filesystem";
    }
}

/* Registered directories need an idmapped mount in root mode (pulled OCI images fall back to a
 * shared mapping instead: their files are written with it; a registered directory's are not
 * ours to change). Say which filesystem refused and what to do. */
static int idmap_refused(const char *dir, int e, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, e,
                         "cannot make an idmapped mount of image %s: %s there does not support "
                         "idmapped mounts (or Linux is older than 5.12), and a registered root "
                         "filesystem directory needs one in root mode. Move the directory to a "
                         "filesystem that supports them (ext4, xfs, btrfs, tmpfs) and leave a "
                         "symlink to it at %s, or push it to a registry as an OCI image (pulled "
                         "images work on any filesystem, docs/images.md)",
                         dir, fs_name(dir), dir);
}

/* The image directory as a detached mount tree, idmapped through the sandbox's user namespace
 * and read-only (docs/internals/isolation-facts.md §5). */
static int image_tree(const char *dir, pid_t pid, struct mcp_error *err)
{
    cleanup_close int userns = local_ns_open(pid, "user");
    cleanup_close int tree = (int)syscall(SYS_open_tree, AT_FDCWD, dir,
                                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                          MOUNT_ATTR_NODEV,
                              .userns_fd = (uint64_t)userns};
    int rc = userns < 0 || tree < 0 ? -1
             : (int)syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                            sizeof attr);
    if (rc < 0)
        return idmap_refused(dir, errno, err);
    return steal_fd(&tree);
}

int local_ns_open(pid_t pid, const char *ns)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, ns);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* A user namespace that only serves to idmap: the mount owner's uid/gid (on disk) are shown as
 * the sandbox's uid/gid `to` (its root, or its image's User), and what those write lands as
 * the owner. Made by a child that waits on a pipe while its maps are written; an fd of its
 * namespace outlives it. */
static int owner_userns(uint32_t uid, uint32_t gid, uint32_t to_uid, uint32_t to_gid,
                        struct mcp_error *err)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "pipe");
    cleanup_close int wait_end = pipefd[0], release_end = pipefd[1];
    struct clone_args args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) { /* waits until the parent closes release_end (EOF), then goes */
        char b;
        local_close_except(wait_end, wait_end); /* release_end and every other thread's too */
        ssize_t r = read(wait_end, &b, 1);
        _exit(r < 0);
    }
    close(steal_fd(&wait_end));
    int fd = -1, e = errno;
    if (pid > 0) {
        char map[64];
        struct mcp_error why;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)to_uid);
        int rc = local_proc_write(pid, "uid_map", map, &why);
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)to_gid);
        rc = rc == 0 ? local_proc_write(pid, "gid_map", map, &why) : -1;
        fd = rc == 0 ? local_ns_open(pid, "user") : -1;
        e = rc == 0 ? errno : why.sys_errno;
        close(steal_fd(&release_end)); /* the child's read sees EOF and it exits */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, e,
                             "cannot make the user namespace that idmaps host mounts");
    return fd;
}

/* Root mode: each host mount's source as a detached tree, cloned from the very descriptor the
 * create checked (never a path looked up again) and idmapped so that its owner's files belong to the sandbox's root (or
 * the image's User) and what the sandbox writes there lands as that owner. */
static int ws_trees(const struct spawn_request *req, struct image_trees *trees,
                    struct mcp_error *err)
{
    uint32_t to_uid = local_identity_root_uid(req->ident, req->slot) + req->run_uid;
    uint32_t to_gid = local_identity_root_gid(req->ident, req->slot) + req->run_gid;
    for (size_t i = 0; i < req->ws->n; i++) {
        const struct local_ws_mount *w = &req->ws->m[i];
        cleanup_close int userns =
            owner_userns(w->m.owner_uid, w->m.owner_gid, to_uid, to_gid, err);
        if (userns < 0)
            return -1;
        cleanup_close int tree =
            (int)syscall(SYS_open_tree, w->fd, "",
                         AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        int e = errno;
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID |
                                              MOUNT_ATTR_NODEV |
                                              (w->m.mode == LOCAL_MOUNT_RW ? 0 : MOUNT_ATTR_RDONLY),
                                  .userns_fd = (uint64_t)userns};
        int rc = tree < 0 ? -1
                          : (int)syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE,
                                         &attr, sizeof attr);
        e = tree < 0 ? e : errno;
        if (rc < 0) {
            return mcp_error_set(err, MCP_ERR_UNSUPPORTED, e,
                                 "cannot mount %s into the sandbox as an idmapped mount (needs "
                                 "Linux 5.12+ and a filesystem that supports idmapped mounts: "
                                 "ext4, xfs, btrfs, tmpfs)", w->m.source);
        }
        trees->fd[trees->n++] = steal_fd(&tree);
    }
    return 0;
}

static int send_go(int sock, const struct image_trees *t)
{
    char go = 'g', ctl[CMSG_SPACE(sizeof(int) * LOCAL_MAX_TREES)];
    struct iovec iov = {.iov_base = &go, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (t && t->n > 0) {
        memset(ctl, 0, sizeof ctl);
        msg.msg_control = ctl;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * t->n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * t->n);
        memcpy(CMSG_DATA(c), t->fd, sizeof(int) * t->n);
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

static void shared_child_main(void *p)
{
    child_main(p);
}

/* For a shared child: this thread, and so the child, which inherits it, may run only on this
 * CPU until the clone returns. The thread then waits for the child's exec; left to itself, the
 * kernel places a new child on an idle CPU (on a VM, one whose wake-up takes 0.1-0.3 ms), and
 * the loop, which goes on meanwhile (spawner.c), next to it, while this CPU idles. *saved: the
 * thread's CPUs, for both to return to. */
static bool pin_to_this_cpu(cpu_set_t *saved)
{
    const char *off = getenv("MCPBOX_LOCAL_PIN"); /* "0": off, to compare (benchmarks) */
    int cpu = sched_getcpu();
    if ((off && strcmp(off, "0") == 0) || cpu < 0 ||
        sched_getaffinity(0, sizeof *saved, saved) < 0 || CPU_COUNT(saved) < 2 ||
        !CPU_ISSET(cpu, saved))
        return false;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0;
}

static pid_t do_clone(struct child_plan *p, int cgroup_fd, bool shared, int *pidfd)
{
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                 CLONE_NEWCGROUP | CLONE_PIDFD |
                 (p->req->netns_ready || child_makes_netns(p->req) ? 0 : CLONE_NEWNET);
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    args.exit_signal = SIGCHLD;
    if (cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)cgroup_fd;
    }
    if (shared) {
        p->pinned = pin_to_this_cpu(&p->cpus);
        pid_t pid = local_clone_shared(&args, shared_child_main, p);
        if (p->pinned)
            sched_setaffinity(0, sizeof p->cpus, &p->cpus);
        return pid;
    }
    pid_t pid = local_clone_copy(&args);
    if (pid == 0)
        child_main(p);
    return pid;
}

/* A POSIX access ACL (the raw system.posix_acl_access format) giving `uid` rwx on a directory
 * of ours: the owner may name any uid in an ACL, where only root may chown to it. */
static int grant_acl(const char *path, uint32_t uid)
{
    struct {
        uint16_t tag, perm;
        uint32_t id;
    } acl_entries[5] = {{0x01, 7, 0xffffffffu}, {0x02, 7, uid}, {0x04, 0, 0xffffffffu},
                        {0x10, 7, 0xffffffffu}, {0x20, 0, 0xffffffffu}};
    unsigned char raw[4 + sizeof acl_entries];
    uint32_t version = 2; /* POSIX_ACL_XATTR_VERSION, little-endian like the entries */
    memcpy(raw, &version, 4);
    memcpy(raw + 4, acl_entries, sizeof acl_entries);
    return setxattr(path, "system.posix_acl_access", raw, sizeof raw, 0);
}

/* The logs directory must be writable by the sandbox's root. As root: chown it to that uid.
 * Rootless with subordinate ids: the user cannot chown to a subordinate uid, so an ACL grants
 * it; the directory stays the user's, who can therefore always remove what is in it (the agent
 * makes only plain files there). Single uid: sandbox root is the user already. */
static int own_logdir(const struct spawn_request *req, const char *path, struct mcp_error *err)
{
    const struct local_identity *id = req->ident;
    /* The agent runs as the image's User (run_uid/run_gid; 0 for root). */
    if (id->mode == LOCAL_ID_SLICES &&
        chown(path, local_identity_root_uid(id, req->slot) + req->run_uid,
              local_identity_root_gid(id, req->slot) + req->run_gid) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "chown %s", path);
    /* (with person_id the agent runs as the user: the directory is its own already) */
    if (id->mode == LOCAL_ID_SUBID && req->person_id == 0 &&
        grant_acl(path, id->uid_base + req->run_uid) < 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, errno,
                             "cannot give the sandbox's root (uid %u) access to %s with a POSIX "
                             "ACL: put the state directory (--state-dir) on a filesystem with "
                             "ACLs (ext4, xfs, btrfs, tmpfs)", (unsigned)id->uid_base, path);
    return 0;
}

static int open_logdir(const struct spawn_request *req, bool made, struct mcp_error *err)
{
    const char *path = req->logs_dir;
    if (!made && mkdir(path, 0700) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", path);
    if (own_logdir(req, path, err) < 0)
        return -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "open %s", path);
    return fd;
}

static int open_listener(const char *dir, struct mcp_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/agent.sock", dir);
    if (n < 0 || (size_t)n >= sizeof sa.sun_path)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "runtime directory path too long for a unix socket: %s", dir);
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "socket");
    unlink(sa.sun_path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot listen on %s", sa.sun_path);
    chmod(sa.sun_path, 0600);
    return steal_fd(&fd);
}

/* The listener a spawner made ahead, if its socket is still where the agent's clients look (the
 * directory is mcpbox's alone: what is there is it); else a new one. */
static int listener(const struct spawn_request *req, int premade, struct mcp_error *err)
{
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/agent.sock", req->dir);
    struct stat st;
    if (premade >= 0 && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        return premade;
    if (premade >= 0)
        close(premade);
    return open_listener(req->dir, err);
}

/* /proc files a sandbox could read or write without a cover: any with a permission bit for
 * "others". The rest (kcore, kmsg, kpage*, vmallocinfo, pagetypeinfo: mode 0400 or 0200) belong
 * to host root, which no sandbox's user namespace maps, so a sandbox is refused them as it
 * would be the host's other users; a /dev/null bind each would cost 5-10 us of every create.
 * Absent ones need none either. The modes are the kernel's, the same in every proc mount. */
static bool proc_mask[PROC_MASKED];
static pthread_once_t proc_mask_once = PTHREAD_ONCE_INIT;

static void plan_proc_masks(void)
{
    for (size_t i = 0; i < PROC_MASKED; i++) {
        char host[64];
        struct stat st;
        snprintf(host, sizeof host, "/%s", proc_masked[i]);
        proc_mask[i] = lstat(host, &st) == 0 && (st.st_uid != 0 || (st.st_mode & 0007) != 0);
    }
}

/* A root template owned by the host ids of the sandbox's root, where one can be: not for an
 * image (its own root), nor with host mounts (their targets are made in the root), nor with a
 * user's shared subordinate ids (the user cannot give files to those ids). If it cannot be
 * made, the child makes the root itself on a tmpfs, as it does in those cases. */
static void plan_root(struct child_plan *p, const struct spawn_request *req)
{
    p->layout = local_root_layout();
    p->template_root[0] = '\0';
    if (req->root_templates == NULL || req->n_image_dirs > 0 || (req->ws && req->ws->n > 0) ||
        req->ident->mode == LOCAL_ID_SUBID)
        return;
    struct mcp_error ignored;
    if (local_root_template(req->root_templates, req->network || req->egress,
                            local_identity_root_uid(req->ident, req->slot),
                            local_identity_root_gid(req->ident, req->slot), p->template_root,
                            sizeof p->template_root, &ignored) < 0)
        p->template_root[0] = '\0';
}

/* dirs_made: the spawner made the directories (spawn_fds): about 40 us of failing mkdirs less. */
static int prepare(struct child_plan *p, const struct spawn_request *req, int premade_listener,
                   bool dirs_made, struct mcp_error *err)
{
    memset(p, 0, sizeof *p);
    p->req = req;
    p->sync_fd = p->err_fd = p->logdir_fd = p->data_fd = p->root_tree = -1;
    p->listen_fd = premade_listener; /* close_plan closes it if this fails */
    for (size_t i = 0; i < LOCAL_WS_MAX_MOUNTS; i++)
        p->ws_tree[i] = p->ws_layers[i] = -1;
    p->exe_fd = req->agent_exe_fd;
    snprintf(p->rootfs, sizeof p->rootfs, "%s/rootfs", req->dir);
    if (!dirs_made && mkdir(p->rootfs, 0700) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir in %s", req->dir);
    /* uid/gid 0 of the sandbox: enter_root mounts it before the child becomes that root. */
    snprintf(p->data_opts, sizeof p->data_opts, "size=%llu,mode=755,uid=0,gid=0",
             (unsigned long long)req->disk_bytes);
    snprintf(p->datadir, sizeof p->datadir, "%s/data", req->dir);
    if (req->n_image_dirs == 0 && !dirs_made && mkdir(p->datadir, 0700) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir in %s", req->dir);
    snprintf(p->shm_opts, sizeof p->shm_opts, "size=%llu,mode=1777",
             (unsigned long long)local_shm_bytes(req->memory_bytes));
    plan_root(p, req);
    pthread_once(&proc_mask_once, plan_proc_masks);
    p->proc_mask = proc_mask;
    p->agent_argv[0] = (char *)"mcpbox-agent";
    p->agent_argv[1] = NULL;
    p->agent_env = xasprintf(AGENT_CONFIG_ENV "=%s", req->agent_config);
    if ((p->logdir_fd = open_logdir(req, dirs_made, err)) < 0)
        return -1;
    if ((p->listen_fd = listener(req, p->listen_fd, err)) < 0)
        return -1;
    return 0;
}

void local_spawn_fds_make(struct spawn_fds *f, const char *dir)
{
    struct mcp_error err;
    *f = SPAWN_FDS_NONE;
    f->listen_fd = open_listener(dir, &err);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->sync) < 0)
        f->sync[0] = f->sync[1] = -1;
    if (pipe2(f->err, O_CLOEXEC) < 0)
        f->err[0] = f->err[1] = -1;
}

void local_spawn_fds_close(struct spawn_fds *f)
{
    int fds[] = {f->listen_fd, f->sync[0], f->sync[1], f->err[0], f->err[1], f->cgroup_v2,
                 f->root_tree};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    *f = SPAWN_FDS_NONE;
}

static void close_plan(struct child_plan *p)
{
    free(p->agent_env);
    p->agent_env = NULL;
    int fds[] = {p->sync_fd, p->listen_fd, p->logdir_fd};
    for (size_t i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Before the clone everything local_spawn holds is in p and fds: one place closes it all. */
static int fail_before_clone(struct child_plan *p, struct spawn_fds *fds, int rc)
{
    close_plan(p);
    local_spawn_fds_close(fds);
    return rc;
}

/* The parent's part between the clone and the release: the init's note, the child's uid and
 * gid maps, then the mount trees only the parent can open for it (idmapped image layers as
 * root, host mounts when ws_by_parent). Trees opened before a failure stay in trees. */
static int parent_setup(const struct spawn_request *req, pid_t pid, uint64_t *start,
                        struct image_trees *trees, struct mcp_error *err)
{
    int rc = note_init(req->dir, pid, start, err);
    if (rc == 0)
        rc = req->person_id ? local_identity_write_maps_person(req->ident, pid, err)
                            : local_identity_write_maps(req->ident, req->slot, pid, err);
    bool idmap = req->ident->mode == LOCAL_ID_SLICES && !req->bind_image;
    for (size_t i = 0; rc == 0 && idmap && i < req->n_image_dirs &&
                       i < LOCAL_MAX_IMAGE_LAYERS;
         i++) {
        int tree = image_tree(req->image_dirs[i], pid, err);
        if (tree < 0)
            rc = -1;
        else
            trees->fd[trees->n++] = tree;
    }
    if (rc == 0 && ws_by_parent(req))
        rc = ws_trees(req, trees, err);
    return rc;
}

/* A child in mcpbox's memory (clone_shared.c) uses p, the request and this thread's stack until
 * its exec: release it, then wait for that (EOF on the sync socket, which the exec closes; or
 * its death). The agent's start is watched by the caller through the error pipe as usual; with
 * req->released, from the release on rather than from this function's return. */
static int release_shared(struct child_plan *p, int sync_fd, int pidfd,
                          struct image_trees *trees, int rc, struct mcp_error *err)
{
    if (rc >= 0 && p->req->may_release && p->req->may_release(p->req->may_release_arg) != 0)
        rc = mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "the create was given up before the "
                           "sandbox init was released");
    if (rc >= 0 && send_go(sync_fd, trees) < 0)
        rc = mcp_error_set(err, MCP_ERR_IO, errno, "releasing the sandbox init failed");
    local_image_trees_close(trees); /* sent (the child has its own copies), or not needed */
    if (rc < 0)
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    else if (p->req->released)
        p->req->released(p->req->released_arg); /* trees, err and the result are the caller's now */
    char b;
    while (recv(sync_fd, &b, 1, 0) < 0 && errno == EINTR)
        ;
    close(sync_fd);
    free(p->agent_env);
    local_clone_shared_done();
    return rc < 0 ? -1 : 0; /* on failure the caller reaps it via pidfd and closes fds */
}

/* The sandbox's v2 cgroup for CLONE_INTO_CGROUP, made again if it is gone: a spawner's set
 * waits with it empty, and another process's age-based sweep may have removed it. */
static int open_v2_made(const struct cg_sandbox *cg)
{
    int fd = cg_open_v2(cg);
    if (fd < 0 && cg->v2[0] && errno == ENOENT) {
        struct mcp_error ignored;
        if (cg_ensure_v2(cg, &ignored) == 0)
            fd = cg_open_v2(cg);
    }
    return fd;
}

/* Whether the root's tree a spawner made is the root this create wants: its template, and
 * data and /dev/shm of the sizes and owner it asks for. */
static bool tree_fits(const struct root_tree_plan *t, const struct child_plan *p)
{
    const struct spawn_request *req = p->req;
    return p->template_root[0] && strcmp(t->template_root, p->template_root) == 0 &&
           t->uid == local_identity_root_uid(req->ident, req->slot) &&
           t->gid == local_identity_root_gid(req->ident, req->slot) &&
           t->disk_bytes == req->disk_bytes && t->shm_bytes == local_shm_bytes(req->memory_bytes) &&
           req->run_uid == 0 && req->run_gid == 0 && req->person_id == 0;
}

int local_spawn(const struct spawn_request *req, struct spawn_result *out, struct mcp_error *err)
{
    struct child_plan p;
    struct spawn_fds fds = SPAWN_FDS_NONE;
    if (req->premade) { /* ours now, whatever happens */
        fds = *req->premade;
        *req->premade = SPAWN_FDS_NONE;
    }
    int *sync = fds.sync, *errp = fds.err;
    memset(out, 0, sizeof *out);
    out->pidfd = out->err_fd = out->release_fd = -1;
    out->trees.n = 0;
    /* Each step sets err itself: callers may pass an err that was never written. */
    int listen_fd = fds.listen_fd;
    fds.listen_fd = -1; /* prepare's now */
    if (prepare(&p, req, listen_fd, fds.dirs_made, err) < 0)
        return fail_before_clone(&p, &fds, -1);
    if (sync[0] < 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0)
        return fail_before_clone(
            &p, &fds, mcp_error_set(err, MCP_ERR_IO, errno, "socketpair for the sandbox init"));
    if (errp[0] < 0 && pipe2(errp, O_CLOEXEC) < 0)
        return fail_before_clone(
            &p, &fds, mcp_error_set(err, MCP_ERR_IO, errno, "pipe for the sandbox init's errors"));
    p.sync_fd = sync[0];
    p.err_fd = errp[1];
    p.parent_sync_fd = sync[1];
    p.parent_err_fd = errp[0];
    if (fds.root_tree >= 0 && tree_fits(&fds.root_tree_for, &p))
        p.root_tree = fds.root_tree; /* p's now */
    else if (fds.root_tree >= 0) /* closing it takes 15-20 us: the spawner does, after this */
        req->premade->root_tree = fds.root_tree;
    fds.root_tree = -1;
    bool cg_premade = fds.cgroup_v2 >= 0;
    int cgfd = cg_premade ? fds.cgroup_v2 : open_v2_made(req->cg);
    fds.cgroup_v2 = -1; /* cgfd's now */
    int pidfd = -1;
    bool shared = local_clone_shared_possible(req);
    /* A shared child renumbers its fds in p itself: the parent closes its copies by value. */
    int parent_copies[] = {p.sync_fd, p.listen_fd, p.logdir_fd};
    pid_t pid = do_clone(&p, cgfd, shared, &pidfd);
    if (pid < 0 && cg_premade && errno == ENOENT) {
        /* Another process's sweep removed the set's empty v2 cgroup while it waited: it is
         * made again here rather than checked on every create's critical path. */
        close(cgfd);
        cgfd = open_v2_made(req->cg);
        pid = do_clone(&p, cgfd, shared, &pidfd);
    }
    if (pid < 0 && cgfd >= 0 && (errno == EINVAL || errno == EBUSY || errno == EOPNOTSUPP)) {
        close(cgfd), cgfd = -1; /* CLONE_INTO_CGROUP refused: attach by pid instead */
        pid = do_clone(&p, -1, shared, &pidfd);
    }
    if (pid < 0 && shared) { /* no stack for it: a copy, as everywhere else */
        shared = false;
        pid = do_clone(&p, cgfd, false, &pidfd);
    }
    int clone_errno = errno;
    if (cgfd >= 0)
        close(cgfd), out->in_cgroup_v2 = true;
    if (p.root_tree >= 0) /* the child has its own descriptor of it */
        close(p.root_tree);
    close(errp[1]);
    if (shared && pid > 0) {
        for (size_t i = 0; i < sizeof parent_copies / sizeof parent_copies[0]; i++)
            close(parent_copies[i]);
    } else {
        close_plan(&p);
    }
    if (pid < 0) {
        close(sync[1]), close(errp[0]);
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, clone_errno,
                             "clone3 with user, pid, mount, net, uts, ipc and cgroup namespaces "
                             "failed (run `mcpbox doctor`)");
    }
    out->pid = pid, out->pidfd = pidfd, out->err_fd = errp[0], out->shared_memory = shared;
    out->root_template = p.template_root[0] != '\0';
    out->root_tree = p.root_tree >= 0;
    struct image_trees *trees = &out->trees;
    int rc = parent_setup(req, pid, &out->start, trees, err);
    if (shared)
        return release_shared(&p, sync[1], pidfd, trees, rc, err);
    bool held_for_network = req->network || req->egress; /* pasta or nft before the release */
    if (rc >= 0 && !held_for_network && req->may_release &&
        req->may_release(req->may_release_arg) != 0)
        rc = mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "the create was given up before the "
                           "sandbox init was released");
    if (rc >= 0 && req->hold && !held_for_network && send_go(sync[1], NULL) < 0)
        rc = mcp_error_set(err, MCP_ERR_IO, errno, "releasing the sandbox init failed");
    if (rc >= 0 && (held_for_network || req->hold)) {
        /* pasta takes tens of milliseconds, a v1 attach a grace period: the caller does them
         * off the loop, then releases the child with local_spawn_release(). A held rootless
         * child without network already builds its root meanwhile (child_main: attach_pending),
         * and local_spawn_release only lets it drop the uid that allows the attach. */
        out->release_fd = sync[1];
        return 0;
    }
    if (rc >= 0 && local_spawn_release(sync[1], trees) < 0)
        rc = mcp_error_set(err, MCP_ERR_IO, errno, "releasing the sandbox init failed");
    else if (rc < 0)
        close(sync[1]), local_image_trees_close(trees);
    if (rc < 0) {
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        return -1; /* caller reaps via pidfd and closes fds */
    }
    return 0;
}

void local_image_trees_close(struct image_trees *t)
{
    for (unsigned i = 0; i < t->n; i++)
        close(t->fd[i]);
    t->n = 0;
}

int local_spawn_release(int release_fd, struct image_trees *trees)
{
    int rc = send_go(release_fd, trees);
    int e = errno;
    close(release_fd);
    if (trees)
        local_image_trees_close(trees);
    errno = e;
    return rc;
}

/* Ours never changes: read once per process (a fork gets its own). Every create wrote it twice
 * (the record, the uid slot lease), each a /proc read of 15-30 us on the loop. */
uint64_t local_self_starttime(void)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static pid_t pid;
    static uint64_t start;
    pthread_mutex_lock(&mu);
    if (pid != getpid()) {
        pid = getpid();
        start = local_proc_starttime(pid);
    }
    uint64_t v = start;
    pthread_mutex_unlock(&mu);
    return v;
}

uint64_t local_proc_starttime(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    char *p = strrchr(text, ')'); /* comm may contain spaces */
    if (p == NULL)
        return 0;
    if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
        return 0; /* a zombie is not a live sandbox */
    /* after ") " come fields 3..; starttime is field 22 */
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    return p && *p ? strtoull(p, NULL, 10) : 0;
}
