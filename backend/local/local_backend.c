/* The local backend object: construction, reconciliation with the store, the set of live
 * sandboxes this process watches, and sandbox exit handling. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "backend/code_interp.h"
#include "backend/shell_session_proc.h"
#include "backend/local/doctor.h"
#include "backend/local/local.h"
#include "backend/local/image/image.h"
#include "lib/base/rmtree.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_mounts.h"
#include "backend/local/local_seccomp.h"
#include "backend/local/local_volume.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_agent.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/snapshot.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_secrets.h"
#include "backend/local/local_vault.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define LOCAL_TIMER_MS 5000
#define LOCAL_CREATING_GRACE_MS 60000 /* a "creating" record younger than this may be live */

int local_event(struct store *st, const char *id, const char *kind, json_t *data,
                struct mcp_error *err)
{
    int rc = store_event_add(st, id, kind, data, err);
    json_decref(data);
    if (rc < 0) /* the event log is diagnostics: the operation goes on, the loss is logged */
        log_warn("sandbox %s: the %s event was not recorded: %s", id ? id : "?",
                 kind ? kind : "?", err->msg);
    return rc;
}

/* get_sandbox's "isolation": who the sandbox runs as, and which limits hold. A limit that is not
 * enforced on this host is taken out of "limits" and named in limits_not_enforced: it is never
 * shown as one. */
static void local_info_isolation(json_t *info, json_t *record)
{
    static const char *const keys[][2] = {{"memory", "memory_bytes"}, {"cpu", "cpu"},
                                          {"pids", "pids"}};
    json_t *enf = json_object_get(record, "enforced");
    json_t *ident = json_object_get(record, "identity");
    if (!json_is_object(enf) && !json_is_object(ident))
        return; /* a record from before this was recorded */
    json_t *iso = json_object(), *off = json_array();
    json_t *limits = json_object_get(info, "limits");
    if (json_is_object(enf) && json_is_object(limits)) {
        json_t *shown = json_deep_copy(limits);
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (!json_is_string(json_object_get(enf, keys[i][0]))) { /* null: not enforced */
                json_object_del(shown, keys[i][1]);
                json_array_append_new(off, json_string(keys[i][0]));
            }
        json_object_set_new(info, "limits", shown);
        json_object_set(iso, "limits_enforced_by", enf);
    }
    json_object_set_new(iso, "limits_not_enforced", off);
    if (json_is_object(ident))
        json_object_set(iso, "identity", ident);
    json_object_set_new(info, "isolation", iso);
}

void local_record_delete(struct store *st, const char *id)
{
    struct mcp_error err;
    if (store_sandbox_delete(st, id, &err) < 0 && err.code != MCP_ERR_NOT_FOUND) /* gone: fine */
        log_warn("sandbox %s: its record was not deleted (%s); the next start reaps it", id,
                 err.msg);
}

json_t *local_info(const struct store_sandbox *rec)
{
    char created[32], expires[32];
    format_rfc3339_ms(rec->created_at_ms, created);
    json_t *r = rec->record;
    json_t *limits = json_object_get(r, "limits");
    json_t *meta = json_object_get(r, "metadata");
    const char *image = json_string_value(json_object_get(r, "image"));
    json_t *info = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:I, s:O, s:b, s:O}", "sandbox_id", rec->id, "backend", "local",
        "image", image ? image : "host", "state", rec->state, "created_at", created,
        "idle_timeout_seconds", (json_int_t)rec->idle_timeout_s, "limits",
        limits ? limits : json_null(), "network", json_is_true(json_object_get(r, "network")),
        "metadata", json_is_object(meta) ? meta : json_null());
    json_t *policy = json_object_get(r, "network_policy");
    json_object_set_new(info, "network_policy", json_is_object(policy) ? json_deep_copy(policy)
                                                                       : json_null());
    if (json_is_null(json_object_get(info, "metadata")))
        json_object_set_new(info, "metadata", json_object());
    local_info_isolation(info, r);
    json_t *digest = json_object_get(r, "image_digest");
    if (json_is_string(digest)) /* an OCI image: what exactly runs */
        json_object_set_new(info, "image_digest", json_copy(digest));
    json_t *mounts = json_object_get(r, "mounts");
    if (json_array_size(mounts) > 0) { /* host directories: where, and how */
        json_t *shown = json_array(), *m;
        size_t i;
        json_array_foreach(mounts, i, m)
        {
            json_t *vol = json_object_get(m, "volume"); /* a named volume: its name */
            json_t *item = json_pack("{s:O, s:O, s:O}", vol ? "volume" : "source",
                                     vol ? vol : json_object_get(m, "source"), "target",
                                     json_object_get(m, "target"), "mode",
                                     json_object_get(m, "mode"));
            if (vol) /* how its size limit holds here, as the volume tool says */
                json_object_set_new(item, "limit_enforced_by",
                                    json_string(local_volume_enforcement()));
            json_array_append_new(shown, item);
        }
        json_object_set_new(info, "mounts", shown);
    }
    json_t *mapping = json_object_get(r, "image_mapping");
    if (json_is_string(mapping)) /* root mode without idmapped mounts (docs/images.md) */
        json_object_set_new(info, "image_mapping", json_copy(mapping));
    json_t *copied = json_object_get(r, "image_copied_from");
    if (json_is_string(copied)) /* a registered directory run from its copy in the store */
        json_object_set_new(info, "image_copied_from", json_copy(copied));
    if (rec->expires_at_ms > 0) {
        format_rfc3339_ms(rec->expires_at_ms, expires);
        json_object_set_new(info, "expires_at", json_string(expires));
    } else {
        json_object_set_new(info, "expires_at", json_null());
    }
    return info;
}

