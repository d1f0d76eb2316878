/* Lifecycle tools: create, list, get, destroy, renew, pause, resume. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"
#include "lib/store/store.h"

/* network_policy of create_sandbox: a new policy, NULL when there is none (*err untouched) or
 * on an error (err filled). network: false with a policy is a contradiction, refused. */
static struct egress_policy *policy_from_args(json_t *args, struct mcp_error *err)
{
    json_t *j = json_object_get(args, "network_policy");
    if (j == NULL || json_is_null(j))
        return NULL;
    if (json_is_false(json_object_get(args, "network"))) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "network: false turns egress off entirely, network_policy lets some of it "
                      "through: drop network to filter egress by the policy, or drop "
                      "network_policy for no egress at all");
        return NULL;
    }
    return egress_policy_parse(j, "network_policy", err);
}

/* Fills spec from create_sandbox's arguments; -1 with err on a bad size or policy (the policy
 * is a new reference in spec->network_policy: the caller releases it). */
static int spec_from_args(json_t *args, const char *owner, struct sandbox_spec *spec,
                          struct mcp_error *err)
{
    memset(spec, 0, sizeof(*spec));
    if (tools_pairs_to_object(args, "env", err) < 0 ||
        tools_pairs_to_object(args, "metadata", err) < 0)
        return -1;
    spec->owner = owner;
    spec->image = tools_arg_str(args, "image", NULL);
    spec->env = json_object_get(args, "env");
    spec->metadata = json_object_get(args, "metadata");
    json_t *cpu = json_object_get(args, "cpu");
    spec->cpu = json_is_number(cpu) ? json_number_value(cpu) : 0;
    json_t *v;
    if ((v = json_object_get(args, "memory")) != NULL &&
        tools_parse_size(v, "memory", &spec->memory_bytes, err) < 0)
        return -1;
    if ((v = json_object_get(args, "disk")) != NULL &&
        tools_parse_size(v, "disk", &spec->disk_bytes, err) < 0)
        return -1;
    spec->pids = (uint32_t)tools_arg_int(args, "pids", 0, 0, UINT32_MAX);
    spec->network = tools_arg_bool(args, "network", false);
    spec->mounts = json_object_get(args, "mounts");
    spec->secrets = json_object_get(args, "secrets"); /* names; the backend binds them */
    spec->timeout_seconds = tools_arg_int(args, "timeout_seconds", 0, -1, MAX_DURATION_S);
    spec->idle_timeout_seconds = tools_arg_int(args, "idle_timeout_seconds", 0, -1, MAX_DURATION_S);
    spec->snapshot_id = tools_arg_str(args, "snapshot_id", NULL);
    err->code = 0;
    struct egress_policy *policy = policy_from_args(args, err);
    if (policy == NULL && err->code != 0)
        return -1;
    if (policy != NULL) /* by policy only: code that knows only network stays loopback-only */
        spec->network = false;
    spec->network_policy = policy;
    return 0;
}

/* Records the new sandbox's id in the audit row, then finishes as usual. */
static void create_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    const char *id = json_string_value(json_object_get(result, "sandbox_id"));
    if (err == NULL && id != NULL) {
        free(job->sandbox_id);
        job->sandbox_id = xstrdup(id);
    }
    tool_job_done_cb(job, result, err);
}

/* An image pull under way: work done of total, so clients show it and their timeouts reset;
 * what says which layer and how far (docs/images.md, Progress). */
static void create_progress(void *arg, uint64_t done, uint64_t total, const char *what)
{
    struct tool_job *job = arg;
    char msg[400];
    snprintf(msg, sizeof msg, "pulling the image: %s", what);
    tool_call_progress(job->call, (double)done, (double)total, msg);
}

/* A restore with no backend named (issue 36): the first backend with snapshots that keeps this
 * one. Each answers "no snapshot" at once for one it does not keep, so the next is asked. */
static int create_restore_any(struct tool_job *job, struct sandbox_spec *spec,
                              struct mcp_error *err)
{
    const struct backend_set *set = &job->ctx->backends;
    int rc = job->be->ops->create(job->be, spec, create_done_cb, job, err);
    for (size_t i = 0; rc < 0 && err->code == MCP_ERR_NOT_FOUND && i < set->n; i++) {
        struct backend *be = set->slots[i].be;
        if (be == NULL || be == job->be || !backend_has(set->slots[i].ops, BACKEND_SNAPSHOTS))
            continue;
        job->be = be;
        rc = be->ops->create(be, spec, create_done_cb, job, err);
    }
    return rc;
}

