/* Internals of the local backend, shared by its files (not part of the public API). */
#ifndef MCPBOX_LOCAL_INTERNAL_H
#define MCPBOX_LOCAL_INTERNAL_H

#include <jansson.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "backend/backend.h"
#include "backend/egress_policy.h"
#include "backend/local/image/addr_blocked.h"
#include "backend/local/pasta_path.h"
#include "backend/local/identity.h"
#include "backend/local/workspace.h"
#include "lib/base/rmtree.h"
#include "lib/base/buf.h"
#include "lib/base/error.h"
#include "lib/store/store.h"

#define LOCAL_PATH_MAX 512
#define LOCAL_ID_LEN 21             /* "sbx-" + 16 hex + NUL */
#define LOCAL_UID_BASE 100000u
#define LOCAL_UID_RANGE 65536u
#define LOCAL_MAX_SLOTS 4096u
#define LOCAL_DEFAULT_MEMORY (1ull << 30)
#define LOCAL_DEFAULT_DISK (512ull << 20)
#define LOCAL_DEFAULT_PIDS 512u
#define LOCAL_DEFAULT_CPU 1.0
#define LOCAL_DEFAULT_TTL_S 3600
#define LOCAL_DEFAULT_IDLE_S 1800
#define LOCAL_MIN_MEMORY (32ull << 20)
/* Fewer processes cannot run a sandbox: its agent, the shell of a command and the few processes
 * of a small pipeline (with 1 a warm server's clone3 fails; with 3 `echo | cat` cannot fork). */
#define LOCAL_MIN_PIDS 8u
#define LOCAL_MIN_DISK (1ull << 20)
/* The agent gets its configuration (env included, as JSON) in one environment string, which
 * Linux caps at MAX_ARG_STRLEN (BACKEND_ENV_VAR_MAX); the rest of the configuration is small. */
#define LOCAL_ENV_JSON_MAX (BACKEND_ENV_VAR_MAX - 4096)
#define LOCAL_ROOT_TMPFS "size=8m,mode=755,uid=0,gid=0"
#define LOCAL_SHM_BYTES (64ull << 20)
#define LOCAL_IMAGE_NAME_MAX 64
#define LOCAL_TOUCH_INTERVAL_MS 1000
#define LOCAL_KILL_WAIT_MS 2000
#define LOCAL_CG_RETRY_MS 100
#define LOCAL_CG_RETRIES 100
#define LOCAL_CG_SWEEP_AGE_S 60

/* ---- host directories mounted at create (workspace.c; layout in workspace.h) ---- */
/* The directories a person allowed (--allow-dir, MCPBOX_ALLOW_DIRS, or the default), as real
 * paths resolved at start. */
struct local_allow {
    char **dirs;
    uid_t *owners; /* whose each is: only that uid's callers may mount it (workspace_caller.c) */
    size_t n;
};
/* dirs: colon-separated [USER=]DIR entries (NULL: none; no USER: the server's own user). -1 with
 * err naming the bad entry. */
int local_allow_init(struct local_allow *a, const char *dirs, struct mcp_error *err);
void local_allow_free(struct local_allow *a);

/* ---- who is creating (workspace_caller.c) ---- */
struct stat;
#define LOCAL_WS_CALLER_GROUPS 256
struct local_ws_caller {
    bool known;    /* false: no local user to tie the caller to; they mount nothing */
    bool by_token; /* a bearer token's holder, acting as the server's user */
    uid_t uid;
    gid_t gid; /* their primary group (65534 without an account) */
    gid_t groups[LOCAL_WS_CALLER_GROUPS];
    int ngroups;
};
/* The caller behind a sandbox owner ("local:uid:N", "token:..."); -1 for any other. */
int local_ws_caller(const char *owner, struct local_ws_caller *out);
/* 0 if the caller can open `path` as a directory with their own rights (uid, groups, no
 * capabilities) and finds the directory fd is; -1 with errno (ESTALE: another one). */
int local_ws_caller_opens(const struct local_ws_caller *who, int fd, const char *path);
/* The host ids a mount of the directory `st` maps into the sandbox for this caller. */
void local_ws_caller_ids(const struct local_ws_caller *who, const struct stat *st, uint32_t *uid,
                         uint32_t *gid);
/* A user name or number as a uid; -1 if there is no such user. */
int local_user_parse(const char *name, uid_t *uid);
/* "alice (uid 1000)", or "uid 1000" without an account. */
void local_user_name(uid_t uid, char *out, size_t size);