/* ---- the live set ------------------------------------------------------------------------- */

struct lsbx *lsbx_find(struct local_backend *lb, const char *id)
{
    for (struct lsbx *sb = lb->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, id) == 0 && !sb->gone)
            return sb;
    return NULL;
}

void lsbx_ref(struct lsbx *sb)
{
    sb->refs++;
}

void lsbx_unref(struct lsbx *sb)
{
    if (--sb->refs > 0)
        return;
    agent_conn_close(sb->conn);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    local_egress_forget(sb);
    free(sb);
}

static void list_remove(struct lsbx *sb)
{
    if (!sb->in_list)
        return;
    for (struct lsbx **pp = &sb->be->sandboxes; *pp; pp = &(*pp)->next)
        if (*pp == sb) {
            *pp = sb->next;
            break;
        }
    sb->in_list = false;
    lsbx_unref(sb);
}

static bool record_is_live(const struct store_sandbox *rec, pid_t *pid);
static void adopt(struct local_backend *lb, const struct store_sandbox *rec, pid_t pid);

/* local_record_get, or without the record (out->record NULL) when with_record is false. */
static int record_fetch(struct store *st, const char *id, struct store_sandbox *rec,
                        bool with_record, struct mcp_error *err)
{
    if ((with_record ? store_sandbox_get(st, id, rec, err)
                     : store_sandbox_peek(st, id, rec, err)) < 0)
        return -1;
    if (strcmp(rec->state, LOCAL_POOL_STATE) != 0 && strcmp(rec->state, LOCAL_DESTROYED_STATE) != 0)
        return 0;
    store_sandbox_release(rec); /* pooled: not anyone's yet; destroyed: its release is under way */
    memset(rec, 0, sizeof *rec);
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                         "no sandbox %s (list_sandboxes shows the ones that exist)", id);
}

int local_record_get(struct store *st, const char *id, struct store_sandbox *rec,
                     struct mcp_error *err)
{
    return record_fetch(st, id, rec, true, err);
}

/* Made by another mcpbox process after we started: adopted if it lives. The record (the init's
 * pid and start time, its cgroups) is read only here, not for every operation. rec is read
 * again, whole; zeroed (and err set) if it is gone meanwhile. */
static struct lsbx *adopt_if_live(struct local_backend *lb, const char *id,
                                  struct store_sandbox *rec, struct mcp_error *err)
{
    store_sandbox_release(rec);
    if (local_record_get(lb->base.store, id, rec, err) < 0)
        return NULL;
    pid_t pid;
    if ((strcmp(rec->state, "running") == 0 || strcmp(rec->state, "paused") == 0) &&
        record_is_live(rec, &pid))
        adopt(lb, rec, pid);
    return lsbx_find(lb, id);
}

struct lsbx *lsbx_for_op(struct local_backend *lb, const char *id, bool allow_paused,
                         struct mcp_error *err)
{
    struct store_sandbox rec = {0};
    if (record_fetch(lb->base.store, id, &rec, false, err) < 0)
        return NULL;
    struct lsbx *sb = lsbx_find(lb, id);
    if (sb == NULL && strcmp(rec.backend, "local") == 0 &&
        (strcmp(rec.state, "running") == 0 || strcmp(rec.state, "paused") == 0)) {
        sb = adopt_if_live(lb, id, &rec, err);
        if (rec.state == NULL)
            return NULL; /* gone meanwhile: err says so */
    }
    bool paused = strcmp(rec.state, "paused") == 0;
    if (sb == NULL || (strcmp(rec.state, "running") != 0 && !paused)) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0, "sandbox %s is %s; create a new one", id,
                      sb ? rec.state : (strcmp(rec.state, "running") == 0 ? "unreachable" : rec.state));
        store_sandbox_release(&rec);
        return NULL;
    }
    store_sandbox_release(&rec);
    if (paused && !allow_paused) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "sandbox %s is paused; call update_sandbox with paused: false first", id);
        return NULL;
    }
    return sb;
}

