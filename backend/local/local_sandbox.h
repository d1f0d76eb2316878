/* The backend's own state: the sandboxes it manages and their lifecycle (local_backend.c,
 * local_ops.c, local_exec.c and their neighbours). Internal to the local backend. */
#ifndef MCPBOX_LOCAL_SANDBOX_H
#define MCPBOX_LOCAL_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "backend/backend.h"
#include "backend/egress_policy.h"
#include "backend/local/identity.h"
#include "lib/base/error.h"
#include "lib/store/store.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_mounts.h"
#include "backend/local/local_seccomp.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"

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
int local_spawner_take(struct local_spawner *s, char *id, struct cg_sandbox *cg, uint32_t *uid_slot,
                       bool *dirs_made);
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
    int pool_size;            /* the target; 0 = off */
    bool apply_unreviewed;    /* local_options.apply_unreviewed */
    uint64_t apply_max_bytes; /* local_options.apply_max_bytes */
    int64_t pool_ttl_s;       /* LOCAL_POOL_TTL_S (MCPBOX_LOCAL_POOL_TTL: tests) */
    uint64_t pool_idle_ms;    /* LOCAL_POOL_REFILL_IDLE_MS (MCPBOX_LOCAL_POOL_IDLE_MS: tests) */
    int pool_filling;         /* pooled creates in flight */
    bool pool_started;        /* from the second create on */
    bool closing;             /* shutdown: no more refills */
    struct lsbx *pool;        /* ready, untaken (linked by pool_next) */
    uv_timer_t *pool_timer;   /* the deferred refill (own allocation: closed at free) */
    uint64_t last_create_ms;  /* monotonic: when the last create began */
    struct cg_host cg;
    struct local_spawner *spawner; /* NULL unless hybrid; started by the first create */
    bool spawner_tried;
    unsigned creates; /* the spawner starts at the second one */
    struct local_seccomp seccomp;
    int agent_fd; /* sealed memfd of the agent binary */
    char state_dir[LOCAL_PATH_MAX];
    struct image_service *images; /* OCI images: made on the first create that names one */
    bool image_shared_mapping;    /* root, store not idmappable: image sandboxes share a mapping */
    struct {
        dev_t dev;
        bool ok;
    } idmap_seen[8]; /* local_image_dir_idmappable's answers, per filesystem */
    size_t n_idmap_seen;
    char run_dir[LOCAL_PATH_MAX];        /* runtime_dir.c: per-sandbox files that need no disk */
    char root_templates[LOCAL_PATH_MAX]; /* beside run_dir: shared by all state directories */
    struct local_identity ident;         /* which host ids its sandboxes get (identity.h) */
    struct local_allow allow;            /* host directories mounts may come from (workspace.c) */
    char slots_dir[LOCAL_PATH_MAX];      /* host-wide uid slot leases (LOCAL_ID_SLICES only) */
    unsigned char slots_excluded[LOCAL_MAX_SLOTS / 8 + 1]; /* slices of users' subordinate ids */
    struct lsbx *sandboxes;                                /* live sandboxes this process watches */
    uv_timer_t timer;                                      /* paused sandboxes' TTL */
    struct local_volume_guard *volume_guard; /* as a user: volume limits (volume_guard.c) */
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
    uv_poll_t oom_poll; /* v1: eventfd from cgroup.event_control; v2: memory.events */
    int oom_fd;
    uint64_t oom_seen;
    bool watching, oom_watching, gone, in_list;
    struct cg_sandbox cg;
    struct agent_conn *conn;
    struct destroy_op *destroying;
    struct fwd *forwards;        /* host-side TCP forwarders (forward.c) */
    struct local_egress *egress; /* egress by policy: its proxy, or NULL */
    uint64_t touched_ms;         /* last store_sandbox_touch (monotonic) */
    /* egress by policy (local_egress.c): the policy in force, parsed from the record's JSON,
     * re-read every LOCAL_EGRESS_RELOAD_MS; read it with local_egress_policy() */
    struct egress_policy *policy;
    json_t *policy_json;
    uint64_t policy_checked_ms; /* monotonic; 0: never read */
    json_t *secrets_json;       /* the record's "secrets" (names bound), read with the policy */
    bool pooled;                /* ready in the pool, not given to anyone yet */
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

#endif
