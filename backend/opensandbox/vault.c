/* Secrets on OpenSandbox (issue 37): the person's secrets bound to an osb- sandbox are written
 * into that sandbox's Credential Vault on the remote's egress sidecar (specs/egress-api.yaml,
 * reached through the endpoint of port 18080, as /policy is: egress.c), so that the remote's
 * egress proxy injects them. A create asks for credentialProxy, waits for the sandbox, reads
 * the values off the loop and POSTs the vault; if the vault cannot be written the sandbox is
 * destroyed and the error says so. update_sandbox's binding PATCHes mcpbox's entries (add,
 * replace, delete) and leaves the vault's others alone. Values go only into the vault request:
 * a remote's error that repeats one has it masked. docs/secrets.md, "On the opensandbox
 * backend". */
#define LOG_MODULE "opensandbox"

#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

struct vault_op {
    struct osb_backend *b;
    char *sid, *rid;
    struct osb_vault_plan *plan;
    json_t *creds; /* [{name, source, raw}] with values: wiped when the op ends */
    json_t *info;  /* create: the sandbox as made */
    struct osb_endpoint ep;
    struct mcp_error err; /* the value reading's error; then the one to report */
    uv_work_t work;
    backend_cb *cb;
    void *arg;
};

static struct vault_op *vop_new(struct osb_backend *b, struct osb_vault_plan *plan, backend_cb *cb,
                                void *arg)
{
    struct vault_op *op = xcalloc(1, sizeof *op);
    op->b = b;
    op->plan = plan;
    op->cb = cb;
    op->arg = arg;
    return op;
}

static void vop_free(struct vault_op *op)
{
    osb_vault_wipe(op->creds);
    json_decref(op->creds);
    osb_vault_plan_free(op->plan);
    json_decref(op->info);
    free(op->sid);
    free(op->rid);
    free(op->ep.base);
    json_decref(op->ep.headers);
    free(op);
}

static void vop_end(struct vault_op *op, json_t *result, const struct mcp_error *err)
{
    op->cb(op->arg, err ? NULL : result, err);
    vop_free(op);
}

/* Masks in msg every run of at least SCRUB_MIN bytes (or the whole value, if shorter) that
 * begins a value: a server's error may repeat the request, and its snippet may cut a value
 * anywhere. */
#define SCRUB_MIN 6
static void scrub_value(char *msg, const char *v)
{
    size_t vl = v ? strlen(v) : 0, need = vl < SCRUB_MIN ? vl : SCRUB_MIN;
    for (char *at = msg; vl > 0 && *at; at++) {
        size_t n = 0;
        while (n < vl && at[n] == v[n])
            n++;
        if (n >= need) {
            memset(at, '*', n);
            at += n - 1;
        }
    }
}

static void scrub(const struct vault_op *op, char *msg)
{
    size_t i;
    json_t *c;
    json_array_foreach(op->creds, i, c)
    {
        scrub_value(msg, json_string_value(json_object_get(c, "raw")));
        scrub_value(msg, json_string_value(json_object_get(json_object_get(c, "source"), "value")));
    }
}

/* What went wrong with the vault request `what`, said so that a remote without a vault is
 * named as such. */
static void vault_error(struct vault_op *op, const struct httpc_response *resp, const char *what,
                        const struct mcp_error *err)
{
    long st = resp ? resp->status : 0;
    if (st == 404 || st == 405 || st == 501)
        mcp_error_set(&op->err, MCP_ERR_UNSUPPORTED, 0,
                      "the OpenSandbox server at %s has no Credential Vault (%s on its egress "
                      "sidecar, port %d, answered %ld), so it cannot take mcpbox's secrets: use "
                      "the local backend (backend: \"local\") for sandboxes with secrets",
                      op->b->domain, what, OSB_EGRESS_PORT, st);
    else if (st == 412)
        mcp_error_set(&op->err, MCP_ERR_UNAVAILABLE, 0,
                      "the OpenSandbox server's Credential Proxy is not ready for sandbox %s "
                      "(%s answered 412): it was made without credentialProxy, or the server "
                      "cannot intercept its egress; create a new sandbox with secrets",
                      op->sid, what);
    else
        op->err = *err;
    scrub(op, op->err.msg);
}

/* ---- create: the sandbox first, then its vault; destroyed if that fails ------------------- */