struct local_ws_check {
    const struct local_allow *allow;
    const char *caller; /* the sandbox's owner: whose rights the mounts may use (NULL: no one's) */
    json_t *roots; /* the client's roots (host paths), or NULL: they only narrow allow */
    const char *state_dir, *run_dir; /* never mountable, nor anything holding them */
};
struct local_ws_mount {
    struct local_mount m; /* m.allow_dir, m.rel: where it was found; m.dev, m.ino: what */
    int fd;               /* the checked source (O_PATH), kept until local_ws_free: the tree
                           * the sandbox gets is made from it, never from a path again */
};
struct local_ws {
    struct local_ws_mount *m;
    size_t n;
};
/* Checks a create's `mounts` (JSON list of {source, target, mode}) against the allowlist. */
int local_ws_check(const struct local_ws_check *c, json_t *mounts, struct local_ws *out,
                   struct mcp_error *err);
void local_ws_free(struct local_ws *ws);
bool local_ws_writable(const struct local_ws *ws); /* any rw or copy-on-write mount */
/* The list as JSON (with_layers: upper and work too). */
json_t *local_ws_json(const struct local_ws *ws, bool with_layers);
/* Makes <state>/workspaces/<id>, the copy-on-write layers (owned by layer_uid/gid, as root)
 * and mounts.json; fills each copy-on-write mount's upper and work. */
int local_ws_prepare(const char *state_dir, const char *id, struct local_ws *ws, uid_t layer_uid,
                     gid_t layer_gid, struct mcp_error *err);
void local_ws_remove(const char *state_dir, const char *id, const struct local_identity *ident);
/* openat2(allow_dir, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) as an O_PATH directory fd;
 * the allowed directory itself is opened with RESOLVE_NO_SYMLINKS. -1 with errno. */
int local_ws_open_beneath(const char *allow_dir, const char *rel);
#define LOCAL_WS_OPEN_TRIES 16 /* walks tried while a rename makes openat2 answer EAGAIN */

/* ---- seccomp (seccomp_profile.c) ---- */
struct local_seccomp {
    struct sock_filter *filter; /* owned */
    unsigned short len;
};
int local_seccomp_build(struct local_seccomp *out, struct mcp_error *err);
void local_seccomp_free(struct local_seccomp *s);

/* The profile's tables, also read by the test that checks the compiled program against one
 * libseccomp builds from the same tables (tests/local/unit/test_seccomp_profile.c). */
#define LOCAL_SECCOMP_HIGHEST_KNOWN 469 /* file_setattr (Linux 6.17) */
#define LOCAL_SECCOMP_X32_BIT 0x40000000u
/* NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */
#define LOCAL_SECCOMP_CLONE_NS_FLAGS 0x7E020000u
#define LOCAL_SECCOMP_SETID_MODE 06000u
#define LOCAL_SECCOMP_AF_ALG 38
#define LOCAL_SECCOMP_AF_VSOCK 40
struct local_seccomp_call {
    const char *name;
    int nr;       /* x86_64 number if libseccomp cannot name it, else -1 */
    unsigned arg; /* the argument checked (the mode of the chmod calls) */
};
extern const char *const local_seccomp_allowed[];
extern const size_t local_seccomp_n_allowed;
extern const struct local_seccomp_call local_seccomp_allowed_by_number[];
extern const size_t local_seccomp_n_allowed_by_number;
extern const struct local_seccomp_call local_seccomp_chmods[];
extern const size_t local_seccomp_n_chmods;
extern const uint32_t local_seccomp_personas[];
extern const size_t local_seccomp_n_personas;
/* The x86_64 number of a syscall: libseccomp's, else fallback (-1: unknown). */
int local_seccomp_nr(const char *name, int fallback);

/* ---- cgroups (cgroup.c): one interface over hybrid (v1 limits + v2 core) and pure v2 ---- */
enum cg_layout { CG_NONE, CG_HYBRID, CG_V2 };

struct cg_host {
    enum cg_layout layout;
    char v2_base[LOCAL_PATH_MAX];   /* our parent cgroup in the v2 hierarchy */
    char mem_base[LOCAL_PATH_MAX];  /* hybrid: v1 parents */
    char pids_base[LOCAL_PATH_MAX];
    char cpu_base[LOCAL_PATH_MAX];
    char freezer_base[LOCAL_PATH_MAX]; /* v1 freezer, only when there is no v2 hierarchy */
    /* What sandboxes of this host get (a limit without its controller is not enforced, and is
     * never reported as one): */
    bool lim_memory, lim_pids, lim_cpu, can_freeze;
    char note[384]; /* rootless: where the delegated subtree is, or why there is none */
};
/* A rootless server's delegated v1 subtree in each hierarchy, made by `mcpbox setup --user`. */
#define LOCAL_CG_USER_DIR "mcpbox-u%u"
/* In a delegated v2 subtree the server moves into this leaf; sandboxes are its siblings. */
#define LOCAL_CG_LEAF "mcpbox-leaf"

