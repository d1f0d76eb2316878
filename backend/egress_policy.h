/* Egress policy: which outbound connections a sandbox may make, by destination name and port.
 *
 * One shape for every backend and for the tool layer (create_sandbox's network_policy,
 * set_network_policy, get_sandbox), close to OpenSandbox's networkPolicy:
 *
 *   {"default_action": "deny",
 *    "egress": [{"action": "allow", "target": "pypi.org"},
 *               {"action": "allow", "target": "*.pythonhosted.org", "ports": [443]},
 *               {"action": "deny",  "target": "*.example.com"}]}
 *
 * Semantics (docs/tools-design.md, "Network policy"):
 *  - Rules are tried in order; the first rule whose target matches the name (and whose ports, if
 *    it lists any, include the port) decides. No rule matches: default_action decides.
 *  - default_action is optional and defaults to "deny" (as OpenSandbox's sidecar does); egress is
 *    optional (none: the default decides everything; {} denies everything).
 *  - target is a domain name or "*." followed by one. "*.example.com" matches every name below
 *    example.com (a.example.com, a.b.example.com) but NOT example.com itself: OpenSandbox's egress
 *    sidecar matches the same way. List both to allow both.
 *  - Names are compared case-insensitively, with a trailing dot ignored, on both sides.
 *  - Targets are names only: IP literals, CIDRs, a bare "*", a "*" anywhere but the front, empty
 *    labels or labels over 63 characters are refused with an error that says what to write.
 *  - ports is optional: a list of 1..EGRESS_POLICY_MAX_PORTS port numbers (1-65535); absent means
 *    every port. (OpenSandbox cannot express ports: its backend refuses rules that have them.)
 *  - A connection whose destination has no name (an IP literal, no SNI and no Host) matches no
 *    rule, so default_action decides it: under "deny" with an allowlist it is refused.
 *
 * A parsed policy is immutable and reference counted (egress_policy_ref/unref), so the local
 * backend can swap in a new one (set_network_policy) while a connection still holds the old one.
 * Reference counts are not atomic: use a policy from one thread (the server's loop), or give
 * each thread its own copy (egress_policy_parse of egress_policy_to_json).
 *
 * For the enforcement (the proxy that sees each outbound connection):
 *   struct egress_decision d = egress_policy_decide(policy, sni_or_host, port);
 *   if (!d.allow) { record the refusal (local_egress_refused, backend/local/local.h); close; }
 * and for DNS answered from the policy: egress_policy_may_resolve(policy, qname).
 */
#ifndef MCPBOX_EGRESS_POLICY_H
#define MCPBOX_EGRESS_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

#define EGRESS_POLICY_MAX_RULES 256 /* more: use a wildcard, or default_action "allow" */
#define EGRESS_POLICY_MAX_PORTS 16  /* per rule */
#define EGRESS_NAME_MAX 253         /* a DNS name's longest text form, without the trailing dot */
#define EGRESS_LABEL_MAX 63

struct egress_rule {
    bool allow;
    bool wildcard;                     /* target was "*.<suffix>"; name holds the suffix */
    char name[EGRESS_NAME_MAX + 1];    /* lower case, no trailing dot, no "*." */
    uint16_t ports[EGRESS_POLICY_MAX_PORTS];
    size_t n_ports;                    /* 0: every port */
};

struct egress_policy {
    int refs;
    bool default_allow;
    size_t n_rules;
    struct egress_rule *rules; /* owned */
};

/* What decided a connection: rule is the index into egress (0-based) of the first rule that
 * matched, or -1 when none did and default_action decided. */
struct egress_decision {
    bool allow;
    int rule;
};

/* Parses and validates a policy object (the shape above). what names the argument in error
 * messages ("network_policy"). Returns a new policy (one reference) or NULL with err filled
 * (MCP_ERR_INVALID), naming the field ("network_policy.egress[2].target") and what to do. */
struct egress_policy *egress_policy_parse(const json_t *j, const char *what,
                                          struct mcp_error *err);
/* The policy in its normalized form (lower-case targets, no trailing dots, "default_action"
 * always present, "ports" only on rules that have them). New reference. */
json_t *egress_policy_to_json(const struct egress_policy *p);

struct egress_policy *egress_policy_ref(struct egress_policy *p);
void egress_policy_unref(struct egress_policy *p); /* NULL-safe */

/* Decides a connection to name:port. name is what the destination was called (TLS SNI, HTTP
 * Host without its port, or the DNS query name); NULL, "", or an IP literal match no rule.
 * port 0 (unknown) matches only rules without ports. p NULL refuses (fail closed: a sandbox
 * whose policy could not be found gets no egress), with rule -1. */
struct egress_decision egress_policy_decide(const struct egress_policy *p, const char *name,
                                            uint16_t port);
/* Whether some port of name could be allowed: what a DNS answer from the policy needs (a name no
 * rule or default allows on any port does not resolve). p NULL: false. */
bool egress_policy_may_resolve(const struct egress_policy *p, const char *name);
/* The same as a decision, for recording a refused lookup: allow = may_resolve, rule = the rule
 * that settled it (the first allow rule for the name, or the first deny rule for it without
 * ports) or -1 for default_action. */
struct egress_decision egress_policy_decide_lookup(const struct egress_policy *p,
                                                   const char *name);

/* What decided, for people: "egress[2] (deny *.example.com ports 80,443)" or "default deny".
 * Writes at most size bytes (NUL-terminated); returns out. */
char *egress_decision_describe(const struct egress_policy *p, struct egress_decision d, char *out,
                               size_t size);

/* Normalizes a name as the policy compares it (lower case, trailing dot dropped) into out.
 * Returns false (out empty) if it is not a syntactically valid domain name (too long, empty
 * label, a character other than letters, digits, '-' and '_') or is an IP literal. */
bool egress_name_normalize(const char *name, char out[EGRESS_NAME_MAX + 1]);

#endif
