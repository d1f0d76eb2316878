/* Egress by policy: the proxy of one sandbox (egress_proxy.c), the policy, its changes and refused
 * connections (local_egress.c). Internal to the local backend. */
#ifndef MCPBOX_LOCAL_EGRESS_H
#define MCPBOX_LOCAL_EGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "backend/egress_policy.h"
#include "backend/local/identity.h"
#include "lib/base/error.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_sandbox.h"

/* ---- egress by policy (egress_proxy.c): the proxy and DNS server of one sandbox ---- */
struct local_egress;
struct lsbx;
/* Takes the agent's egress sockets and serves them on the loop (sb->egress). Each connection
 * and DNS answer follows local_egress_policy(sb) (local_egress.c): a change applies to the next
 * one; open connections are left alone. */
int local_egress_start(struct lsbx *sb, struct mcp_error *err);
void local_egress_stop(struct local_egress *eg); /* NULL-safe */

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
/* The names of the secrets bound to sb (the record's "secrets", re-read with the policy),
 * borrowed like the policy; NULL: none. */
json_t *local_egress_secrets(struct lsbx *sb);
/* diagnose_sandbox's secrets_used: {name: {host: {count, last_time}}} of this process's proxy
 * since it started serving sb (no values), or NULL when none was used. New reference. */
json_t *local_egress_secrets_used(struct lsbx *sb);
/* create: 0 when spec has no policy or this host can enforce it, else -1 with err. */
int local_egress_check(struct local_backend *lb, const struct sandbox_spec *spec,
                       struct mcp_error *err);
int local_set_network_policy(struct backend *be, const char *id, const struct egress_policy *policy,
                             backend_cb *cb, void *arg, struct mcp_error *err);

/* One refused outbound connection, UDP datagram or DNS lookup, as the enforcement saw it. A
 * lookup the policy refuses (no port of the name could be allowed) is protocol "dns", port 0,
 * reason "policy" with decision = egress_policy_decide_lookup(policy, name); it is usually the
 * only trace a refused name leaves, since the program never connects. */
struct egress_refusal {
    const char *name;    /* SNI, Host or DNS name it asked for; NULL/"": it named none */
    const char *address; /* the address it went to or the name resolved to, or NULL */
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
int local_command_kill(struct backend *be, const char *id, const char *cmd, int sig, backend_cb *cb,
                       void *arg, struct mcp_error *err);
int local_command_input(struct backend *be, const char *id, const char *cmd, const void *data,
                        size_t len, bool eof, backend_cb *cb, void *arg, struct mcp_error *err);
int local_command_resize(struct backend *be, const char *id, const char *cmd, unsigned rows,
                         unsigned cols, backend_cb *cb, void *arg, struct mcp_error *err);
int local_command_attach(struct backend *be, const char *id, const char *cmd, uint64_t offset,
                         const struct exec_observer *obs, struct exec_handle **out,
                         struct mcp_error *err);
int local_command_find(struct backend *be, const char *id, const char *label, backend_cb *cb,
                       void *arg, struct mcp_error *err);
int local_file_read(struct backend *be, const char *id, const char *path, uint64_t offset,
                    uint64_t length, backend_read_cb *cb, void *arg, struct mcp_error *err);
int local_file_write(struct backend *be, const char *id, const char *path, const void *data,
                     size_t len, uint32_t mode, bool append, backend_cb *cb, void *arg,
                     struct mcp_error *err);
int local_file_op(struct backend *be, const char *id, const char *op, json_t *args, backend_cb *cb,
                  void *arg, struct mcp_error *err);
int local_list(struct backend *be, const char *owner, json_t *filter, backend_cb *cb, void *arg,
               struct mcp_error *err);
int local_get(struct backend *be, const char *id, backend_cb *cb, void *arg, struct mcp_error *err);
int local_renew(struct backend *be, const char *id, int64_t timeout_seconds, backend_cb *cb,
                void *arg, struct mcp_error *err);
int local_pause(struct backend *be, const char *id, backend_cb *cb, void *arg,
                struct mcp_error *err);
int local_resume(struct backend *be, const char *id, backend_cb *cb, void *arg,
                 struct mcp_error *err);
int local_endpoint(struct backend *be, const char *id, int port, backend_cb *cb, void *arg,
                   struct mcp_error *err);
int local_diagnose(struct backend *be, const char *id, const char *what, backend_cb *cb, void *arg,
                   struct mcp_error *err);
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
int local_image_import(struct local_backend *lb, const struct sandbox_spec *spec, const char *dir,
                       local_image_ready_fn *ready, backend_cb *cb, void *arg,
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
void local_pool_forget(struct lsbx *sb);         /* a pooled sandbox ended (its TTL, a kill) */
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
int local_slot_lease(const char *dir, const char *id, uint32_t max, const unsigned char *excluded,
                     uint32_t *slot, struct mcp_error *err);
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
