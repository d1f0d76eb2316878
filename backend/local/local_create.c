/* create and destroy.
 *
 * create: record (state "creating") -> uid slot -> directory, cgroups -> clone3 (into the v2
 * cgroup where the kernel allows it) -> uid/gid maps -> the child builds its root and execs the
 * agent while, on hybrid hosts, a worker thread attaches it to the v1 cgroups (an RCU grace
 * period per write: kept off the loop and overlapped with the child's setup) -> "running".
 * A crash at any point leaves a record the next reconcile cleans up. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "backend/local/pasta_path.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_mounts.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"
#include "backend/local/snapshot_inline.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "backend/local/snapshot.h"
#include "backend/local/local_secrets.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define CREATE_ERRMSG_MAX 400

struct create_op {
    struct lsbx *sb;
    backend_cb *cb;
    void *arg;
    uv_poll_t err_poll;
    uv_work_t work;
    int err_fd;
    bool exec_done, attach_done, attach_needed_v2;
    struct mcp_error attach_err;
    int attach_rc;
    char msg[CREATE_ERRMSG_MAX];
    size_t msg_len;
    uint64_t started_ms;
    uint64_t exec_ms, attach_ms; /* when the agent was exec'd / the v1 attach finished */
    int pool_slot;               /* a spawner thread's prepared cgroups, or -1 */
    bool recorded;               /* the record is in the store (a failed create deletes it) */
    uint32_t prepared_uid_slot;  /* leased with the spawner's set, or LOCAL_NO_SLOT */
    bool prepared_dirs;          /* the spawner's set came with its directories made */
    bool slot_leased;            /* a uid slot lease is ours (the record then names it) */
    bool v1_attached;            /* cloned by that thread: already in the v1 cgroups */
    bool shared_memory;          /* cloned in mcpbox's memory (clone_shared.c) */
    bool root_template;          /* its root is a root template (root_template.h) */
    bool root_tree;              /* ... attached as a tree made ahead (root_tree.c) */
    int release_fd;              /* network or hold: the child waits until released */
    bool release_broken;         /* ... but it had already given up (its message says why) */
    struct image_trees trees;    /* ... and then gets the image's layers (root mode) */
    bool network;                /* pasta starts before the release */
    /* Egress by policy (egress_proxy.c): nft writes the netns's rules before the release, and
     * the proxy starts before the reply. */
    bool egress;
    /* A pooled create (the pool's refill): spawned in a worker thread, never replied to. */
    bool pooled;
    struct spawn_request req;
    struct spawn_result res;
    struct store_sandbox rec;    /* record json owned until the spawn is recorded */
    uint32_t slot;
    char *agent_cfg;
    /* create_sandbox's answer, made from the record while the child builds its root: once the
     * agent runs, only the state's write is left before the reply. */
    json_t *reply;
};

int64_t local_ttl_ms(int64_t seconds)
{
    if (seconds < 0)
        return 0;
    return now_wall_ms() + duration_ms(seconds == 0 ? LOCAL_DEFAULT_TTL_S : seconds);
}

int64_t local_idle_s(const struct sandbox_spec *spec)
{
    int64_t s = spec->idle_timeout_seconds;
    return s < 0 ? 0 : s == 0 ? LOCAL_DEFAULT_IDLE_S : s > MAX_DURATION_S ? MAX_DURATION_S : s;
}

int local_spec_limits(const struct sandbox_spec *spec, struct cg_limits *lim, uint64_t *disk,
                      struct mcp_error *err)
{
    lim->memory_bytes = spec->memory_bytes ? spec->memory_bytes : LOCAL_DEFAULT_MEMORY;
    lim->pids = spec->pids ? spec->pids : LOCAL_DEFAULT_PIDS;
    lim->cpu = spec->cpu > 0 ? spec->cpu : LOCAL_DEFAULT_CPU;
    *disk = spec->disk_bytes ? spec->disk_bytes : LOCAL_DEFAULT_DISK;
    if (*disk > lim->memory_bytes / 2 && spec->disk_bytes == 0)
        *disk = lim->memory_bytes / 2;
    if (lim->memory_bytes < LOCAL_MIN_MEMORY)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "memory must be at least %llu bytes",
                             (unsigned long long)LOCAL_MIN_MEMORY);
    if (*disk < LOCAL_MIN_DISK)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "disk must be at least %llu bytes",
                             (unsigned long long)LOCAL_MIN_DISK);
    if (*disk >= lim->memory_bytes)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "disk (%llu bytes) must be below memory (%llu bytes): the local "
                             "backend's writable space is RAM-backed and counts against memory",
                             (unsigned long long)*disk, (unsigned long long)lim->memory_bytes);
    if (lim->pids < LOCAL_MIN_PIDS)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "pids must be at least %u (the sandbox's agent, a command's shell "
                             "and a small pipeline need that many); leave pids out for the "
                             "default %u", LOCAL_MIN_PIDS, LOCAL_DEFAULT_PIDS);
    if (lim->cpu > 1024 || lim->pids > 1u << 22)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "cpu or pids out of range");
    if (backend_check_env(spec->env, "env", err) < 0)
        return -1;
    size_t json_len = spec->env ? json_dumpb(spec->env, NULL, 0, JSON_COMPACT) : 0;
    if (json_len > LOCAL_ENV_JSON_MAX)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "env is %zu bytes as JSON; the local backend hands it to the "
                             "sandbox's agent in one environment string, which Linux caps at "
                             "131072 bytes (MAX_ARG_STRLEN): keep env under %d bytes and write "
                             "larger values to files (write_file), read from there",
                             json_len, LOCAL_ENV_JSON_MAX);
    return 0;
}

static bool image_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > LOCAL_IMAGE_NAME_MAX || name[0] == '.' || name[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", name[i]))
            return false;
    return true;
}

/* What a sandbox's root is made of: nothing (image "host"), a registered rootfs directory,
 * or the layers of an OCI image (local_image.c). */
