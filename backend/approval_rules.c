/* The person's approval settings: parsing the serve options and the pure decisions
 * (approval_rules.h). */
#include "backend/approval_rules.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

static const char *const kind_names[APPROVAL_KINDS] = {"apply", "egress", "rw-mount", "secret"};

const char *approval_kind_name(enum approval_kind kind)
{
    return kind < APPROVAL_KINDS ? kind_names[kind] : "?";
}

void approval_settings_defaults(struct approval_settings *s)
{
    memset(s, 0, sizeof *s);
    for (int k = 0; k < APPROVAL_KINDS; k++)
        s->mode[k] = APPROVAL_MODE_ASK;
    s->unasked_allow[APPROVAL_APPLY] = true;
    s->unasked_allow[APPROVAL_RW_MOUNT] = true;
    s->timeout_s = APPROVAL_TIMEOUT_DEFAULT_S;
}

void approval_settings_release(struct approval_settings *s)
{
    for (size_t i = 0; i < s->n_egress_allow; i++)
        free(s->egress_allow[i]);
    free(s->apply_dir);
    memset(s, 0, sizeof *s);
}

/* "KIND=VALUE" -> kind and value; -1 when KIND is not one of kind_names. */
static int split_kind(const char *v, enum approval_kind *kind, const char **value)
{
    const char *eq = strchr(v, '=');
    for (int k = 0; eq && k < APPROVAL_KINDS; k++) {
        if (strlen(kind_names[k]) == (size_t)(eq - v) && strncmp(v, kind_names[k], eq - v) == 0) {
            *kind = (enum approval_kind)k;
            *value = eq + 1;
            return 0;
        }
    }
    return -1;
}

static int set_mode(struct approval_settings *s, const char *v, struct mcp_error *err)
{
    enum approval_kind k;
    const char *m;
    if (split_kind(v, &k, &m) < 0 ||
        (strcmp(m, "ask") != 0 && strcmp(m, "allow") != 0 && strcmp(m, "refuse") != 0))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--approve takes KIND=MODE, KIND one of apply, egress, rw-mount, "
                             "secret and MODE one of ask, allow, refuse (got \"%s\")",
                             v);
    s->mode[k] = strcmp(m, "ask") == 0     ? APPROVAL_MODE_ASK
                 : strcmp(m, "allow") == 0 ? APPROVAL_MODE_ALLOW
                                           : APPROVAL_MODE_REFUSE;
    return 0;
}

static int set_unasked(struct approval_settings *s, const char *v, struct mcp_error *err)
{
    enum approval_kind k;
    const char *m;
    if (split_kind(v, &k, &m) < 0 || (strcmp(m, "allow") != 0 && strcmp(m, "refuse") != 0))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--approve-unasked takes KIND=allow or KIND=refuse, KIND one of "
                             "apply, egress, rw-mount, secret (got \"%s\")",
                             v);
    s->unasked_allow[k] = strcmp(m, "allow") == 0;
    return 0;
}

static int add_egress_allow(struct approval_settings *s, const char *v, struct mcp_error *err)
{
    char norm[EGRESS_NAME_MAX + 1];
    bool wild = strncmp(v, "*.", 2) == 0;
    if (!egress_name_normalize(wild ? v + 2 : v, norm))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--approve-egress-allow needs a domain name or *.domain, as in a "
                             "network_policy target (got \"%s\")",
                             v);
    if (s->n_egress_allow == APPROVAL_EGRESS_ALLOW_MAX)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "--approve-egress-allow was given more than %d times; use a "
                             "wildcard (*.example.com) for a family of names",
                             APPROVAL_EGRESS_ALLOW_MAX);
    s->egress_allow[s->n_egress_allow++] = wild ? xasprintf("*.%s", norm) : xstrdup(norm);
    return 0;
}

