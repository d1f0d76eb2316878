/* Secrets on OpenSandbox (issue 37), the plan: which of the person's secrets an osb- sandbox
 * binds and how each becomes a credential and a binding of the remote's Credential Vault
 * (specs/egress-api.yaml), without values; then, off the loop, the credentials with their
 * values. Entries are named "mcpbox-<name>" so that the vault's other entries (the person's own,
 * through the OpenSandbox SDK) are left alone. What the spec cannot express (a placeholder) is
 * refused, never widened. docs/secrets.md, "On the opensandbox backend". */
#include <string.h>
#include <strings.h>

#include "backend/opensandbox/osb.h"
#include "backend/secrets.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

/* The person's secrets file lives beside the store. */
static json_t *load_defs(struct osb_backend *b, struct mcp_error *err)
{
    const char *dir = b->base.store ? store_state_dir(b->base.store) : NULL;
    if (dir == NULL) {
        mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                      "this opensandbox backend runs without mcpbox's state directory, where "
                      "the person's secrets are defined: start mcpbox with its state directory");
        return NULL;
    }
    return secrets_load(dir, err);
}

static json_t *auth_json(const char *type, const char *hname, const char *cname)
{
    if (hname == NULL)
        return json_pack("{s:s, s:s}", "type", type, "credential", cname);
    if (strcmp(type, "apiKey") == 0)
        return json_pack("{s:s, s:s, s:s}", "type", type, "name", hname, "credential", cname);
    return json_pack("{s:s, s:[{s:s, s:s}]}", "type", type, "headers", "name", hname, "credential",
                     cname);
}

/* def's header as the spec's CredentialAuth: "Authorization: Bearer {}" and "... Basic {}" as
 * bearer and basic, "Name: {}" as apiKey, any other template as customHeaders whose credential
 * is the whole header value (*tmpl: the template the value is put into). */
static json_t *auth_of(const char *name, const json_t *def, const char *cname, const char **tmpl,
                       struct mcp_error *err)
{
    const char *h = json_string_value(json_object_get(def, "header"));
    const char *colon = h ? strchr(h, ':') : NULL;
    if (json_is_true(json_object_get(def, "placeholder")) || colon == NULL) {
        mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                      "secret %s is sent as a placeholder (" SECRET_PLACEHOLDER_PREFIX "...), "
                      "which OpenSandbox's Credential Vault cannot express (its bindings set "
                      "headers only): bind it to a local sandbox (backend: \"local\"), or ask "
                      "the person to define it with --header and without --placeholder",
                      name);
        return NULL;
    }
    cleanup_free char *hname = xstrndup(h, (size_t)(colon - h));
    const char *t = colon + 1 + strspn(colon + 1, " \t");
    bool authz = strcasecmp(hname, "Authorization") == 0;
    *tmpl = "{}";
    if (authz && strcmp(t, "Bearer {}") == 0)
        return auth_json("bearer", NULL, cname);
    if (authz && strcmp(t, "Basic {}") == 0) /* the value is base64(user:password) already */
        return auth_json("basic", NULL, cname);
    if (strcmp(t, "{}") == 0)
        return auth_json("apiKey", hname, cname);
    *tmpl = t;
    return auth_json("customHeaders", hname, cname);
}

/* One name: {name, def, template, binding}; NULL with err. */
static json_t *plan_item(const char *name, json_t *def, struct mcp_error *err)
{
    cleanup_free char *cname = xasprintf(OSB_VAULT_PREFIX "%s", name);
    const char *tmpl = NULL;
    json_t *auth = auth_of(name, def, cname, &tmpl, err);
    if (auth == NULL)
        return NULL;
    /* the spec's default is https on 443; mcpbox's secrets go to their hosts over both */
    json_t *binding = json_pack("{s:s, s:{s:O, s:[ss], s:[ii]}, s:o}", "name", cname, "match",
                                "hosts", json_object_get(def, "hosts"), "schemes", "https", "http",
                                "ports", 443, 80, "auth", auth);
    json_t *d = json_deep_copy(def);
    json_object_set_new(d, "name", json_string(name)); /* for secret_value's messages */
    return json_pack("{s:s, s:o, s:s, s:o}", "name", name, "def", d, "template", tmpl, "binding",
                     binding);
}

static bool has_target(json_t *rules, json_t *target)
{
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        if (json_equal(json_object_get(r, "target"), target))
            return true;
    }
    return false;
}

/* An allow rule for each host of def, unless its egress is the policy's business. */
static void plan_allow(json_t *allow, json_t *def)
{
    if (json_is_false(json_object_get(def, "egress")))
        return;
    size_t i;
    json_t *h;
    json_array_foreach(json_object_get(def, "hosts"), i, h)
    {
        if (!has_target(allow, h))
            json_array_append_new(allow, json_pack("{s:s, s:O}", "action", "allow", "target", h));
    }
}

