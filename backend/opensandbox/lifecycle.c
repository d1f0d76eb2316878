/* Sandbox lifecycle on the OpenSandbox server: create (then wait until Running and execd answers
 * /ping), get, list, renew, pause, resume, destroy. */
#define LOG_MODULE "opensandbox"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

struct lc_op {
    struct osb_backend *b;
    backend_cb *cb;
    void *arg;
    char *sid, *rid, *owner;
    json_t *record;  /* create: what the store keeps */
    json_t *remote;  /* the last Sandbox object seen */
    json_t *acc;     /* list: accumulated infos */
    json_t *filter;  /* list: {state?, metadata?} */
    char *query;     /* list: query without page */
    int page;
    uint64_t deadline_ms;
    bool created;    /* create: the remote sandbox exists; delete it if we fail */
    bool resuming;
    uv_timer_t timer;
};

static void lc_closed(uv_handle_t *h)
{
    struct lc_op *op = h->data;
    free(op->sid);
    free(op->rid);
    free(op->owner);
    free(op->query);
    json_decref(op->record);
    json_decref(op->remote);
    json_decref(op->acc);
    json_decref(op->filter);
    free(op);
}

static struct lc_op *lc_new(struct osb_backend *b, const char *sid, backend_cb *cb, void *arg)
{
    struct lc_op *op = xcalloc(1, sizeof(*op));
    op->b = b;
    op->cb = cb;
    op->arg = arg;
    if (sid != NULL) {
        op->sid = xstrdup(sid);
        op->rid = xstrdup(sid + strlen(OSB_ID_PREFIX));
    }
    uv_timer_init(b->base.loop, &op->timer);
    op->timer.data = op;
    return op;
}

/* Frees an op whose first request could not even start (nothing will call back). */
static int lc_abandon(struct lc_op *op)
{
    uv_close((uv_handle_t *)&op->timer, lc_closed);
    return -1;
}

static void lc_finish(struct lc_op *op, json_t *result, const struct mcp_error *err)
{
    op->cb(op->arg, err ? NULL : result, err);
    json_decref(result);
    uv_close((uv_handle_t *)&op->timer, lc_closed);
}

static void lc_fail(struct lc_op *op, const struct mcp_error *err)
{
    lc_finish(op, NULL, err);
}

static void ignore_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    if (err != NULL)
        log_warn("cleanup of a failed sandbox: %s", err->msg);
}

/* A call that may fail to start: report through the op (asynchronously is not needed here
 * because every caller is itself running from a loop callback). */
static void lc_call(struct lc_op *op, const char *path, const struct osb_call_opts *o,
                    osb_call_fn *done)
{
    struct mcp_error e;
    if (osb_lifecycle_call(op->b, path, o, done, op, &e) != 0)
        lc_fail(op, &e);
}

static void lc_set_state(struct lc_op *op, json_t *remote)
{
    const char *rs = json_string_value(json_object_get(json_object_get(remote, "status"), "state"));
    struct mcp_error e;
    if (op->b->base.store != NULL && rs != NULL &&
        store_sandbox_set_state(op->b->base.store, op->sid,
                                sandbox_state_name(osb_state_map(rs)), &e) != 0 &&
        e.code != MCP_ERR_NOT_FOUND)
        log_warn("recording the state of %s: %s", op->sid, e.msg);
}

/* ---- get ------------------------------------------------------------------------------------- */

static void get_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    struct mcp_error e;
    if (err != NULL) {
        lc_fail(op, err);
        return;
    }
    json_t *j = osb_resp_json(resp, "getting the sandbox", &e);
    if (j == NULL) {
        lc_fail(op, &e);
        return;
    }
    lc_set_state(op, j);
    json_t *info = osb_sandbox_info(op->b, j);
    json_decref(j);
    lc_finish(op, info, NULL);
}

static void lc_get(struct lc_op *op)
{
    cleanup_free char *path = xasprintf("/sandboxes/%s", op->rid);
    struct osb_call_opts o = {.method = "GET", .what = "getting the sandbox",
                              .sandbox_id = op->sid, .retry = HTTPC_RETRY_IDEMPOTENT};
    lc_call(op, path, &o, get_done);
}