static void undone(void *arg, json_t *result, const struct mcp_error *err)
{
    struct vault_op *op = arg;
    size_t n = strlen(op->err.msg);
    if (err == NULL)
        snprintf(op->err.msg + n, sizeof op->err.msg - n, " (sandbox %s was destroyed)", op->sid);
    else
        snprintf(op->err.msg + n, sizeof op->err.msg - n,
                 " (destroying sandbox %s failed too: destroy_sandbox it)", op->sid);
    vop_end(op, NULL, &op->err);
}

/* The vault could not be written: nothing half-made is left. */
static void create_undo(struct vault_op *op)
{
    struct mcp_error e;
    log_warn("sandbox %s: its secrets could not be bound; destroying it: %s", op->sid, op->err.msg);
    if (osb_destroy(&op->b->base, op->sid, undone, op, &e) != 0)
        undone(op, NULL, &e);
}

static void vault_fail(struct vault_op *op)
{
    if (op->info != NULL)
        create_undo(op);
    else
        vop_end(op, NULL, &op->err);
}

/* GET is retried as any read; POST and PATCH only when nothing reached the server (a replayed
 * create would meet the vault it made, a replayed PATCH a newer revision). */
static void vault_call(struct vault_op *op, const char *method, const char *path, json_t *body,
                       const char *what, osb_call_fn *done)
{
    bool get = strcmp(method, "GET") == 0;
    struct osb_call_opts o = {.method = method,
                              .what = what,
                              .sandbox_id = op->sid,
                              .json = body,
                              .retry = get ? HTTPC_RETRY_IDEMPOTENT : HTTPC_RETRY_SAFE,
                              .sensitive = true};
    if (osb_execd_call(op->b, &op->ep, path, &o, done, op, &op->err) == NULL)
        vault_fail(op);
}

/* The credentials as the spec has them: name and source (not the raw value kept to scrub). */
static json_t *wire_credentials(json_t *creds)
{
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(creds, i, c)
    {
        json_array_append_new(out, json_pack("{s:O, s:O}", "name", json_object_get(c, "name"),
                                             "source", json_object_get(c, "source")));
    }
    return out;
}

static json_t *plan_bindings(const struct osb_vault_plan *p)
{
    json_t *out = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(p->items, i, it) json_array_append(out, json_object_get(it, "binding"));
    return out;
}

static void bound(struct vault_op *op);

static void written(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct vault_op *op = arg;
    if (err != NULL) {
        vault_error(op, resp, "writing the Credential Vault", err);
        vault_fail(op);
        return;
    }
    bound(op);
}

static void vault_post(struct vault_op *op)
{
    cleanup_json json_t *body = json_pack("{s:o, s:o}", "credentials", wire_credentials(op->creds),
                                          "bindings", plan_bindings(op->plan));
    vault_call(op, "POST", "/credential-vault", body, "creating the Credential Vault", written);
}

/* ---- update: mcpbox's entries changed in one PATCH (vault_patch.c) ------------------------- */

static void got_vault(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct vault_op *op = arg;
    struct mcp_error e;
    if (err != NULL && resp != NULL && resp->status == 404) {
        vault_post(op); /* none yet (or none served: the POST says which) */
        return;
    }
    cleanup_json json_t *doc = err ? NULL : osb_resp_json(resp, "reading the vault", &e);
    if (doc == NULL) {
        vault_error(op, resp, "reading the Credential Vault", err ? err : &e);
        vault_fail(op);
        return;
    }
    cleanup_json json_t *creds = wire_credentials(op->creds);
    cleanup_json json_t *binds = plan_bindings(op->plan);
    cleanup_json json_t *body = osb_vault_patch(doc, creds, binds);
    if (body == NULL) {
        bound(op);
        return;
    }
    vault_call(op, "PATCH", "/credential-vault", body, "changing the Credential Vault", written);
}

/* ---- both: the sidecar's endpoint, after the values are read -------------------------------- */

static void endpoint_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct vault_op *op = arg;
    struct mcp_error e;
    cleanup_json json_t *j = NULL;
    json_t *v = err ? NULL
                    : osb_resp_member(resp, "resolving the egress sidecar's endpoint", "endpoint",
                                      JSON_STRING, &j, &e);
    if (v == NULL) {
        op->err = err ? *err : e;
        vault_fail(op);
        return;
    }
    json_t *headers = json_object_get(j, "headers");
    op->ep.base = osb_endpoint_url(op->b->protocol, json_string_value(v));
    op->ep.headers = json_is_object(headers) ? json_deep_copy(headers) : json_object();
    if (op->info != NULL)
        vault_post(op); /* a new sandbox has no vault */
    else
        vault_call(op, "GET", "/credential-vault", NULL, "reading the Credential Vault", got_vault);
}