/* One sandbox's cgroups (paths empty when unused). */
struct cg_sandbox {
    char v2[LOCAL_PATH_MAX];
    char mem[LOCAL_PATH_MAX];
    char pids[LOCAL_PATH_MAX];
    char cpu[LOCAL_PATH_MAX];
    char freezer[LOCAL_PATH_MAX];
};

struct cg_limits {
    uint64_t memory_bytes;
    uint32_t pids;
    double cpu;
};

int cg_host_detect(struct cg_host *h, struct mcp_error *err);
const char *cg_layout_name(enum cg_layout l);
int cg_create(const struct cg_host *h, const char *id, const struct cg_limits *lim,
              struct cg_sandbox *out, struct mcp_error *err);
/* Moves pid into the v1 cgroups (slow on hybrid: an RCU grace period per write). */
int cg_attach_v1(const struct cg_sandbox *cg, pid_t pid, struct mcp_error *err);
int cg_attach_v2(const struct cg_sandbox *cg, pid_t pid, struct mcp_error *err);
int cg_open_v2(const struct cg_sandbox *cg); /* fd for CLONE_INTO_CGROUP, or -1 */
int cg_kill(const struct cg_sandbox *cg);
int cg_freeze(const struct cg_sandbox *cg, bool frozen, struct mcp_error *err);
int cg_set_limits(const struct cg_sandbox *cg, const struct cg_limits *lim, struct mcp_error *err);
/* Makes the v2 cgroup again if it was removed (a prepared set's, swept while it waited). */
int cg_ensure_v2(const struct cg_sandbox *cg, struct mcp_error *err);
int cg_join_v1_thread(const struct cg_sandbox *cg, pid_t tid, struct mcp_error *err);
int cg_wait_empty(const struct cg_sandbox *cg, int timeout_ms); /* -1: still populated */
int cg_destroy(const struct cg_sandbox *cg); /* rmdir all; -1 if one is still busy */
void cg_sweep(const struct cg_host *h, long min_age_s);
uint64_t cg_oom_kills(const struct cg_sandbox *cg);
uint64_t cg_memory_limit(const struct cg_sandbox *cg);
/* An fd that signals OOM kills: a v1 eventfd registered on memory.oom_control (readable), or
 * v2 memory.events (POLLPRI on change); -1 if unavailable. */
int cg_oom_fd(const struct cg_sandbox *cg);
json_t *cg_usage(const struct cg_sandbox *cg);
json_t *cg_to_json(const struct cg_sandbox *cg);
void cg_from_json(json_t *j, struct cg_sandbox *out);

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
    int listen_fd; /* bound to <dir>/agent.sock and listening */
    int sync[2];   /* socketpair: [0] the child's end, [1] the parent's */
    int err[2];    /* pipe: [0] the parent's read end, [1] the child's */
    int cgroup_v2; /* the sandbox's v2 cgroup (O_PATH), for CLONE_INTO_CGROUP */
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
    const char *dir;          /* <runtime dir>/<id>: mount point, agent socket, init file */
    const char *logs_dir;     /* <state>/sandboxes/<id>: the agent's command logs (on disk) */
    const struct local_identity *ident; /* the ids it runs as (identity.h) */
    uint32_t slot;                      /* its slice (LOCAL_ID_SLICES only) */
    uint64_t disk_bytes;
    uint64_t memory_bytes;
    uint32_t pids;
    bool network;
    bool egress;              /* egress by policy: no route out but mcpbox (egress_netns.c) */
    const char *agent_config; /* JSON text for the agent's argv[1] */
    /* NULL/0: image "host"; else the image's layers, bottom first (one for a registered rootfs
     * directory): each becomes an idmapped read-only lower layer of the sandbox's overlay. */
    const char *const *image_dirs;
    size_t n_image_dirs;
    /* The image's User: the agent and every command run as these ids (inside the sandbox);
     * 0/0 for root. /workspace and the logs directory belong to them. */
    uint32_t run_uid, run_gid;
    int agent_exe_fd;         /* the sealed memfd */
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
    int err_fd;        /* read end of the CLOEXEC error pipe: EOF means the agent runs */
    bool in_cgroup_v2; /* CLONE_INTO_CGROUP worked */
    bool shared_memory; /* cloned in mcpbox's own memory (clone_shared.c), not a copy */
    bool root_template; /* its root is a root template (root_template.h), not a tmpfs */
    bool root_tree;     /* ... attached as a tree a spawner made (root_tree.c) */
    uint64_t start;     /* the child's start time ("/proc/<pid>/stat" field 22) */
    int release_fd;    /* network: the child waits on this until local_spawn_release */
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
/* Lets the child go on (sending the image trees, if any); closes all the fds. Thread-safe. */
int local_spawn_release(int release_fd, struct image_trees *trees);
/* "/proc/<pid>/stat" field 22, to tell a live init from a reused pid; 0 if gone. */
uint64_t local_proc_starttime(pid_t pid);
uint64_t local_self_starttime(void); /* this process's, read once */
#define LOCAL_INIT_FILE "init" /* in the sandbox directory: "<pid> <start time>" */
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

