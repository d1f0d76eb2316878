/* snapshot_sandbox: create (of a running sandbox), list and delete snapshots on backends that
 * have them (OpenSandbox); restoring is create_sandbox {snapshot_id}. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <string.h>

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

void tool_snapshot_sandbox(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *action = tools_arg_str(args, "action", "create");
    const char *sandbox_id = tools_arg_str(args, "sandbox_id", NULL);
    tool_job_set_detail(job, "action=%s", action);
    if (strcmp(action, "create") == 0) {
        /* ownership and "running" first: the backend is asked only about the caller's own */
        if (sandbox_id == NULL)
            mcp_error_set(&err, MCP_ERR_INVALID, 0, "action \"create\" needs sandbox_id");
        if (sandbox_id == NULL || tool_job_bind(job, sandbox_id, TOOL_NEED_RUNNING, &err) < 0) {
            tool_job_fail(job, &err);
            return;
        }
    } else if ((job->be = snapshot_backend(job, sandbox_id, &err)) == NULL) {
        tool_job_fail(job, &err);
        return;
    }
    if (job->be->ops->snapshot(job->be, job->owner, action, args, snapshot_done_cb, job,
                               &err) < 0) {
        tools_instead_snapshots(job, &err);
        tool_job_fail(job, &err);
    }
}