static void values_work(uv_work_t *w)
{
    struct vault_op *op = w->data;
    op->creds = osb_vault_credentials(op->plan, &op->err);
}

static void values_read(uv_work_t *w, int status)
{
    struct vault_op *op = w->data;
    if (op->creds == NULL) {
        if (status != 0)
            mcp_error_set(&op->err, MCP_ERR_INTERNAL, 0,
                          "reading the secrets' values was cancelled (mcpbox is shutting down)");
        vault_fail(op);
        return;
    }
    cleanup_free char *path = xasprintf("/sandboxes/%s/endpoints/%d%s", op->rid, OSB_EGRESS_PORT,
                                        op->b->use_server_proxy ? "?use_server_proxy=true" : "");
    struct osb_call_opts o = {.method = "GET",
                              .what = "resolving the egress sidecar's endpoint",
                              .sandbox_id = op->sid,
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_lifecycle_call(op->b, path, &o, endpoint_done, op, &op->err) != 0)
        vault_fail(op);
}

/* Reads the values off the loop (a file, a command), then goes on. */
static int vop_start(struct vault_op *op, const char *sid, struct mcp_error *err)
{
    op->sid = xstrdup(sid);
    op->rid = xstrdup(sid + strlen(OSB_ID_PREFIX));
    op->work.data = op;
    if (uv_queue_work(op->b->base.loop, &op->work, values_work, values_read) < 0)
        return mcp_error_set(err, MCP_ERR_INTERNAL, 0, "could not start reading the secrets");
    return 0;
}

/* ---- the ends: create and update_sandbox's binding ----------------------------------------- */

/* The record keeps the names (never a value) and an event says what was bound. */
static void record_names(struct vault_op *op)
{
    struct store *st = op->b->base.store;
    struct store_sandbox rec = {0};
    struct mcp_error e;
    if (st == NULL || store_sandbox_get(st, op->sid, &rec, &e) != 0)
        return;
    json_object_set(rec.record, "secrets", op->plan->names);
    if (store_sandbox_update(st, &rec, &e) != 0)
        log_warn("sandbox %s: its secrets are bound but not recorded: %s", op->sid, e.msg);
    store_sandbox_release(&rec);
    cleanup_json json_t *ev = json_pack("{s:O}", "secrets", op->plan->names);
    store_event_add(st, op->sid, "secrets_bound", ev, &e);
}

static bool has_rule_for(json_t *rules, json_t *target)
{
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        const char *action = json_string_value(json_object_get(r, "action"));
        if (json_equal(json_object_get(r, "target"), target) && action &&
            strcmp(action, "allow") == 0)
            return true;
    }
    return false;
}

/* The sandbox's policy with an allow rule for each new host first, or NULL when its record has
 * no policy (made without rules: network decides) or every host is allowed already. */
static struct egress_policy *policy_with_hosts(struct vault_op *op)
{
    struct store_sandbox rec = {0};
    struct mcp_error e;
    if (op->b->base.store == NULL || store_sandbox_get(op->b->base.store, op->sid, &rec, &e) != 0)
        return NULL;
    json_t *np = json_object_get(rec.record, "network_policy");
    struct egress_policy *p = NULL;
    cleanup_json json_t *pj = json_is_object(np) ? json_deep_copy(np) : NULL;
    store_sandbox_release(&rec);
    json_t *rules = json_object_get(pj, "egress"), *fresh = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(op->plan->allow, i, r)
    {
        if (pj != NULL && !has_rule_for(rules, json_object_get(r, "target")))
            json_array_append(fresh, r);
    }
    if (json_array_size(fresh) > 0) {
        json_array_extend(fresh, rules);
        json_object_set(pj, "egress", fresh);
        p = egress_policy_parse(pj, "network_policy with the secrets' hosts", &e);
        if (p == NULL)
            log_warn("sandbox %s: the secrets' hosts were not allowed: %s", op->sid, e.msg);
    }
    json_decref(fresh);
    return p;
}