/* ---- egress by policy (egress_proxy.c): the proxy and DNS server of one sandbox ---- */
struct local_egress;
struct lsbx;
/* Takes the agent's egress sockets and serves them on the loop (sb->egress). Each connection
 * and DNS answer follows local_egress_policy(sb) (local_egress.c): a change applies to the next
 * one; open connections are left alone. */
int local_egress_start(struct lsbx *sb, struct mcp_error *err);
void local_egress_stop(struct local_egress *eg); /* NULL-safe */

/* ---- the agent binary (agent_blob.c) ---- */
extern const unsigned char local_agent_blob[];
extern const unsigned char local_agent_blob_end[];
int local_agent_memfd(struct mcp_error *err);

/* ---- agent connection (agent_client.c) ---- */
struct agent_conn;
typedef void agent_reply_cb(void *arg, json_t *reply, const struct mcp_error *err);
typedef void agent_event_cb(void *arg, json_t *event);

struct agent_conn *agent_conn_open(uv_loop_t *loop, const char *sock_path,
                                   struct mcp_error *err);
void agent_conn_close(struct agent_conn *c); /* pending calls fail (asynchronously) */
bool agent_conn_alive(const struct agent_conn *c);
/* Sends req (stolen; "v" and "id" are added). cb gets the reply object or an error. */
int agent_call(struct agent_conn *c, json_t *req, agent_reply_cb *cb, void *arg,
               struct mcp_error *err);
void agent_watch(struct agent_conn *c, const char *cmd_id, agent_event_cb *cb, void *arg);
void agent_unwatch(struct agent_conn *c, const char *cmd_id);

/* ---- the backend (local_backend.c, local_ops.c, local_exec.c) ---- */
struct lsbx;
struct fwd;

/* Spawner threads (spawner.c): hybrid hosts pre-attach the next sandboxes' v1 cgroups. */
#define LOCAL_SPAWNERS 2
struct local_spawner;
/* NULL: not needed. Prepared sets are marked in run_dir (spawner_marker.c). slots_dir: where a
 * prepared set leases its uid slot (root mode), or NULL. root_templates (or NULL): where the
 * root template of a set's slot is, for the root's tree made with the set (root_tree.c). */
struct local_spawner *local_spawner_start(const struct cg_host *host, const char *run_dir,
                                          const char *logs_base, const char *slots_dir,
                                          const unsigned char *slots_excluded,
                                          const struct local_identity *ident,
                                          const char *root_templates);
/* Whether a prepared set's cgroups already hold these limits (those of the default spec). */
bool local_spawner_has_limits(const struct cg_limits *lim);
#define LOCAL_NO_SLOT UINT32_MAX
/* A cold create has begun and will take a set: the thread holding the next one watches for the
 * request rather than sleeping (spawner.c, await_request). Harmless if none is then taken. */
void local_spawner_nudge(struct local_spawner *s);
/* Reserves a prepared id + cgroup set (+ uid slot lease, or LOCAL_NO_SLOT; *dirs_made: its
 * runtime and logs directories exist); returns its spawner slot, or -1 if none is ready. */
int local_spawner_take(struct local_spawner *s, char *id, struct cg_sandbox *cg,
                       uint32_t *uid_slot, bool *dirs_made);
/* local_spawn in the reserved thread, in three steps: post the request (req and res stay the
 * caller's until the answer); say whether the sandbox's record is written (the thread clones
 * meanwhile, and releases the child only once it is: a crash before leaves no released child
 * without a record); wait for the answer, which comes once the child is released (the caller
 * learns of its exec from the error pipe). */
void local_spawner_post(struct local_spawner *s, int slot, const struct spawn_request *req,
                        struct spawn_result *res);
void local_spawner_record_done(struct local_spawner *s, int slot, bool written);
int local_spawner_wait(struct local_spawner *s, int slot, struct mcp_error *err);
/* Gives a reserved set back unused. */
void local_spawner_give_back(struct local_spawner *s, int slot);
void local_spawner_stop(struct local_spawner *s);
void spawner_marker_write(const char *run_dir, const char *id, const struct cg_sandbox *cg);
void spawner_marker_remove(const char *run_dir, const char *id);
/* At start: removes the prepared sets of processes that are gone (kill -9). */
void local_spawner_reap(const char *run_dir, const char *logs_base);

/* The pool (local_pool.c): sandboxes pre-created for the default spec (image host, no network,
 * default limits), taken by create; refilled in the background. */