struct agent_conn *lsbx_conn(struct lsbx *sb, struct mcp_error *err)
{
    if (agent_conn_alive(sb->conn))
        return sb->conn;
    agent_conn_close(sb->conn);
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/agent.sock", sb->dir);
    sb->conn = agent_conn_open(sb->be->base.loop, path, err);
    return sb->conn;
}

/* ---- cleanup ------------------------------------------------------------------------------ */

/* A cgroup can stay busy for a moment after cgroup.kill: a helper outside the sandbox's pid
 * namespace (pasta) is reaped by the host's init, not by us. Retry on a timer. */
struct cg_retry {
    uv_timer_t timer;
    struct cg_sandbox cg;
    int tries;
};

static void cg_retry_closed(uv_handle_t *h)
{
    free(h->data);
}

static void cg_retry_fire(uv_timer_t *t)
{
    struct cg_retry *r = t->data;
    cg_kill(&r->cg);
    if (cg_destroy(&r->cg) == 0 || ++r->tries >= LOCAL_CG_RETRIES) {
        if (r->tries >= LOCAL_CG_RETRIES)
            log_warn("a sandbox cgroup (%s) stayed busy; the next start sweeps it", r->cg.v2);
        uv_close((uv_handle_t *)t, cg_retry_closed);
    }
}

static void cg_destroy_later(struct local_backend *lb, const struct cg_sandbox *cg)
{
    struct cg_retry *r = xcalloc(1, sizeof *r);
    r->cg = *cg;
    uv_timer_init(lb->base.loop, &r->timer);
    r->timer.data = r;
    /* Referenced: a short-lived process (the CLI) finishes the cleanup before it exits. */
    uv_timer_start(&r->timer, cg_retry_fire, LOCAL_CG_RETRY_MS, LOCAL_CG_RETRY_MS);
}

void local_release_resources(struct local_backend *lb, const char *id, const char *dir,
                             const struct cg_sandbox *cg)
{
    cg_kill(cg);
    /* Killed processes that are not our children (another mcpbox's sandbox, a half-made one,
     * pasta) exit a moment later: what is destroyed must not run on. Bounded, then logged. */
    if (cg_wait_empty(cg, LOCAL_KILL_WAIT_MS) < 0)
        log_warn("sandbox %s: processes still in its cgroups %d ms after the kill", id,
                 LOCAL_KILL_WAIT_MS);
    if (cg_destroy(cg) < 0)
        cg_destroy_later(lb, cg);
    char logs[LOCAL_PATH_MAX], run[LOCAL_PATH_MAX];
    local_sandbox_dirs(lb, id, run, logs);
    if (dir[0])
        rmtree(dir);
    rmtree(logs);
    local_ws_remove(lb->state_dir, id, &lb->ident); /* mounts' copy-on-write layers (workspace.h) */
    local_vault_remove(lb->state_dir, id);          /* its credential vault (local_vault.h) */
    local_release_slot(lb, id);
}

int local_lease_slot(struct local_backend *lb, const char *id, uint32_t *slot,
                     struct mcp_error *err)
{
    *slot = 0;
    if (lb->ident.mode != LOCAL_ID_SLICES)
        return 0; /* one mapping shared by all of this user's sandboxes */
    return local_slot_lease(lb->slots_dir, id, LOCAL_MAX_SLOTS, lb->slots_excluded, slot, err);
}

void local_release_slot(struct local_backend *lb, const char *id)
{
    struct mcp_error err;
    uint32_t slot;
    if (lb->ident.mode != LOCAL_ID_SLICES)
        return;
    if (store_slot_of(lb->base.store, id, &slot, &err) == 1)
        local_slot_unlease(lb->slots_dir, slot, id);
    if (store_slot_release(lb->base.store, id, &err) < 0 && err.code != MCP_ERR_NOT_FOUND)
        log_warn("sandbox %s: releasing uid slot: %s", id, err.msg);
}

