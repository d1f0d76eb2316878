/* Network and diagnostics tools: get_endpoint, diagnose_sandbox, doctor. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <stddef.h>
#include <string.h>

#include "mcp/base/cleanup.h"
#include "mcp/base/xalloc.h"
#include "mcp/config.h"
#include "mcp/context.h"
#include "mcp/store/store.h"
#ifdef MCPBOX_HAVE_DOCTOR
#include "backend/local/doctor.h"
#endif

void tool_get_endpoint(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    int port = (int)tools_arg_int(args, "port", 0, 1, 65535);
    tool_job_set_detail(job, "port=%d", port);
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0 ||
        job->be->ops->endpoint(job->be, job->sandbox_id, port, tool_job_done_cb, job, &err) < 0)
        tool_job_fail(job, &err);
}

/* Metrics are a diagnosis "what": {sandbox_id, what:"metrics", metrics:{...}}. */
static void metrics_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    if (err != NULL || !json_is_object(result)) {
        tool_job_done_cb(job, result, err);
        return;
    }
    tool_job_finish(job, json_pack("{s:s,s:s,s:O}", "sandbox_id", job->sandbox_id, "what",
                                   "metrics", "metrics", result));
}

void tool_diagnose_sandbox(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *what = tools_arg_str(args, "what", "summary");
    bool metrics = strcmp(what, "metrics") == 0;
    tool_job_set_detail(job, "what=%s", what);
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""),
                      metrics ? TOOL_NEED_RUNNING : TOOL_NEED_ANY, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    if (metrics && job->be->ops->metrics == NULL) {
        tools_unsupported(&err, job->be, "live metrics", "call get_sandbox for what it records "
                          "of the sandbox's usage");
        tool_job_fail(job, &err);
        return;
    }
    if ((metrics ? job->be->ops->metrics(job->be, job->sandbox_id, metrics_done_cb, job, &err)
                 : job->be->ops->diagnose(job->be, job->sandbox_id, what, tool_job_done_cb, job,
                                          &err)) < 0)
        tool_job_fail(job, &err);
}

#ifdef MCPBOX_HAVE_DOCTOR
/* The checks fork probe children and read /proc and /sys: run them off the loop thread. */
struct doctor_job {
    uv_work_t work;
    struct tool_job *job;
    char *state_dir;
    struct doctor_report report;
};

static void doctor_work(uv_work_t *w)
{
    struct doctor_job *dj = container_of(w, struct doctor_job, work);
    doctor_run(dj->state_dir, &dj->report);
}

static void doctor_after(uv_work_t *w, int status)
{
    struct doctor_job *dj = container_of(w, struct doctor_job, work);
    json_t *out = doctor_report_json(&dj->report);
    if (!doctor_report_ok(&dj->report))
        json_object_set_new(out, "note", json_string("local sandboxes cannot run on this host "
                                                     "until the failing required checks are "
                                                     "fixed: run each check's fix"));
    tool_job_set_detail(dj->job, "ok=%s", doctor_report_ok(&dj->report) ? "true" : "false");
    tool_job_finish(dj->job, out);
    doctor_report_release(&dj->report);
    free(dj->state_dir);
    free(dj);
}

void tool_doctor(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct doctor_job *dj = xcalloc(1, sizeof(*dj));
    dj->job = job;
    const char *dir = job->ctx->store ? store_state_dir(job->ctx->store) : NULL;
    if (dir == NULL && job->ctx->config != NULL)
        dir = job->ctx->config->state_dir;
    dj->state_dir = xstrdup(dir ? dir : ".");
    if (uv_queue_work(job->ctx->loop, &dj->work, doctor_work, doctor_after) != 0) {
        doctor_work(&dj->work); /* no thread pool: run inline rather than fail */
        doctor_after(&dj->work, 0);
    }
}
#else
void tool_doctor(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    mcp_error_set(&err, MCP_ERR_UNSUPPORTED, 0,
                  "this mcpbox was built without the local backend's host checks; run "
                  "`mcpbox doctor` from a build that includes backend/local");
    tool_job_fail(job, &err);
}
#endif