#define LOCAL_POOL_TTL_S 600 /* an untaken pooled sandbox ends itself after this */
#define LOCAL_POOL_STATE "pooled"
/* A destroy was answered and its release is under way: absent to every operation, reaped by
 * the next start if the process that destroyed it died first. */
#define LOCAL_DESTROYED_STATE "destroyed"
/* A refill starts once no create has begun for this long: creates that come back to back get
 * the CPU to themselves (no refill racing them), and a create's first exec, which usually
 * follows within milliseconds, does not share it with a refill either. It also starts as soon
 * as a command finishes (local_pool_after_exec): the caller is then busy with its answer, and a
 * caller that makes sandboxes faster than every 50 ms still finds the pool refilled. */
#define LOCAL_POOL_REFILL_IDLE_MS 50
#define LOCAL_POOL_AFTER_EXEC_MS 5

struct local_backend {
    struct backend base;
    int pool_size;                 /* the target; 0 = off */
    bool apply_unreviewed;         /* local_options.apply_unreviewed */
    uint64_t apply_max_bytes;      /* local_options.apply_max_bytes */
    int64_t pool_ttl_s;            /* LOCAL_POOL_TTL_S (MCPBOX_LOCAL_POOL_TTL: tests) */
    uint64_t pool_idle_ms;         /* LOCAL_POOL_REFILL_IDLE_MS (MCPBOX_LOCAL_POOL_IDLE_MS: tests) */
    int pool_filling;              /* pooled creates in flight */
    bool pool_started;             /* from the second create on */
    bool closing;                  /* shutdown: no more refills */
    struct lsbx *pool;             /* ready, untaken (linked by pool_next) */
    uv_timer_t *pool_timer;        /* the deferred refill (own allocation: closed at free) */
    uint64_t last_create_ms;       /* monotonic: when the last create began */
    struct cg_host cg;
    struct local_spawner *spawner; /* NULL unless hybrid; started by the first create */
    bool spawner_tried;
    unsigned creates;              /* the spawner starts at the second one */
    struct local_seccomp seccomp;
    int agent_fd;                 /* sealed memfd of the agent binary */
    char state_dir[LOCAL_PATH_MAX];
    struct image_service *images; /* OCI images: made on the first create that names one */
    bool image_shared_mapping;    /* root, store not idmappable: image sandboxes share a mapping */
    struct {
        dev_t dev;
        bool ok;
    } idmap_seen[8];              /* local_image_dir_idmappable's answers, per filesystem */
    size_t n_idmap_seen;
    char run_dir[LOCAL_PATH_MAX]; /* runtime_dir.c: per-sandbox files that need no disk */
    char root_templates[LOCAL_PATH_MAX]; /* beside run_dir: shared by all state directories */
    struct local_identity ident;  /* which host ids its sandboxes get (identity.h) */
    struct local_allow allow;     /* host directories mounts may come from (workspace.c) */
    char slots_dir[LOCAL_PATH_MAX]; /* host-wide uid slot leases (LOCAL_ID_SLICES only) */
    unsigned char slots_excluded[LOCAL_MAX_SLOTS / 8 + 1]; /* slices of users' subordinate ids */
    struct lsbx *sandboxes;       /* live sandboxes this process watches */
    uv_timer_t timer;             /* paused sandboxes' TTL */
};

struct destroy_op {
    backend_cb *cb;
    void *arg;
};

/* A live sandbox watched by this process. Reference counted: the list holds one reference,
 * the pidfd watcher one, and each operation in flight one. */
struct lsbx {
    struct local_backend *be;
    char id[LOCAL_ID_LEN];
    char dir[LOCAL_PATH_MAX];      /* <run_dir>/<id> */
    char logs_dir[LOCAL_PATH_MAX]; /* <state_dir>/sandboxes/<id> */
    pid_t pid;
    int pidfd;
    uv_poll_t exit_poll;
    uv_poll_t oom_poll;           /* v1: eventfd from cgroup.event_control; v2: memory.events */
    int oom_fd;
    uint64_t oom_seen;
    bool watching, oom_watching, gone, in_list;
    struct cg_sandbox cg;
    struct agent_conn *conn;
    struct destroy_op *destroying;
    struct fwd *forwards;         /* host-side TCP forwarders (forward.c) */
    struct local_egress *egress;  /* egress by policy: its proxy, or NULL */
    uint64_t touched_ms;          /* last store_sandbox_touch (monotonic) */
    /* egress by policy (local_egress.c): the policy in force, parsed from the record's JSON,
     * re-read every LOCAL_EGRESS_RELOAD_MS; read it with local_egress_policy() */
    struct egress_policy *policy;
    json_t *policy_json;
    uint64_t policy_checked_ms;   /* monotonic; 0: never read */
    bool pooled;                  /* ready in the pool, not given to anyone yet */
    struct lsbx *pool_next;
    int refs;
    struct lsbx *next;
};