void local_sandbox_dirs(const struct local_backend *lb, const char *id, char dir[LOCAL_PATH_MAX],
                        char logs[LOCAL_PATH_MAX])
{
    snprintf(dir, LOCAL_PATH_MAX, "%s/%s", lb->run_dir, id);
    snprintf(logs, LOCAL_PATH_MAX, "%s/sandboxes/%s", lb->state_dir, id);
}

/* The agent's marker in its logs directory: why it ended itself (ttl, idle). */
static bool read_marker(const char *logs, char *why, size_t size)
{
    char path[LOCAL_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/expired", logs);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, why, size - 1);
    close(fd);
    why[n > 0 ? n : 0] = '\0';
    return true;
}

static void exit_poll_closed(uv_handle_t *h)
{
    lsbx_unref(h->data);
}

static void oom_poll_closed(uv_handle_t *h)
{
    struct lsbx *sb = h->data;
    close(sb->oom_fd);
    sb->oom_fd = -1;
    lsbx_unref(sb);
}

static void stop_watching(struct lsbx *sb)
{
    local_forwards_close(sb);
    local_egress_stop(sb->egress);
    sb->egress = NULL;
    if (sb->watching) {
        sb->watching = false;
        uv_close((uv_handle_t *)&sb->exit_poll, exit_poll_closed);
    }
    if (sb->oom_watching) {
        sb->oom_watching = false;
        uv_close((uv_handle_t *)&sb->oom_poll, oom_poll_closed);
    }
}

/* The memcg reported an OOM kill: record it for diagnose, whoever was (not) watching. The exec
 * path separately attributes a kill to the command it watched. */
void local_note_oom(struct lsbx *sb)
{
    uint64_t count = cg_oom_kills(&sb->cg);
    if (count <= sb->oom_seen)
        return;
    struct mcp_error err;
    local_event(sb->be->base.store, sb->id, "oom",
                json_pack("{s:I, s:I}", "oom_kills", (json_int_t)count, "memory_limit_bytes",
                          (json_int_t)cg_memory_limit(&sb->cg)), &err);
    sb->oom_seen = count;
}

/* The memcg reported an OOM kill: record it for diagnose, whoever was (not) watching. The exec
 * path separately attributes a kill to the command it watched; the periodic timer catches what a
 * notification missed. */
static void on_oom(uv_poll_t *p, int status, int events)
{
    struct lsbx *sb = p->data;
    uint64_t n = 0;
    if (sb->cg.mem[0] && read(sb->oom_fd, &n, sizeof n) < 0) /* drain the v1 eventfd */
        return;
    local_note_oom(sb);
}

static void local_watch_oom(struct lsbx *sb)
{
    sb->oom_seen = cg_oom_kills(&sb->cg);
    bool v1 = sb->cg.mem[0] != '\0';
    sb->oom_fd = cg_oom_fd(&sb->cg);
    if (sb->oom_fd < 0 || uv_poll_init(sb->be->base.loop, &sb->oom_poll, sb->oom_fd) < 0) {
        if (sb->oom_fd >= 0)
            close(sb->oom_fd);
        sb->oom_fd = -1;
        return;
    }
    sb->oom_poll.data = sb;
    lsbx_ref(sb);
    sb->oom_watching = true;
    uv_poll_start(&sb->oom_poll, v1 ? UV_READABLE : UV_PRIORITIZED, on_oom);
}

/* Another mcpbox process destroyed it and is releasing it (or its next start will): its record
 * must stay "destroyed", invisible, not become "stopped". */
static bool destroyed_elsewhere(struct local_backend *lb, const char *id)
{
    struct store_sandbox rec = {0};
    struct mcp_error err;
    if (store_sandbox_get(lb->base.store, id, &rec, &err) < 0)
        return false;
    bool destroyed = strcmp(rec.state, LOCAL_DESTROYED_STATE) == 0;
    store_sandbox_release(&rec);
    return destroyed;
}

/* The sandbox's init is gone: reap it (if it is our child), release everything, and record
 * why. A pending destroy completes here. */
static void on_init_exit(struct lsbx *sb)
{
    struct local_backend *lb = sb->be;
    struct mcp_error err;
    siginfo_t si = {0};
    syscall(SYS_waitid, P_PIDFD, sb->pidfd, &si, WEXITED | WNOHANG, NULL);
    char why[64] = "";
    bool expired = read_marker(sb->logs_dir, why, sizeof why);
    sb->gone = true;
    agent_conn_close(sb->conn);
    sb->conn = NULL;
    local_release_resources(lb, sb->id, sb->dir, &sb->cg);
    if (sb->destroying) { /* the caller had its answer; the "destroyed" event is written */
        free(sb->destroying);
        sb->destroying = NULL;
        local_record_delete(lb->base.store, sb->id);
    } else if (sb->pooled) { /* never given out: nobody to tell, nothing to keep */
        local_pool_forget(sb);
        local_record_delete(lb->base.store, sb->id);
    } else if (!destroyed_elsewhere(lb, sb->id)) {
        /* No record: another mcpbox process destroyed it; nothing to report. */
        if (store_sandbox_set_state(lb->base.store, sb->id, expired ? "expired" : "stopped",
                                    &err) == 0)
            local_event(lb->base.store, sb->id, expired ? "expired" : "exit",
                        json_pack("{s:s}", "reason", expired ? why : "sandbox init exited"), &err);
    }
    stop_watching(sb);
    list_remove(sb);
}

static void on_exit_readable(uv_poll_t *p, int status, int events)
{
    on_init_exit(p->data);
}

void local_kill_now(struct lsbx *sb)
{
    if (sb->gone)
        return;
    cg_kill(&sb->cg); /* never frozen: pooled or half-taken */
    syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    /* The pidfd is non-blocking (libuv's poll made it so): wait with poll, on_init_exit reaps. */
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    poll(&p, 1, LOCAL_KILL_WAIT_MS); /* SIGKILL: at once */
    on_init_exit(sb);
}

void local_watch_exit(struct lsbx *sb)
{
    local_watch_oom(sb);
    if (uv_poll_init(sb->be->base.loop, &sb->exit_poll, sb->pidfd) < 0)
        return;
    sb->exit_poll.data = sb;
    lsbx_ref(sb);
    sb->watching = true;
    uv_poll_start(&sb->exit_poll, UV_READABLE, on_exit_readable);
}

/* ---- reconcile ------------------------------------------------------------------------------ */

static bool record_is_live(const struct store_sandbox *rec, pid_t *pid)
{
    json_t *r = rec->record;
    *pid = (pid_t)json_integer_value(json_object_get(r, "init_pid"));
    uint64_t start = (uint64_t)json_integer_value(json_object_get(r, "init_start"));
    return *pid > 0 && start != 0 && local_proc_starttime(*pid) == start;
}

/* Is the process that is creating this record still at it? By pid plus start time: a killed
 * creator's pid may be reused (or be an unreaped zombie, which kill(pid, 0) still finds). */
static bool creator_busy(const struct store_sandbox *rec)
{
    pid_t creator = (pid_t)json_integer_value(json_object_get(rec->record, "creator_pid"));
    uint64_t start = (uint64_t)json_integer_value(json_object_get(rec->record, "creator_start"));
    bool pooled = strcmp(rec->state, LOCAL_POOL_STATE) == 0; /* as long as its creator lives */
    if (creator <= 0 || (!pooled && (strcmp(rec->state, "creating") != 0 ||
                                     now_wall_ms() - rec->created_at_ms >= LOCAL_CREATING_GRACE_MS)))
        return false;
    uint64_t now_start = local_proc_starttime(creator); /* 0: gone or a zombie */
    return now_start != 0 && (start == 0 || now_start == start);
}

pid_t local_init_of(const char *dir, json_t *record, uint64_t *start)
{
    pid_t pid = (pid_t)json_integer_value(json_object_get(record, "init_pid"));
    *start = (uint64_t)json_integer_value(json_object_get(record, "init_start"));
    if (pid > 0)
        return pid;
    char path[LOCAL_PATH_MAX + 16], text[64];
    snprintf(path, sizeof path, "%s/" LOCAL_INIT_FILE, dir);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0)
        close(fd);
    int p = 0;
    unsigned long long s = 0;
    text[n > 0 ? n : 0] = '\0';
    if (n <= 0 || sscanf(text, "%d %llu", &p, &s) != 2)
        p = 0, s = 0;
    *start = s;
    return p;
}