int osb_get(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
            struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    struct lc_op *op = lc_new(b, sandbox_id, cb, arg);
    cleanup_free char *path = xasprintf("/sandboxes/%s", op->rid);
    struct osb_call_opts o = {.method = "GET", .what = "getting the sandbox",
                              .sandbox_id = sandbox_id, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_lifecycle_call(b, path, &o, get_done, op, err) != 0)
        return lc_abandon(op);
    return 0;
}

/* ---- waiting until ready (create, resume) ------------------------------------------------------ */

static void wait_poll_state(struct lc_op *op);
static void wait_ping(struct lc_op *op);
static void create_ready(struct lc_op *op);

static void create_cleanup_remote(struct lc_op *op)
{
    if (!op->created)
        return;
    cleanup_free char *path = xasprintf("/sandboxes/%s", op->rid);
    struct osb_call_opts o = {.method = "DELETE", .what = "deleting the failed sandbox",
                              .sandbox_id = op->sid, .retry = HTTPC_RETRY_IDEMPOTENT};
    struct mcp_error e;
    if (osb_lifecycle_call(op->b, path, &o, ignore_done, NULL, &e) != 0)
        log_warn("%s", e.msg);
    if (op->b->base.store != NULL)
        store_sandbox_delete(op->b->base.store, op->sid, &e);
    osb_endpoint_forget(op->b, op->rid);
}

/* Failure while waiting: a created sandbox is deleted (best effort), as the SDKs do. */
static void wait_fail(struct lc_op *op, const struct mcp_error *err)
{
    struct mcp_error e;
    mcp_error_copy(&e, err);
    if (!op->resuming) {
        create_cleanup_remote(op);
        if (op->created)
            mcp_error_prefix(&e, "sandbox %s was deleted again", op->sid);
    }
    lc_fail(op, &e);
}

static void wait_again(struct lc_op *op, uint32_t delay_ms, uv_timer_cb next,
                       const struct mcp_error *why)
{
    if (now_mono_ms() + delay_ms >= op->deadline_ms) {
        struct mcp_error e;
        mcp_error_set(&e, MCP_ERR_TIMEOUT, 0,
                      "sandbox %s was not ready within %u ms (%s); the image may be slow to "
                      "start: try again with a longer wait, or call diagnose_sandbox",
                      op->sid, op->b->t.ready_timeout_ms, why ? why->msg : "still starting");
        wait_fail(op, &e);
        return;
    }
    uv_timer_start(&op->timer, next, delay_ms, 0);
}

static void on_state_timer(uv_timer_t *t)
{
    wait_poll_state(t->data);
}

static void on_ping_timer(uv_timer_t *t)
{
    wait_ping(t->data);
}

static int remote_failed(struct lc_op *op, json_t *status, const char *rs, struct mcp_error *e)
{
    const char *reason = json_string_value(json_object_get(status, "reason"));
    const char *msg = json_string_value(json_object_get(status, "message"));
    bool pull = (reason && strstr(reason, "PULL")) || (msg && strcasestr(msg, "pull"));
    if (pull)
        return mcp_error_set(e, MCP_ERR_INVALID, 0,
                             "sandbox %s failed: the server could not pull the image (%s: %s); "
                             "check the image name", op->sid, reason ? reason : rs,
                             msg ? msg : "no details");
    return mcp_error_set(e, MCP_ERR_BACKEND, 0,
                         "sandbox %s is %s (%s: %s); call diagnose_sandbox for its logs", op->sid,
                         rs, reason ? reason : "no reason given", msg ? msg : "no details");
}

static void wait_check(struct lc_op *op);

static void poll_state_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    struct mcp_error e;
    json_t *j = err ? NULL : osb_resp_json(resp, "waiting for the sandbox", &e);
    if (j == NULL) {
        wait_fail(op, err ? err : &e);
        return;
    }
    json_decref(op->remote);
    op->remote = j;
    wait_check(op);
}

