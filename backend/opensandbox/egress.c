/* Egress policy on OpenSandbox (issue 14): create_sandbox's network_policy becomes the create
 * request's networkPolicy, and set_network_policy goes to the egress sidecar's /policy, reached
 * through the sandbox's endpoint for port 18080 (specs/egress-api.yaml).
 *
 * The sidecar's PATCH /policy merges: incoming rules take priority over the ones in force, and
 * DELETE /policy removes rules by target. A replacement is therefore PATCH with the new rules,
 * then DELETE of the old targets the new policy no longer names, so no moment allows more than
 * the old or the new policy did. The sidecar cannot change defaultAction at runtime and has no
 * ports: both are refused with what to do instead. */
#define LOG_MODULE "opensandbox"

#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

json_t *osb_network_policy_body(const struct egress_policy *p, struct mcp_error *err)
{
    json_t *rules = json_array();
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct egress_rule *r = &p->rules[i];
        if (r->n_ports > 0) {
            json_decref(rules);
            mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                          "network_policy.egress[%zu] limits ports, which OpenSandbox's egress "
                          "policy cannot express (its rules name domains only); drop \"ports\" "
                          "from that rule, or use a local sandbox",
                          i);
            return NULL;
        }
        json_array_append_new(rules, json_pack("{s:s, s:s+}", "action",
                                               r->allow ? "allow" : "deny", "target",
                                               r->wildcard ? "*." : "", r->name));
    }
    return json_pack("{s:s, s:o}", "defaultAction", p->default_allow ? "allow" : "deny", "egress",
                     rules);
}

struct egress_op {
    struct osb_backend *b;
    char *sid, *rid;
    json_t *policy;  /* ours, normalized (egress_policy_to_json), for the record */
    json_t *rules;   /* the sidecar's rules [{action, target}] */
    json_t *current; /* the rules in force before (GET /policy), for the DELETE after the PATCH */
    struct osb_endpoint ep; /* the sidecar's endpoint (not cached: rarely used) */
    backend_cb *cb;
    void *arg;
};

static void egress_free(struct egress_op *op)
{
    free(op->sid);
    free(op->rid);
    json_decref(op->policy);
    json_decref(op->rules);
    json_decref(op->current);
    free(op->ep.base);
    json_decref(op->ep.headers);
    free(op);
}

static void egress_fail(struct egress_op *op, const struct mcp_error *err)
{
    op->cb(op->arg, NULL, err);
    egress_free(op);
}

/* The last step: the record keeps the policy, and the answer is the sandbox as get shows it. */
static void egress_finish(struct egress_op *op)
{
    struct store_sandbox rec = {0};
    struct mcp_error e;
    if (op->b->base.store != NULL && store_sandbox_get(op->b->base.store, op->sid, &rec, &e) == 0) {
        json_object_set(rec.record, "network_policy", op->policy);
        if (store_sandbox_update(op->b->base.store, &rec, &e) < 0)
            log_warn("sandbox %s: the new egress policy is in force but not recorded: %s",
                     op->sid, e.msg);
        store_sandbox_release(&rec);
    }
    if (osb_get(&op->b->base, op->sid, op->cb, op->arg, &e) < 0)
        op->cb(op->arg, NULL, &e);
    egress_free(op);
}

static void egress_call(struct egress_op *op, const char *method, json_t *body, const char *what,
                        osb_call_fn *done)
{
    struct mcp_error e;
    struct osb_call_opts o = {.method = method, .what = what, .sandbox_id = op->sid,
                              .json = body, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_execd_call(op->b, &op->ep, "/policy", &o, done, op, &e) == NULL)
        egress_fail(op, &e);
}

static void deleted(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct egress_op *op = arg;
    if (err != NULL) {
        egress_fail(op, err);
        return;
    }
    egress_finish(op);
}

/* After the PATCH: removes the targets of the rules in force before that the new rules do not
 * name. */
static void delete_stale(struct egress_op *op)
{
    cleanup_json json_t *stale = json_array();
    size_t i, k;
    json_t *r, *n;
    json_array_foreach(op->current, i, r) {
        json_t *target = json_object_get(r, "target");
        bool kept = !json_is_string(target);
        json_array_foreach(op->rules, k, n)
            kept = kept || json_equal(json_object_get(n, "target"), target);
        if (!kept)
            json_array_append(stale, target);
    }
    if (json_array_size(stale) == 0) {
        egress_finish(op);
        return;
    }
    egress_call(op, "DELETE", stale, "removing the old egress rules (sidecar, port 18080)",
                deleted);
}

static void patched(void *arg, struct httpc_response *resp, const struct mcp_error *err);

