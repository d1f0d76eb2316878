/* list, get, renew, pause, resume, endpoint, diagnose: mostly the store plus cgroup files. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "backend/local/local_limits.h"
#include "backend/local/local_mounts.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_agent.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_secrets.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define DIAG_EVENTS_MAX 100

static bool metadata_matches(json_t *info, json_t *want)
{
    const char *k;
    json_t *v;
    json_t *have = json_object_get(info, "metadata");
    json_object_foreach(want, k, v)
    {
        if (!json_equal(json_object_get(have, k), v))
            return false;
    }
    return true;
}

int local_list(struct backend *be, const char *owner, json_t *filter, backend_cb *cb, void *arg,
               struct mcp_error *err)
{
    struct store_sandbox *list = NULL;
    size_t n = 0;
    if (store_sandbox_list(be->store, "local", owner, &list, &n, err) < 0)
        return -1;
    const char *state = json_string_value(json_object_get(filter, "state"));
    json_t *meta = json_object_get(filter, "metadata");
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++) {
        if (strcmp(list[i].state, LOCAL_POOL_STATE) == 0 ||
            strcmp(list[i].state, LOCAL_DESTROYED_STATE) == 0)
            continue; /* nobody's yet, or being released */
        json_t *info = local_info(&list[i]);
        if (owner == NULL) /* everyone's (the CLI's ls --all): say whose */
            json_object_set_new(info, "owner", json_string(list[i].owner));
        if ((state && strcmp(state, list[i].state) != 0) ||
            (json_is_object(meta) && !metadata_matches(info, meta)))
            json_decref(info);
        else
            json_array_append_new(items, info);
    }
    store_sandbox_list_free(list, n);
    json_t *res = json_pack("{s:o}", "sandboxes", items);
    backend_defer(be, cb, arg, res, NULL);
    json_decref(res);
    return 0;
}

static json_t *info_with_usage(struct local_backend *lb, const char *id, struct mcp_error *err)
{
    struct store_sandbox rec = {0};
    if (local_record_get(lb->base.store, id, &rec, err) < 0)
        return NULL;
    json_t *info = local_info(&rec);
    struct lsbx *sb = lsbx_find(lb, id);
    if (sb)
        json_object_set_new(info, "usage", cg_usage(&sb->cg));
    store_sandbox_release(&rec);
    return info;
}

int local_get(struct backend *be, const char *id, backend_cb *cb, void *arg,
              struct mcp_error *err)
{
    json_t *info = info_with_usage((struct local_backend *)be, id, err);
    if (info == NULL)
        return -1;
    backend_defer(be, cb, arg, info, NULL);
    json_decref(info);
    return 0;
}

struct renew_ctx {
    struct local_backend *lb;
    struct lsbx *sb;
    backend_cb *cb;
    void *arg;
    char id[LOCAL_ID_LEN];
};

static void on_config_reply(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct renew_ctx *c = arg;
    struct mcp_error e2;
    json_t *info = err ? NULL : info_with_usage(c->lb, c->id, &e2);
    c->cb(c->arg, info, err ? err : info ? NULL : &e2);
    json_decref(info);
    lsbx_unref(c->sb);
    free(c);
}

/* Tells the agent the sandbox's current TTL and idle timeout (from the store). */
static int push_config(struct lsbx *sb, backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct store_sandbox rec = {0};
    struct agent_conn *conn = lsbx_conn(sb, err);
    if (conn == NULL || store_sandbox_get(sb->be->base.store, sb->id, &rec, err) < 0)
        return -1;
    json_t *msg = json_pack("{s:s, s:I, s:I}", "op", "config", "expires_at_ms",
                            (json_int_t)rec.expires_at_ms, "idle_timeout_s",
                            (json_int_t)rec.idle_timeout_s);
    store_sandbox_release(&rec);
    struct renew_ctx *c = xcalloc(1, sizeof *c);
    c->lb = sb->be, c->sb = sb, c->cb = cb, c->arg = arg;
    snprintf(c->id, sizeof c->id, "%s", sb->id);
    lsbx_ref(sb);
    if (agent_call(conn, msg, on_config_reply, c, err) < 0) {
        lsbx_unref(sb);
        free(c);
        return -1;
    }
    return 0;
}

