/* The egress sidecar's /policy (specs/egress-api.yaml, port 18080) over a sandbox's
 * network_policy (issue 14): GET shows it in OpenSandbox's shape; PATCH merges rules as the
 * sidecar does (incoming rules first, the first rule per target wins, the rules in force keep
 * the targets not named); DELETE removes rules by target. PATCH and DELETE go through the
 * backend's set_network_policy, so they apply to the sandbox's next connection. Errors are
 * text/plain, as the sidecar's. */
#include <string.h>

#include "lib/base/xalloc.h"
#include "osapi/osapi-internal.h"

static void reply_text(struct osapi_req *req, int status, const char *msg)
{
    osapi_reply_raw(req, status, "text/plain; charset=utf-8", NULL, msg, strlen(msg));
}

/* network_policy (mcpbox's shape, or null) -> PolicyStatusResponse. Rules with ports cannot be
 * written in OpenSandbox's shape: they are left out and named in "reason". */
json_t *osapi_egress_status(json_t *info)
{
    json_t *np = json_object_get(info, "network_policy");
    bool net = json_is_true(json_object_get(info, "network"));
    const char *def = json_is_object(np)
                          ? json_string_value(json_object_get(np, "default_action"))
                          : (net ? "allow" : "deny");
    json_t *rules = json_array();
    size_t i, hidden = 0;
    json_t *r;
    json_array_foreach(json_object_get(np, "egress"), i, r) {
        if (json_object_get(r, "ports") != NULL) {
            hidden++;
            continue;
        }
        json_array_append_new(rules, json_pack("{s:O, s:O}", "action", json_object_get(r, "action"),
                                               "target", json_object_get(r, "target")));
    }
    json_t *out = json_pack("{s:s, s:s, s:s, s:{s:s, s:o}}", "status", "ok", "mode",
                            !strcmp(def ? def : "deny", "allow") ? "allow_all" : "deny_all",
                            "enforcementMode", "mcpbox", "policy", "defaultAction",
                            def ? def : "deny", "egress", rules);
    if (!json_is_object(np))
        json_object_set_new(out, "reason",
                            json_string("created without a network policy: its egress is all "
                                        "or nothing and cannot be changed (create it with "
                                        "networkPolicy egress rules)"));
    else if (hidden > 0)
        json_object_set_new(out, "reason",
                            json_sprintf("%zu rule(s) limited to ports are not shown (set with "
                                         "mcpbox's update_sandbox)",
                                         hidden));
    return out;
}

static bool rule_names(json_t *rules, json_t *target)
{
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r) {
        if (json_equal(json_object_get(r, "target"), target))
            return true;
    }
    return false;
}

/* PATCH: incoming first (the first per target), then the rules in force whose targets the
 * incoming ones do not name. DELETE: the rules in force without the given targets. The
 * sidecar compares targets as written; mcpbox's are normalized, so incoming ones are too. */
json_t *osapi_egress_merge(json_t *current, json_t *body, bool patch)
{
    json_t *out = json_array();
    size_t i;
    json_t *r;
    if (patch) {
        json_array_foreach(body, i, r) {
            if (!rule_names(out, json_object_get(r, "target")))
                json_array_append(out, r);
        }
    }
    json_array_foreach(current, i, r) {
        json_t *t = json_object_get(r, "target");
        bool named = patch ? rule_names(body, t) : false;
        for (size_t k = 0; !patch && k < json_array_size(body); k++)
            named = named || json_equal(json_array_get(body, k), t);
        if (!named)
            json_array_append(out, r);
    }
    return out;
}

/* Normalizes the targets of body (rules, or target strings) so they compare with the policy's:
 * "PyPI.org." is "pypi.org". Leaves anything that is not a name for the parser to refuse. */
static void normalize_targets(json_t *body, bool patch)
{
    size_t i;
    json_t *v;
    json_array_foreach(body, i, v) {
        json_t *t = patch ? json_object_get(v, "target") : v;
        const char *s = json_string_value(t);
        if (s == NULL)
            continue;
        bool wild = strncmp(s, "*.", 2) == 0;
        char norm[EGRESS_NAME_MAX + 1], both[EGRESS_NAME_MAX + 3];
        if (!egress_name_normalize(wild ? s + 2 : s, norm))
            continue;
        snprintf(both, sizeof(both), "%s%s", wild ? "*." : "", norm);
        if (patch)
            json_object_set_new(v, "target", json_string(both));
        else
            json_array_set_new(body, i, json_string(both));
    }
}

