/* Egress by policy on the local backend: everything but the enforcement itself.
 *
 *  - local_egress_policy(): the policy in force for a live sandbox, which the enforcement (the
 *    proxy that receives each outbound connection and DNS query) asks for each one;
 *  - local_set_network_policy(): the set_network_policy operation;
 *  - local_egress_refused(): the "egress_refused" event the enforcement records for each
 *    connection it refuses, and local_egress_refusals(): what diagnose_sandbox makes of them;
 *  - local_egress_check(): whether create may take a policy on this host.
 *
 * The policy lives in the sandbox's record ("network_policy", egress_policy_to_json form), so
 * every mcpbox process on the state directory sees the same one; each live sandbox caches it
 * parsed (struct lsbx) and re-reads the record at most every LOCAL_EGRESS_RELOAD_MS, so a change
 * made by another process (the CLI, a second server) takes effect within that time, one made by
 * this process at once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/local/pasta_path.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "lib/base/log.h"
#include "lib/base/util.h"

/* ---- the policy in force -------------------------------------------------------------------- */

static void cache_policy(struct lsbx *sb, struct egress_policy *p, json_t *j)
{
    egress_policy_unref(sb->policy);
    json_decref(sb->policy_json);
    sb->policy = p;
    sb->policy_json = j;
    sb->policy_checked_ms = now_mono_ms();
}

/* Re-reads the record's policy when it differs from the cached one. A record without a policy
 * (or one that no longer parses) leaves NULL: egress_policy_decide(NULL, ...) refuses. A store
 * that cannot be read keeps the cached policy (logged). */
static void reload_policy(struct lsbx *sb)
{
    struct store_sandbox rec = {0};
    struct mcp_error err;
    if (store_sandbox_get(sb->be->base.store, sb->id, &rec, &err) < 0) {
        log_warn("sandbox %s: egress policy not re-read (%s); the last one stays", sb->id,
                 err.msg);
        sb->policy_checked_ms = now_mono_ms();
        return;
    }
    json_t *j = json_object_get(rec.record, "network_policy");
    json_decref(sb->secrets_json); /* names bound to it (local_secrets.c) */
    sb->secrets_json = json_incref(json_object_get(rec.record, "secrets"));
    if (j != NULL && sb->policy_json != NULL && json_equal(j, sb->policy_json)) {
        sb->policy_checked_ms = now_mono_ms();
    } else {
        struct egress_policy *p = json_is_object(j) ? egress_policy_parse(j, "record", &err) : NULL;
        if (json_is_object(j) && p == NULL)
            log_warn("sandbox %s: its stored egress policy does not parse (%s); refusing all "
                     "egress", sb->id, err.msg);
        cache_policy(sb, p, p ? json_incref(j) : NULL);
    }
    store_sandbox_release(&rec);
}

const struct egress_policy *local_egress_policy(struct lsbx *sb)
{
    if (sb->policy_checked_ms == 0 || now_mono_ms() - sb->policy_checked_ms >= LOCAL_EGRESS_RELOAD_MS)
        reload_policy(sb);
    return sb->policy;
}

json_t *local_egress_secrets(struct lsbx *sb)
{
    local_egress_policy(sb); /* re-reads the record with the policy */
    return sb->secrets_json;
}

void local_egress_forget(struct lsbx *sb)
{
    json_decref(sb->secrets_json);
    sb->secrets_json = NULL;
    egress_policy_unref(sb->policy);
    json_decref(sb->policy_json);
    sb->policy = NULL;
    sb->policy_json = NULL;
}

/* ---- create and set_network_policy ---------------------------------------------------------- */

int local_egress_check(struct local_backend *lb, const struct sandbox_spec *spec,
                       struct mcp_error *err)
{
    (void)lb;
    if (spec->network_policy == NULL || local_nft_path() != NULL)
        return 0;
    /* The enforcement (egress_netns.c) writes the sandbox's nftables rules with the host's nft. */
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, ENOENT,
                         "network_policy needs nft, which is not installed (Debian/Ubuntu: apt "
                         "install nftables); or create the sandbox without a network_policy");
}

int local_set_network_policy(struct backend *be, const char *id,
                             const struct egress_policy *policy, backend_cb *cb, void *arg,
                             struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct lsbx *sb = lsbx_for_op(lb, id, true, err);
    struct store_sandbox rec = {0};
    if (sb == NULL || store_sandbox_get(be->store, id, &rec, err) < 0)
        return -1;
    if (!json_is_object(json_object_get(rec.record, "network_policy"))) {
        bool net = json_is_true(json_object_get(rec.record, "network"));
        store_sandbox_release(&rec);
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "sandbox %s was created with network: %s and no network_policy, so "
                             "its egress has no policy to change; create a new sandbox with "
                             "network_policy (and without network)",
                             id, net ? "true" : "false");
    }
    json_t *j = egress_policy_to_json(policy);
    json_object_set(rec.record, "network_policy", j);
    if (store_sandbox_update(be->store, &rec, err) < 0) {
        json_decref(j);
        store_sandbox_release(&rec);
        return -1;
    }
    /* this process's connections follow it at once; other processes within the reload time */
    cache_policy(sb, egress_policy_ref((struct egress_policy *)policy), json_incref(j));
    local_event(be->store, id, "network_policy", json_pack("{s:o}", "network_policy", j), err);
    json_t *info = local_info(&rec);
    store_sandbox_release(&rec);
    backend_defer(be, cb, arg, info, NULL);
    json_decref(info);
    return 0;
}