/* GET /policy answered: the rules in force, then PATCH the new ones in. */
static void got_policy(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct egress_op *op = arg;
    struct mcp_error e;
    if (err != NULL) {
        egress_fail(op, err);
        return;
    }
    cleanup_json json_t *doc = osb_resp_json(resp, "reading the egress policy", &e);
    if (doc == NULL) {
        egress_fail(op, &e);
        return;
    }
    json_t *egress = json_object_get(json_object_get(doc, "policy"), "egress");
    op->current = json_is_array(egress) ? json_incref(egress) : json_array();
    if (json_array_size(op->rules) == 0) { /* PATCH needs at least one rule */
        delete_stale(op);
        return;
    }
    egress_call(op, "PATCH", op->rules, "adding the new egress rules (sidecar, port 18080)",
                patched);
}

static void patched(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct egress_op *op = arg;
    if (err != NULL) {
        egress_fail(op, err);
        return;
    }
    delete_stale(op);
}

static void endpoint_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct egress_op *op = arg;
    struct mcp_error e;
    cleanup_json json_t *j = NULL;
    json_t *v = err ? NULL : osb_resp_member(resp, "resolving the egress sidecar's endpoint",
                                             "endpoint", JSON_STRING, &j, &e);
    if (v == NULL) {
        egress_fail(op, err ? err : &e);
        return;
    }
    json_t *headers = json_object_get(j, "headers");
    op->ep.base = osb_endpoint_url(op->b->protocol, json_string_value(v));
    op->ep.headers = json_is_object(headers) ? json_deep_copy(headers) : json_object();
    egress_call(op, "GET", NULL, "reading the egress policy (sidecar, port 18080)", got_policy);
}

/* The sandbox's record must say it was made with a policy and with the same default. */
static int check_record(struct osb_backend *b, const char *sid, const struct egress_policy *p,
                        struct mcp_error *err)
{
    struct store_sandbox rec = {0};
    if (store_sandbox_get(b->base.store, sid, &rec, err) < 0)
        return -1;
    json_t *old = json_object_get(rec.record, "network_policy");
    const char *def = json_string_value(json_object_get(old, "default_action"));
    int rc = 0;
    if (!json_is_object(old))
        rc = mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                           "sandbox %s was created without network_policy, so its egress has no "
                           "policy to change; create a new sandbox with network_policy",
                           sid);
    else if (def != NULL && strcmp(def, p->default_allow ? "allow" : "deny") != 0)
        rc = mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                           "OpenSandbox's egress sidecar cannot change default_action of a "
                           "running sandbox (PATCH /policy takes rules only): keep "
                           "default_action \"%s\", or create a new sandbox with \"%s\"",
                           def, p->default_allow ? "allow" : "deny");
    store_sandbox_release(&rec);
    return rc;
}

int osb_set_network_policy(struct backend *be, const char *sandbox_id,
                           const struct egress_policy *policy, backend_cb *cb, void *arg,
                           struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    const char *rid = osb_remote_id(sandbox_id, err);
    if (rid == NULL)
        return -1;
    json_t *body = osb_network_policy_body(policy, err);
    if (body == NULL)
        return -1;
    if (b->base.store != NULL && check_record(b, sandbox_id, policy, err) < 0) {
        json_decref(body);
        return -1;
    }
    struct egress_op *op = xcalloc(1, sizeof(*op));
    op->b = b;
    op->sid = xstrdup(sandbox_id);
    op->rid = xstrdup(rid);
    op->policy = egress_policy_to_json(policy);
    op->rules = json_incref(json_object_get(body, "egress"));
    json_decref(body);
    op->cb = cb;
    op->arg = arg;
    cleanup_free char *path = xasprintf("/sandboxes/%s/endpoints/%d%s", rid, OSB_EGRESS_PORT,
                                        b->use_server_proxy ? "?use_server_proxy=true" : "");
    struct osb_call_opts o = {.method = "GET", .what = "resolving the egress sidecar's endpoint",
                              .sandbox_id = sandbox_id, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_lifecycle_call(b, path, &o, endpoint_done, op, err) != 0) {
        egress_free(op);
        return -1;
    }
    return 0;
}

/* credentialProxy from an API client (osapi): mcpbox does not relay it, nor the vault calls
 * that would follow (docs/secrets.md, "On the opensandbox backend"). mcpbox's own secrets are
 * mapped onto the remote's vault: vault.c. */
int osb_credential_proxy_refused(struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                         "credentialProxy is not relayed to the OpenSandbox server behind "
                         "mcpbox: use that server's API directly for a sandbox with a "
                         "Credential Vault, bind the person's secrets (secrets) instead, or "
                         "create the sandbox on the local backend");
}