int local_renew(struct backend *be, const char *id, int64_t timeout_seconds, backend_cb *cb,
                void *arg, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct lsbx *sb = lsbx_for_op(lb, id, true, err);
    if (sb == NULL)
        return -1;
    struct store_sandbox rec = {0};
    if (store_sandbox_get(be->store, id, &rec, err) < 0)
        return -1;
    rec.expires_at_ms = local_ttl_ms(timeout_seconds);
    int rc = store_sandbox_update(be->store, &rec, err);
    bool paused = strcmp(rec.state, "paused") == 0;
    store_sandbox_release(&rec);
    if (rc < 0)
        return -1;
    local_event(be->store, id, "renewed", json_pack("{s:I}", "timeout_seconds",
                                                        (json_int_t)timeout_seconds), err);
    if (paused) { /* the frozen agent learns its new TTL at resume */
        json_t *info = info_with_usage(lb, id, err);
        if (info == NULL)
            return -1;
        backend_defer(&lb->base, cb, arg, info, NULL);
        json_decref(info);
        return 0;
    }
    return push_config(sb, cb, arg, err);
}

static int set_frozen(struct backend *be, const char *id, bool frozen, backend_cb *cb, void *arg,
                      struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct lsbx *sb = lsbx_for_op(lb, id, true, err);
    if (sb == NULL || cg_freeze(&sb->cg, frozen, err) < 0)
        return -1;
    if (store_sandbox_set_state(be->store, id, frozen ? "paused" : "running", err) < 0)
        return -1;
    local_event(be->store, id, "state", json_pack("{s:s}", "state", frozen ? "paused" : "running"),
                    err);
    /* Adopted while paused (its agent could not hand over the egress sockets): now it can. */
    struct mcp_error e2;
    if (!frozen && sb->egress == NULL && local_egress_policy(sb) != NULL &&
        local_egress_start(sb, &e2) < 0)
        log_warn("sandbox %s: its egress is not served by this process: %s", id, e2.msg);
    if (!frozen)
        return push_config(sb, cb, arg, err);
    json_t *info = info_with_usage(lb, id, err);
    if (info == NULL)
        return -1;
    backend_defer(&lb->base, cb, arg, info, NULL);
    json_decref(info);
    return 0;
}

int local_pause(struct backend *be, const char *id, backend_cb *cb, void *arg,
                struct mcp_error *err)
{
    return set_frozen(be, id, true, cb, arg, err);
}

int local_resume(struct backend *be, const char *id, backend_cb *cb, void *arg,
                 struct mcp_error *err)
{
    return set_frozen(be, id, false, cb, arg, err);
}

/* The local user an endpoint of sandbox `id` is for: its owner's uid (local:uid:N), else the
 * server's user (a token's holder acts as that user; docs/security.md, "Endpoints"). */
static uid_t endpoint_user(struct local_backend *lb, const char *id)
{
    struct store_sandbox rec = {0};
    struct mcp_error ignored = {0};
    struct local_ws_caller who;
    uid_t uid = geteuid();
    if (store_sandbox_peek(lb->base.store, id, &rec, &ignored) == 0 &&
        local_ws_caller(rec.owner, &who) == 0)
        uid = who.uid;
    store_sandbox_release(&rec);
    return uid;
}

/* A sandbox has its own network namespace: a port inside it is reached from the host through a
 * forwarder process that lives as long as the sandbox (forward.c; 127.0.0.1:<ephemeral> ->
 * 127.0.0.1:<port> in the sandbox). */
int local_endpoint(struct backend *be, const char *id, int port, backend_cb *cb, void *arg,
                   struct mcp_error *err)
{
    if (port < 1 || port > 65535)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "port must be 1..65535");
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    if (sb == NULL)
        return -1;
    int host_port = local_forward(sb, port, endpoint_user((struct local_backend *)be, id), err);
    if (host_port < 0)
        return -1;
    char url[64], note[320];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", host_port);
    snprintf(note, sizeof note,
             "forwarded from the host's 127.0.0.1:%d to port %d inside the sandbox for as long "
             "as the sandbox lives (even after this MCP server exits), for the sandbox owner's "
             "and the server's local user only; inside the sandbox the service is at "
             "127.0.0.1:%d",
             host_port, port, port);
    json_t *res = json_pack("{s:s, s:i, s:s, s:{}, s:s, s:i, s:s}", "sandbox_id", id, "port", port,
                            "url", url, "headers", "reachable_from", "host", "host_port",
                            host_port, "note", note);
    backend_defer(be, cb, arg, res, NULL);
    json_decref(res);
    return 0;
}

static json_t *diag_inspect(struct local_backend *lb, const struct store_sandbox *rec)
{
    json_t *r = json_deep_copy(rec->record);
    json_object_del(r, "env"); /* values may be secrets the user passed in */
    json_object_set_new(r, "cgroup_layout", json_string(cg_layout_name(lb->cg.layout)));
    json_object_set_new(r, "live_here", json_boolean(lsbx_find(lb, rec->id) != NULL));
    json_object_set_new(r, "seccomp_instructions", json_integer(lb->seccomp.len));
    char dir[LOCAL_PATH_MAX], logs[LOCAL_PATH_MAX];
    local_sandbox_dirs(lb, rec->id, dir, logs);
    json_object_set_new(r, "runtime_dir", json_string(dir)); /* host paths, for the operator */
    json_object_set_new(r, "logs_dir", json_string(logs));
    return r;
}