/* ---- refused connections -------------------------------------------------------------------- */

/* Refusals already recorded, so that a program retrying in a loop does not flood the event log
 * (which keeps a fixed number of events per sandbox, and would lose the older, useful ones):
 * the same sandbox, name, port and reason within LOCAL_EGRESS_REPEAT_MS of the event are not
 * recorded again but counted in it as they happen ("repeats" and "last_time" in its data), so
 * diagnose_sandbox shows them at once. Loop thread only. */
#define RECENT_MAX 64
static struct recent_refusal {
    char id[LOCAL_ID_LEN];
    char name[EGRESS_NAME_MAX + 1];
    char reason[24];
    uint16_t port;
    uint64_t at_ms;
    uint64_t repeats;     /* counted */
    uint64_t stored;      /* of those, written into the event */
    int64_t last_wall_ms; /* of the last repeat */
    int64_t seq;          /* the event they are counted in; -1: none */
} recent[RECENT_MAX];

static struct recent_refusal *recent_slot(const char *id, const char *name, uint16_t port,
                                          const char *reason, bool *found)
{
    struct recent_refusal *oldest = &recent[0];
    for (size_t i = 0; i < RECENT_MAX; i++) {
        struct recent_refusal *r = &recent[i];
        if (r->port == port && strcmp(r->id, id) == 0 && strcmp(r->name, name) == 0 &&
            strcmp(r->reason, reason) == 0) {
            *found = true;
            return r;
        }
        if (r->at_ms < oldest->at_ms)
            oldest = r;
    }
    *found = false;
    return oldest;
}

/* Writes the repeats counted but not yet written into the slot's event: 1 when they are there
 * (or there was nothing to write), 0 when the event is gone (pruned by newer ones), -1 when the
 * store failed (logged). */
static int write_repeats(struct store *st, struct recent_refusal *slot)
{
    if (slot->seq < 0 || slot->repeats == slot->stored)
        return slot->seq < 0 ? 0 : 1;
    char when[32];
    format_rfc3339_ms(slot->last_wall_ms, when);
    json_t *fields =
        json_pack("{s:I, s:s}", "repeats", (json_int_t)slot->repeats, "last_time", when);
    struct mcp_error err;
    int rc = store_event_merge(st, slot->seq, fields, &err);
    json_decref(fields);
    if (rc < 0)
        log_warn("sandbox %s: repeated egress refusals were not counted: %s", slot->id, err.msg);
    if (rc > 0)
        slot->stored = slot->repeats;
    return rc;
}

void local_egress_flush_repeats(struct store *st, const char *sandbox_id)
{
    for (size_t i = 0; i < RECENT_MAX; i++)
        if (strcmp(recent[i].id, sandbox_id) == 0)
            write_repeats(st, &recent[i]);
}

int local_egress_refused_at(struct store *st, const char *sandbox_id,
                            const struct egress_refusal *r, uint64_t now_ms)
{
    const char *reason = r->reason ? r->reason : "policy";
    if (strcmp(reason, "dns") == 0) /* a lookup the policy refused */
        reason = "policy";
    const char *name = r->name && r->name[0] ? r->name : NULL;
    bool found;
    struct recent_refusal *slot = recent_slot(sandbox_id, name ? name : "", r->port, reason,
                                              &found);
    if (found && now_ms - slot->at_ms < LOCAL_EGRESS_REPEAT_MS && slot->seq >= 0) {
        slot->repeats++;
        slot->last_wall_ms = now_wall_ms();
        if (r->flood) /* no store write now: the next write or diagnose_sandbox's flush */
            return 0;
        int rc = write_repeats(st, slot);
        if (rc != 0)
            return rc < 0 ? -1 : 0;
        /* the event was pruned: this one is recorded as a new event */
    } else if (r->flood) {
        return 0; /* a flood: nothing new is recorded */
    } else {
        write_repeats(st, slot); /* what the slot counted goes to its event before reuse */
    }
    snprintf(slot->id, sizeof(slot->id), "%s", sandbox_id);
    snprintf(slot->name, sizeof(slot->name), "%s", name ? name : "");
    snprintf(slot->reason, sizeof(slot->reason), "%s", reason);
    slot->port = r->port;
    slot->at_ms = now_ms;
    slot->repeats = slot->stored = 0;

    char decided[160] = "";
    json_t *data = json_pack("{s:s?, s:i, s:s, s:s}", "name", name, "port", (int)r->port,
                             "protocol", r->protocol ? r->protocol : "tcp", "reason", reason);
    if (r->address != NULL)
        json_object_set_new(data, "address", json_string(r->address));
    if (strcmp(reason, "policy") == 0 && r->policy != NULL) {
        egress_decision_describe(r->policy, r->decision, decided, sizeof(decided));
        json_object_set_new(data, "rule", r->decision.rule >= 0 ? json_integer(r->decision.rule)
                                                                : json_null());
        json_object_set_new(data, "decided_by", json_string(decided));
    }
    struct mcp_error err;
    int rc = store_event_add_seq(st, sandbox_id, "egress_refused", data, &slot->seq, &err);
    json_decref(data);
    if (rc < 0) { /* diagnostics: the refusal stands, the loss is logged (as local_event does) */
        log_warn("sandbox %s: the egress_refused event was not recorded: %s", sandbox_id, err.msg);
        slot->seq = -1;
    }
    return rc;
}

