/* Spawning a sandbox (spawn.c) and its network (network.c, egress_netns.c). Internal to the local
 * backend. */
#ifndef MCPBOX_LOCAL_SPAWN_H
#define MCPBOX_LOCAL_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/local/identity.h"
#include "backend/local/workspace.h"
#include "lib/base/error.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_mounts.h"
#include "backend/local/local_seccomp.h"
#include "backend/local/local_cgroup.h"

struct snap_inline;

/* ---- spawning (spawn.c) ---- */
/* /proc/<pid>/ns/<ns> ("user", "net") opened read-only and close-on-exec: an fd to setns or to
 * idmap through, which stays valid after the process ends. -1 and errno on failure. */
int local_ns_open(pid_t pid, const char *ns);
/* What a root's tree (root_tree.c) is made for; a create that wants just that attaches it. */
struct root_tree_plan {
    char template_root[LOCAL_PATH_MAX];
    uint32_t uid, gid; /* the host ids of the sandbox's root, which owns its data */
    uint64_t disk_bytes, shm_bytes;
};

/* A sandbox's /dev/shm: a quarter of its memory, at most LOCAL_SHM_BYTES. */
static inline uint64_t local_shm_bytes(uint64_t memory_bytes)
{
    return memory_bytes / 4 < LOCAL_SHM_BYTES ? memory_bytes / 4 : LOCAL_SHM_BYTES;
}

/* Descriptors a spawner thread makes with a prepared set, ahead of the create; -1 where
 * local_spawn is to make its own. local_spawn takes them over (and sets them to -1). */
struct spawn_fds {
    int listen_fd;  /* bound to <dir>/agent.sock and listening */
    int sync[2];    /* socketpair: [0] the child's end, [1] the parent's */
    int err[2];     /* pipe: [0] the parent's read end, [1] the child's */
    int cgroup_v2;  /* the sandbox's v2 cgroup (O_PATH), for CLONE_INTO_CGROUP */
    bool dirs_made; /* <dir>/rootfs, <dir>/data and the logs directory exist */
    int root_tree;  /* local_root_tree of root_tree_for, or -1 */
    struct root_tree_plan root_tree_for;
};
#define SPAWN_FDS_NONE ((struct spawn_fds){-1, {-1, -1}, {-1, -1}, -1, false, -1, {"", 0, 0, 0, 0}})
void local_spawn_fds_make(struct spawn_fds *f, const char *dir); /* best effort */
/* A host-mode root as one detached mount tree (root_tree.c): the template, read-only, with
 * local_root_binds, the data tmpfs's directories and /dev/shm mounted on it. -1 with errno,
 * *failed naming the step. */
int local_root_tree(const struct root_tree_plan *plan, const char **failed);
void local_spawn_fds_close(struct spawn_fds *f);

struct spawn_request {
    const char *id;
    const char *dir;      /* <runtime dir>/<id>: mount point, agent socket, init file */
    const char *logs_dir; /* <state>/sandboxes/<id>: the agent's command logs (on disk) */
    const struct local_identity *ident; /* the ids it runs as (identity.h) */
    uint32_t slot;                      /* its slice (LOCAL_ID_SLICES only) */
    uint64_t disk_bytes;
    uint64_t memory_bytes;
    uint32_t pids;
    bool network;
    bool egress;              /* egress by policy: no route out but mcpbox (egress_netns.c) */
    const char *agent_config; /* JSON text for the agent's argv[1] */
    /* Secrets over TLS (local_secrets.c): the egress CA's certificate (PEM), written with the
     * root's system bundle to tmp/ and bound read-only over etc/ssl/certs/ca-certificates.crt
     * (host root only; a failure leaves the bundle as it is); NULL: none. */
    const char *egress_ca;
    /* NULL/0: image "host"; else the image's layers, bottom first (one for a registered rootfs
     * directory): each becomes an idmapped read-only lower layer of the sandbox's overlay. */
    const char *const *image_dirs;
    size_t n_image_dirs;
    /* The image's User: the agent and every command run as these ids (inside the sandbox);
     * 0/0 for root. /workspace and the logs directory belong to them. */
    uint32_t run_uid, run_gid;
    int agent_exe_fd; /* the sealed memfd */
    const struct local_seccomp *seccomp;
    const struct cg_sandbox *cg;
    /* The cloning thread already sits in a fresh network namespace with lo up (a spawner made
     * it ahead of time): clone3 without CLONE_NEWNET, the child inherits that one. */
    bool netns_ready;
    /* The caller moves the child into cgroups before releasing it (local_spawn_release): a
     * rootless server may move only processes of its own uid into v1 cgroups, and the child
     * switches to the sandbox's root (a subordinate uid) once released. */
    bool hold;
    /* The child binds the image directories itself instead of receiving idmapped trees (root
     * mode on a filesystem without idmapped mounts: see local_image_shared_identity). */
    bool bind_image;
    /* Host directories to mount (workspace.c checked them); NULL: none. As root each tree is
     * opened and idmapped by the parent (the mount owner's files appear as the sandbox's root,
     * its writes land as that owner); as a user the child opens them itself (no idmap). */
    const struct local_ws *ws;
    /* LOCAL_ID_SUBID with a writable mount: the user's own ids are mapped at this sandbox id
     * (local_identity_person_id) and run_uid/run_gid are it; 0 otherwise. */
    uint32_t person_id;
    /* No pids cgroup: RLIMIT_NPROC (counted per user namespace and uid, and no process in the
     * sandbox can change uid) is the pids limit itself rather than a backstop. */
    bool pids_by_rlimit;
    /* A child in mcpbox's memory (clone_shared.c): called on the cloning thread once the child
     * is released, before local_spawn waits for its exec. The caller may go on meanwhile, with
     * the result as it is then (spawner.c); local_spawn then writes neither it nor err. Only
     * for a request whose child reads nothing the caller may free before the exec: no
     * image_dirs, ws NULL. */
    void (*released)(void *arg);
    void *released_arg;
    /* Called on the cloning thread before local_spawn releases the child itself (not for a
     * held one): nonzero kills the child instead, the caller having given up. The spawner's
     * creates write the record meanwhile (spawner.c). */
    int (*may_release)(void *arg);
    void *may_release_arg;
    struct spawn_fds *premade; /* NULL: none */
    /* Where root templates are kept (root_template.h); NULL: the child makes its root. */
    const char *root_templates;
    /* A small snapshot's files for the child to write once its mounts are made, before the
     * agent exists (snapshot_inline.h); NULL: none. The caller keeps it until the exec. */
    const struct snap_inline *restore;
};