static void wait_check(struct lc_op *op)
{
    struct mcp_error e;
    json_t *status = json_object_get(op->remote, "status");
    const char *rs = json_string_value(json_object_get(status, "state"));
    if (rs && (strcasecmp(rs, "Running") == 0 || strcasecmp(rs, "Allocated") == 0)) {
        wait_ping(op);
        return;
    }
    if (rs && (strcasecmp(rs, "Failed") == 0 || strcasecmp(rs, "Terminated") == 0)) {
        remote_failed(op, status, rs, &e);
        wait_fail(op, &e);
        return;
    }
    wait_again(op, op->b->t.state_poll_ms, on_state_timer, NULL);
}

static void wait_poll_state(struct lc_op *op)
{
    cleanup_free char *path = xasprintf("/sandboxes/%s", op->rid);
    struct osb_call_opts o = {.method = "GET", .what = "waiting for the sandbox",
                              .sandbox_id = op->sid, .retry = HTTPC_RETRY_IDEMPOTENT};
    struct mcp_error e;
    if (osb_lifecycle_call(op->b, path, &o, poll_state_done, op, &e) != 0)
        wait_fail(op, &e);
}

static void ping_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    if (err == NULL) {
        create_ready(op);
        return;
    }
    if (err->code == MCP_ERR_DENIED) {
        wait_fail(op, err);
        return;
    }
    wait_again(op, op->b->t.ping_poll_ms, on_ping_timer, err);
}

static void ping_with_endpoint(void *arg, const struct osb_endpoint *ep,
                               const struct mcp_error *err)
{
    struct lc_op *op = arg;
    if (err != NULL) { /* K8s: 404 POD_IP_NOT_AVAILABLE while the pod starts */
        if (err->code == MCP_ERR_DENIED) {
            wait_fail(op, err);
            return;
        }
        wait_again(op, op->b->t.ping_poll_ms, on_ping_timer, err);
        return;
    }
    uint64_t left = op->deadline_ms - now_mono_ms();
    struct osb_call_opts o = {.method = "GET", .what = "pinging execd", .sandbox_id = op->sid,
                              .retry = HTTPC_RETRY_NONE,
                              .deadline_ms = left < op->b->t.request_timeout_ms
                                                 ? (uint32_t)left + 1
                                                 : op->b->t.request_timeout_ms};
    struct mcp_error e;
    if (osb_execd_call(op->b, ep, "/ping", &o, ping_done, op, &e) == NULL)
        wait_fail(op, &e);
}

static void wait_ping(struct lc_op *op)
{
    struct mcp_error e;
    if (osb_endpoint_resolve(op->b, op->sid, ping_with_endpoint, op, &e) != 0)
        wait_fail(op, &e);
}

static void workspace_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    if (err != NULL)
        log_warn("creating %s in %s: %s", OSB_WORKSPACE, op->sid, err->msg);
    lc_set_state(op, op->remote);
    lc_finish(op, osb_sandbox_info(op->b, op->remote), NULL);
}