int local_egress_refused(struct store *st, const char *sandbox_id, const struct egress_refusal *r)
{
    return local_egress_refused_at(st, sandbox_id, r, now_mono_ms());
}

/* ---- what diagnose_sandbox shows ------------------------------------------------------------ */

/* What to tell the person about one refusal. */
static json_t *refusal_hint(json_t *data)
{
    const char *reason = json_string_value(json_object_get(data, "reason"));
    const char *name = json_string_value(json_object_get(data, "name"));
    const char *address = json_string_value(json_object_get(data, "address"));
    json_t *rule = json_object_get(data, "rule");
    if (reason != NULL && strcmp(reason, "private_address") == 0)
        return json_sprintf("%s resolved to %s, a loopback, private, link-local or metadata "
                            "address, which egress never reaches whatever the policy says",
                            name ? name : "the name", address ? address : "an address");
    if (reason != NULL && strcmp(reason, "udp") == 0)
        return json_string("only DNS leaves the sandbox over UDP; use TCP (HTTPS) instead");
    if (reason != NULL && strcmp(reason, "policy") != 0)
        return json_sprintf("refused: %s", reason);
    if (name == NULL)
        return json_string("the connection named no host (an IP address, no TLS SNI or HTTP "
                           "Host): rules match names, so connect by name, or ask the person to "
                           "set default_action \"allow\"");
    const char *protocol = json_string_value(json_object_get(data, "protocol"));
    const char *what = protocol && strcmp(protocol, "dns") == 0 ? " (so it did not resolve)" : "";
    if (json_is_integer(rule))
        return json_sprintf("egress[%d] denies %s%s: ask the person whether to allow it, then "
                            "update_sandbox with a network_policy without that rule or with "
                            "{\"action\":\"allow\",\"target\":\"%s\"} before it",
                            (int)json_integer_value(rule), name, what, name);
    return json_sprintf("no rule allows %s%s: ask the person whether to allow it, then "
                        "update_sandbox with a network_policy that adds "
                        "{\"action\":\"allow\",\"target\":\"%s\"} to egress",
                        name, what, name);
}

static bool same_refusal(json_t *a, json_t *b)
{
    static const char *const keys[] = {"name", "port", "reason", "decided_by", "address"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *x = json_object_get(a, keys[i]), *y = json_object_get(b, keys[i]);
        if (!(x == NULL && y == NULL) && !(x && y && json_equal(x, y)))
            return false;
    }
    return true;
}

json_t *local_egress_refusals(json_t *events)
{
    json_t *out = json_array();
    for (size_t i = json_array_size(events); i-- > 0;) { /* newest first */
        json_t *ev = json_array_get(events, i);
        const char *kind = json_string_value(json_object_get(ev, "kind"));
        json_t *data = json_object_get(ev, "data");
        if (kind == NULL || strcmp(kind, "egress_refused") != 0 || !json_is_object(data))
            continue;
        json_int_t n = 1 + json_integer_value(json_object_get(data, "repeats"));
        json_t *seen = NULL;
        for (size_t k = 0; k < json_array_size(out) && seen == NULL; k++)
            if (same_refusal(json_array_get(out, k), data))
                seen = json_array_get(out, k);
        if (seen != NULL) {
            json_object_set_new(seen, "count",
                                json_integer(json_integer_value(json_object_get(seen, "count")) + n));
            continue;
        }
        if (json_array_size(out) >= LOCAL_EGRESS_DIAG_MAX)
            continue;
        json_t *one = json_deep_copy(data);
        json_object_del(one, "repeats");
        json_object_set_new(one, "count", json_integer(n));
        if (!json_is_string(json_object_get(one, "last_time"))) /* not repeated */
            json_object_set(one, "last_time", json_object_get(ev, "time"));
        json_object_set_new(one, "hint", refusal_hint(data));
        json_array_append_new(out, one);
    }
    return out;
}
