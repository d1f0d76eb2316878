/* Fuzz target for the egress policy parser (network_policy comes from agents and from the CLI):
 * whatever JSON it is given, parsing never crashes; a policy it accepts writes out (to_json) as a
 * policy that parses back to the same JSON, and deciding any name and port on it is safe. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/egress_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decide_some(const struct egress_policy *p, const uint8_t *data, size_t size)
{
    char name[300];
    size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
    memcpy(name, data, n);
    name[n] = '\0';
    uint16_t port = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0;
    struct egress_decision d = egress_policy_decide(p, name, port);
    if (d.rule >= (int)p->n_rules)
        abort();
    (void)egress_policy_may_resolve(p, name);
    char text[64];
    egress_decision_describe(p, d, text, sizeof(text));
    for (size_t i = 0; i < p->n_rules; i++) {
        char target[EGRESS_NAME_MAX + 3];
        strcpy(target, p->rules[i].name);
        /* every rule's own name (a wildcard's: one label below it) is decided by a rule */
        if (p->rules[i].wildcard) {
            if (strlen(target) + 2 > EGRESS_NAME_MAX)
                continue;
            memmove(target + 2, target, strlen(target) + 1);
            memcpy(target, "a.", 2);
        }
        uint16_t any = p->rules[i].n_ports ? p->rules[i].ports[0] : 443;
        if (egress_policy_decide(p, target, any).rule < 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *j = json_loadb((const char *)data, size, 0, &jerr);
    if (j == NULL)
        return 0;
    struct mcp_error err;
    struct egress_policy *p = egress_policy_parse(j, "network_policy", &err);
    json_decref(j);
    if (p == NULL) {
        if (err.msg[0] == '\0')
            abort(); /* every refusal says why */
        return 0;
    }
    json_t *out = egress_policy_to_json(p);
    struct egress_policy *q = egress_policy_parse(out, "again", &err);
    if (q == NULL)
        abort();
    json_t *out2 = egress_policy_to_json(q);
    if (!json_equal(out, out2))
        abort();
    decide_some(p, data, size);
    json_decref(out);
    json_decref(out2);
    egress_policy_unref(q);
    egress_policy_unref(p);
    return 0;
}
