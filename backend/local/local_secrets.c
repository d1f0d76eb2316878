/* Binding the person's secrets to a local sandbox at create (local_secrets.h). */
#include "backend/local/local_secrets.h"

#include <string.h>

#include "backend/local/doctor.h"
#include "backend/local/egress_tls.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/proto.h"
#include "backend/secrets.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

/* Whether the sandbox's egress may be intercepted: it binds secrets, was made with OpenSandbox's
 * credentialProxy (its vault, local_vault.c), or goes by a policy (so through the proxy: a secret
 * bound later with update_sandbox works over TLS as one bound at create). It then trusts the
 * egress CA. */
static bool wants_trust(const struct sandbox_spec *spec)
{
    return json_array_size(spec->secrets) > 0 || spec->credential_proxy ||
           spec->network_policy != NULL;
}

/* Each name once, each the person's; err lists the names there are. */
static int check_names(const json_t *names, const json_t *defs, struct mcp_error *err)
{
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        const char *name = json_string_value(n);
        if (name != NULL && json_object_get(defs, name) != NULL)
            continue;
        cleanup_free char *known = secrets_names_text(defs);
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "no secret named %s; the secrets you may bind are: %s. Ask the "
                             "person to add one with `mcpbox secret add` if none fits",
                             name ? name : "(not a string)", known);
    }
    return 0;
}

static bool has_rule(json_t *rules, json_t *rule)
{
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        if (json_equal(r, rule))
            return true;
    }
    return false;
}

/* An allow rule for each host of def, unless one is there already (bound before). */
static void allow_hosts(json_t *rules, json_t *existing, json_t *def)
{
    size_t k;
    json_t *h;
    json_array_foreach(json_object_get(def, "hosts"), k, h)
    {
        json_t *rule = json_pack("{s:s, s:O}", "action", "allow", "target", h);
        if (has_rule(rules, rule) || has_rule(existing, rule))
            json_decref(rule);
        else
            json_array_append_new(rules, rule);
    }
}

/* The policy the sandbox gets: the agent's own (or default deny) with an allow rule first for
 * each host of each bound secret the person did not mark egress false. */
static struct egress_policy *bound_policy(const struct sandbox_spec *spec, const json_t *defs,
                                          struct mcp_error *err)
{
    /* credentialProxy without a policy (OpenSandbox: all egress allowed) goes by one allowing
     * all, so that it passes the proxy */
    cleanup_json json_t *pj = spec->network_policy ? egress_policy_to_json(spec->network_policy)
                                                   : json_pack("{s:s}", "default_action",
                                                               spec->network ? "allow" : "deny");
    json_t *rules = json_array();
    size_t i;
    json_t *n;
    json_array_foreach(spec->secrets, i, n)
    {
        json_t *def = json_object_get(defs, json_string_value(n));
        if (!json_is_false(json_object_get(def, "egress")))
            allow_hosts(rules, json_object_get(pj, "egress"), def);
    }
    json_array_extend(rules, json_object_get(pj, "egress"));
    json_object_set_new(pj, "egress", rules);
    return egress_policy_parse(pj, "network_policy with the secrets' hosts", err);
}

static void add_placeholders(json_t *env, const json_t *names, const json_t *defs)
{
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        const char *name = json_string_value(n);
        if (!json_is_true(json_object_get(json_object_get(defs, name), "placeholder")))
            continue;
        char ph[SECRET_PLACEHOLDER_MAX];
        secret_placeholder(name, ph);
        if (json_object_get(env, ph) == NULL)
            json_object_set_new(env, ph, json_string(ph));
    }
}