struct lsbx *lsbx_find(struct local_backend *lb, const char *id);
/* store_sandbox_get for the API: a pooled sandbox is NOT_FOUND (it is nobody's yet). */
int local_record_get(struct store *st, const char *id, struct store_sandbox *rec,
                     struct mcp_error *err);
/* forward.c: the host port (127.0.0.1) relaying to 127.0.0.1:port inside the sandbox, for
 * connections from the uid owner or the server's own user only. */
int local_forward(struct lsbx *sb, int port, uid_t owner, struct mcp_error *err);
void local_forwards_close(struct lsbx *sb);
/* The live sandbox for an operation: NOT_FOUND / CONFLICT (stopped, paused) otherwise. */
struct lsbx *lsbx_for_op(struct local_backend *lb, const char *id, bool allow_paused,
                         struct mcp_error *err);
struct agent_conn *lsbx_conn(struct lsbx *sb, struct mcp_error *err);
void lsbx_ref(struct lsbx *sb);
void lsbx_unref(struct lsbx *sb);
json_t *local_info(const struct store_sandbox *rec);
/* store_event_add that takes ownership of data (may be NULL). */
/* Records an event (logs a warning if the store refuses; takes data's reference). */
int local_event(struct store *st, const char *id, const char *kind, json_t *data,
                struct mcp_error *err);
/* Deletes a sandbox's record; a failure is logged (reconcile reaps the record later). */
void local_record_delete(struct store *st, const char *id);
void local_watch_exit(struct lsbx *sb);
/* Records an "oom" event if the sandbox memcg's oom_kill counter rose since last seen. */
void local_note_oom(struct lsbx *sb);

/* ---- egress by policy (local_egress.c): the policy, its changes, refused connections ---- */
#define LOCAL_EGRESS_RELOAD_MS 1000  /* a change by another mcpbox process applies within this */
#define LOCAL_EGRESS_REPEAT_MS 60000 /* the same refusal again within this is counted, not logged */
#define LOCAL_EGRESS_DIAG_MAX 10     /* distinct refusals diagnose_sandbox lists */

/* For the enforcement: the policy that decides sb's next connection or DNS answer, borrowed
 * (valid until the next call on this sandbox; egress_policy_ref to keep it longer). NULL when
 * the sandbox has none (made with network true/false) or its record's policy is unreadable:
 * egress_policy_decide(NULL, ...) refuses. Loop thread. */
const struct egress_policy *local_egress_policy(struct lsbx *sb);
void local_egress_forget(struct lsbx *sb); /* drops the cache (lsbx_unref) */
/* create: 0 when spec has no policy or this host can enforce it, else -1 with err. */
int local_egress_check(struct local_backend *lb, const struct sandbox_spec *spec,
                       struct mcp_error *err);
int local_set_network_policy(struct backend *be, const char *id,
                             const struct egress_policy *policy, backend_cb *cb, void *arg,
                             struct mcp_error *err);

/* One refused outbound connection, UDP datagram or DNS lookup, as the enforcement saw it. A
 * lookup the policy refuses (no port of the name could be allowed) is protocol "dns", port 0,
 * reason "policy" with decision = egress_policy_decide_lookup(policy, name); it is usually the
 * only trace a refused name leaves, since the program never connects. */
struct egress_refusal {
    const char *name;     /* SNI, Host or DNS name it asked for; NULL/"": it named none */
    const char *address;  /* the address it went to or the name resolved to, or NULL */
    uint16_t port;
    const char *protocol; /* "tcp" (NULL), "udp", "dns" */
    /* "policy" (NULL): the policy refused, see decision; "private_address": an allowed name
     * resolved to a loopback/private/link-local/metadata address; "udp": UDP other than DNS;
     * "dns" is taken as "policy" for a lookup; another short word for any other refusal */
    const char *reason;
    /* reason "policy": the policy that decided (NULL: not known, decided_by is left out) and
     * what it decided (egress_policy_decide, or egress_policy_decide_lookup for a lookup) */
    const struct egress_policy *policy;
    struct egress_decision decision;
    /* past the proxy's cap on events (a flood): a repeat is counted in memory only, and goes to
     * the store with the next one written; anything else is not recorded */
    bool flood;
};
/* Records the "egress_refused" event, data {name|null, port, protocol, reason, address?,
 * rule:index|null and decided_by:"egress[2] (deny ...)"|"default deny" (reason policy),
 * repeats?, last_time?}, unless the same refusal was recorded within LOCAL_EGRESS_REPEAT_MS:
 * then it is counted in that event as it happens (repeats, last_time). Loop thread; a store
 * failure is logged. */
int local_egress_refused(struct store *st, const char *sandbox_id, const struct egress_refusal *r);
int local_egress_refused_at(struct store *st, const char *sandbox_id,
                            const struct egress_refusal *r, uint64_t now_ms);