struct create_image {
    const char *dirs[LOCAL_MAX_IMAGE_LAYERS]; /* bottom first */
    size_t n;
    char registered[LOCAL_PATH_MAX];
    json_t *oci; /* the image record (image.h), borrowed; NULL unless OCI */
    uint32_t run_uid, run_gid; /* the image's User */
    bool shared_mapping;       /* root mode, store not idmappable (local_image.c) */
    struct local_ws ws;        /* host directories to mount (workspace.c) */
    uint32_t person_id;        /* a user's writable mounts: the user's own id inside */
};

/* 0: "host" or a rootfs registered as <state_dir>/images/<name> (img filled); 1: a name to
 * resolve as an OCI reference; 2: a registered rootfs to copy into the image store first (root
 * mode, its filesystem cannot be idmapped: local_image_import); -1: neither. */
static int resolve_image(struct local_backend *lb, const char *name, struct create_image *img,
                         struct mcp_error *err)
{
    memset(img, 0, sizeof *img);
    if (name == NULL || strcmp(name, "host") == 0)
        return 0;
    struct stat st;
    snprintf(img->registered, sizeof img->registered, "%s/images/%s", lb->state_dir, name);
    if (image_name_ok(name) && stat(img->registered, &st) == 0 && S_ISDIR(st.st_mode)) {
        img->dirs[0] = img->registered;
        img->n = 1;
        return lb->ident.mode == LOCAL_ID_SLICES && !local_image_dir_idmappable(lb, img->registered)
                   ? 2
                   : 0;
    }
    if (local_image_reference_ok(name))
        return 1;
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                         "image '%s' is neither an image reference (like python:3.12-slim or "
                         "registry:5000/name:tag) nor a root filesystem directory registered as "
                         "%s/images/<name>; use \"host\" or one of those",
                         name, lb->state_dir);
}

json_t *local_make_record(const struct sandbox_spec *spec, const struct cg_limits *lim,
                          uint64_t disk)
{
    json_t *meta = json_is_object(spec->metadata) ? json_deep_copy(spec->metadata) : json_object();
    json_t *env = json_is_object(spec->env) ? json_deep_copy(spec->env) : json_object();
    json_t *rec = json_pack("{s:s, s:{s:f, s:I, s:I, s:I}, s:b, s:o, s:o, s:i, s:I}", "image",
                            spec->image ? spec->image : "host", "limits", "cpu", lim->cpu,
                            "memory_bytes", (json_int_t)lim->memory_bytes, "pids",
                            (json_int_t)lim->pids, "disk_bytes", (json_int_t)disk, "network",
                            spec->network || spec->network_policy != NULL, "metadata", meta,
                            "env", env, "creator_pid", (int)getpid(), "creator_start",
                            (json_int_t)local_self_starttime());
    if (spec->network_policy != NULL) /* what local_egress_policy() reads */
        json_object_set_new(rec, "network_policy", egress_policy_to_json(spec->network_policy));
    if (json_array_size(spec->secrets) > 0) /* names only: the proxy reads the definitions */
        json_object_set(rec, "secrets", spec->secrets);
    if (spec->credential_proxy) /* its credential vault may be used (local_vault.c) */
        json_object_set_new(rec, "credential_proxy", json_true());
    return rec;
}

static void create_fail(struct create_op *op, const struct mcp_error *e);
static void create_maybe_done(struct create_op *op);

static void err_poll_closed(uv_handle_t *h)
{
    struct create_op *op = h->data;
    close(op->err_fd);
    op->err_fd = -1;
    create_maybe_done(op);
}

static void on_err_pipe(uv_poll_t *p, int status, int events)
{
    struct create_op *op = p->data;
    ssize_t n = read(op->err_fd, op->msg + op->msg_len, sizeof op->msg - 1 - op->msg_len);
    if (n > 0) {
        op->msg_len += (size_t)n;
        if (op->msg_len < sizeof op->msg - 1)
            return;
    } else if (n < 0 && errno == EAGAIN) {
        return;
    }
    op->msg[op->msg_len] = '\0';
    op->exec_done = true;
    op->exec_ms = now_mono_ms();
    uv_close((uv_handle_t *)p, err_poll_closed);
}

/* In a worker thread: the v1 attach (an RCU grace period per write) and, for network
 * sandboxes, pasta's start-up; then the child may go on. */
static void attach_work(uv_work_t *w)
{
    struct create_op *op = w->data;
    op->attach_rc = op->v1_attached ? 0 : cg_attach_v1(&op->sb->cg, op->sb->pid, &op->attach_err);
    if (op->attach_rc == 0 && op->attach_needed_v2)
        op->attach_rc = cg_attach_v2(&op->sb->cg, op->sb->pid, &op->attach_err);
    if (op->release_fd < 0)
        return;
    if (op->attach_rc == 0 && op->network)
        op->attach_rc = local_start_network(op->sb->dir, op->sb->pid, &op->sb->cg, &op->attach_err);
    if (op->attach_rc == 0 && op->egress)
        op->attach_rc = local_egress_rules(op->sb->pid, &op->attach_err);
    if (op->attach_rc == 0 && local_spawn_release(op->release_fd, &op->trees) < 0) {
        op->release_broken = errno == EPIPE;
        op->attach_rc = mcp_error_set(&op->attach_err, MCP_ERR_IO, errno,
                                      "releasing the sandbox init failed");
    } else if (op->attach_rc < 0) { /* the child sees EOF and gives up */
        close(op->release_fd);
        local_image_trees_close(&op->trees);
    }
    op->release_fd = -1;
}

static void attach_after(uv_work_t *w, int status)
{
    struct create_op *op = w->data;
    op->attach_done = true;
    op->attach_ms = now_mono_ms();
    create_maybe_done(op);
}

/* Connects to the agent while the caller reads the reply, so that the first command does not
 * pay for the connection: mcpbox made the socket listen before the clone, so the connection
 * waits in its backlog until the agent, idle until then, accepts it. A failure is left for
 * the first call to report (lsbx_conn tries again). */