static void create_now(struct tool_job *job, struct sandbox_spec *spec)
{
    struct mcp_error err;
    struct egress_policy *policy = (struct egress_policy *)spec->network_policy;
    bool any = spec->snapshot_id != NULL && json_object_get(job->args, "backend") == NULL;
    if ((any ? create_restore_any(job, spec, &err)
             : job->be->ops->create(job->be, spec, create_done_cb, job, &err)) < 0)
        tool_job_fail(job, &err);
    egress_policy_unref(policy); /* the backend copied what it keeps */
}

#define TOOL_CLIENT_GONE (-32001) /* tool.h: the call was cancelled or the session ended */

/* A create waiting for the client's roots/list (its spec points into the job's arguments). */
struct create_roots {
    struct tool_job *job;
    struct sandbox_spec spec;
};

/* "file:///a/b%20c" -> "/a/b c"; NULL for other schemes. */
static char *root_path(const char *uri)
{
    if (uri == NULL || strncmp(uri, "file://", 7) != 0)
        return NULL;
    const char *p = uri + 7;
    if (strncmp(p, "localhost/", 10) == 0)
        p += 9;
    if (*p != '/')
        return NULL;
    char *out = xmalloc(strlen(p) + 1), *o = out;
    for (; *p; p++) {
        unsigned v;
        if (*p == '%' && sscanf(p + 1, "%2x", &v) == 1 && v != 0)
            *o++ = (char)v, p += 2;
        else
            *o++ = *p;
    }
    *o = '\0';
    return out;
}

/* The client answered roots/list: its file roots narrow the mounts' sources. An error answer
 * narrows nothing (the allowlist still holds). */
static void create_with_roots(void *arg, json_t *result, json_t *error)
{
    struct create_roots *cr = arg;
    json_t *roots = NULL, *r;
    size_t i;
    if (json_integer_value(json_object_get(error, "code")) == TOOL_CLIENT_GONE) {
        struct mcp_error err;
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0, "create_sandbox was cancelled while "
                      "waiting for the client's roots");
        egress_policy_unref((struct egress_policy *)cr->spec.network_policy);
        tool_job_fail(cr->job, &err);
        free(cr);
        return;
    }
    if (error == NULL && json_is_array(json_object_get(result, "roots"))) {
        roots = json_array();
        json_array_foreach(json_object_get(result, "roots"), i, r) {
            char *path = root_path(json_string_value(json_object_get(r, "uri")));
            if (path)
                json_array_append_new(roots, json_string(path));
            free(path);
        }
    }
    if (json_array_size(roots) == 0) {
        /* No file:// root: nothing to narrow to. Clients that declare the capability and list
         * none (the MCP Inspector's CLI) would otherwise never mount; the person's allowlist
         * still bounds every source. */
        json_decref(roots);
        roots = NULL;
    }
    cr->spec.roots = roots;
    create_now(cr->job, &cr->spec);
    json_decref(roots);
    free(cr);
}

/* Host mounts and a client with roots: ask for them first (they narrow the allowlist). */
static void create_roots_then_now(struct tool_job *job, struct sandbox_spec *spec)
{
    struct mcp_error err;
    if (json_array_size(spec->mounts) > 0 && tool_call_client_has(job->call, "roots")) {
        struct create_roots *cr = xcalloc(1, sizeof *cr);
        cr->job = job, cr->spec = *spec;
        if (tool_call_request_client(job->call, "roots/list", json_object(), create_with_roots, cr,
                                     &err) == 0)
            return;
        free(cr); /* a client that cannot be asked (2026-07-28): no narrowing */
    }
    create_now(job, spec);
}

/* ---- approvals (issue 38): egress beyond the person's list and rw mounts ask first ---- */
static void create_approved(void *arg, bool allowed, const struct mcp_error *refusal)
{
    struct create_roots *cr = arg;
    if (allowed) {
        create_roots_then_now(cr->job, &cr->spec);
    } else {
        egress_policy_unref((struct egress_policy *)cr->spec.network_policy);
        if (refusal)
            tool_job_fail(cr->job, refusal);
        else /* answered already: the person is being asked (2026-07-28) */
            tool_job_abandon(cr->job, "create_sandbox");
    }
    free(cr);
}