static void adopt(struct local_backend *lb, const struct store_sandbox *rec, pid_t pid)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    uint64_t start = (uint64_t)json_integer_value(json_object_get(rec->record, "init_start"));
    if (pidfd < 0 || local_proc_starttime(pid) != start) { /* died (or pid reused) meanwhile */
        if (pidfd >= 0)
            close(pidfd);
        return;
    }
    struct lsbx *sb = xcalloc(1, sizeof *sb);
    sb->be = lb;
    snprintf(sb->id, sizeof sb->id, "%s", rec->id);
    local_sandbox_dirs(lb, rec->id, sb->dir, sb->logs_dir);
    sb->pid = pid, sb->pidfd = pidfd, sb->refs = 1, sb->in_list = true;
    cg_from_json(json_object_get(rec->record, "cgroups"), &sb->cg);
    sb->next = lb->sandboxes;
    lb->sandboxes = sb;
    local_watch_exit(sb);
    /* Made by another process (or before a restart) with a network policy: this process serves
     * its egress too (a paused one's agent cannot answer: it gets none until resumed here). */
    struct mcp_error err;
    if (json_is_object(json_object_get(rec->record, "network_policy")) &&
        strcmp(rec->state, "running") == 0 && local_egress_start(sb, &err) < 0)
        log_warn("sandbox %s: its egress is not served by this process: %s", sb->id, err.msg);
}