/* Where TLS clients inside find the egress CA (the agent writes them: agent_egress_trust). */
static void trust_env(json_t *env)
{
    static const char *const bundle_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                              "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"};
    for (size_t i = 0; i < sizeof bundle_vars / sizeof bundle_vars[0]; i++)
        if (json_object_get(env, bundle_vars[i]) == NULL) /* the agent's own choice wins */
            json_object_set_new(env, bundle_vars[i],
                                json_string(AGENT_EGRESS_TRUST_DIR "/ca-bundle.pem"));
    if (json_object_get(env, "NODE_EXTRA_CA_CERTS") == NULL)
        json_object_set_new(env, "NODE_EXTRA_CA_CERTS",
                            json_string(AGENT_EGRESS_TRUST_DIR "/ca.pem"));
}

static json_t *bound_env(const struct sandbox_spec *spec, const json_t *defs)
{
    json_t *env = json_is_object(spec->env) ? json_deep_copy(spec->env) : json_object();
    trust_env(env);
    add_placeholders(env, spec->secrets, defs);
    return env;
}

int local_secrets_bind(struct local_backend *lb, const struct sandbox_spec *spec,
                       struct local_bound *out, struct mcp_error *err)
{
    memset(out, 0, sizeof *out);
    out->spec = *spec;
    if (!wants_trust(spec))
        return 0;
    if (spec->network && spec->network_policy == NULL && json_array_size(spec->secrets) > 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "secrets are injected by egress by policy, not with network: true; "
                             "drop network (binding allows the secrets' hosts) or give a "
                             "network_policy such as {\"default_action\": \"allow\"}");
    cleanup_json json_t *defs =
        json_array_size(spec->secrets) ? secrets_load(lb->state_dir, err) : json_object();
    if (defs == NULL || check_names(spec->secrets, defs, err) < 0)
        return -1;
    out->policy = bound_policy(spec, defs, err);
    if (out->policy == NULL)
        return -1;
    out->env = bound_env(spec, defs);
    out->spec.network = false;
    out->spec.network_policy = out->policy;
    out->spec.env = out->env;
    return 0;
}

void local_secrets_unbind(struct local_bound *b)
{
    egress_policy_unref(b->policy);
    json_decref(b->env);
    memset(b, 0, sizeof *b);
}

json_t *local_secrets_for_host(const char *state_dir, json_t *bound_names, const char *host)
{
    json_t *out = json_array();
    struct mcp_error err;
    cleanup_json json_t *defs = json_array_size(bound_names) ? secrets_load(state_dir, &err) : NULL;
    size_t i;
    json_t *n;
    json_array_foreach(defs ? bound_names : NULL, i, n)
    {
        json_t *def = json_object_get(defs, json_string_value(n));
        if (def == NULL || !secret_host_matches(def, host))
            continue; /* removed by the person since, or not for this host */
        json_t *d = json_deep_copy(def);
        json_object_set(d, "name", n);
        json_array_append_new(out, d);
    }
    return out;
}

char *local_secrets_agent_config(struct local_backend *lb, const struct sandbox_spec *spec,
                                 char *cfg)
{
    if (!wants_trust(spec) || cfg == NULL)
        return cfg;
    struct mcp_error err;
    char *pem = egress_tls_ca_pem(lb->state_dir, &err);
    json_t *j = pem ? json_loads(cfg, 0, NULL) : NULL;
    if (j == NULL) { /* TLS to its hosts then fails verification: nothing leaks */
        log_warn("the egress CA is not available (%s): TLS to the secrets' hosts will fail",
                 pem ? "bad agent config" : err.msg);
        free(pem);
        return cfg;
    }
    json_object_set_new(j, "egress_ca", json_string(pem));
    free(pem);
    free(cfg);
    cfg = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return cfg;
}

const char *local_secrets_ca(struct local_backend *lb, const struct sandbox_spec *spec)
{
    static char *pem; /* the loop thread's; the CA never changes in a process's life */
    struct mcp_error err;
    if (pem == NULL && wants_trust(spec))
        pem = egress_tls_ca_pem(lb->state_dir, &err);
    return wants_trust(spec) ? pem : NULL;
}