static int set_apply_dir(struct approval_settings *s, const char *v, struct mcp_error *err)
{
    char *real = v[0] == '/' ? realpath(v, NULL) : NULL;
    if (real == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--approve-apply-dir needs an existing absolute directory (got "
                             "\"%s\")",
                             v);
    free(s->apply_dir);
    s->apply_dir = real;
    return 0;
}

static int set_timeout(struct approval_settings *s, const char *v, struct mcp_error *err)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 1 || n > APPROVAL_TIMEOUT_MAX_S)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--approve-timeout must be seconds from 1 to %d (got \"%s\")",
                             APPROVAL_TIMEOUT_MAX_S, v);
    s->timeout_s = (unsigned)n;
    return 0;
}

int approval_settings_option(struct approval_settings *s, const char *name, const char *value,
                             struct mcp_error *err)
{
    if (strcmp(name, "approve") == 0)
        return set_mode(s, value, err);
    if (strcmp(name, "approve-unasked") == 0)
        return set_unasked(s, value, err);
    if (strcmp(name, "approve-egress-allow") == 0)
        return add_egress_allow(s, value, err);
    if (strcmp(name, "approve-apply-dir") == 0)
        return set_apply_dir(s, value, err);
    if (strcmp(name, "approve-timeout") == 0)
        return set_timeout(s, value, err);
    return mcp_error_set(err, MCP_ERR_INVALID, 0, "unknown approval option --%s", name);
}

/* Whether name ("x.org") or a wildcard ("*.x.org") is within the person's entry. */
static bool entry_covers(const char *entry, const char *target)
{
    if (strcmp(entry, target) == 0)
        return true;
    if (strncmp(entry, "*.", 2) != 0)
        return false;
    const char *suffix = entry + 1; /* ".x.org" */
    const char *name = strncmp(target, "*.", 2) == 0 ? target + 2 : target;
    size_t n = strlen(name), m = strlen(suffix);
    return (n > m && strcmp(name + n - m, suffix) == 0) || strcmp(name, suffix + 1) == 0;
}

static bool person_allows(const struct approval_settings *s, const char *target)
{
    for (size_t i = 0; i < s->n_egress_allow; i++)
        if (entry_covers(s->egress_allow[i], target))
            return true;
    return false;
}

json_t *approval_egress_beyond(const struct approval_settings *s,
                               const struct egress_policy *policy, bool full_network)
{
    json_t *out = json_array();
    if (full_network || (policy && policy->default_allow)) {
        json_array_append_new(out, json_string("*"));
        return out;
    }
    for (size_t i = 0; policy && i < policy->n_rules; i++) {
        const struct egress_rule *r = &policy->rules[i];
        char target[EGRESS_NAME_MAX + 3];
        snprintf(target, sizeof target, "%s%s", r->wildcard ? "*." : "", r->name);
        if (r->allow && !person_allows(s, target))
            json_array_append_new(out, json_string(target));
    }
    return out;
}

bool approval_apply_dir_covers(const struct approval_settings *s, const char *host_path)
{
    if (s->apply_dir == NULL || host_path == NULL)
        return false;
    size_t n = strlen(s->apply_dir);
    if (strncmp(host_path, s->apply_dir, n) != 0 || strstr(host_path, "/../") != NULL)
        return false;
    return host_path[n] == '/' || (n > 0 && s->apply_dir[n - 1] == '/');
}

bool approval_unattended(const struct approval_settings *s, enum approval_kind kind,
                         const char *what, struct mcp_error *err)
{
    if (s->mode[kind] == APPROVAL_MODE_ALLOW ||
        (s->mode[kind] == APPROVAL_MODE_ASK && s->unasked_allow[kind]))
        return true;
    if (s->mode[kind] == APPROVAL_MODE_REFUSE)
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "%s is refused by the person's settings (mcpbox serve --approve %s=refuse); "
                      "do not retry: only the person can change this, by restarting mcpbox serve "
                      "with --approve %s=ask or =allow",
                      what, kind_names[kind], kind_names[kind]);
    else
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "%s needs the person's approval, and this client cannot ask them (it does "
                      "not support MCP elicitation); do not retry: the person can use a client "
                      "with elicitation, or restart mcpbox serve with --approve-unasked "
                      "%s=allow%s",
                      what, kind_names[kind],
                      kind == APPROVAL_EGRESS ? " or list the names with --approve-egress-allow"
                                              : "");
    return false;
}