static void workspace_with_endpoint(void *arg, const struct osb_endpoint *ep,
                                    const struct mcp_error *err)
{
    struct lc_op *op = arg;
    if (err != NULL) {
        workspace_done(op, NULL, err);
        return;
    }
    json_t *body = json_pack("{s:{s:i}}", OSB_WORKSPACE, "mode", 755);
    struct osb_call_opts o = {.method = "POST", .what = "creating the workspace",
                              .sandbox_id = op->sid, .json = body,
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    struct mcp_error e;
    struct httpc_req *r = osb_execd_call(op->b, ep, "/directories", &o, workspace_done, op, &e);
    json_decref(body);
    if (r == NULL)
        lc_fail(op, &e);
}

static void create_ready(struct lc_op *op)
{
    if (op->resuming) {
        lc_set_state(op, op->remote);
        lc_finish(op, osb_sandbox_info(op->b, op->remote), NULL);
        return;
    }
    struct mcp_error e;
    if (osb_endpoint_resolve(op->b, op->sid, workspace_with_endpoint, op, &e) != 0)
        workspace_done(op, NULL, &e);
}

/* ---- create ---------------------------------------------------------------------------------- */

/* The store row is what lets the tools find the sandbox and check its owner: without it the
 * sandbox would be unusable, so failing to write it fails the create. */
static int create_record(struct lc_op *op, json_t *remote, struct mcp_error *err)
{
    struct osb_backend *b = op->b;
    if (b->base.store == NULL)
        return 0;
    int64_t now = now_wall_ms(), expires = 0;
    const char *exp = json_string_value(json_object_get(remote, "expiresAt"));
    if (exp != NULL)
        parse_rfc3339_ms(exp, &expires);
    json_object_set_new(op->record, "remote_id", json_string(op->rid));
    struct store_sandbox sb = {.id = op->sid, .backend = (char *)"opensandbox", .owner = op->owner,
                               .state = (char *)"creating", .created_at_ms = now,
                               .expires_at_ms = expires, .last_active_ms = now,
                               .record = op->record};
    if (store_sandbox_insert(b->base.store, &sb, err) != 0)
        return mcp_error_prefix(err, "recording sandbox %s in the state store", op->sid);
    return 0;
}

static void create_posted(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    struct mcp_error e;
    if (err != NULL) {
        lc_fail(op, err);
        return;
    }
    json_t *j = osb_resp_json(resp, "creating the sandbox", &e);
    const char *rid = json_string_value(json_object_get(j, "id"));
    cleanup_free char *sid = rid ? xasprintf(OSB_ID_PREFIX "%s", rid) : NULL;
    if (rid == NULL || osb_remote_id(sid, &e) == NULL) {
        if (j != NULL)
            mcp_error_set(&e, MCP_ERR_BACKEND, 0,
                          "creating the sandbox: the server's answer has no usable \"id\"");
        json_decref(j);
        lc_fail(op, &e);
        return;
    }
    op->sid = steal_ptr(&sid);
    op->rid = xstrdup(rid);
    op->created = true;
    op->remote = j;
    if (create_record(op, j, &e) != 0) {
        wait_fail(op, &e);
        return;
    }
    op->deadline_ms = now_mono_ms() + op->b->t.ready_timeout_ms;
    wait_check(op); /* the 202 body carries the state: Docker says Running at once */
}

static json_t *create_limits(const struct sandbox_spec *spec, json_t **record_limits)
{
    json_t *rl = json_object();
    if (spec->cpu > 0) {
        long milli = lround(spec->cpu * 1000.0);
        json_object_set_new(rl, "cpu", milli % 1000 == 0 ? json_sprintf("%ld", milli / 1000)
                                                         : json_sprintf("%ldm", milli));
    } else {
        json_object_set_new(rl, "cpu", json_string(OSB_DEFAULT_CPU));
    }
    if (spec->memory_bytes > 0) {
        uint64_t mib = (spec->memory_bytes + 1048575) / 1048576;
        json_object_set_new(rl, "memory", json_sprintf("%lluMi", (unsigned long long)mib));
    } else {
        json_object_set_new(rl, "memory", json_string(OSB_DEFAULT_MEMORY));
    }
    double cpu = osb_parse_cpu(json_string_value(json_object_get(rl, "cpu")));
    int64_t mem = osb_parse_quantity(json_string_value(json_object_get(rl, "memory")));
    *record_limits = json_pack("{s:f,s:I,s:I,s:I}", "cpu", cpu, "memory_bytes", (json_int_t)mem,
                               "pids", (json_int_t)0, "disk_bytes", (json_int_t)0);
    return rl;
}

static int check_strings(json_t *obj, const char *what, struct mcp_error *err)
{
    const char *k;
    json_t *v;
    if (obj != NULL && !json_is_object(obj))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "%s must be an object of strings", what);
    json_object_foreach(obj, k, v) {
        if (!json_is_string(v))
            return mcp_error_set(err, MCP_ERR_INVALID, 0, "%s.%s must be a string", what, k);
    }
    return 0;
}

/* The start source: an image (with the SDKs' idle entrypoint), or a snapshot to restore, for
 * which the server defaults the entrypoint itself (the lifecycle spec, POST /sandboxes:
 * tests/opensandbox/specs/sandbox-lifecycle.yml). */
static json_t *create_source(const struct sandbox_spec *spec, const char *image)
{
    if (spec->snapshot_id != NULL)
        return json_pack("{s:s}", "snapshotId", spec->snapshot_id);
    return json_pack("{s:{s:s},s:[sss]}", "image", "uri", image, "entrypoint", "tail", "-f",
                     "/dev/null");
}