static void bound(struct vault_op *op)
{
    struct mcp_error e;
    record_names(op);
    if (op->info != NULL) {
        vop_end(op, op->info, NULL);
        return;
    }
    struct egress_policy *p = policy_with_hosts(op);
    int rc = p ? osb_set_network_policy(&op->b->base, op->sid, p, op->cb, op->arg, &e)
               : osb_get(&op->b->base, op->sid, op->cb, op->arg, &e);
    egress_policy_unref(p);
    if (rc != 0)
        op->cb(op->arg, NULL, &e);
    op->cb = NULL;
    vop_free(op);
}

static void vault_created(void *arg, json_t *info, const struct mcp_error *err)
{
    struct vault_op *op = arg;
    struct mcp_error e;
    const char *sid = json_string_value(json_object_get(info, "sandbox_id"));
    if (err != NULL || sid == NULL) {
        if (err == NULL)
            mcp_error_set(&e, MCP_ERR_BACKEND, 0, "the new sandbox has no id");
        else
            e = *err;
        size_t n = strlen(e.msg);
        if (err != NULL && (err->code == MCP_ERR_INVALID || err->code == MCP_ERR_UNSUPPORTED))
            snprintf(e.msg + n, sizeof e.msg - n,
                     " (the create asked for credentialProxy, "
                     "which secrets need: a server without a Credential Vault may refuse it)");
        vop_end(op, NULL, &e);
        return;
    }
    op->info = json_incref(info);
    if (vop_start(op, sid, &op->err) != 0)
        create_undo(op);
}

int osb_vault_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb, void *arg,
                     struct mcp_error *err)
{
    struct osb_vault_plan *plan = osb_vault_plan_new(osb_of(be), spec->secrets, err);
    if (plan == NULL)
        return -1;
    struct vault_op *op = vop_new(osb_of(be), plan, cb, arg);
    if (osb_create_as(be, spec, plan, vault_created, op, err) != 0) {
        vop_free(op);
        return -1;
    }
    return 0;
}

/* update_sandbox's secrets: the sandbox must have been made with them (credentialProxy). */
static int check_proxy(struct osb_backend *b, const char *sid, struct mcp_error *err)
{
    struct store_sandbox rec = {0};
    if (b->base.store == NULL || store_sandbox_get(b->base.store, sid, &rec, err) != 0)
        return b->base.store ? -1 : 0; /* without a store, the remote's 412 says it */
    bool proxy = json_is_true(json_object_get(rec.record, "credential_proxy"));
    store_sandbox_release(&rec);
    if (!proxy)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "sandbox %s was created without secrets, so its OpenSandbox server "
                             "does not pass its egress through a Credential Proxy: create a new "
                             "sandbox with secrets (they can be changed later)",
                             sid);
    return 0;
}

int osb_bind_secrets(struct backend *be, const char *sandbox_id, json_t *names, backend_cb *cb,
                     void *arg, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL || check_proxy(b, sandbox_id, err) != 0)
        return -1;
    struct osb_vault_plan *plan = osb_vault_plan_new(b, names, err);
    if (plan == NULL)
        return -1;
    struct vault_op *op = vop_new(b, plan, cb, arg);
    if (vop_start(op, sandbox_id, err) != 0) {
        vop_free(op);
        return -1;
    }
    return 0;
}

/* rules first, then those of policy's "egress" (both shapes use {action, target}). */
static void prepend_rules(json_t *policy, const json_t *rules)
{
    json_t *all = json_deep_copy(rules);
    json_array_extend(all, json_object_get(policy, "egress"));
    json_object_set_new(policy, "egress", all);
}

void osb_vault_apply_body(const struct osb_vault_plan *p, json_t *body, json_t *record)
{
    json_object_set_new(body, "credentialProxy", json_pack("{s:b}", "enabled", true));
    json_object_set_new(record, "credential_proxy", json_true());
    json_object_set(record, "secrets", p->names);
    /* credentialProxy needs a networkPolicy (the server's model): network true is one that
     * allows all, network false one that denies all but the secrets' hosts */
    json_t *np = json_object_get(body, "networkPolicy");
    if (np == NULL) {
        np = json_pack("{s:s, s:[]}", "defaultAction", "allow", "egress");
        json_object_set_new(body, "networkPolicy", np);
    }
    json_t *rp = json_object_get(record, "network_policy");
    if (!json_is_object(rp)) {
        rp = json_pack("{s:O, s:[]}", "default_action", json_object_get(np, "defaultAction"),
                       "egress");
        json_object_set_new(record, "network_policy", rp);
    }
    prepend_rules(np, p->allow);
    prepend_rules(rp, p->allow);
}
