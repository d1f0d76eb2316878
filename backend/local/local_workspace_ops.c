/* The backend's "workspace" operation: review and apply of a sandbox's copy-on-write mounts
 * (workspace_review.h), on mounts.json's layout (workspace.h). The scan reads whole trees and
 * files, so it runs on libuv's worker pool, never on the loop. It reads the upper layers as the
 * server: as root anything; as a user the files the sandbox's commands wrote, which are the
 * user's own (workspace.h, "owners in upper"). Each mount's host directory is reached once per
 * call, verified to be the one the create checked (workspace_source.c), and the engine works
 * below that descriptor only. */
#define LOG_MODULE "local"
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/local/local_limits.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "backend/local/workspace.h"
#include "backend/local/workspace_review.h"
#include "lib/base/xalloc.h"

struct ws_job {
    uv_work_t req;
    struct ws_job *next_apply; /* in applies_running */
    char id[LOCAL_ID_LEN];
    struct local_backend *lb;
    backend_cb *cb;
    void *arg;
    bool apply;
    int ns_fd; /* rootless: a pidfd of the sandbox's init, to read as its user namespace (-1) */
    struct local_mount *all; /* mounts.json, every mode */
    struct ws_mount *mounts; /* the copy-on-write ones */
    char (*journals)[LOCAL_WS_PATH_MAX];
    char reviews_dir[LOCAL_WS_PATH_MAX + 16];
    size_t n;
    struct ws_options opts;
    json_t *args;
    json_t *result;
    struct mcp_error err;
};

/* Applies in flight in this process (touched on the loop thread only): two applies of one
 * sandbox at once would race on its host files and its journal. */
static struct ws_job *applies_running;

static bool apply_running(const char *id)
{
    for (struct ws_job *j = applies_running; j; j = j->next_apply)
        if (strcmp(j->id, id) == 0)
            return true;
    return false;
}

static void apply_done(struct ws_job *j)
{
    for (struct ws_job **p = &applies_running; *p; p = &(*p)->next_apply)
        if (*p == j) {
            *p = j->next_apply;
            return;
        }
}

static void ws_job_free(struct ws_job *j)
{
    if (j->ns_fd >= 0)
        close(j->ns_fd);
    for (size_t i = 0; i < j->n; i++)
        if (j->mounts[i].source_fd >= 0)
            close(j->mounts[i].source_fd);
    free(j->all);
    free(j->mounts);
    free(j->journals);
    json_decref(j->args);
    json_decref(j->result);
    free(j);
}

static void ws_work(uv_work_t *req)
{
    struct ws_job *j = req->data;
    json_t *paths = json_object_get(j->args, "paths");
    if (j->ns_fd >= 0) {
        j->result = ws_run_in_userns(j->ns_fd, j->apply ? "apply" : "review", j->mounts, j->n,
                                     &j->opts, j->args, &j->err);
        return;
    }
    if (j->apply)
        j->result = ws_apply(j->mounts, j->n, &j->opts, paths,
                             json_is_true(json_object_get(j->args, "overwrite")), &j->err);
    else
        j->result =
            ws_review(j->mounts, j->n, &j->opts, paths,
                      (uint64_t)json_integer_value(json_object_get(j->args, "offset")),
                      (uint64_t)json_integer_value(json_object_get(j->args, "max_bytes")), &j->err);
}

static void ws_after(uv_work_t *req, int status)
{
    struct ws_job *j = req->data;
    if (j->apply)
        apply_done(j);
    if (status < 0 && j->result == NULL)
        mcp_error_set(&j->err, MCP_ERR_UNAVAILABLE, 0, "the review was cancelled; call again");
    j->cb(j->arg, j->result, j->result ? NULL : &j->err);
    ws_job_free(j);
}