static void connect_agent_ahead(struct lsbx *sb)
{
    struct mcp_error ignored;
    (void)lsbx_conn(sb, &ignored);
}

/* A pooled create is done: the sandbox waits, watched, in the pool (state still "pooled"). */
static void pooled_finish(struct create_op *op)
{
    struct lsbx *sb = op->sb;
    struct local_backend *lb = sb->be;
    struct mcp_error err;
    local_event(lb->base.store, sb->id, "pooled",
                json_pack("{s:i, s:I}", "init_pid", (int)sb->pid, "create_ms",
                          (json_int_t)(now_mono_ms() - op->started_ms)), &err);
    sb->pooled = true;
    sb->next = lb->sandboxes;
    lb->sandboxes = sb;
    sb->in_list = true;
    local_watch_exit(sb);
    connect_agent_ahead(sb);
    free(op);
    local_pool_filled(lb, sb);
}

static void create_finish(struct create_op *op)
{
    struct lsbx *sb = op->sb;
    struct local_backend *lb = sb->be;
    struct mcp_error err;
    if (op->pooled) {
        pooled_finish(op);
        return;
    }
    if ((op->egress && local_egress_start(sb, &err) < 0) ||
        store_sandbox_set_state(lb->base.store, sb->id, "running", &err) < 0) {
        create_fail(op, &err);
        return;
    }
    sb->next = lb->sandboxes;
    lb->sandboxes = sb;
    sb->in_list = true;
    lsbx_ref(sb); /* the reply's receiver may destroy it at once */
    op->cb(op->arg, op->reply, NULL);
    /* After the reply (the caller need not wait for these), before the loop runs anything
     * else. A destroy made from the callback has killed the init: its exit shows here too. */
    if (!sb->gone) {
        local_watch_exit(sb);
        connect_agent_ahead(sb);
    }
    json_t *ev = json_pack("{s:i, s:I, s:I, s:I, s:s, s:b, s:s, s:s}", "init_pid", (int)sb->pid,
                           "create_ms", (json_int_t)(now_mono_ms() - op->started_ms),
                           "agent_exec_ms", (json_int_t)(op->exec_ms - op->started_ms),
                           "cgroup_attach_ms",
                           (json_int_t)(op->attach_ms ? op->attach_ms - op->started_ms : 0),
                           "cgroups", cg_layout_name(lb->cg.layout), "spawner", op->v1_attached,
                           "clone", op->shared_memory ? "shared memory" : "copy", "root",
                           op->root_tree       ? "template tree made ahead"
                           : op->root_template ? "template"
                                               : "made by the sandbox");
    local_event(lb->base.store, sb->id, "created", ev, &err);
    lsbx_unref(sb);
    json_decref(op->reply);
    free(op);
    local_pool_refill(lb); /* after the reply: off the critical path */
}

static void create_maybe_done(struct create_op *op)
{
    if (!op->exec_done || !op->attach_done || op->err_fd >= 0)
        return;
    struct mcp_error err;
    /* First a failed attach: the child then complains of a release that never came. But a
     * release that found the pipe closed (EPIPE) came too late: the child had failed on its
     * own (a damaged root template, say) and its message is the cause. */
    if (op->attach_rc < 0 && !(op->release_broken && op->msg_len > 0)) {
        create_fail(op, &op->attach_err);
    } else if (op->msg_len > 0) {
        /* A bind that fails on a template's missing mount point: a template damaged from
         * outside (they are made whole or not at all), which every later create would hit. */
        bool template_hint = op->root_template && strncmp(op->msg, "bind ", 5) == 0;
        mcp_error_set(&err, MCP_ERR_BACKEND, 0, "sandbox setup failed: %s%s%s%s", op->msg,
                      template_hint ? " (the sandbox's root is a template in " : "",
                      template_hint ? op->sb->be->root_templates : "",
                      template_hint ? ": if one there lacks that path, remove the directory; "
                                      "the next create makes a new one)"
                                    : "");
        create_fail(op, &err);
    } else {
        create_finish(op);
    }
}

/* Undo everything; the record goes, the failure stays as an event. */
static void create_fail(struct create_op *op, const struct mcp_error *e)
{
    struct lsbx *sb = op->sb;
    struct local_backend *lb = sb->be;
    struct mcp_error err;
    if (sb->pidfd >= 0) {
        syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        syscall(SYS_waitid, P_PIDFD, sb->pidfd, &si, WEXITED, NULL); /* dies at once: SIGKILL */
    }
    local_release_resources(lb, sb->id, sb->dir, &sb->cg);
    local_event(lb->base.store, sb->id, "create_failed", json_pack("{s:s}", "error", e->msg),
                    &err);
    local_record_delete(lb->base.store, sb->id);
    if (op->pooled)
        local_pool_fill_failed(lb, e);
    else
        op->cb(op->arg, NULL, e);
    local_egress_stop(sb->egress);
    sb->egress = NULL;
    lsbx_unref(sb);
    json_decref(op->reply);
    free(op);
}

static char *agent_config(const struct sandbox_spec *spec, int64_t expires_ms, int64_t idle_s,
                          const struct create_image *img)
{
    json_t *cfg = json_pack("{s:I, s:I, s:s, s:O?}", "expires_at_ms", (json_int_t)expires_ms,
                            "idle_timeout_s", (json_int_t)idle_s, "workdir", "/workspace", "env",
                            json_is_object(spec->env) ? spec->env : NULL);
    if (img->oci)
        local_image_agent_config(cfg, img->oci, spec->env);
    if (spec->network_policy) /* the agent opens the sockets nftables sends traffic to */
        json_object_set_new(cfg, "egress", json_true());
    char *text = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    return text;
}

/* The cgroup paths create will use, recorded before they exist so that reconcile can remove
 * whatever a crash left. */
