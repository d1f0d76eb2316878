/* Egress policy: parsing, normalizing and deciding (see egress_policy.h for the semantics). */
#include "backend/egress_policy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

static bool label_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_';
}

/* Why s (already lower case, trailing dot dropped) is not a domain name, or NULL if it is one. */
static const char *name_problem(const char *s)
{
    size_t len = strlen(s);
    if (len == 0)
        return "is empty";
    if (len > EGRESS_NAME_MAX)
        return "is longer than 253 characters";
    if (strchr(s, '/') != NULL)
        return "looks like a CIDR or a URL; rules name domains only (\"pypi.org\", "
               "\"*.example.com\"), without scheme, path or port";
    if (strchr(s, ':') != NULL || s[0] == '[')
        return "has a \":\": write the name alone (ports go in \"ports\"); IPv6 addresses "
               "are not targets, rules name domains";
    if (strchr(s, '*') != NULL)
        return "has a \"*\" that is not a leading \"*.\"; only \"*.example.com\" wildcards "
               "are supported";
    const char *label = s;
    size_t label_len = 0;
    bool all_digits = true;
    for (const char *c = s;; c++) {
        if (*c == '.' || *c == '\0') {
            if (label_len == 0)
                return "has an empty label (\"..\" or a leading dot)";
            if (label_len > EGRESS_LABEL_MAX)
                return "has a label longer than 63 characters";
            if (label[0] == '-' || c[-1] == '-')
                return "has a label that starts or ends with \"-\"";
            if (*c == '\0')
                break;
            label = c + 1;
            label_len = 0;
            all_digits = true;
            continue;
        }
        if (!label_char_ok(*c))
            return "has a character other than letters, digits, \"-\", \"_\" and \".\" (write "
                   "the name alone: no scheme, port, path or spaces; internationalized names "
                   "in their xn-- form)";
        if (!isdigit((unsigned char)*c))
            all_digits = false;
        label_len++;
    }
    if (all_digits) /* a numeric last label: an IPv4 address (or a form of one), not a name */
        return "is an IP address; rules name domains (write the domain name the program "
               "connects to)";
    return NULL;
}

/* Lower-cases s into out and drops one trailing dot; false if it does not fit. */
static bool lower_copy(const char *s, char out[EGRESS_NAME_MAX + 1])
{
    size_t len = strlen(s);
    if (len > 0 && s[len - 1] == '.')
        len--;
    if (len > EGRESS_NAME_MAX) {
        out[0] = '\0';
        return false;
    }
    for (size_t i = 0; i < len; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[len] = '\0';
    return true;
}

bool egress_name_normalize(const char *name, char out[EGRESS_NAME_MAX + 1])
{
    if (name == NULL || !lower_copy(name, out))
        return false;
    if (name_problem(out) != NULL) {
        out[0] = '\0';
        return false;
    }
    return true;
}

static int parse_action(const json_t *v, const char *field, bool *allow, struct mcp_error *err)
{
    const char *s = json_string_value(v);
    if (s != NULL && strcmp(s, "allow") == 0)
        *allow = true;
    else if (s != NULL && strcmp(s, "deny") == 0)
        *allow = false;
    else
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s must be \"allow\" or \"deny\"", field);
    return 0;
}