/* Writes the repeats a flood left counted in memory only into their events (diagnose_sandbox
 * calls it before it reads them). Loop thread. */
void local_egress_flush_repeats(struct store *st, const char *sandbox_id);
/* diagnose_sandbox's egress_refused: the distinct refusals among events, newest first, each
 * with count, last_time and a hint saying what to ask the person. New array. */
json_t *local_egress_refusals(json_t *events);

/* local_ops.c / local_exec.c: the vtable entries beyond lifecycle. */
extern const struct backend_ops local_ops;
int local_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb, void *arg,
                 struct mcp_error *err);
int local_destroy(struct backend *be, const char *id, backend_cb *cb, void *arg,
                  struct mcp_error *err);
int local_exec(struct backend *be, const char *id, const struct exec_request *req,
               const struct exec_observer *obs, struct exec_handle **out, struct mcp_error *err);
void local_exec_detach(struct exec_handle *h);
int local_command_get(struct backend *be, const char *id, const char *cmd, uint64_t offset,
                      uint64_t limit, backend_cb *cb, void *arg, struct mcp_error *err);
int local_command_kill(struct backend *be, const char *id, const char *cmd, int sig,
                       backend_cb *cb, void *arg, struct mcp_error *err);
int local_file_read(struct backend *be, const char *id, const char *path, uint64_t offset,
                    uint64_t length, backend_read_cb *cb, void *arg, struct mcp_error *err);
int local_file_write(struct backend *be, const char *id, const char *path, const void *data,
                     size_t len, uint32_t mode, bool append, backend_cb *cb, void *arg,
                     struct mcp_error *err);
int local_file_op(struct backend *be, const char *id, const char *op, json_t *args,
                  backend_cb *cb, void *arg, struct mcp_error *err);
int local_list(struct backend *be, const char *owner, json_t *filter, backend_cb *cb, void *arg,
               struct mcp_error *err);
int local_get(struct backend *be, const char *id, backend_cb *cb, void *arg,
              struct mcp_error *err);
int local_renew(struct backend *be, const char *id, int64_t timeout_seconds, backend_cb *cb,
                void *arg, struct mcp_error *err);
int local_pause(struct backend *be, const char *id, backend_cb *cb, void *arg,
                struct mcp_error *err);
int local_resume(struct backend *be, const char *id, backend_cb *cb, void *arg,
                 struct mcp_error *err);
int local_endpoint(struct backend *be, const char *id, int port, backend_cb *cb, void *arg,
                   struct mcp_error *err);
int local_diagnose(struct backend *be, const char *id, const char *what, backend_cb *cb,
                   void *arg, struct mcp_error *err);
/* local_workspace_ops.c: review and apply of copy-on-write mounts (backend.h "workspace"). */
int local_workspace(struct backend *be, const char *id, const char *action, json_t *args,
                    backend_cb *cb, void *arg, struct mcp_error *err);
/* local_metrics.c: memory, pids and CPU use of a sandbox live in this process. */
int local_metrics(struct backend *be, const char *id, backend_cb *cb, void *arg,
                  struct mcp_error *err);

/* local_create.c: the create path, split so the pool can use it. */
int local_create_cold(struct local_backend *lb, const struct sandbox_spec *spec, backend_cb *cb,
                      void *arg, struct mcp_error *err);
/* Starts one pooled create (spawned off the loop); local_pool_filled/_fill_failed end it. */
int local_create_pooled(struct local_backend *lb, struct mcp_error *err);

/* OCI images (local_image.c over backend/local/image/image.h). */
struct image_service;
typedef void local_image_ready_fn(struct local_backend *lb, const struct sandbox_spec *spec,
                                  json_t *image, backend_cb *cb, void *arg);
bool local_image_reference_ok(const char *name);
struct image_service *local_image_service(struct local_backend *lb, struct mcp_error *err);
/* Resolves spec->image (from the store, or pulled); then ready, or cb with the error. */
int local_image_resolve(struct local_backend *lb, const struct sandbox_spec *spec,
                        local_image_ready_fn *ready, backend_cb *cb, void *arg,
                        struct mcp_error *err);
/* A registered directory (name, its path) whose filesystem cannot be idmapped: copied into the
 * image store with the shared mapping's ids (image_service_import_dir); then ready. */
int local_image_import(struct local_backend *lb, const struct sandbox_spec *spec,
                       const char *dir, local_image_ready_fn *ready, backend_cb *cb, void *arg,
                       struct mcp_error *err);
/* Root mode: can dir be mounted idmapped (cached per filesystem)? */
bool local_image_dir_idmappable(struct local_backend *lb, const char *dir);
/* Whether sandboxes on this image use the shared mapping: the store's fallback, or an
 * imported directory. */