static int plan_add(struct osb_vault_plan *p, const json_t *defs, json_t *n, struct mcp_error *err)
{
    const char *name = json_string_value(n);
    json_t *def = name ? json_object_get(defs, name) : NULL;
    if (def == NULL) {
        cleanup_free char *known = secrets_names_text(defs);
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "no secret named %s; the secrets you may bind are: %s. Ask the "
                             "person to add one with `mcpbox secret add` if none fits",
                             name ? name : "(not a string)", known);
    }
    size_t i;
    json_t *it;
    json_array_foreach(p->items, i, it)
    {
        if (strcmp(json_string_value(json_object_get(it, "name")), name) == 0)
            return 0; /* named twice: bound once */
    }
    json_t *item = plan_item(name, def, err);
    if (item == NULL)
        return -1;
    json_array_append_new(p->items, item);
    json_array_append(p->names, n);
    plan_allow(p->allow, def);
    return 0;
}

struct osb_vault_plan *osb_vault_plan_new(struct osb_backend *b, json_t *names,
                                          struct mcp_error *err)
{
    cleanup_json json_t *defs = load_defs(b, err);
    if (defs == NULL)
        return NULL;
    struct osb_vault_plan *p = xcalloc(1, sizeof *p);
    p->names = json_array();
    p->items = json_array();
    p->allow = json_array();
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        if (plan_add(p, defs, n, err) < 0) {
            osb_vault_plan_free(p);
            return NULL;
        }
    }
    return p;
}

/* Zeroes the memory of a JSON string holding a value before it is released. */
static void wipe_string(json_t *s)
{
    if (json_is_string(s))
        explicit_bzero((char *)json_string_value(s), json_string_length(s));
}

void osb_vault_wipe(json_t *creds)
{
    size_t i;
    json_t *c;
    json_array_foreach(creds, i, c)
    {
        wipe_string(json_object_get(json_object_get(c, "source"), "value"));
        wipe_string(json_object_get(c, "raw"));
    }
}

void osb_vault_plan_free(struct osb_vault_plan *p)
{
    if (p == NULL)
        return;
    json_decref(p->names);
    json_decref(p->items);
    json_decref(p->allow);
    free(p);
}

/* tmpl with each {} replaced by v (new string, allocated once: no copy of v is left behind in
 * freed memory). */
static char *compose(const char *tmpl, const char *v)
{
    size_t holes = 0, vl = strlen(v);
    for (const char *s = strstr(tmpl, "{}"); s; s = strstr(s + 2, "{}"))
        holes++;
    char *out = xmalloc(strlen(tmpl) - 2 * holes + holes * vl + 1), *o = out;
    for (const char *s = tmpl; *s;) {
        const char *at = strstr(s, "{}");
        size_t n = at ? (size_t)(at - s) : strlen(s);
        memcpy(o, s, n);
        o += n;
        if (at == NULL)
            break;
        memcpy(o, v, vl);
        o += vl;
        s = at + 2;
    }
    *o = '\0';
    return out;
}

json_t *osb_vault_credentials(const struct osb_vault_plan *p, struct mcp_error *err)
{
    json_t *creds = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(p->items, i, it)
    {
        size_t len = 0;
        char *v = secret_value(json_object_get(it, "def"), &len, err);
        if (v == NULL) {
            osb_vault_wipe(creds);
            json_decref(creds);
            return NULL;
        }
        char *value = compose(json_string_value(json_object_get(it, "template")), v);
        /* raw: the value alone, kept to scrub it from a remote's error (never sent) */
        json_array_append_new(creds,
                              json_pack("{s:O, s:{s:s, s:s}, s:s}", "name",
                                        json_object_get(json_object_get(it, "binding"), "name"),
                                        "source", "type", "inline", "value", value, "raw", v));
        explicit_bzero(value, strlen(value));
        explicit_bzero(v, len);
        free(value);
        free(v);
    }
    return creds;
}

void osb_vault_diagnose(struct osb_backend *b, json_t *record, json_t *res)
{
    json_t *names = json_object_get(record, "secrets");
    if (json_array_size(names) == 0)
        return;
    struct mcp_error err;
    cleanup_json json_t *defs = load_defs(b, &err);
    json_t *bound = secrets_bound_list(names, defs);
    json_object_set_new(res, "secrets",
                        json_pack("{s:o, s:n, s:s}", "bound", bound, "used", "note",
                                  "in the OpenSandbox server's Credential Vault, injected by its "
                                  "egress proxy; its API reports no use, so none is counted"));
}