static int parse_target(const json_t *v, const char *field, struct egress_rule *r,
                        struct mcp_error *err)
{
    const char *s = json_string_value(v);
    if (s == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s must be a string: a domain name (\"pypi.org\") or a wildcard "
                             "(\"*.pythonhosted.org\")", field);
    if (strcmp(s, "*") == 0 || strcmp(s, "*.") == 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s \"%s\" would match every name: set default_action to \"allow\" "
                             "instead", field, s);
    r->wildcard = strncmp(s, "*.", 2) == 0;
    const char *rest = r->wildcard ? s + 2 : s;
    char lowered[EGRESS_NAME_MAX + 1];
    const char *why = lower_copy(rest, lowered) ? name_problem(lowered)
                                                : "is longer than 253 characters";
    if (why != NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "%s \"%.*s\" %s", field, 80, s, why);
    memcpy(r->name, lowered, sizeof(r->name));
    return 0;
}

static int parse_ports(const json_t *v, const char *field, struct egress_rule *r,
                       struct mcp_error *err)
{
    if (!json_is_array(v) || json_array_size(v) == 0 ||
        json_array_size(v) > EGRESS_POLICY_MAX_PORTS)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s must be a list of 1 to %d port numbers (leave it out to match "
                             "every port)", field, EGRESS_POLICY_MAX_PORTS);
    size_t i;
    json_t *p;
    json_array_foreach(v, i, p) {
        json_int_t n = json_is_integer(p) ? json_integer_value(p) : -1;
        if (n < 1 || n > 65535)
            return mcp_error_set(err, MCP_ERR_INVALID, 0,
                                 "%s[%zu] must be a port number from 1 to 65535", field, i);
        r->ports[r->n_ports++] = (uint16_t)n;
    }
    return 0;
}

static int parse_rule(const json_t *j, const char *field, struct egress_rule *r,
                      struct mcp_error *err)
{
    char sub[96];
    if (!json_is_object(j))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s must be an object {action, target, ports?}", field);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        if (strcmp(key, "action") != 0 && strcmp(key, "target") != 0 &&
            strcmp(key, "ports") != 0)
            return mcp_error_set(err, MCP_ERR_INVALID, 0,
                                 "%s has an unknown field \"%.40s\"; a rule has action, target "
                                 "and optionally ports", field, key);
    }
    json_t *action = json_object_get(j, "action"), *target = json_object_get(j, "target");
    if (action == NULL || target == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s needs both \"action\" (\"allow\" or \"deny\") and \"target\" "
                             "(a domain name or \"*.\" wildcard)", field);
    snprintf(sub, sizeof(sub), "%s.action", field);
    if (parse_action(action, sub, &r->allow, err) < 0)
        return -1;
    snprintf(sub, sizeof(sub), "%s.target", field);
    if (parse_target(target, sub, r, err) < 0)
        return -1;
    json_t *ports = json_object_get(j, "ports");
    snprintf(sub, sizeof(sub), "%s.ports", field);
    return ports != NULL ? parse_ports(ports, sub, r, err) : 0;
}

static int parse_rules(const json_t *egress, const char *what, struct egress_policy *p,
                       struct mcp_error *err)
{
    if (!json_is_array(egress))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s.egress must be a list of rules {action, target, ports?}", what);
    size_t n = json_array_size(egress);
    if (n > EGRESS_POLICY_MAX_RULES)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s.egress has %zu rules; at most %d: cover names with a wildcard "
                             "(\"*.example.com\") or use default_action \"allow\" with deny rules",
                             what, n, EGRESS_POLICY_MAX_RULES);
    p->rules = xcalloc(n ? n : 1, sizeof(*p->rules));
    for (size_t i = 0; i < n; i++) {
        char field[64];
        snprintf(field, sizeof(field), "%.24s.egress[%zu]", what, i);
        if (parse_rule(json_array_get(egress, i), field, &p->rules[i], err) < 0)
            return -1;
        p->n_rules++;
    }
    return 0;
}

struct egress_policy *egress_policy_parse(const json_t *j, const char *what,
                                          struct mcp_error *err)
{
    if (!json_is_object(j)) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "%s must be an object {default_action?, egress?:[{action, target, "
                      "ports?}]}", what);
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        if (strcmp(key, "default_action") != 0 && strcmp(key, "egress") != 0) {
            mcp_error_set(err, MCP_ERR_INVALID, 0,
                          "%s has an unknown field \"%.40s\"; a policy has default_action and "
                          "egress (OpenSandbox's defaultAction is spelled default_action here)",
                          what, key);
            return NULL;
        }
    }
    struct egress_policy *p = xcalloc(1, sizeof(*p));
    p->refs = 1;
    char field[64];
    snprintf(field, sizeof(field), "%.40s.default_action", what);
    json_t *def = json_object_get(j, "default_action");
    json_t *egress = json_object_get(j, "egress");
    if ((def != NULL && parse_action(def, field, &p->default_allow, err) < 0) ||
        (egress != NULL && parse_rules(egress, what, p, err) < 0)) {
        egress_policy_unref(p);
        return NULL;
    }
    return p;
}