static void create_gated(struct tool_job *job, struct sandbox_spec *spec)
{
    struct create_roots *cr = xcalloc(1, sizeof *cr);
    cr->job = job, cr->spec = *spec;
    tools_gate_create(job, spec, create_approved, cr);
}
/* ---- end of approvals ---- */

void tool_create_sandbox(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    struct sandbox_spec spec;
    /* a snapshot lives on a backend: restoring one defaults to the backend that has them */
    bool restore = json_object_get(args, "snapshot_id") != NULL;
    if (restore && json_object_get(args, "image") != NULL) { /* the snapshot has its own image */
        mcp_error_set(&err, MCP_ERR_INVALID, 0, "create_sandbox takes image or snapshot_id, not "
                      "both: pass snapshot_id alone to restore a snapshot (it brings its image), "
                      "or image alone for a fresh sandbox");
        tool_job_fail(job, &err);
        return;
    }
    /* no backend named: the first in the table, or for a restore the first that keeps them */
    const char *name = tools_arg_str(args, "backend", NULL);
    struct backend *be = name == NULL && restore
                             ? backend_for_snapshots(&job->ctx->backends, &err)
                             : backend_by_name(&job->ctx->backends, name, &err);
    if (be != NULL && restore && !backend_has(be->ops, BACKEND_SNAPSHOTS)) {
        char hint[TOOLS_HINT_MAX];
        tools_hint_snapshots(&job->ctx->backends, hint, sizeof hint);
        be = (tools_unsupported(&err, be, "snapshots to restore", hint), NULL);
    }
    if (be == NULL || spec_from_args(args, job->owner, &spec, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    tool_job_set_detail(job, "backend=%s %s=%s", be->ops->name, restore ? "snapshot" : "image",
                        restore ? spec.snapshot_id : spec.image ? spec.image : "default");
    job->be = be;
    spec.progress = create_progress;
    spec.progress_arg = job;
    create_gated(job, &spec);
}

/* ---- update: the settings of a live sandbox ------------------------------------------------ */

/* update_sandbox changes what its arguments name, one backend call after the other: the
 * network_policy (new connections follow it), then the expiry (timeout_seconds from now), then
 * paused. The answer is the sandbox as the last call left it. A call that fails ends the
 * update with its error, which says what was already changed. */
enum update_step { UPDATE_POLICY, UPDATE_SECRETS, UPDATE_EXPIRY, UPDATE_PAUSED, UPDATE_DONE };

struct update_job {
    struct tool_job *job;
    struct egress_policy *policy; /* NULL: the policy stays */
    json_t *secrets;              /* names to bind (after the policy), or NULL: they stay */
    int64_t timeout_seconds;      /* 0: the expiry stays */
    int paused;                   /* -1: stays; 0 resume; 1 pause */
    enum update_step step;
    char done[64]; /* what was changed so far, for an error */
};

static const char *const update_step_names[] = {"network_policy", "secrets", "timeout_seconds",
                                                "paused"};

static void update_next(struct update_job *u, json_t *last);

static void update_free(struct update_job *u)
{
    egress_policy_unref(u->policy);
    json_decref(u->secrets);
    free(u);
}

static void update_fail(struct update_job *u, const struct mcp_error *err)
{
    struct mcp_error e = *err;
    if (u->done[0] != '\0')
        mcp_error_set(&e, err->code, err->sys_errno, "%s (%s was already changed)", err->msg,
                      u->done);
    tool_job_fail(u->job, &e);
    update_free(u);
}

static void update_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct update_job *u = arg;
    if (err != NULL) {
        update_fail(u, err);
        return;
    }
    size_t n = strlen(u->done);
    snprintf(u->done + n, sizeof u->done - n, "%s%s", n ? ", " : "", update_step_names[u->step]);
    u->step++;
    update_next(u, json_incref(result));
}

/* Starts this step's backend call: 0 under way (update_cb goes on), 1 nothing to change at
 * this step, -1 failed (err set). */
static int update_call(struct update_job *u, struct mcp_error *err)
{
    struct backend *be = u->job->be;
    const char *id = u->job->sandbox_id;
    switch (u->step) {
    case UPDATE_POLICY:
        return u->policy ? be->ops->set_network_policy(be, id, u->policy, update_cb, u, err) : 1;
    case UPDATE_SECRETS: /* the one call that binds: a step asking the person can wrap it */
        return u->secrets ? be->ops->bind_secrets(be, id, u->secrets, update_cb, u, err) : 1;
    case UPDATE_EXPIRY:
        return u->timeout_seconds > 0
                   ? be->ops->renew(be, id, u->timeout_seconds, update_cb, u, err)
                   : 1;
    case UPDATE_PAUSED:
        if (u->paused < 0)
            return 1;
        return u->paused ? be->ops->pause(be, id, update_cb, u, err)
                         : be->ops->resume(be, id, update_cb, u, err);
    case UPDATE_DONE:
        break;
    }
    return 1;
}

/* last: the sandbox as the call before left it (stolen). */
static void update_next(struct update_job *u, json_t *last)
{
    struct mcp_error err;
    int rc = 1;
    while (u->step < UPDATE_DONE && (rc = update_call(u, &err)) == 1)
        u->step++;
    if (rc == 1) {
        tool_job_finish(u->job, last);
        update_free(u);
        return;
    }
    json_decref(last);
    if (rc < 0)
        update_fail(u, &err);
}

/* The network_policy argument, in create_sandbox's shape; NULL (err set) when unusable. */
static struct egress_policy *update_policy_arg(json_t *j, const char *id, struct mcp_error *err)
{
    if (json_object_get(j, "default_action") == NULL && json_object_get(j, "egress") == NULL) {
        /* {} would deny everything: most likely not what was meant */
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "network_policy needs default_action and/or egress: e.g. {\"sandbox_id\": "
                      "\"%s\", \"network_policy\": {\"egress\": [{\"action\": \"allow\", "
                      "\"target\": \"pypi.org\"}]}}; to refuse everything say "
                      "{\"default_action\": \"deny\"}",
                      id);
        return NULL;
    }
    return egress_policy_parse(j, "network_policy", err);
}