struct diag_ctx {
    struct lsbx *sb;
    json_t *res;
    backend_cb *cb;
    void *arg;
};

/* logs: the events plus the agent's recent commands (newest first, status and sizes; the output
 * itself is read with command_get). */
static void on_cmd_list(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct diag_ctx *c = arg;
    if (reply)
        json_object_set(c->res, "commands", json_object_get(reply, "commands"));
    else
        json_object_set_new(c->res, "commands_error", json_string(err->msg));
    c->cb(c->arg, c->res, NULL);
    json_decref(c->res);
    lsbx_unref(c->sb);
    free(c);
}

static int diag_logs(struct local_backend *lb, const char *id, json_t *res, backend_cb *cb,
                     void *arg)
{
    struct mcp_error e;
    struct lsbx *sb = lsbx_for_op(lb, id, false, &e);
    struct agent_conn *conn = sb ? lsbx_conn(sb, &e) : NULL;
    if (conn == NULL)
        return -1;
    struct diag_ctx *c = xcalloc(1, sizeof *c);
    c->sb = sb, c->res = json_incref(res), c->cb = cb, c->arg = arg;
    lsbx_ref(sb);
    if (agent_call(conn, json_pack("{s:s}", "op", "cmd_list"), on_cmd_list, c, &e) < 0) {
        json_decref(c->res);
        lsbx_unref(sb);
        free(c);
        return -1;
    }
    return 0;
}

/* The last failing commands (newest first) out of the "command_failed" events (local_exec.c):
 * how each ended and the end of its output. */
#define DIAG_FAILED_MAX 5
static json_t *failed_commands(json_t *events)
{
    json_t *out = json_array();
    for (size_t i = json_array_size(events); i-- > 0 && json_array_size(out) < DIAG_FAILED_MAX;) {
        json_t *ev = json_array_get(events, i);
        const char *kind = json_string_value(json_object_get(ev, "kind"));
        json_t *data = json_object_get(ev, "data");
        if (kind && strcmp(kind, "command_failed") == 0 && json_is_object(data)) {
            json_t *one = json_deep_copy(data);
            json_object_set(one, "time", json_object_get(ev, "time"));
            json_array_append_new(out, one);
        }
    }
    return out;
}

int local_diagnose(struct backend *be, const char *id, const char *what, backend_cb *cb,
                   void *arg, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct store_sandbox rec = {0};
    if (what == NULL)
        what = "summary";
    if (strcmp(what, "summary") && strcmp(what, "logs") && strcmp(what, "events") &&
        strcmp(what, "inspect"))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "what must be summary, logs, events or inspect");
    json_t *events = NULL;
    local_egress_flush_repeats(be->store, id); /* repeats counted during a flood of refusals */
    if (local_record_get(be->store, id, &rec, err) < 0 ||
        store_event_list(be->store, id, DIAG_EVENTS_MAX, &events, err) < 0) {
        store_sandbox_release(&rec);
        return -1;
    }
    json_t *res = json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "what", what, "state", rec.state);
    if (strcmp(what, "summary") == 0) {
        json_object_set_new(res, "sandbox", local_info(&rec));
        struct lsbx *sb = lsbx_find(lb, id);
        if (sb)
            json_object_set_new(res, "usage", cg_usage(&sb->cg));
        json_object_set_new(res, "failed_commands", failed_commands(events));
        json_t *refused = local_egress_refusals(events);
        if (json_array_size(refused) > 0) /* connections the network policy refused */
            json_object_set(res, "egress_refused", refused);
        json_decref(refused);
        local_secrets_diagnose(lb, id, rec.record, res); /* which were used, where, how often */
        json_object_set(res, "events", events);
    } else if (strcmp(what, "inspect") == 0) {
        json_object_set_new(res, "inspect", diag_inspect(lb, &rec));
    } else {
        json_object_set(res, "events", events);
    }
    json_decref(events);
    store_sandbox_release(&rec);
    int rc = strcmp(what, "logs") == 0 ? diag_logs(lb, id, res, cb, arg) : -1;
    if (rc < 0) /* not "logs", or the agent is out of reach: what the store knows */
        backend_defer(&lb->base, cb, arg, res, NULL);
    json_decref(res);
    return 0;
}