static json_t *rule_to_json(const struct egress_rule *r)
{
    char target[EGRESS_NAME_MAX + 3];
    snprintf(target, sizeof(target), "%s%s", r->wildcard ? "*." : "", r->name);
    json_t *j = json_pack("{s:s, s:s}", "action", r->allow ? "allow" : "deny", "target", target);
    if (r->n_ports > 0) {
        json_t *ports = json_array();
        for (size_t i = 0; i < r->n_ports; i++)
            json_array_append_new(ports, json_integer(r->ports[i]));
        json_object_set_new(j, "ports", ports);
    }
    return j;
}

json_t *egress_policy_to_json(const struct egress_policy *p)
{
    json_t *rules = json_array();
    for (size_t i = 0; i < p->n_rules; i++)
        json_array_append_new(rules, rule_to_json(&p->rules[i]));
    return json_pack("{s:s, s:o}", "default_action", p->default_allow ? "allow" : "deny",
                     "egress", rules);
}

struct egress_policy *egress_policy_ref(struct egress_policy *p)
{
    if (p != NULL)
        p->refs++;
    return p;
}

void egress_policy_unref(struct egress_policy *p)
{
    if (p == NULL || --p->refs > 0)
        return;
    free(p->rules);
    free(p);
}

/* name: normalized. "*.suffix" matches names that end in ".suffix" (not suffix itself). */
static bool target_matches(const struct egress_rule *r, const char *name)
{
    if (!r->wildcard)
        return strcmp(r->name, name) == 0;
    size_t n = strlen(name), s = strlen(r->name);
    return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, r->name) == 0;
}

static bool port_matches(const struct egress_rule *r, uint16_t port)
{
    if (r->n_ports == 0)
        return true;
    for (size_t i = 0; i < r->n_ports; i++)
        if (r->ports[i] == port)
            return true;
    return false;
}

struct egress_decision egress_policy_decide(const struct egress_policy *p, const char *name,
                                            uint16_t port)
{
    if (p == NULL)
        return (struct egress_decision){.allow = false, .rule = -1};
    char norm[EGRESS_NAME_MAX + 1];
    if (egress_name_normalize(name, norm)) {
        for (size_t i = 0; i < p->n_rules; i++)
            if (target_matches(&p->rules[i], norm) && port_matches(&p->rules[i], port))
                return (struct egress_decision){.allow = p->rules[i].allow, .rule = (int)i};
    }
    return (struct egress_decision){.allow = p->default_allow, .rule = -1};
}

struct egress_decision egress_policy_decide_lookup(const struct egress_policy *p,
                                                   const char *name)
{
    if (p == NULL)
        return (struct egress_decision){.allow = false, .rule = -1};
    char norm[EGRESS_NAME_MAX + 1];
    if (egress_name_normalize(name, norm)) {
        /* An allow rule for the name allows some port; a deny rule without ports ends the
         * search; a deny rule with ports leaves the other ports to later rules and the
         * default. */
        for (size_t i = 0; i < p->n_rules; i++) {
            const struct egress_rule *r = &p->rules[i];
            if (target_matches(r, norm) && (r->allow || r->n_ports == 0))
                return (struct egress_decision){.allow = r->allow, .rule = (int)i};
        }
    }
    return (struct egress_decision){.allow = p->default_allow, .rule = -1};
}

bool egress_policy_may_resolve(const struct egress_policy *p, const char *name)
{
    return egress_policy_decide_lookup(p, name).allow;
}

char *egress_decision_describe(const struct egress_policy *p, struct egress_decision d, char *out,
                               size_t size)
{
    if (size == 0)
        return out;
    if (p == NULL || d.rule < 0 || (size_t)d.rule >= p->n_rules) {
        snprintf(out, size, "default %s", d.allow ? "allow" : "deny");
        return out;
    }
    const struct egress_rule *r = &p->rules[d.rule];
    int n = snprintf(out, size, "egress[%d] (%s %s%s", d.rule, r->allow ? "allow" : "deny",
                     r->wildcard ? "*." : "", r->name);
    for (size_t i = 0; i < r->n_ports && n > 0 && (size_t)n < size; i++)
        n += snprintf(out + n, size - (size_t)n, "%s%u", i == 0 ? " ports " : ",",
                      (unsigned)r->ports[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, ")");
    return out;
}