/* The person's answer to a network_policy beyond their list (approvals, issue 38). */
static void update_approved(void *arg, bool allowed, const struct mcp_error *refusal)
{
    struct update_job *u = arg;
    if (allowed) {
        update_next(u, NULL);
        return;
    }
    if (refusal)
        tool_job_fail(u->job, refusal);
    else /* answered already: the person is being asked (2026-07-28) */
        tool_job_abandon(u->job, "update_sandbox");
    update_free(u);
}

void tool_update_sandbox(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *id = tools_arg_str(args, "sandbox_id", "");
    if (tool_job_bind(job, id, TOOL_NEED_ANY, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    struct update_job *u = xcalloc(1, sizeof *u);
    u->job = job;
    json_t *paused = json_object_get(args, "paused");
    u->paused = json_is_boolean(paused) ? json_is_true(paused) : -1;
    u->timeout_seconds = tools_arg_int(args, "timeout_seconds", 0, 0, MAX_DURATION_S);
    json_t *policy = json_object_get(args, "network_policy");
    if (json_is_object(policy) && (u->policy = update_policy_arg(policy, id, &err)) == NULL) {
        tool_job_fail(job, &err);
        update_free(u);
        return;
    }
    u->secrets = json_incref(json_object_get(args, "secrets"));
    if (u->policy == NULL && u->secrets == NULL && u->timeout_seconds == 0 && u->paused < 0) {
        mcp_error_set(&err, MCP_ERR_INVALID, 0,
                      "update_sandbox changes nothing without paused, timeout_seconds or "
                      "network_policy (or secrets): e.g. {\"sandbox_id\": \"%s\", \"paused\": "
                      "false} resumes it",
                      id);
        tool_job_fail(job, &err);
        update_free(u);
        return;
    }
    tool_job_set_detail(job, "paused=%d timeout=%lld policy=%s", u->paused,
                        (long long)u->timeout_seconds, u->policy ? "new" : "kept");
    if (u->policy == NULL && u->secrets == NULL) {
        update_next(u, NULL);
        return;
    }
    tools_gate_update(job, u->policy, u->secrets, update_approved, u); /* approvals, issue 38 */
}

/* ---- list: every enabled backend, merged ----------------------------------------------------- */

struct list_job {
    struct tool_job *job;
    json_t *sandboxes; /* merged */
    json_t *errors;    /* one message per backend that failed */
    int pending;
};

static void list_maybe_done(struct list_job *lj)
{
    if (--lj->pending > 0)
        return;
    struct tool_job *job = lj->job;
    if (json_array_size(lj->sandboxes) == 0 && json_array_size(lj->errors) > 0) {
        struct mcp_error err;
        mcp_error_set(&err, MCP_ERR_BACKEND, 0, "listing sandboxes failed: %s",
                      json_string_value(json_array_get(lj->errors, 0)));
        tool_job_fail(job, &err);
    } else {
        json_t *out = json_pack("{s:O}", "sandboxes", lj->sandboxes);
        if (json_array_size(lj->errors) > 0)
            json_object_set(out, "errors", lj->errors);
        tool_job_finish(job, out);
    }
    json_decref(lj->sandboxes);
    json_decref(lj->errors);
    free(lj);
}

static void list_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct list_job *lj = arg;
    json_t *items = json_object_get(result, "sandboxes");
    if (err != NULL)
        json_array_append_new(lj->errors, json_string(err->msg));
    else if (json_is_array(items))
        json_array_extend(lj->sandboxes, items);
    list_maybe_done(lj);
}

void tool_list_sandboxes(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error perr;
    if (tools_pairs_to_object(args, "metadata", &perr) < 0) {
        tool_job_fail(job, &perr);
        return;
    }
    struct list_job *lj = xcalloc(1, sizeof(*lj));
    lj->job = job;
    lj->sandboxes = json_array();
    lj->errors = json_array();
    lj->pending = 1; /* held until every backend has been asked */
    const struct backend_set *set = &job->ctx->backends;
    for (size_t i = 0; i < set->n; i++) {
        struct backend *be = set->slots[i].be;
        struct mcp_error err;
        if (be == NULL) /* not running: it has no sandboxes to list */
            continue;
        lj->pending++;
        if (be->ops->list(be, job->owner, args, list_cb, lj, &err) < 0) {
            json_array_append_new(lj->errors, json_string(err.msg));
            lj->pending--;
        }
    }
    list_maybe_done(lj);
}

/* ---- operations on one sandbox --------------------------------------------------------------- */

enum sandbox_op { OP_GET, OP_DESTROY };

/* destroy_sandbox is idempotent: a second call for a sandbox this caller created or destroyed
 * (the audit log says so) succeeds. Anyone else still gets the one not-found message. */
static bool destroyed_before(struct tool_job *job, const char *id, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err->code != MCP_ERR_NOT_FOUND ||
        store_audit_owned(job->ctx->store, job->owner, id, &e) != 1)
        return false;
    tool_job_finish(job, json_pack("{s:s, s:b, s:s}", "sandbox_id", id, "destroyed", 1, "note",
                                   "already gone (destroyed or expired earlier)"));
    return true;
}