/* The sandbox's copy-on-write mounts as the engine takes them; -1 with err when it has none. */
static int load_mounts(struct ws_job *j, const char *id, struct mcp_error *err)
{
    size_t n = 0;
    if (local_workspace_load(j->lb->state_dir, id, &j->all, &n, err) < 0)
        return -1;
    j->mounts = xcalloc(n + 1, sizeof *j->mounts);
    j->journals = xcalloc(n + 1, sizeof *j->journals);
    char dir[LOCAL_WS_PATH_MAX];
    local_workspace_dir(j->lb->state_dir, id, dir);
    bool root = geteuid() == 0;
    for (size_t i = 0; i < n; i++) {
        const struct local_mount *m = &j->all[i];
        if (m->mode != LOCAL_MOUNT_COW)
            continue;
        /* The directory the create checked, or a refusal: never the path as it is now. */
        int src = local_source_open(m, err);
        if (src < 0)
            return -1;
        size_t k = j->n++;
        snprintf(j->journals[k], LOCAL_WS_PATH_MAX, "%s/%u/%s", dir, m->index, WS_JOURNAL_NAME);
        j->mounts[k] = (struct ws_mount){.source_fd = src,
                                         .source = m->source,
                                         .target = m->target,
                                         .upper = m->upper,
                                         .journal = j->journals[k],
                                         /* as the person, files are theirs already */
                                         .owner_uid = root ? (int64_t)m->owner_uid : -1,
                                         .owner_gid = root ? (int64_t)m->owner_gid : -1};
    }
    if (j->n == 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "sandbox %s has no copy-on-write mount, so there is nothing to "
                             "review or apply; create a sandbox with mounts "
                             "[{source, target, mode: \"copy-on-write\"}] to work on a host "
                             "directory this way",
                             id);
    return 0;
}

/* Rootless: the sandbox's init as a pidfd, when it runs (checked against its start time, so a
 * reused pid is never taken), else -1 (a stopped sandbox is read as the server). As root the
 * server reads everything itself. */
static int sandbox_ns_fd(struct local_backend *lb, const char *id, json_t *record)
{
    if (geteuid() == 0)
        return -1;
    char dir[LOCAL_PATH_MAX], logs[LOCAL_PATH_MAX];
    local_sandbox_dirs(lb, id, dir, logs);
    uint64_t start = 0;
    pid_t pid = local_init_of(dir, record, &start);
    int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
    if (fd >= 0 && local_proc_starttime(pid) != start) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The apply's limits: the person's CLI flags (args apply_max_bytes, group_write, which the tools
 * never pass on from an agent), else the server's option, else the defaults. */
static void person_choices(const struct local_backend *lb, json_t *args, struct ws_options *o)
{
    json_t *max = json_object_get(args, "apply_max_bytes");
    o->apply_max_bytes = json_is_integer(max) && json_integer_value(max) > 0
                             ? (uint64_t)json_integer_value(max)
                             : lb->apply_max_bytes;
    o->group_write = json_is_true(json_object_get(args, "group_write"));
}

int local_workspace(struct backend *be, const char *id, const char *action, json_t *args,
                    backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    bool apply = strcmp(action, "apply") == 0;
    if (apply && apply_running(id))
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "an apply of sandbox %s is already running; wait for its result, "
                             "then call review_changes to see what is left",
                             id);
    struct store_sandbox rec = {0};
    if (local_record_get(be->store, id, &rec, err) < 0)
        return -1;
    int64_t created_ms = rec.created_at_ms;
    int ns_fd = sandbox_ns_fd(lb, id, rec.record);
    store_sandbox_release(&rec);
    struct ws_job *j = xcalloc(1, sizeof *j);
    j->lb = lb, j->cb = cb, j->arg = arg;
    j->apply = apply;
    j->ns_fd = ns_fd;
    snprintf(j->id, sizeof j->id, "%s", id);
    j->args = args ? json_deep_copy(args) : json_object();
    char dir[LOCAL_WS_PATH_MAX];
    local_workspace_dir(lb->state_dir, id, dir);
    snprintf(j->reviews_dir, sizeof j->reviews_dir, "%s/reviews", dir);
    /* The mounts are made during the create, after its record: the sandbox saw the host from
     * then on (a host change in between is taken for a conflict, the safe side). */
    j->opts = (struct ws_options){.since_ns = created_ms * 1000000ll,
                                  .xattr_prefix = "user.overlay.",
                                  .reviews_dir = j->reviews_dir,
                                  .review = json_string_value(json_object_get(j->args, "review"))};
    person_choices(lb, j->args, &j->opts);
    if (load_mounts(j, id, err) < 0) {
        ws_job_free(j);
        return -1;
    }
    if (apply && j->opts.review == NULL && !lb->apply_unreviewed) {
        ws_job_free(j);
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "apply_changes needs the review token of the review_changes that "
                             "showed the changes: call review_changes on sandbox %s, read the "
                             "diff, then apply_changes with review set to its \"review\"",
                             id);
    }
    j->req.data = j;
    int rc = uv_queue_work(be->loop, &j->req, ws_work, ws_after);
    if (rc == 0 && apply) {
        j->next_apply = applies_running;
        applies_running = j;
    }
    if (rc < 0) {
        ws_job_free(j);
        return mcp_error_set(err, MCP_ERR_IO, 0, "cannot start the review: %s", uv_strerror(rc));
    }
    return 0;
}