static json_t *planned_cgroups(const struct local_backend *lb, const char *id)
{
    struct cg_sandbox planned;
    memset(&planned, 0, sizeof planned);
    const char *bases[] = {lb->cg.v2_base, lb->cg.mem_base, lb->cg.pids_base, lb->cg.cpu_base,
                           lb->cg.freezer_base};
    char *paths[] = {planned.v2, planned.mem, planned.pids, planned.cpu, planned.freezer};
    for (size_t i = 0; i < 5; i++)
        if (bases[i][0] && (i == 0 || lb->cg.layout == CG_HYBRID))
            snprintf(paths[i], LOCAL_PATH_MAX, "%s/%s", bases[i], id);
    return cg_to_json(&planned);
}

/* A rootless server may not move a process of another uid into v1 cgroups: the child is held
 * until a worker has attached it, while it still runs as the user (unless a spawner thread
 * clones it straight into them). */
static bool hold_for_v1(const struct local_backend *lb, const struct cg_sandbox *cg)
{
    return lb->ident.mode != LOCAL_ID_SLICES &&
           (cg->mem[0] || cg->pids[0] || cg->cpu[0] || cg->freezer[0]);
}

/* The record and its uid slot, in one transaction: one commit (WAL frames and locks) less on
 * the critical path of every create. */
static int insert_record(struct local_backend *lb, const struct store_sandbox *rec,
                         uint32_t slot, struct mcp_error *err)
{
    if (lb->ident.mode != LOCAL_ID_SLICES)
        return store_sandbox_insert(lb->base.store, rec, err);
    return store_sandbox_insert_with_slot(lb->base.store, rec, slot, err);
}

static const char *root_templates(const struct local_backend *lb)
{
    return lb->root_templates[0] ? lb->root_templates : NULL;
}

/* The agent's config (new string), and the egress CA for a sandbox whose egress passes the
 * proxy (local_secrets.c: the CA the sandbox trusts for its secrets). */
static void child_config(struct local_backend *lb, const struct sandbox_spec *spec,
                         const struct store_sandbox *rec, const struct create_image *img,
                         struct spawn_request *req)
{
    char *cfg = agent_config(spec, rec->expires_at_ms, rec->idle_timeout_s, img);
    req->agent_config = local_secrets_agent_config(lb, spec, cfg);
    req->egress_ca = local_secrets_ca(lb, spec); /* host root and image bundles (spawn.c) */
}

static int spawn_child(struct create_op *op, const struct sandbox_spec *spec,
                       const struct cg_limits *lim, uint64_t disk, const struct create_image *img,
                       const struct store_sandbox *rec, struct spawn_result *res,
                       struct mcp_error *err)
{
    struct lsbx *sb = op->sb;
    struct local_backend *lb = sb->be;
    struct spawn_request req = {.id = sb->id,
                                .dir = sb->dir,
                                .logs_dir = sb->logs_dir,
                                .ident = &lb->ident,
                                .slot = op->slot,
                                .disk_bytes = disk,
                                .memory_bytes = lim->memory_bytes,
                                .pids = lim->pids,
                                .network = spec->network,
                                .egress = spec->network_policy != NULL,
                                .agent_exe_fd = lb->agent_fd,
                                .image_dirs = img->dirs,
                                .n_image_dirs = img->n,
                                .run_uid = img->run_uid,
                                .run_gid = img->run_gid,
                                .seccomp = &lb->seccomp,
                                .cg = &sb->cg,
                                .root_templates = root_templates(lb),
                                .ws = &img->ws,
                                .person_id = img->person_id};
    int rc;
    req.hold = op->pool_slot < 0 && hold_for_v1(lb, &sb->cg);
    if (img->shared_mapping) /* the layers' files carry that mapping's ids: no idmap */
        req.ident = local_image_shared_identity(), req.slot = 0, req.bind_image = true;
    req.pids_by_rlimit = !lb->cg.lim_pids;
    if ((req.restore = spec->local_restore) != NULL) /* its setup writes the files */
        spec->local_restore->handed = true;
    child_config(lb, spec, rec, img, &req);
    if (op->pool_slot >= 0) {
        struct mcp_error spawn_err;
        local_spawner_post(lb->spawner, op->pool_slot, &req, res);
        /* The record is written while the thread clones (it releases the child only then). */
        int written = insert_record(lb, rec, op->slot, err);
        op->recorded = written == 0;
        local_spawner_record_done(lb->spawner, op->pool_slot, written == 0);
        rc = local_spawner_wait(lb->spawner, op->pool_slot, &spawn_err);
        if (written < 0)
            rc = -1; /* err says why; the thread killed the child */
        else if (rc < 0)
            mcp_error_copy(err, &spawn_err);
        op->pool_slot = -1;
        op->v1_attached = true;
    } else {
        rc = local_spawn(&req, res, err);
    }
    free((char *)req.agent_config);
    if (res->pidfd >= 0)
        sb->pidfd = res->pidfd, sb->pid = res->pid;
    op->err_fd = res->err_fd;
    op->release_fd = res->release_fd, op->trees = res->trees;
    op->network = spec->network;
    op->attach_needed_v2 = !res->in_cgroup_v2;
    op->shared_memory = res->shared_memory;
    op->root_template = res->root_template;
    op->root_tree = res->root_tree;
    return rc;
}

/* img: NULL for a pooled sandbox (the default spec: root, no mounts). */
static void record_started(struct local_backend *lb, const char *id, json_t *r,
                           const struct spawn_result *res, uint32_t slot,
                           const struct cg_sandbox *cg, const struct create_image *img)
{
    uint64_t start = res->start;
    json_object_set_new(r, "init_pid", json_integer(res->pid));
    json_object_set_new(r, "init_start", json_integer((json_int_t)start));
    json_object_set_new(r, "slot", json_integer(slot));
    json_object_set_new(r, "uid_base", json_integer(local_identity_root_uid(&lb->ident, slot)));
    json_object_set_new(
        r, "identity",
        img ? local_identity_json(&lb->ident, slot, img->person_id, img->run_uid, img->run_gid)
            : local_identity_json(&lb->ident, slot, 0, 0, 0)); /* pooled */
    json_object_set_new(r, "cgroups", cg_to_json(cg));
    if (lb->ident.mode == LOCAL_ID_SLICES)
        local_slot_note_init(lb->slots_dir, slot, id, res->pid, start);
}