static json_t *create_body(const struct sandbox_spec *spec, json_t **record, struct mcp_error *err)
{
    int64_t timeout = spec->timeout_seconds == 0 ? OSB_DEFAULT_TIMEOUT_S : spec->timeout_seconds;
    if (timeout > 0 && timeout < OSB_MIN_TIMEOUT_S) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "OpenSandbox sandboxes live at least %d s: use timeout_seconds >= "
                      "%d, or a negative value for no expiry",
                      OSB_MIN_TIMEOUT_S, OSB_MIN_TIMEOUT_S);
        return NULL;
    }
    if (spec->pids > 0 || spec->disk_bytes > 0 || spec->idle_timeout_seconds > 0) {
        mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                      "OpenSandbox cannot limit %s; leave it out (cpu, memory, "
                      "timeout_seconds and network are supported)",
                      spec->pids > 0         ? "pids"
                      : spec->disk_bytes > 0 ? "disk"
                                             : "idle time");
        return NULL;
    }
    if (check_strings(spec->env, "env", err) || check_strings(spec->metadata, "metadata", err) ||
        backend_check_env(spec->env, "env", err))
        return NULL;
    const char *image = spec->image ? spec->image : OSB_DEFAULT_IMAGE;
    json_t *rec_limits = NULL;
    json_t *body = create_source(spec, image);
    json_object_set_new(body, "resourceLimits", create_limits(spec, &rec_limits));
    if (timeout > 0)
        json_object_set_new(body, "timeout", json_integer(timeout));
    if (spec->env != NULL && json_object_size(spec->env) > 0)
        json_object_set_new(body, "env", json_deep_copy(spec->env));
    json_t *meta = spec->metadata ? json_deep_copy(spec->metadata) : json_object();
    if (spec->owner != NULL) {
        char label[17];
        osb_owner_label(spec->owner, label);
        json_object_set_new(meta, OSB_OWNER_KEY, json_string(label));
    }
    json_object_set_new(body, "metadata", meta);
    if (spec->network_policy != NULL) {
        json_t *np = osb_network_policy_body(spec->network_policy, err);
        if (np == NULL) {
            json_decref(body);
            json_decref(rec_limits);
            return NULL;
        }
        json_object_set_new(body, "networkPolicy", np);
    } else if (!spec->network) {
        json_object_set_new(body, "networkPolicy",
                            json_pack("{s:s,s:[]}", "defaultAction", "deny", "egress"));
    }
    *record = json_pack("{s:s,s:o,s:b}", "image", image, "limits", rec_limits, "network",
                        spec->network || spec->network_policy != NULL);
    if (spec->network_policy != NULL)
        json_object_set_new(*record, "network_policy",
                            egress_policy_to_json(spec->network_policy));
    if (spec->snapshot_id != NULL)
        json_object_set_new(*record, "image", json_sprintf("snapshot:%s", spec->snapshot_id));
    return body;
}

