/* Fuzz target for what approvals read of an agent's network_policy (backend/approval_rules.c):
 * whatever policy JSON comes, approval_egress_beyond never crashes, and every name it returns is
 * an allow target of the policy (or "*" for everything) that the person's list does not cover. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/approval_rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_allow_target(const struct egress_policy *p, const char *t)
{
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct egress_rule *r = &p->rules[i];
        bool wild = strncmp(t, "*.", 2) == 0;
        if (r->allow && r->wildcard == wild && strcmp(r->name, wild ? t + 2 : t) == 0)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct approval_settings s;
    static bool ready;
    struct mcp_error err;
    if (!ready) {
        approval_settings_defaults(&s);
        approval_settings_option(&s, "approve-egress-allow", "pypi.org", &err);
        approval_settings_option(&s, "approve-egress-allow", "*.example.com", &err);
        ready = true;
    }
    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    struct egress_policy *p = j ? egress_policy_parse(j, "network_policy", &err) : NULL;
    json_decref(j);
    if (p == NULL)
        return 0;
    json_t *beyond = approval_egress_beyond(&s, p, false);
    size_t i;
    json_t *b;
    json_array_foreach(beyond, i, b)
    {
        const char *t = json_string_value(b);
        if (t == NULL || (strcmp(t, "*") != 0 && !is_allow_target(p, t)) ||
            strcmp(t, "pypi.org") == 0 || strcmp(t, "a.example.com") == 0)
            abort();
    }
    json_decref(beyond);
    egress_policy_unref(p);
    return 0;
}