json_t *local_secrets_exec_env(struct lsbx *sb, json_t *env)
{
    /* only a sandbox with a proxy may have secrets: the others skip the record's re-read */
    json_t *names = sb->egress ? local_egress_secrets(sb) : NULL;
    struct mcp_error err;
    cleanup_json json_t *defs =
        json_array_size(names) ? secrets_load(sb->be->state_dir, &err) : NULL;
    if (defs == NULL)
        return json_incref(env);
    json_t *out = json_is_object(env) ? json_copy(env) : json_object();
    add_placeholders(out, names, defs);
    return out;
}

json_t *local_host_check(const char *state_dir)
{
    json_t *out = doctor_host_check(state_dir);
    struct mcp_error err;
    cleanup_json json_t *defs = secrets_load(state_dir, &err);
    /* what create_sandbox's secrets may name (never a value) */
    json_object_set_new(out, "secrets", defs ? secrets_describe(defs) : json_array());
    return out;
}

void local_secrets_diagnose(struct local_backend *lb, const char *id, json_t *record, json_t *res)
{
    json_t *names = json_object_get(record, "secrets");
    if (json_array_size(names) == 0)
        return;
    struct mcp_error err;
    cleanup_json json_t *defs = secrets_load(lb->state_dir, &err);
    json_t *bound = secrets_bound_list(names, defs);
    struct lsbx *sb = lsbx_find(lb, id);
    json_t *used = sb ? local_egress_secrets_used(sb) : NULL;
    json_object_set_new(
        res, "secrets",
        json_pack("{s:o, s:o}", "bound", bound, "used", used ? used : json_object()));
}

/* The record's policy, parsed; NULL with err (CONFLICT) when it has none. */
static struct egress_policy *record_policy(const char *id, json_t *record, struct mcp_error *err)
{
    json_t *j = json_object_get(record, "network_policy");
    if (!json_is_object(j)) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "sandbox %s was created without a network_policy, so its egress has no "
                      "proxy to inject secrets; create a new sandbox with secrets",
                      id);
        return NULL;
    }
    return egress_policy_parse(j, "record", err);
}

/* With rec read: the new names and policy written, the caches told, the event recorded. */
static int bind_into(struct lsbx *sb, struct store_sandbox *rec, json_t *names,
                     struct mcp_error *err)
{
    struct local_backend *lb = sb->be;
    cleanup_json json_t *defs = secrets_load(lb->state_dir, err);
    if (defs == NULL || check_names(names, defs, err) < 0)
        return -1;
    struct sandbox_spec spec = {.secrets = names};
    struct egress_policy *now = record_policy(sb->id, rec->record, err);
    spec.network_policy = now;
    struct egress_policy *p = now ? bound_policy(&spec, defs, err) : NULL;
    egress_policy_unref(now);
    if (p == NULL)
        return -1;
    json_object_set_new(rec->record, "network_policy", egress_policy_to_json(p));
    json_object_set(rec->record, "secrets", names);
    egress_policy_unref(p);
    if (store_sandbox_update(lb->base.store, rec, err) < 0)
        return -1;
    sb->policy_checked_ms = 0; /* this process's next connection re-reads both */
    local_event(lb->base.store, sb->id, "secrets_bound", json_pack("{s:O}", "secrets", names), err);
    return 0;
}

int local_bind_secrets(struct backend *be, const char *id, json_t *names, backend_cb *cb, void *arg,
                       struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct lsbx *sb = lsbx_for_op(lb, id, true, err);
    struct store_sandbox rec = {0};
    if (sb == NULL || store_sandbox_get(be->store, id, &rec, err) < 0)
        return -1;
    if (bind_into(sb, &rec, names, err) < 0) {
        store_sandbox_release(&rec);
        return -1;
    }
    json_t *info = local_info(&rec);
    store_sandbox_release(&rec);
    backend_defer(be, cb, arg, info, NULL);
    json_decref(info);
    return 0;
}
