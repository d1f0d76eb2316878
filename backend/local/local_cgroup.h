/* cgroups (cgroup.c). Internal to the local backend. */
#ifndef MCPBOX_LOCAL_CGROUP_H
#define MCPBOX_LOCAL_CGROUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/base/error.h"
#include "backend/local/local_limits.h"

/* ---- cgroups (cgroup.c): one interface over hybrid (v1 limits + v2 core) and pure v2 ---- */
enum cg_layout { CG_NONE, CG_HYBRID, CG_V2 };

struct cg_host {
    enum cg_layout layout;
    char v2_base[LOCAL_PATH_MAX];  /* our parent cgroup in the v2 hierarchy */
    char mem_base[LOCAL_PATH_MAX]; /* hybrid: v1 parents */
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

#endif