struct egress_state {
    json_t *body; /* PATCH: rules; DELETE: targets; NULL: GET */
    bool patch;
};

static void egress_state_free(void *p)
{
    struct egress_state *s = p;
    json_decref(s->body);
    free(s);
}

static void set_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (err != NULL)
        reply_text(req, err->code == MCP_ERR_INTERNAL || err->code == MCP_ERR_IO ? 500 : 400,
                   err->msg);
    else
        osapi_reply_json(req, 200, osapi_egress_status(result), NULL);
}

static void got_cb(void *arg, json_t *info, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct egress_state *s = req->state;
    if (err != NULL) {
        reply_text(req, 500, err->msg);
        return;
    }
    if (s->body == NULL) {
        osapi_reply_json(req, 200, osapi_egress_status(info), NULL);
        return;
    }
    json_t *np = json_object_get(info, "network_policy");
    if (!json_is_object(np)) {
        reply_text(req, 400, "this sandbox was created without a network policy, so its egress "
                             "has no rules to change; create one with networkPolicy egress rules");
        return;
    }
    json_t *rules = osapi_egress_merge(json_object_get(np, "egress"), s->body, s->patch);
    json_t *policy = json_pack("{s:O, s:o}", "default_action", json_object_get(np, "default_action"),
                               "egress", rules);
    struct mcp_error e;
    struct egress_policy *p = egress_policy_parse(policy, "the patched policy", &e);
    json_decref(policy);
    if (p == NULL) {
        reply_text(req, 400, e.msg);
        return;
    }
    if (osapi_approval_egress(p, false, &e) < 0) { /* approvals (issue 38) */
        egress_policy_unref(p);
        reply_text(req, 403, e.msg);
        return;
    }
    int rc = req->be->ops->set_network_policy(req->be, req->sandbox_id, p, set_cb, req, &e);
    egress_policy_unref(p);
    if (rc < 0)
        set_cb(req, NULL, &e);
}

/* The body of PATCH (rules) or DELETE (target strings): a non-empty array, else answered. */
static json_t *egress_body(struct osapi_req *req, bool patch)
{
    const struct http_request *h = osapi_req_http(req);
    json_error_t jerr;
    json_t *body = json_loadb(h->body.data, h->body.len, 0, &jerr);
    bool ok = json_is_array(body) && json_array_size(body) > 0;
    size_t i;
    json_t *v;
    json_array_foreach(body, i, v) {
        ok = ok && (patch ? json_is_object(v) : json_is_string(v));
    }
    if (!ok) {
        json_decref(body);
        reply_text(req, 400, patch ? "the body must be a non-empty JSON array of rules "
                                     "{action, target}"
                                   : "the body must be a non-empty JSON array of targets");
        return NULL;
    }
    return body;
}

void osapi_egress(struct osapi_req *req, const char *sandbox_id, const char *rest)
{
    if (strncmp(rest, "/credential-vault", 17) == 0) { /* issue 37 */
        osapi_vault(req, sandbox_id, rest + 17);
        return;
    }
    if (strcmp(rest, "/policy") != 0) {
        osapi_reply_unsupported(req,
                                "the egress sidecar's %s is not served by mcpbox (only "
                                "/policy and /credential-vault)",
                                rest);
        return;
    }
    enum http_method m = osapi_req_http(req)->method;
    if (m != HTTP_GET && m != HTTP_PATCH && m != HTTP_DELETE) {
        reply_text(req, 405, "/policy takes GET, PATCH and DELETE");
        return;
    }
    json_t *body = NULL;
    if (m != HTTP_GET && (body = egress_body(req, m == HTTP_PATCH)) == NULL)
        return; /* answered (and req freed) */
    if (osapi_bind(req, sandbox_id, false, NULL) < 0) {
        json_decref(body);
        return;
    }
    struct egress_state *s = xcalloc(1, sizeof(*s));
    s->patch = m == HTTP_PATCH;
    s->body = body;
    if (body != NULL)
        normalize_targets(body, s->patch);
    req->state = s;
    req->free_state = egress_state_free;
    struct mcp_error err;
    if (req->be->ops->get(req->be, req->sandbox_id, got_cb, req, &err) < 0)
        got_cb(req, NULL, &err);
}