int osb_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb, void *arg,
               struct mcp_error *err)
{
    /* Host directories: the remote server cannot see this host's files. */
    if (json_array_size(spec->mounts) > 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the opensandbox backend cannot mount host directories (its "
                             "sandboxes run on another server): copy files in with write_file, "
                             "or create the sandbox on the local backend (backend: \"local\")");
    if (spec->credential_proxy)
        return osb_credential_proxy_refused(err);
    if (json_array_size(spec->secrets) > 0) /* the remote's vault: vault.c */
        return osb_vault_create(be, spec, cb, arg, err);
    return osb_create_as(be, spec, NULL, cb, arg, err);
}

int osb_create_as(struct backend *be, const struct sandbox_spec *spec,
                  const struct osb_vault_plan *plan, backend_cb *cb, void *arg,
                  struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    json_t *record = NULL;
    if (spec->snapshot_id != NULL &&
        (osb_snapshot_id_check(spec->snapshot_id, err) != 0 ||
         osb_snap_owned(b, spec->snapshot_id, spec->owner ? spec->owner : "", err) != 0))
        return -1;
    cleanup_json json_t *body = create_body(spec, &record, err);
    if (body == NULL)
        return -1;
    if (plan != NULL)
        osb_vault_apply_body(plan, body, record);
    struct lc_op *op = lc_new(b, NULL, cb, arg);
    op->record = record;
    op->owner = xstrdup(spec->owner ? spec->owner : "");
    struct osb_call_opts o = {.method = "POST", .what = "creating the sandbox", .json = body,
                              .retry = HTTPC_RETRY_SAFE};
    if (osb_lifecycle_call(b, "/sandboxes", &o, create_posted, op, err) != 0)
        return lc_abandon(op);
    return 0;
}

/* ---- pause, resume, renew -------------------------------------------------------------------- */

static void then_get(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    if (err != NULL) {
        lc_fail(op, err);
        return;
    }
    lc_get(op);
}

static void resume_posted(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    if (err != NULL) {
        lc_fail(op, err);
        return;
    }
    osb_endpoint_forget(op->b, op->rid); /* K8s may move it */
    op->resuming = true;
    op->deadline_ms = now_mono_ms() + op->b->t.ready_timeout_ms;
    wait_poll_state(op);
}

static int lc_post(struct backend *be, const char *sandbox_id, const char *verb, json_t *body,
                   osb_call_fn *done, backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    struct lc_op *op = lc_new(b, sandbox_id, cb, arg);
    cleanup_free char *path = xasprintf("/sandboxes/%s/%s", op->rid, verb);
    cleanup_free char *what = xasprintf("%s the sandbox",
                                        strcmp(verb, "pause") == 0    ? "pausing"
                                        : strcmp(verb, "resume") == 0 ? "resuming"
                                                                      : "renewing");
    struct osb_call_opts o = {.method = "POST", .what = what, .sandbox_id = sandbox_id,
                              .json = body, .retry = HTTPC_RETRY_SAFE};
    if (osb_lifecycle_call(b, path, &o, done, op, err) != 0)
        return lc_abandon(op);
    return 0;
}

int osb_pause(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
              struct mcp_error *err)
{
    return lc_post(be, sandbox_id, "pause", NULL, then_get, cb, arg, err);
}

int osb_resume(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
               struct mcp_error *err)
{
    return lc_post(be, sandbox_id, "resume", NULL, resume_posted, cb, arg, err);
}

int osb_renew(struct backend *be, const char *sandbox_id, int64_t timeout_seconds, backend_cb *cb,
              void *arg, struct mcp_error *err)
{
    if (timeout_seconds <= 0 || timeout_seconds > OSB_RENEW_MAX_S)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "renew needs timeout_seconds between 1 "
                             "and %d (the new lifetime from now)", OSB_RENEW_MAX_S);
    char when[32];
    format_rfc3339_ms(now_wall_ms() + timeout_seconds * 1000, when);
    cleanup_json json_t *body = json_pack("{s:s}", "expiresAt", when);
    return lc_post(be, sandbox_id, "renew-expiration", body, then_get, cb, arg, err);
}

/* ---- destroy --------------------------------------------------------------------------------- */

static void destroy_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    struct osb_backend *b = op->b;
    struct mcp_error e;
    bool known = false;
    if (b->base.store != NULL) {
        struct store_sandbox sb = {0};
        known = store_sandbox_get(b->base.store, op->sid, &sb, &e) == 0;
        if (known)
            store_sandbox_release(&sb);
    }
    if (err != NULL && !(err->code == MCP_ERR_NOT_FOUND && known)) {
        lc_fail(op, err);
        return;
    }
    if (known && store_sandbox_delete(b->base.store, op->sid, &e) != 0)
        log_warn("forgetting %s: %s", op->sid, e.msg);
    if (known)
        store_event_add(b->base.store, op->sid, "destroyed", NULL, &e);
    osb_endpoint_forget(b, op->rid);
    json_t *res = json_pack("{s:s,s:b}", "sandbox_id", op->sid, "destroyed", err == NULL);
    if (err != NULL)
        json_object_set_new(res, "note", json_string("it no longer existed on the OpenSandbox "
                                                     "server (expired or deleted elsewhere)"));
    lc_finish(op, res, NULL);
}

