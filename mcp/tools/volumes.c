/* volume: create, list, inspect and delete the caller's named volumes (issue 36) on the backend
 * that keeps them (local). Mounting one is create_sandbox's mounts {volume, target, mode}. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include "server/context.h"

void tool_volume(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *action = tools_arg_str(args, "action", "list");
    const char *name = tools_arg_str(args, "name", NULL);
    tool_job_set_detail(job, "action=%s%s%s", action, name ? " name=" : "", name ? name : "");
    if ((job->be = backend_for_volumes(&job->ctx->backends, &err)) == NULL ||
        job->be->ops->volume(job->be, job->owner, action, args, tool_job_done_cb, job, &err) < 0)
        tool_job_fail(job, &err);
}