void local_kill_init(pid_t pid, uint64_t start)
{
    if (pid <= 0 || start == 0)
        return;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return;
    if (local_proc_starttime(pid) == start) { /* still the same process, not a reused pid */
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        poll(&p, 1, LOCAL_KILL_WAIT_MS); /* the pid namespace dies with its init */
    }
    close(pidfd);
}

/* A record whose sandbox is gone, or was left half-made by a crashed creator: kill what may
 * still run, release everything, drop the record (the event log keeps the story). */
static void reap_dead(struct local_backend *lb, const struct store_sandbox *rec)
{
    struct mcp_error err;
    struct cg_sandbox cg;
    char dir[LOCAL_PATH_MAX], logs[LOCAL_PATH_MAX], why[64] = "";
    cg_from_json(json_object_get(rec->record, "cgroups"), &cg);
    local_sandbox_dirs(lb, rec->id, dir, logs);
    bool expired = read_marker(logs, why, sizeof why);
    bool half_made = strcmp(rec->state, "creating") == 0;
    bool pooled = strcmp(rec->state, LOCAL_POOL_STATE) == 0;
    bool destroyed = strcmp(rec->state, LOCAL_DESTROYED_STATE) == 0;
    cg_kill(&cg);
    uint64_t start;
    pid_t pid = local_init_of(dir, rec->record, &start);
    local_kill_init(pid, start);
    local_release_resources(lb, rec->id, dir, &cg);
    local_event(lb->base.store, rec->id, "reaped",
                    json_pack("{s:s, s:s}", "previous_state", rec->state, "reason",
                              destroyed ? "destroyed; its release was cut short (mcpbox stopped)"
                              : expired ? why : half_made ? "its creator died during create"
                              : pooled ? "pooled, and the process that pooled it is gone"
                                       : "init gone at reconcile"), &err);
    local_record_delete(lb->base.store, rec->id);
    log_info("sandbox %s (%s) was gone; cleaned up", rec->id, rec->state);
}

static int reconcile(struct local_backend *lb, struct mcp_error *err)
{
    struct store_sandbox *list = NULL;
    size_t n = 0;
    if (store_sandbox_list(lb->base.store, "local", NULL, &list, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        pid_t pid;
        if (creator_busy(&list[i]))
            continue; /* another process is creating it right now, or holds it in its pool */
        if (strcmp(list[i].state, "creating") != 0 &&
            strcmp(list[i].state, LOCAL_POOL_STATE) != 0 &&
            strcmp(list[i].state, LOCAL_DESTROYED_STATE) != 0 && record_is_live(&list[i], &pid))
            adopt(lb, &list[i], pid);
        else
            reap_dead(lb, &list[i]);
    }
    store_sandbox_list_free(list, n);
    return 0;
}

/* Paused sandboxes cannot run their agent's TTL clock: thaw expired ones so the agent ends
 * them itself. */
static void on_timer(uv_timer_t *t)
{
    struct local_backend *lb = t->data;
    struct store_sandbox *list = NULL;
    size_t n = 0;
    struct mcp_error err;
    if (store_sandbox_list(lb->base.store, "local", NULL, &list, &n, &err) < 0)
        return;
    int64_t now = now_wall_ms();
    for (struct lsbx *sb = lb->sandboxes; sb; sb = sb->next)
        if (!sb->gone)
            local_note_oom(sb);
    for (size_t i = 0; i < n; i++) {
        struct lsbx *sb = lsbx_find(lb, list[i].id);
        if (sb && strcmp(list[i].state, "paused") == 0 && list[i].expires_at_ms > 0 &&
            now >= list[i].expires_at_ms && cg_freeze(&sb->cg, false, &err) == 0 &&
            store_sandbox_set_state(lb->base.store, list[i].id, "running", &err) < 0)
            log_warn("sandbox %s: thawed, but its state was not recorded: %s", list[i].id,
                     err.msg);
    }
    store_sandbox_list_free(list, n);
}

/* ---- construction -------------------------------------------------------------------------- */

/* An ordinary user needs the kernel to let it make user namespaces (sysctls, AppArmor). */
static int probe_userns(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0xff));
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return errno ? errno : EAGAIN;
    return WIFEXITED(status) ? WEXITSTATUS(status) : EINVAL;
}