bool local_image_shared(const struct local_backend *lb, json_t *image);
/* What the record keeps of the image: image_digest, image_reference, image_layers, image_config. */
void local_image_record(json_t *record, json_t *image, bool shared_mapping);
/* The fixed mapping of that fallback (root mode, a store that cannot be idmapped). */
const struct local_identity *local_image_shared_identity(void);
/* The image config into the agent's config: env (the spec's env wins over the image's), workdir. */
void local_image_agent_config(json_t *cfg, json_t *image, json_t *spec_env);
/* The image's User as ids inside the sandbox (0/0: root); names come from the image's files. */
void local_image_user(json_t *image, uint32_t *uid, uint32_t *gid);
/* The record and agent config create computes for spec (shared with the pool's take). */
int local_spec_limits(const struct sandbox_spec *spec, struct cg_limits *lim, uint64_t *disk,
                      struct mcp_error *err);
json_t *local_make_record(const struct sandbox_spec *spec, const struct cg_limits *lim,
                          uint64_t disk);
int64_t local_ttl_ms(int64_t seconds);
/* {memory, pids, cpu, disk: how each limit is enforced (absent: it is not), pause, cgroups}. */
json_t *local_enforced_json(const struct cg_host *h);
int64_t local_idle_s(const struct sandbox_spec *spec);

/* local_pool.c */
/* 1: taken (cb called later), 0: not from the pool (spec not pooled, pool empty), -1: err. */
int local_pool_take(struct local_backend *lb, const struct sandbox_spec *spec, backend_cb *cb,
                    void *arg, struct mcp_error *err);
void local_pool_refill(struct local_backend *lb);
void local_pool_after_exec(struct local_backend *lb); /* a command finished: refill now */
void local_pool_filled(struct local_backend *lb, struct lsbx *sb);
void local_pool_fill_failed(struct local_backend *lb, const struct mcp_error *e);
void local_pool_forget(struct lsbx *sb);  /* a pooled sandbox ended (its TTL, a kill) */
void local_pool_drain(struct local_backend *lb); /* shutdown: destroy every untaken one */
/* local_backend.c: SIGKILL a sandbox this process watches and clean up at once (synchronous). */
void local_kill_now(struct lsbx *sb);

/* runtime_dir.c: the runtime directory of a state directory (same for every process on it;
 * on a tmpfs when /run or /dev/shm is one, else <state_dir>/run), created and checked. */
int local_runtime_dir(const char *state_dir, char *out, size_t size, struct mcp_error *err);
/* mkdir 0700 if missing; refuses a non-directory (symlink), another owner, mode other than 0700. */
int local_private_dir(const char *dir, struct mcp_error *err);
/* A sandbox's two directories: dir = <run_dir>/<id>, logs = <state_dir>/sandboxes/<id>. */
void local_sandbox_dirs(const struct local_backend *lb, const char *id, char dir[LOCAL_PATH_MAX],
                        char logs[LOCAL_PATH_MAX]);

/* uid_slots.c: host-wide leases of uid slices (root mode), see the file's comment. */
int local_slots_dir(char *out, size_t size, struct mcp_error *err);
/* excluded: a bitmap of slots never to lease (NULL: none). */
int local_slot_lease(const char *dir, const char *id, uint32_t max,
                     const unsigned char *excluded, uint32_t *slot, struct mcp_error *err);
/* Sets the bits of slots whose slice overlaps a subordinate range in /etc/subuid or subgid. */
void local_slots_excluded(unsigned char *bits, uint32_t max);
void local_slot_note_init(const char *dir, uint32_t slot, const char *id, pid_t init,
                          uint64_t start);
void local_slot_unlease(const char *dir, uint32_t slot, const char *id);
/* Removes the leases of sandboxes that are gone; returns how many (-1: the lock failed). */
int local_slots_sweep(const char *dir);
/* local_backend.c: the host-wide lease of a slot for a new sandbox (always 0 without slices;
 * the create records it in the store with the sandbox's record), and the release of both. */
int local_lease_slot(struct local_backend *lb, const char *id, uint32_t *slot,
                     struct mcp_error *err);
void local_release_slot(struct local_backend *lb, const char *id);

/* Removes a dead sandbox's leftovers: cgroups, directories, uid slot (not the record). */
void local_release_resources(struct local_backend *lb, const char *id, const char *dir,
                             const struct cg_sandbox *cg);
/* SIGKILLs a sandbox init identified by pid + start time and waits (briefly) for it to go. */
void local_kill_init(pid_t pid, uint64_t start);
/* The init of a sandbox from its record, or (a create that died before recording it) from
 * <dir>/init; 0 if neither knows one. */
pid_t local_init_of(const char *dir, json_t *record, uint64_t *start);

#endif