json_t *local_enforced_json(const struct cg_host *h)
{
    return json_pack("{s:s?, s:s, s:s?, s:s, s:b, s:s}", "memory",
                     h->lim_memory ? "cgroup" : NULL, "pids",
                     h->lim_pids ? "cgroup" : "RLIMIT_NPROC", "cpu", h->lim_cpu ? "cgroup" : NULL,
                     "disk", "tmpfs size", "pause", h->can_freeze, "cgroups",
                     h->note[0] ? h->note : cg_layout_name(h->layout));
}

/* <run_dir>/<id>. The runtime directory itself is removed when the last process on the state
 * directory exits with no sandbox left: another process may have just done so. */
static int make_sandbox_dir(struct local_backend *lb, const char *dir, struct mcp_error *err)
{
    if (mkdir(dir, 0700) == 0 || errno == EEXIST) /* EEXIST: a spawner made it (spawner.c) */
        return 0;
    if (errno != ENOENT)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", dir);
    if (local_runtime_dir(lb->state_dir, lb->run_dir, sizeof lb->run_dir, err) < 0)
        return -1; /* both levels again (same path: it is derived from the state directory) */
    if (mkdir(dir, 0700) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", dir);
    return 0;
}


/* Slot lease and record first (so a crash from here on is found by reconcile), then
 * directory and cgroups. rec->record stays the caller's. */
static int start_record(struct create_op *op, const struct sandbox_spec *spec,
                        const struct cg_limits *lim, uint64_t disk, json_t *oci,
                        struct local_ws *ws, struct store_sandbox *rec, struct mcp_error *err)
{
    struct lsbx *sb = op->sb;
    struct local_backend *lb = sb->be;
    *rec = (struct store_sandbox){.id = sb->id, .backend = (char *)"local",
                                  .owner = (char *)(spec->owner ? spec->owner : ""),
                                  .state = (char *)(op->pooled ? LOCAL_POOL_STATE : "creating"),
                                  .created_at_ms = now_wall_ms(),
                                  .expires_at_ms = local_ttl_ms(spec->timeout_seconds),
                                  .idle_timeout_s = local_idle_s(spec),
                                  .last_active_ms = now_wall_ms(),
                                  .record = local_make_record(spec, lim, disk)};
    local_sandbox_dirs(lb, sb->id, sb->dir, sb->logs_dir);
    json_object_set_new(rec->record, "cgroups", planned_cgroups(lb, sb->id));
    json_object_set_new(rec->record, "enforced", local_enforced_json(&lb->cg));
    if (oci)
        local_image_record(rec->record, oci, local_image_shared(lb, oci));
    if (ws && ws->n > 0)
        json_object_set_new(rec->record, "mounts", local_ws_json(ws, false));
    /* The lease before the record: a crash between the two leaves a lease whose creator is
     * dead, which the sweep removes (uid_slots.c). A spawner's create writes the record while
     * the thread clones (spawn_child). */
    int rc = 0;
    if (op->prepared_uid_slot != LOCAL_NO_SLOT) /* leased with the spawner's set */
        op->slot = op->prepared_uid_slot;
    else
        rc = local_lease_slot(lb, sb->id, &op->slot, err);
    if (rc < 0)
        return -1;
    op->slot_leased = lb->ident.mode == LOCAL_ID_SLICES;
    if (op->pool_slot < 0) {
        if (insert_record(lb, rec, op->slot, err) < 0)
            return -1;
        op->recorded = true;
    }
    if (rc == 0 && !op->prepared_dirs) /* its mkdir failing with EEXIST cost 15-25 us */
        rc = make_sandbox_dir(lb, sb->dir, err);
    if (rc == 0 && ws && ws->n > 0) /* the overlay's layers belong to the sandbox's root */
        rc = local_ws_prepare(lb->state_dir, sb->id, ws,
                              local_identity_root_uid(&lb->ident, op->slot),
                              local_identity_root_gid(&lb->ident, op->slot), err);
    if (rc == 0)
        rc = op->pool_slot < 0 ? cg_create(&lb->cg, sb->id, lim, &sb->cg, err)
             /* a prepared set holds the default spec's limits already (four cgroup writes,
              * 80 us, saved on the critical path of most creates); if another process's sweep
              * removed its empty v2 cgroup, the spawn makes it again (local_spawn) */
             : local_spawner_has_limits(lim) ? 0 : cg_set_limits(&sb->cg, lim, err);
    return rc;
}

static int start(struct create_op *op, const struct sandbox_spec *spec, const struct cg_limits *lim,
                 uint64_t disk, const struct create_image *img, struct mcp_error *err)
{
    struct store_sandbox rec;
    struct spawn_result res;
    int rc = start_record(op, spec, lim, disk, img->oci, (struct local_ws *)&img->ws, &rec, err);
    if (rc == 0)
        rc = spawn_child(op, spec, lim, disk, img, &rec, &res, err);
    if (rc == 0) {
        record_started(op->sb->be, op->sb->id, rec.record, &res, op->slot, &op->sb->cg, img);
        if (img->shared_mapping) {
            const struct local_identity *shared = local_image_shared_identity();
            json_object_set_new(rec.record, "uid_base", json_integer(shared->uid_base));
            json_object_set_new(rec.record, "identity",
                                local_identity_json(shared, 0, 0, img->run_uid, img->run_gid));
        }
        rc = store_sandbox_update(op->sb->be->base.store, &rec, err);
    }
    if (rc == 0 && !op->pooled) {
        rec.state = (char *)"running"; /* what it is when the reply goes */
        op->reply = local_info(&rec);
    }
    json_decref(rec.record);
    return rc;
}

static int watch_startup(struct create_op *op, struct mcp_error *err)
{
    struct local_backend *lb = op->sb->be;
    fcntl(op->err_fd, F_SETFL, O_NONBLOCK);
    /* Its only failures (epoll refusing the fd: ENOMEM, ENOSPC for max_user_watches) leave
     * nothing registered, so the create can still be undone at once. Once initialized, start
     * and queue_work fail only on arguments that are always valid here. */
    int rc = uv_poll_init(lb->base.loop, &op->err_poll, op->err_fd);
    if (rc < 0)
        return mcp_error_set(err, MCP_ERR_INTERNAL, -rc, "cannot watch the sandbox init's start: "
                             "%s (retry; if it persists, see `mcpbox doctor`)", uv_strerror(rc));
    op->err_poll.data = op;
    uv_poll_start(&op->err_poll, UV_READABLE | UV_DISCONNECT, on_err_pipe);
    bool v1 = !op->v1_attached &&
              (op->sb->cg.mem[0] || op->sb->cg.pids[0] || op->sb->cg.cpu[0] || op->sb->cg.freezer[0]);
    if (!v1 && !(op->attach_needed_v2 && op->sb->cg.v2[0]) && op->release_fd < 0) {
        op->attach_done = true;
        return 0;
    }
    op->work.data = op;
    return uv_queue_work(lb->base.loop, &op->work, attach_work, attach_after) < 0 ? -1 : 0;
}

static struct create_op *create_op_new(struct local_backend *lb, backend_cb *cb, void *arg)
{
    struct create_op *op = xcalloc(1, sizeof *op);
    op->started_ms = now_mono_ms();
    op->cb = cb, op->arg = arg, op->err_fd = -1, op->release_fd = -1;
    op->pool_slot = -1;
    op->prepared_uid_slot = LOCAL_NO_SLOT;
    op->sb = xcalloc(1, sizeof *op->sb);
    op->sb->be = lb, op->sb->refs = 1, op->sb->pidfd = -1, op->sb->oom_fd = -1;
    return op;
}

/* A create that failed before its startup was watched: undo what was done. */
static void create_abort(struct create_op *op)
{
    struct local_backend *lb = op->sb->be;
    if (op->pool_slot >= 0) /* failed before the spawn: the thread moves on */
        local_spawner_give_back(lb->spawner, op->pool_slot);
    if (op->err_fd >= 0)
        close(op->err_fd);
    if (op->release_fd >= 0) /* the child sees EOF and gives up */
        close(op->release_fd);
    local_image_trees_close(&op->trees);
    if (op->sb->pidfd >= 0) {
        syscall(SYS_pidfd_send_signal, op->sb->pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        syscall(SYS_waitid, P_PIDFD, op->sb->pidfd, &si, WEXITED, NULL);
    }
    local_release_resources(lb, op->sb->id, op->sb->dir, &op->sb->cg);
    if (op->recorded) /* not another's that this id ran into */
        local_record_delete(lb->base.store, op->sb->id);
    else if (op->slot_leased) /* no record names the lease: the release above did not see it */
        local_slot_unlease(lb->slots_dir, op->slot, op->sb->id);
    lsbx_unref(op->sb);
    free(op->agent_cfg);
    json_decref(op->reply);
    free(op);
}

/* The spec's host mounts against the allowlist; a user's writable mount also decides who the
 * sandbox's commands run as (identity.h: local_identity_person_id). */
static int check_mounts(struct local_backend *lb, const struct sandbox_spec *spec,
                        struct create_image *img, struct mcp_error *err)
{
    struct local_ws_check c = {.allow = &lb->allow,
                               .caller = spec->owner,
                               .roots = spec->roots,
                               .state_dir = lb->state_dir,
                               .run_dir = lb->run_dir,
                               .store = lb->base.store};
    if (local_ws_check(&c, spec->mounts, &img->ws, err) < 0)
        return -1;
    if (local_ws_writable(&img->ws) && lb->ident.mode == LOCAL_ID_SUBID) {
        img->person_id = local_identity_person_id(&lb->ident);
        img->run_uid = img->run_gid = img->person_id;
    }
    return 0;
}

struct slot_sweep {
    uv_work_t work;
    char dir[LOCAL_PATH_MAX];
    int removed;
};

static void slot_sweep_work(uv_work_t *w)
{
    struct slot_sweep *s = w->data;
    s->removed = local_slots_sweep(s->dir);
}

static void slot_sweep_after(uv_work_t *w, int status)
{
    struct slot_sweep *s = w->data;
    (void)status;
    if (s->removed > 0)
        log_info("removed %d uid slot lease(s) of sandboxes that are gone (%s)", s->removed,
                 s->dir);
    free(s);
}

/* Once per server, with the spawner: the host-wide leases of dead sandboxes go (a directory
 * listing and a read per lease, under the leases' lock: off the loop). */
static void sweep_slots(struct local_backend *lb)
{
    struct slot_sweep *s = xcalloc(1, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", lb->slots_dir);
    s->work.data = s;
    if (uv_queue_work(lb->base.loop, &s->work, slot_sweep_work, slot_sweep_after) < 0)
        free(s);
}

/* The create proper, once the image is known. */
static int create_with_image(struct local_backend *lb, const struct sandbox_spec *spec,
                             struct create_image *img, backend_cb *cb, void *arg,
                             struct mcp_error *err)
{
    struct cg_limits lim;
    uint64_t disk;
    if (local_spec_limits(spec, &lim, &disk, err) < 0)
        return -1;
    if (check_mounts(lb, spec, img, err) < 0)
        return -1;
    struct create_op *op = create_op_new(lb, cb, arg);
    op->egress = spec->network_policy != NULL;
    /* From the second create on: a one-shot process (the CLI's create) would only pay for
     * preparing sets it never uses. MCPBOX_LOCAL_SPAWNER=0: off, to compare (benchmarks). */
    if (!lb->spawner_tried && lb->creates > 1) {
        const char *sw = getenv("MCPBOX_LOCAL_SPAWNER");
        lb->spawner_tried = true;
        char logs_base[LOCAL_PATH_MAX + 16];
        snprintf(logs_base, sizeof logs_base, "%s/sandboxes", lb->state_dir);
        if (sw == NULL || strcmp(sw, "0") != 0)
            lb->spawner = local_spawner_start(&lb->cg, lb->run_dir, logs_base,
                                              lb->ident.mode == LOCAL_ID_SLICES ? lb->slots_dir
                                                                                : NULL,
                                              lb->slots_excluded, &lb->ident,
                                              root_templates(lb));
        if (lb->ident.mode == LOCAL_ID_SLICES)
            sweep_slots(lb);
    }
    op->pool_slot = local_spawner_take(lb->spawner, op->sb->id, &op->sb->cg,
                                       &op->prepared_uid_slot, &op->prepared_dirs);
    if (op->pool_slot < 0)
        random_id(op->sb->id, sizeof op->sb->id, "sbx-", 8);
    int rc = start(op, spec, &lim, disk, img, err);
    local_ws_free(&img->ws); /* the child has its trees (or failed) */
    if (rc < 0 || watch_startup(op, err) < 0) {
        create_abort(op);
        return -1;
    }
    return 0;
}

int local_create_on_image(struct local_backend *lb, const struct sandbox_spec *spec,
                          json_t *image, backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct create_image img;
    memset(&img, 0, sizeof img);
    img.oci = image;
    json_t *d;
    json_array_foreach(json_object_get(image, "layer_dirs"), img.n, d) {
        if (img.n >= LOCAL_MAX_IMAGE_LAYERS)
            break;
        img.dirs[img.n] = json_string_value(d);
    }
    local_image_user(image, &img.run_uid, &img.run_gid);
    img.shared_mapping = local_image_shared(lb, image);
    if (lb->ident.mode == LOCAL_ID_SINGLE || img.run_uid >= lb->ident.uid_count ||
        img.run_gid >= lb->ident.gid_count)
        img.run_uid = img.run_gid = 0; /* not mapped: only sandbox root exists (get_sandbox) */
    return create_with_image(lb, spec, &img, cb, arg, err);
}

/* An OCI image is ready (from the store or just pulled): the create goes on. */
static void image_ready(struct local_backend *lb, const struct sandbox_spec *spec, json_t *image,
                        backend_cb *cb, void *arg)
{
    struct mcp_error err;
    if (json_object_get(json_object_get(image, "config"), "snapshot") != NULL)
        local_create_from_pushed(lb, spec, image, cb, arg); /* a push's (snapshot.h) */
    else if (local_create_on_image(lb, spec, image, cb, arg, &err) < 0)
        cb(arg, NULL, &err);
}

int local_create_cold(struct local_backend *lb, const struct sandbox_spec *spec, backend_cb *cb,
                      void *arg, struct mcp_error *err)
{
    struct cg_limits lim;
    uint64_t disk;
    struct create_image img;
    if (local_spec_limits(spec, &lim, &disk, err) < 0)
        return -1;
    int kind = resolve_image(lb, spec->image, &img, err);
    if (kind < 0)
        return -1;
    if (local_egress_check(lb, spec, err) < 0)
        return -1;
    if (spec->network && local_pasta_path() == NULL)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, ENOENT,
                             "network: true needs pasta, which is not installed (Debian/Ubuntu: "
                             "apt install passt); or create the sandbox without network");
    if (kind == 1)
        return local_image_resolve(lb, spec, image_ready, cb, arg, err);
    if (kind == 2)
        return local_image_import(lb, spec, img.registered, image_ready, cb, arg, err);
    return create_with_image(lb, spec, &img, cb, arg, err);
}

static int create_bound(struct local_backend *lb, const struct sandbox_spec *spec, backend_cb *cb,
                        void *arg, struct mcp_error *err);

int local_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb, void *arg,
                 struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    if (spec->snapshot_id != NULL) /* a create plus the snapshot's files (snapshot.h) */
        return local_create_from_snapshot(be, spec, cb, arg, err);
    struct local_bound bound;
    if (local_secrets_bind(lb, spec, &bound, err) < 0)
        return -1;
    int rc = create_bound(lb, &bound.spec, cb, arg, err);
    local_secrets_unbind(&bound); /* the create copied what it keeps */
    return rc;
}

static int create_bound(struct local_backend *lb, const struct sandbox_spec *spec, backend_cb *cb,
                        void *arg, struct mcp_error *err)
{
    /* The pool, like the spawner, starts with the second create: a one-shot process (the
     * CLI's create) never fills it. */
    if (++lb->creates > 1 && lb->pool_size > 0)
        lb->pool_started = true;
    lb->last_create_ms = now_mono_ms();
    int taken = local_pool_take(lb, spec, cb, arg, err);
    if (taken != 0)
        return taken < 0 ? -1 : 0;
    local_spawner_nudge(lb->spawner); /* its request comes at the end of what follows */
    return local_create_cold(lb, spec, cb, arg, err);
}

/* ---- pooled creates: the pool's refills ------------------------------------------------------ */

/* In a worker thread: the whole spawn, and the v1 attach, so the loop stays free. */
static void pooled_spawn_work(uv_work_t *w)
{
    struct create_op *op = w->data;
    op->attach_rc = local_spawn(&op->req, &op->res, &op->attach_err);
    if (op->attach_rc == 0)
        op->attach_rc = cg_attach_v1(&op->sb->cg, op->res.pid, &op->attach_err);
    if (op->attach_rc == 0 && !op->res.in_cgroup_v2)
        op->attach_rc = cg_attach_v2(&op->sb->cg, op->res.pid, &op->attach_err);
    if (op->res.release_fd < 0)
        return;
    if (op->attach_rc == 0 && local_spawn_release(op->res.release_fd, &op->res.trees) < 0)
        op->attach_rc = mcp_error_set(&op->attach_err, MCP_ERR_IO, errno,
                                      "releasing the sandbox init failed");
    else if (op->attach_rc < 0) { /* the child sees EOF and gives up */
        close(op->res.release_fd);
        local_image_trees_close(&op->res.trees);
    }
    op->res.release_fd = -1;
}

static void pooled_spawn_after(uv_work_t *w, int status)
{
    struct create_op *op = w->data;
    struct lsbx *sb = op->sb;
    struct mcp_error err;
    if (op->res.pidfd >= 0)
        sb->pidfd = op->res.pidfd, sb->pid = op->res.pid;
    op->err_fd = op->res.err_fd;
    int rc = op->attach_rc;
    if (rc < 0)
        mcp_error_copy(&err, &op->attach_err);
    if (rc == 0) {
        record_started(sb->be, sb->id, op->rec.record, &op->res, op->slot, &sb->cg, NULL);
        rc = store_sandbox_update(sb->be->base.store, &op->rec, &err);
    }
    json_decref(op->rec.record);
    op->rec.record = NULL;
    free(op->agent_cfg);
    op->agent_cfg = NULL;
    op->v1_attached = true, op->attach_needed_v2 = false;
    op->attach_done = true, op->attach_ms = now_mono_ms();
    if (rc < 0 || watch_startup(op, &err) < 0) {
        struct local_backend *lb = sb->be;
        create_abort(op);
        local_pool_fill_failed(lb, &err);
    }
}

int local_create_pooled(struct local_backend *lb, struct mcp_error *err)
{
    /* The default spec; TTL and idle timeout of the pool until taken. */
    struct sandbox_spec spec = {.owner = "", .timeout_seconds = lb->pool_ttl_s,
                                .idle_timeout_seconds = -1};
    struct cg_limits lim;
    uint64_t disk;
    if (local_spec_limits(&spec, &lim, &disk, err) < 0)
        return -1;
    struct create_op *op = create_op_new(lb, NULL, NULL);
    op->pooled = true;
    random_id(op->sb->id, sizeof op->sb->id, "sbx-", 8);
    if (start_record(op, &spec, &lim, disk, NULL, NULL, &op->rec, err) < 0) {
        json_decref(op->rec.record);
        create_abort(op);
        return -1;
    }
    static const struct create_image host; /* the pool holds "host" sandboxes only */
    op->agent_cfg = agent_config(&spec, op->rec.expires_at_ms, op->rec.idle_timeout_s, &host);
    op->req = (struct spawn_request){.id = op->sb->id, .dir = op->sb->dir,
                                     .logs_dir = op->sb->logs_dir,
                                     .ident = &lb->ident, .slot = op->slot,
                                     .hold = hold_for_v1(lb, &op->sb->cg),
                                     .pids_by_rlimit = !lb->cg.lim_pids,
                                     .disk_bytes = disk, .memory_bytes = lim.memory_bytes,
                                     .pids = lim.pids, .agent_config = op->agent_cfg,
                                     .agent_exe_fd = lb->agent_fd, .seccomp = &lb->seccomp,
                                     .root_templates = root_templates(lb),
                                     .cg = &op->sb->cg};
    op->res.pidfd = op->res.err_fd = op->res.release_fd = -1;
    op->work.data = op;
    if (uv_queue_work(lb->base.loop, &op->work, pooled_spawn_work, pooled_spawn_after) < 0) {
        json_decref(op->rec.record);
        create_abort(op);
        return mcp_error_set(err, MCP_ERR_INTERNAL, 0, "cannot queue a pooled create");
    }
    return 0;
}

int local_destroy(struct backend *be, const char *id, backend_cb *cb, void *arg,
                  struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct store_sandbox rec = {0};
    if (local_record_get(be->store, id, &rec, err) < 0)
        return -1;
    struct lsbx *sb = lsbx_find(lb, id);
    if (sb && sb->destroying) {
        store_sandbox_release(&rec);
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "sandbox %s is already being destroyed", id);
    }
    if (sb == NULL) { /* not live here: what is left is files, cgroups, slot and the record */
        struct cg_sandbox cg;
        char dir[LOCAL_PATH_MAX], logs[LOCAL_PATH_MAX];
        cg_from_json(json_object_get(rec.record, "cgroups"), &cg);
        local_sandbox_dirs(lb, id, dir, logs);
        uint64_t start;
        pid_t pid = local_init_of(dir, rec.record, &start);
        cg_freeze(&cg, false, err);
        cg_kill(&cg);
        local_kill_init(pid, start); /* live but watched by another mcpbox process (or none) */
        local_release_resources(lb, id, dir, &cg);
        local_event(be->store, id, "destroyed", NULL, err);
        local_record_delete(be->store, id);
        store_sandbox_release(&rec);
        json_t *res = json_pack("{s:s, s:b}", "sandbox_id", id, "destroyed", 1);
        backend_defer(&lb->base, cb, arg, res, NULL);
        json_decref(res);
        return 0;
    }
    bool paused = strcmp(rec.state, "paused") == 0;
    store_sandbox_release(&rec);
    /* The record goes at once (state "destroyed": absent to every operation, reaped by the next
     * start if this process dies before on_init_exit), and the caller is answered: the rest,
     * waiting for the init's exit and releasing cgroups, directories and the uid slot, cannot
     * fail from the caller's view and happens after the reply. */
    if (store_sandbox_set_state(be->store, id, LOCAL_DESTROYED_STATE, err) < 0)
        return -1;
    local_event(be->store, id, "destroyed", NULL, err);
    sb->destroying = xcalloc(1, sizeof *sb->destroying);
    /* Thaw first: a frozen cgroup's tasks die only once thawed on some kernels. Only when
     * paused: a cgroup write waits for cgroup_mutex, which spawner threads preparing the next
     * sandboxes hold now and then (a thaw of a running sandbox took up to 8 ms). The init's
     * death ends its pid namespace; the cgroup kill (for processes outside it, such as pasta)
     * is the release's first step. */
    if (paused)
        cg_freeze(&sb->cg, false, err);
    syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    json_t *res = json_pack("{s:s, s:b}", "sandbox_id", id, "destroyed", 1);
    backend_defer(&lb->base, cb, arg, res, NULL);
    json_decref(res);
    return 0; /* on_init_exit finishes the job */
}