int local_backend_probe(struct mcp_error *err)
{
    struct cg_host h;
    if (access("/proc/self/ns/user", F_OK) < 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, errno,
                             "this kernel has no user namespaces (CONFIG_USER_NS)");
    int e = geteuid() != 0 ? probe_userns() : 0;
    if (e != 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, e,
                             "this user may not create user namespaces (run `mcpbox doctor`: it "
                             "names the sysctl or AppArmor rule that forbids it)");
    /* A user's cgroups never stop sandboxes (missing ones are reported), and detecting a v2
     * delegation moves processes into a leaf: not from a probe (mcpbox doctor changes nothing). */
    return geteuid() != 0 ? 0 : cg_host_detect(&h, err);
}

/* Each live sandbox costs this process a few fds (pidfd, OOM eventfd, agent socket): lift the
 * soft limit to the hard one so that hundreds of sandboxes fit. */
static void raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

static int make_dirs(struct local_backend *lb, struct mcp_error *err)
{
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/sandboxes", lb->state_dir);
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", path);
    if (local_runtime_dir(lb->state_dir, lb->run_dir, sizeof lb->run_dir, err) < 0)
        return -1;
    /* Beside the runtime directory, not in it: that one goes when its last sandbox does.
     * MCPBOX_LOCAL_ROOT_TEMPLATES: "0" for none (every root made on a tmpfs, to compare), or
     * another directory (tests). */
    const char *env = getenv("MCPBOX_LOCAL_ROOT_TEMPLATES");
    const char *slash = strrchr(lb->run_dir, '/');
    if (env && env[0])
        snprintf(lb->root_templates, sizeof lb->root_templates, "%s",
                 strcmp(env, "0") == 0 ? "" : env);
    else
        snprintf(lb->root_templates, sizeof lb->root_templates, "%.*s/root-templates",
                 (int)(slash ? slash - lb->run_dir : 0), lb->run_dir);
    return 0;
}

struct backend *local_backend_new(uv_loop_t *loop, struct store *store,
                                  const struct local_options *opts, struct mcp_error *err)
{
    if (local_backend_probe(err) < 0)
        return NULL;
    raise_nofile();
    struct local_backend *lb = xcalloc(1, sizeof *lb);
    lb->base.ops = &local_ops;
    lb->base.loop = loop;
    lb->base.store = store;
    lb->agent_fd = -1;
    lb->pool_size = opts ? opts->pool : 0;
    lb->apply_unreviewed = opts && opts->apply_unreviewed;
    lb->apply_max_bytes = opts ? opts->apply_max_bytes : 0;
    const char *ttl = getenv("MCPBOX_LOCAL_POOL_TTL"); /* seconds; for tests of the drain */
    lb->pool_ttl_s = ttl && atoi(ttl) > 0 ? atoi(ttl) : LOCAL_POOL_TTL_S;
    const char *idle = getenv("MCPBOX_LOCAL_POOL_IDLE_MS"); /* for tests of the refill rules */
    lb->pool_idle_ms = idle && atoi(idle) > 0 ? (uint64_t)atoi(idle) : LOCAL_POOL_REFILL_IDLE_MS;
    snprintf(lb->state_dir, sizeof lb->state_dir, "%s", store_state_dir(store));
    local_identity_detect(&lb->ident);
    if (local_allow_init(&lb->allow, opts ? opts->allow_dirs : NULL, err) < 0) {
        free(lb);
        return NULL;
    }
    if (lb->ident.mode == LOCAL_ID_SLICES)
        local_slots_excluded(lb->slots_excluded, LOCAL_MAX_SLOTS);
    if (lb->ident.mode == LOCAL_ID_SINGLE)
        log_warn("local sandboxes run in single-uid mode: sandbox root is your own uid (%s)",
                 lb->ident.why);
    if (cg_host_detect(&lb->cg, err) < 0 || make_dirs(lb, err) < 0 ||
        (lb->ident.mode == LOCAL_ID_SLICES &&
         local_slots_dir(lb->slots_dir, sizeof lb->slots_dir, err) < 0) ||
        local_seccomp_build(&lb->seccomp, err) < 0 || (lb->agent_fd = local_agent_memfd(err)) < 0 ||
        reconcile(lb, err) < 0) {
        local_seccomp_free(&lb->seccomp);
        if (lb->agent_fd >= 0)
            close(lb->agent_fd);
        local_allow_free(&lb->allow);
        free(lb);
        return NULL;
    }
    char logs_base[LOCAL_PATH_MAX + 16];
    snprintf(logs_base, sizeof logs_base, "%s/sandboxes", lb->state_dir);
    local_spawner_reap(lb->run_dir, logs_base);
    cg_sweep(&lb->cg, LOCAL_CG_SWEEP_AGE_S);
    uv_timer_init(loop, &lb->timer);
    lb->timer.data = lb;
    uv_timer_start(&lb->timer, on_timer, LOCAL_TIMER_MS, LOCAL_TIMER_MS);
    uv_unref((uv_handle_t *)&lb->timer);
    lb->volume_guard = local_volume_guard_start(lb);
    local_volume_sweep(store, lb->state_dir);
    log_debug("local backend ready: cgroups %s, seccomp %u instructions", cg_layout_name(lb->cg.layout),
              lb->seccomp.len);
    return &lb->base;
}