int osb_destroy(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    struct lc_op *op = lc_new(b, sandbox_id, cb, arg);
    cleanup_free char *path = xasprintf("/sandboxes/%s", op->rid);
    struct osb_call_opts o = {.method = "DELETE", .what = "destroying the sandbox",
                              .sandbox_id = sandbox_id, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_lifecycle_call(b, path, &o, destroy_done, op, err) != 0)
        return lc_abandon(op);
    return 0;
}

/* ---- list ------------------------------------------------------------------------------------ */

static void list_page(struct lc_op *op);

static bool list_wanted(struct lc_op *op, json_t *info)
{
    const char *want = json_string_value(json_object_get(op->filter, "state"));
    return want == NULL || strcmp(want, json_string_value(json_object_get(info, "state"))) == 0;
}

static void list_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct lc_op *op = arg;
    struct mcp_error e;
    if (err != NULL) {
        lc_fail(op, err);
        return;
    }
    cleanup_json json_t *j = NULL;
    json_t *items = osb_resp_member(resp, "listing sandboxes", "items", JSON_ARRAY, &j, &e);
    if (items == NULL) {
        lc_fail(op, &e);
        return;
    }
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        json_t *info = osb_sandbox_info(op->b, it);
        if (list_wanted(op, info))
            json_array_append(op->acc, info);
        json_decref(info);
    }
    json_t *pg = json_object_get(j, "pagination");
    if (json_is_true(json_object_get(pg, "hasNextPage")) && op->page < OSB_LIST_PAGES_MAX) {
        op->page++;
        list_page(op);
        return;
    }
    lc_finish(op, json_pack("{s:O}", "sandboxes", op->acc), NULL);
}

static void list_page(struct lc_op *op)
{
    cleanup_free char *path = xasprintf("/sandboxes?%spage=%d&pageSize=%d", op->query, op->page,
                                        OSB_LIST_PAGE_SIZE);
    struct osb_call_opts o = {.method = "GET", .what = "listing sandboxes",
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    lc_call(op, path, &o, list_done);
}

/* metadata=<k=v&k2=v2, each part form-encoded, the whole percent-encoded once more> */
static char *list_query(const char *owner, json_t *meta)
{
    struct buf inner;
    buf_init(&inner, OSB_JSON_BODY_MAX);
    char label[17];
    if (owner != NULL) {
        osb_owner_label(owner, label);
        buf_printf(&inner, "%s=%s", OSB_OWNER_KEY, label);
    }
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            continue;
        cleanup_free char *ek = osb_escape(k), *ev = osb_escape(json_string_value(v));
        buf_printf(&inner, "%s%s=%s", inner.len ? "&" : "", ek, ev);
    }
    cleanup_free char *outer = inner.len ? osb_escape(buf_cstr(&inner)) : NULL;
    char *q = outer ? xasprintf("metadata=%s&", outer) : xstrdup("");
    buf_release(&inner);
    return q;
}

int osb_list(struct backend *be, const char *owner, json_t *filter, backend_cb *cb, void *arg,
             struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    json_t *state = json_object_get(filter, "state");
    enum sandbox_state st;
    if (state != NULL && (!json_is_string(state) ||
                          sandbox_state_parse(json_string_value(state), &st) != 0))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "unknown state filter; use one of "
                             "creating, running, paused, stopped, expired, failed");
    if (check_strings(json_object_get(filter, "metadata"), "metadata", err) != 0)
        return -1;
    struct lc_op *op = lc_new(b, NULL, cb, arg);
    op->filter = filter ? json_deep_copy(filter) : json_object();
    op->acc = json_array();
    op->page = 1;
    op->query = list_query(owner, json_object_get(filter, "metadata"));
    cleanup_free char *path = xasprintf("/sandboxes?%spage=1&pageSize=%d", op->query,
                                        OSB_LIST_PAGE_SIZE);
    struct osb_call_opts o = {.method = "GET", .what = "listing sandboxes",
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_lifecycle_call(b, path, &o, list_done, op, err) != 0)
        return lc_abandon(op);
    return 0;
}
