/* review_changes and apply_changes: the review-and-apply half of host workspaces (issue 13).
 * A copy-on-write mount leaves the host untouched; these show what the sandbox changed there
 * (a list and a unified diff, paged like command output) and write all or some of it back. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <string.h>

static void review_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    if (err == NULL && result != NULL)
        tool_job_set_detail(job, "changes=%zu diff_bytes=%lld",
                            json_array_size(json_object_get(result, "changes")),
                            (long long)json_integer_value(json_object_get(result, "diff_bytes")));
    tool_job_done_cb(job, result, err);
}

static void apply_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    if (err == NULL && result != NULL)
        tool_job_set_detail(job, "applied=%lld conflicts=%lld failed=%lld refused=%lld",
                            (long long)json_integer_value(json_object_get(result, "applied")),
                            (long long)json_integer_value(json_object_get(result, "conflicts")),
                            (long long)json_integer_value(json_object_get(result, "failed")),
                            (long long)json_integer_value(json_object_get(result, "refused")));
    tool_job_done_cb(job, result, err);
}

/* Relative paths are relative to /workspace, as in the file tools. */
static json_t *absolute_paths(json_t *paths)
{
    json_t *out = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(paths, i, p)
    {
        const char *s = json_string_value(p);
        if (s == NULL)
            continue;
        if (s[0] == '/')
            json_array_append(out, p);
        else
            json_array_append_new(out, json_sprintf("/workspace/%s", s));
    }
    return out;
}

static json_t *backend_args(json_t *args, const char *action)
{
    json_t *bargs = json_object();
    json_t *paths = json_object_get(args, "paths");
    if (json_is_array(paths))
        json_object_set_new(bargs, "paths", absolute_paths(paths));
    if (strcmp(action, "review") == 0) {
        json_object_set_new(bargs, "offset",
                            json_integer(tools_arg_int(args, "offset", 0, 0, INT64_MAX)));
        json_object_set_new(
            bargs, "max_bytes",
            json_integer(tools_arg_int(args, "max_bytes", TOOLS_DEFAULT_OUTPUT_CAP,
                                       TOOLS_MIN_OUTPUT_CAP, TOOLS_MAX_OUTPUT_CAP)));
    } else {
        json_object_set_new(bargs, "overwrite",
                            json_boolean(tools_arg_bool(args, "overwrite", false)));
        const char *review = tools_arg_str(args, "review", NULL);
        if (review)
            json_object_set_new(bargs, "review", json_string(review));
    }
    return bargs;
}

static void workspace_now(struct tool_job *job, const char *action, backend_cb *done)
{
    struct mcp_error err;
    json_t *bargs = backend_args(job->args, action);
    int rc = job->be->ops->workspace(job->be, job->sandbox_id, action, bargs, done, job, &err);
    json_decref(bargs);
    if (rc < 0)
        tool_job_fail(job, &err);
}

static int workspace_bind(struct tool_call *call, json_t *args, struct tool_job **out)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    *out = job;
    /* Any state: the upper layer outlives a paused or stopped sandbox until it is destroyed. */
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_ANY, &err) < 0) {
        tool_job_fail(job, &err);
        return -1;
    }
    return 0;
}

void tool_review_changes(struct tool_call *call, json_t *args)
{
    struct tool_job *job;
    if (workspace_bind(call, args, &job) == 0)
        workspace_now(job, "review", review_done_cb);
}

/* The person's answer (mcp/tools/approvals.c): the apply goes ahead or is refused. */
static void apply_answered(void *arg, bool allowed, const struct mcp_error *refusal)
{
    struct tool_job *job = arg;
    if (allowed)
        workspace_now(job, "apply", apply_done_cb);
    else if (refusal)
        tool_job_fail(job, refusal);
    else /* answered already: the person is being asked (2026-07-28) */
        tool_job_abandon(job, "apply_changes");
}

void tool_apply_changes(struct tool_call *call, json_t *args)
{
    struct tool_job *job;
    if (workspace_bind(call, args, &job) < 0)
        return;
    json_t *paths = json_object_get(args, "paths");
    json_t *abs = json_is_array(paths) ? absolute_paths(paths) : NULL;
    tools_gate_apply(job, abs, apply_answered, job);
    json_decref(abs);
}