static void destroy_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct tool_job *job = arg;
    /* a row still there while a destroy's release is under way: the backend says not found */
    if (err != NULL) {
        if (!destroyed_before(job, job->sandbox_id, err))
            tool_job_fail(job, err);
        return;
    }
    tool_job_finish(job, json_pack("{s:s, s:b}", "sandbox_id", job->sandbox_id, "destroyed", 1));
}

static void sandbox_op(struct tool_call *call, json_t *args, enum sandbox_op op)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    const char *id = tools_arg_str(args, "sandbox_id", "");
    if (tool_job_bind(job, id, TOOL_NEED_ANY, &err) < 0) {
        if (op != OP_DESTROY || !destroyed_before(job, id, &err))
            tool_job_fail(job, &err);
        return;
    }
    const struct backend_ops *ops = job->be->ops;
    int rc = -1;
    switch (op) {
    case OP_GET: rc = ops->get(job->be, id, tool_job_done_cb, job, &err); break;
    case OP_DESTROY:
        rc = ops->destroy(job->be, id, destroy_cb, job, &err);
        break;
    }
    if (rc < 0 && (op != OP_DESTROY || !destroyed_before(job, id, &err)))
        tool_job_fail(job, &err);
}

void tool_get_sandbox(struct tool_call *call, json_t *args)
{
    sandbox_op(call, args, OP_GET);
}

void tool_destroy_sandbox(struct tool_call *call, json_t *args)
{
    sandbox_op(call, args, OP_DESTROY);
}