static void timer_closed(uv_handle_t *h)
{
    struct local_backend *lb = h->data;
    local_seccomp_free(&lb->seccomp);
    local_allow_free(&lb->allow);
    free(lb);
}

static void local_shutdown(struct backend *be)
{
    struct local_backend *lb = (struct local_backend *)be;
    code_interp_release(be); /* code contexts end with the process that made them */
    shell_session_proc_release(be); /* session shells live on in their sandboxes */
    local_pool_drain(lb); /* untaken pooled sandboxes go with the process that pooled them */
    image_service_free(lb->images); /* pulls under way end with an error */
    lb->images = NULL;
    /* Destroys already answered finish their release now (a one-shot CLI rm exits next). */
    for (struct lsbx *sb = lb->sandboxes; sb;) {
        struct lsbx *next = sb->next;
        if (sb->destroying)
            local_kill_now(sb);
        sb = next;
    }
    while (lb->sandboxes) {
        struct lsbx *sb = lb->sandboxes;
        agent_conn_close(sb->conn);
        sb->conn = NULL;
        stop_watching(sb);
        list_remove(sb);
    }
    uv_timer_stop(&lb->timer);
}

void local_backend_free(struct backend *be)
{
    if (be == NULL)
        return;
    struct local_backend *lb = (struct local_backend *)be;
    local_shutdown(be);
    /* A pooled create in flight (its spawn in a worker, or its agent starting) ends within
     * milliseconds, then local_pool_filled destroys it: let it, so that nothing is left. Only a
     * process that made two creates can have one; free is called with the loop stopped. */
    while (lb->pool_filling > 0 && uv_run(lb->base.loop, UV_RUN_ONCE) != 0)
        ;
    local_spawner_stop(lb->spawner);
    lb->spawner = NULL;
    /* Only if empty: no sandbox of this state directory left (another process recreates it). */
    rmdir(lb->run_dir);
    if (lb->agent_fd >= 0)
        close(lb->agent_fd);
    lb->agent_fd = -1;
    uv_close((uv_handle_t *)&lb->timer, timer_closed);
    local_volume_guard_stop(lb->volume_guard);
    lb->volume_guard = NULL;
}

/* ---- vtable ---------------------------------------------------------------------------------- */

const struct backend_ops local_ops = {
    .name = "local",
    .id_prefix = "sbx-",
    .enable_hint = "call diagnose_sandbox without a sandbox_id to see why",
    .shutdown = local_shutdown,
    .free = local_backend_free,
    .create = local_create,
    .destroy = local_destroy,
    .list = local_list,
    .get = local_get,
    .renew = local_renew,
    .pause = local_pause,
    .resume = local_resume,
    .exec = local_exec,
    .exec_detach = local_exec_detach,
    .command_get = local_command_get,
    .command_kill = local_command_kill,
    .file_read = local_file_read,
    .file_write = local_file_write,
    .file_op = local_file_op,
    .endpoint = local_endpoint,
    .diagnose = local_diagnose,
    .metrics = local_metrics,
    .snapshot = local_snapshot,
    .code_context = code_interp_context, /* a driver in the sandbox (backend/code_interp.h) */
    .code_run = code_interp_run,
    .host_check = local_host_check,
    .workspace = local_workspace,
    .set_network_policy = local_set_network_policy,
    .command_input = local_command_input,
    .command_resize = local_command_resize,
    .command_attach = local_command_attach,
    .command_find = local_command_find,
    .session_run = backend_def_session_run,
    .volume = local_volume,
    .bind_secrets = local_bind_secrets,
    .credential_vault = local_credential_vault,
};
