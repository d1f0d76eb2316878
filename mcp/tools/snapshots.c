/* snapshot_sandbox: create (of a running sandbox), list, get and delete snapshots on backends
 * that have them (local, OpenSandbox), and fork a running sandbox into copies (local); restoring
 * is create_sandbox {snapshot_id}. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "server/context.h"

/* The backend that holds snapshots: the sandbox's, or the first that keeps them when no sandbox
 * is named. */
static struct backend *snapshot_backend(struct tool_job *job, const char *sandbox_id,
                                        struct mcp_error *err)
{
    if (sandbox_id != NULL)
        return backend_for_sandbox_id(&job->ctx->backends, sandbox_id, err);
    struct backend *be = backend_for_snapshots(&job->ctx->backends, err);
    if (be == NULL)
        tools_instead_snapshots(job, err);
    return be;
}

static void snapshot_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    const char *id = json_string_value(json_object_get(result, "snapshot_id"));
    if (err == NULL && id != NULL)
        tool_job_set_detail(job, "action=%s snapshot_id=%s",
                            tools_arg_str(job->args, "action", "create"), id);
    tool_job_done_cb(job, result, err);
}

/* With no sandbox named, every backend with snapshots may hold the one asked for (issue 36: the
 * local backend and OpenSandbox both keep them). get and delete: each answers "no snapshot" at
 * once for one it does not keep, so the next is asked. list: the lists merged. */
static int snapshot_call_any(struct tool_job *job, const char *action, backend_cb *cb, void *arg,
                             struct mcp_error *err)
{
    const struct backend_set *set = &job->ctx->backends;
    int rc = job->be->ops->snapshot(job->be, job->owner, action, job->args, cb, arg, err);
    for (size_t i = 0; rc < 0 && err->code == MCP_ERR_NOT_FOUND && i < set->n; i++) {
        struct backend *be = set->slots[i].be;
        if (be == NULL || be == job->be || !backend_has(set->slots[i].ops, BACKEND_SNAPSHOTS))
            continue;
        job->be = be;
        rc = be->ops->snapshot(be, job->owner, action, job->args, cb, arg, err);
    }
    return rc;
}

struct list_merge {
    struct tool_job *job;
    int pending;
    json_t *all;
};

static void merge_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct list_merge *m = arg;
    if (err != NULL) /* one backend's failure leaves the others' lists */
        log_warn("snapshot list: %s", err->msg);
    json_array_extend(m->all, json_object_get(result, "snapshots"));
    if (--m->pending > 0)
        return;
    tool_job_finish(m->job, json_pack("{s:o}", "snapshots", m->all));
    free(m);
}

static int snapshot_list_all(struct tool_job *job, struct mcp_error *err)
{
    const struct backend_set *set = &job->ctx->backends;
    struct list_merge *m = xcalloc(1, sizeof *m);
    m->job = job, m->all = json_array(), m->pending = 1; /* held until every call is made */
    for (size_t i = 0; i < set->n; i++) {
        struct backend *be = set->slots[i].be;
        if (be == NULL || !backend_has(set->slots[i].ops, BACKEND_SNAPSHOTS))
            continue;
        m->pending++;
        if (be->ops->snapshot(be, job->owner, "list", job->args, merge_cb, m, err) < 0)
            merge_cb(m, NULL, err);
    }
    merge_cb(m, NULL, NULL);
    return 0;
}

void tool_snapshot_sandbox(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *action = tools_arg_str(args, "action", "create");
    const char *sandbox_id = tools_arg_str(args, "sandbox_id", NULL);
    tool_job_set_detail(job, "action=%s", action);
    if (strcmp(action, "create") == 0 || strcmp(action, "fork") == 0) {
        /* ownership and "running" first: the backend is asked only about the caller's own */
        if (sandbox_id == NULL)
            mcp_error_set(&err, MCP_ERR_INVALID, 0, "action \"%s\" needs sandbox_id", action);
        if (sandbox_id == NULL || tool_job_bind(job, sandbox_id, TOOL_NEED_RUNNING, &err) < 0) {
            tool_job_fail(job, &err);
            return;
        }
    } else if ((job->be = snapshot_backend(job, sandbox_id, &err)) == NULL) {
        tool_job_fail(job, &err);
        return;
    }
    /* push: local snapshots only, so the first backend with snapshots (the local one) says */
    bool any = sandbox_id == NULL && strcmp(action, "create") != 0 && strcmp(action, "fork") != 0 &&
               strcmp(action, "push") != 0;
    int rc =
        !any
            ? job->be->ops->snapshot(job->be, job->owner, action, args, snapshot_done_cb, job, &err)
        : strcmp(action, "list") == 0 ? snapshot_list_all(job, &err)
                                      : snapshot_call_any(job, action, snapshot_done_cb, job, &err);
    if (rc < 0) {
        tools_instead_snapshots(job, &err);
        tool_job_fail(job, &err);
    }
}