#define LOCAL_MAX_IMAGE_LAYERS 128 /* = OCI_MAX_LAYERS; all go in one SCM_RIGHTS message */
/* ... with the host mounts' trees after them (root mode). Under SCM_MAX_FD (253). */
#define LOCAL_MAX_TREES (LOCAL_MAX_IMAGE_LAYERS + LOCAL_WS_MAX_MOUNTS)
struct image_trees {
    int fd[LOCAL_MAX_TREES];
    unsigned n;
};
void local_image_trees_close(struct image_trees *t);

struct spawn_result {
    pid_t pid;
    int pidfd;
    int err_fd;               /* read end of the CLOEXEC error pipe: EOF means the agent runs */
    bool in_cgroup_v2;        /* CLONE_INTO_CGROUP worked */
    bool shared_memory;       /* cloned in mcpbox's own memory (clone_shared.c), not a copy */
    bool root_template;       /* its root is a root template (root_template.h), not a tmpfs */
    bool root_tree;           /* ... attached as a tree a spawner made (root_tree.c) */
    uint64_t start;           /* the child's start time ("/proc/<pid>/stat" field 22) */
    int release_fd;           /* network: the child waits on this until local_spawn_release */
    struct image_trees trees; /* the image's layers to hand over with the release */
};

int local_spawn(const struct spawn_request *req, struct spawn_result *out, struct mcp_error *err);
/* clone_shared.c: the child in mcpbox's own memory (CLONE_VM), where the request allows it; the
 * caller must not touch what the child uses until it has exec'd or died, then call _done (after
 * a successful local_clone_shared only: one shared child at a time). */
struct clone_args;
bool local_clone_shared_possible(const struct spawn_request *req);
pid_t local_clone_shared(struct clone_args *args, void (*fn)(void *), void *arg);
void local_clone_shared_done(void);
/* clone3 without CLONE_VM (0 in the child, which is dumpable even if cloned in a window). */
pid_t local_clone_copy(struct clone_args *args);
/* In a child that waits and never execs: closes every descriptor but keep_a and keep_b (-1: none;
 * the same twice: one). Another thread's pipe (a helper's error pipe, another such child's
 * release pipe) copied into the child at its fork would otherwise stay open for as long as the
 * child waits, and whoever waits for that pipe's EOF with it. */
void local_close_except(int keep_a, int keep_b);
/* Lets the child go on (sending the image trees, if any); closes all the fds. Thread-safe. */
int local_spawn_release(int release_fd, struct image_trees *trees);
/* "/proc/<pid>/stat" field 22, to tell a live init from a reused pid; 0 if gone. */
uint64_t local_proc_starttime(pid_t pid);
uint64_t local_self_starttime(void); /* this process's, read once */
#define LOCAL_INIT_FILE "init"       /* in the sandbox directory: "<pid> <start time>" */
/* network.c: opt-in egress through pasta. */
#define LOCAL_DNS_ADDR "169.254.1.1"
int local_start_network(const char *dir, pid_t pid, const struct cg_sandbox *cg,
                        struct mcp_error *err);
int local_block_private_routes(const char **failed); /* in the child; sets errno */
/* Loopback, private, link-local, CGNAT, multicast, reserved: never connected to (one list with
 * the routes above): local_addr_blocked, addr_blocked.h. */
/* egress by policy: in the child, everything IPv4 routed to lo (network.c); */
int local_egress_default_route(const char **failed);
/* in a worker before the child's release, the nftables rules sending TCP and DNS to the agent. */
int local_egress_rules(pid_t pid, struct mcp_error *err);

#endif
