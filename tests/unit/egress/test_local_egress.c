/* The local backend's egress policy plumbing on a real store: refused connections recorded as
 * events (what the enforcement calls), what diagnose_sandbox shows of them (the real
 * local_diagnose on a stopped sandbox's record), and the policy a live sandbox's enforcement
 * reads, including a change made by another process through the store. */
#include <stdlib.h>
#include <unistd.h>

#include "backend/local/pasta_path.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "test.h"
#include "lib/base/rmtree.h"

static char dir_template[] = "/tmp/mcpbox-test-egresspolicy-XXXXXX";
static struct store *st;
static uv_loop_t loop;

static void insert_sandbox(const char *id, json_t *policy)
{
    struct store_sandbox sb = {0};
    struct mcp_error err;
    sb.id = (char *)id;
    sb.backend = (char *)"local";
    sb.owner = (char *)"tester";
    sb.state = (char *)"stopped";
    sb.created_at_ms = now_wall_ms();
    sb.record = json_pack("{s:s, s:b}", "image", "host", "network", policy != NULL);
    if (policy != NULL)
        json_object_set(sb.record, "network_policy", policy);
    if (store_sandbox_insert(st, &sb, &err) < 0)
        TEST_FAIL("insert: %s", err.msg);
    json_decref(sb.record);
}

static struct egress_policy *policy_of(const char *text)
{
    struct mcp_error err;
    json_t *j = json_loads(text, 0, NULL);
    struct egress_policy *p = egress_policy_parse(j, "network_policy", &err);
    json_decref(j);
    if (p == NULL)
        TEST_FAIL("policy: %s", err.msg);
    return p;
}

static json_t *events_of(const char *id)
{
    json_t *events = NULL;
    struct mcp_error err;
    if (store_event_list(st, id, 100, &events, &err) < 0)
        TEST_FAIL("events: %s", err.msg);
    return events;
}

static const char *const pypi_only =
    "{\"egress\":[{\"action\":\"allow\",\"target\":\"pypi.org\"},"
    "{\"action\":\"deny\",\"target\":\"*.evil.test\"}]}";

TEST(refusal_events_name_domain_port_and_rule)
{
    struct egress_policy *p = policy_of(pypi_only);
    insert_sandbox("sbx-egresspolicy0001", NULL);
    struct egress_refusal r = {.name = "files.pythonhosted.org", .port = 443,
                               .policy = p};
    r.decision = egress_policy_decide(p, r.name, r.port);
    ASSERT_EQ(local_egress_refused_at(st, "sbx-egresspolicy0001", &r, 1000), 0);
    struct egress_refusal d = {.name = "x.EVIL.test", .port = 80, .policy = p};
    d.decision = egress_policy_decide(p, d.name, d.port);
    ASSERT_EQ(local_egress_refused_at(st, "sbx-egresspolicy0001", &d, 1000), 0);
    json_t *events = events_of("sbx-egresspolicy0001");
    ASSERT_EQ(json_array_size(events), 2);
    json_t *e0 = json_array_get(events, 0), *data = json_object_get(e0, "data");
    ASSERT_STR_EQ(json_string_value(json_object_get(e0, "kind")), "egress_refused");
    ASSERT_STR_EQ(json_string_value(json_object_get(data, "name")), "files.pythonhosted.org");
    ASSERT_EQ(json_integer_value(json_object_get(data, "port")), 443);
    ASSERT_STR_EQ(json_string_value(json_object_get(data, "protocol")), "tcp");
    ASSERT_STR_EQ(json_string_value(json_object_get(data, "reason")), "policy");
    ASSERT(json_is_null(json_object_get(data, "rule")));
    ASSERT_STR_EQ(json_string_value(json_object_get(data, "decided_by")), "default deny");
    data = json_object_get(json_array_get(events, 1), "data");
    ASSERT_EQ(json_integer_value(json_object_get(data, "rule")), 1);
    ASSERT_STR_EQ(json_string_value(json_object_get(data, "decided_by")),
                  "egress[1] (deny *.evil.test)");
    json_decref(events);
    egress_policy_unref(p);
}

TEST(repeats_within_a_minute_are_counted_as_they_happen)
{
    struct egress_policy *p = policy_of(pypi_only);
    const char *id = "sbx-egresspolicy0002";
    insert_sandbox(id, NULL);
    struct egress_refusal r = {.name = "github.com", .port = 443, .policy = p};
    r.decision = egress_policy_decide(p, r.name, r.port);
    for (int i = 0; i < 500; i++) /* a program retrying in a loop */
        local_egress_refused_at(st, id, &r, 5000 + (uint64_t)i);
    r.port = 22; /* another port is another refusal */
    local_egress_refused_at(st, id, &r, 5600);
    json_t *events = events_of(id);
    ASSERT_EQ(json_array_size(events), 2);
    json_t *data = json_object_get(json_array_get(events, 0), "data"); /* counted at once */
    ASSERT_EQ(json_integer_value(json_object_get(data, "repeats")), 499);
    ASSERT(json_is_string(json_object_get(data, "last_time")));
    json_decref(events);
    r.port = 443; /* a minute after the first: a new event, counting from there */
    local_egress_refused_at(st, id, &r, 5000 + LOCAL_EGRESS_REPEAT_MS);
    events = events_of(id);
    ASSERT_EQ(json_array_size(events), 3);
    data = json_object_get(json_array_get(events, 2), "data");
    ASSERT(json_object_get(data, "repeats") == NULL);
    json_t *sum = local_egress_refusals(events);
    ASSERT_EQ(json_array_size(sum), 2);
    json_t *gh = json_array_get(sum, 0); /* newest first */
    ASSERT_EQ(json_integer_value(json_object_get(gh, "port")), 443);
    ASSERT_EQ(json_integer_value(json_object_get(gh, "count")), 501);
    ASSERT(json_object_get(gh, "repeats") == NULL);
    ASSERT(json_is_string(json_object_get(gh, "last_time")));
    json_decref(sum);
    json_decref(events);
    egress_policy_unref(p);
}

TEST(repeats_in_a_flood_are_counted_and_written_before_diagnose)
{
    struct egress_policy *p = policy_of(pypi_only);
    const char *id = "sbx-egresspolicy0009";
    insert_sandbox(id, NULL);
    struct egress_refusal r = {.name = "github.com", .port = 443, .policy = p};
    r.decision = egress_policy_decide(p, r.name, r.port);
    local_egress_refused_at(st, id, &r, 9000);
    r.flood = true; /* past the proxy's cap: nothing written, repeats kept */
    for (int i = 0; i < 100; i++)
        local_egress_refused_at(st, id, &r, 9001 + (uint64_t)i);
    r.port = 22; /* a new refusal in a flood is not recorded */
    local_egress_refused_at(st, id, &r, 9200);
    json_t *events = events_of(id);
    ASSERT_EQ(json_array_size(events), 1);
    ASSERT(json_object_get(json_object_get(json_array_get(events, 0), "data"), "repeats") == NULL);
    json_decref(events);
    local_egress_flush_repeats(st, id); /* what diagnose_sandbox does before it reads */
    events = events_of(id);
    json_t *data = json_object_get(json_array_get(events, 0), "data");
    ASSERT_EQ(json_integer_value(json_object_get(data, "repeats")), 100);
    json_decref(events);
    r.port = 443, r.flood = false; /* the flood is over: this one is counted at once */
    local_egress_refused_at(st, id, &r, 9300);
    events = events_of(id);
    ASSERT_EQ(json_array_size(events), 1);
    data = json_object_get(json_array_get(events, 0), "data");
    ASSERT_EQ(json_integer_value(json_object_get(data, "repeats")), 101);
    json_decref(events);
    egress_policy_unref(p);
}

TEST(hints_say_what_to_ask_for)
{
    struct egress_policy *p = policy_of(pypi_only);
    const char *id = "sbx-egresspolicy0003";
    insert_sandbox(id, NULL);
    struct egress_refusal r = {.name = "files.pythonhosted.org", .port = 443, .policy = p};
    r.decision = egress_policy_decide(p, r.name, r.port);
    local_egress_refused_at(st, id, &r, 1);
    struct egress_refusal d = {.name = "a.evil.test", .port = 443, .policy = p};
    d.decision = egress_policy_decide(p, d.name, d.port);
    local_egress_refused_at(st, id, &d, 1);
    struct egress_refusal ip = {.address = "198.51.100.7", .port = 443, .policy = p};
    ip.decision = egress_policy_decide(p, NULL, 443);
    local_egress_refused_at(st, id, &ip, 1);
    struct egress_refusal priv = {.name = "pypi.org", .address = "10.1.2.3", .port = 443,
                                  .reason = "private_address"};
    local_egress_refused_at(st, id, &priv, 1);
    struct egress_refusal udp = {.address = "198.51.100.7", .port = 123, .protocol = "udp",
                                 .reason = "udp"};
    local_egress_refused_at(st, id, &udp, 1);
    /* a lookup: what a refused name usually leaves (the program never connects) */
    struct egress_refusal dns = {.name = "files.pythonhosted.org", .protocol = "dns",
                                 .reason = "dns", .policy = p};
    dns.decision = egress_policy_decide_lookup(p, dns.name);
    local_egress_refused_at(st, id, &dns, 1);
    struct egress_refusal bare = {.name = "x.evil.test", .protocol = "dns"}; /* no policy given */
    local_egress_refused_at(st, id, &bare, 1);
    json_t *events = events_of(id);
    json_t *all = local_egress_refusals(events);
    ASSERT_EQ(json_array_size(all), 7);
    json_t *one = json_array_get(all, 1);
    ASSERT_STR_EQ(json_string_value(json_object_get(one, "protocol")), "dns");
    ASSERT_STR_EQ(json_string_value(json_object_get(one, "reason")), "policy");
    ASSERT_STR_EQ(json_string_value(json_object_get(one, "decided_by")), "default deny");
    ASSERT_CONTAINS(json_string_value(json_object_get(one, "hint")),
                    "no rule allows files.pythonhosted.org (so it did not resolve)");
    one = json_array_get(all, 0);
    ASSERT(json_object_get(one, "decided_by") == NULL);
    ASSERT_CONTAINS(json_string_value(json_object_get(one, "hint")), "no rule allows x.evil.test");
    json_array_remove(all, 0);
    json_array_remove(all, 0);
    json_t *sum = all;
    ASSERT_EQ(json_array_size(sum), 5);
    const char *h;
    h = json_string_value(json_object_get(json_array_get(sum, 4), "hint"));
    ASSERT_CONTAINS(h, "no rule allows files.pythonhosted.org");
    ASSERT_CONTAINS(h, "{\"action\":\"allow\",\"target\":\"files.pythonhosted.org\"}");
    h = json_string_value(json_object_get(json_array_get(sum, 3), "hint"));
    ASSERT_CONTAINS(h, "egress[1] denies a.evil.test");
    h = json_string_value(json_object_get(json_array_get(sum, 2), "hint"));
    ASSERT_CONTAINS(h, "named no host");
    ASSERT(json_is_null(json_object_get(json_array_get(sum, 2), "name")));
    h = json_string_value(json_object_get(json_array_get(sum, 1), "hint"));
    ASSERT_CONTAINS(h, "pypi.org resolved to 10.1.2.3");
    h = json_string_value(json_object_get(json_array_get(sum, 0), "hint"));
    ASSERT_CONTAINS(h, "only DNS leaves the sandbox over UDP");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(sum, 0), "protocol")), "udp");
    json_decref(sum);
    json_decref(events);
    egress_policy_unref(p);
}

static json_t *diag_result;
static void diag_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    (void)arg;
    (void)err;
    diag_result = json_incref(result);
}

TEST(diagnose_summary_shows_refusals)
{
    struct egress_policy *p = policy_of(pypi_only);
    json_t *pj = egress_policy_to_json(p);
    const char *id = "sbx-egresspolicy0004";
    insert_sandbox(id, pj);
    struct egress_refusal r = {.name = "files.pythonhosted.org", .port = 443, .policy = p};
    r.decision = egress_policy_decide(p, r.name, r.port);
    local_egress_refused_at(st, id, &r, 1);
    struct local_backend lb;
    memset(&lb, 0, sizeof lb);
    lb.base.loop = &loop;
    lb.base.store = st;
    struct mcp_error err;
    ASSERT_EQ(local_diagnose(&lb.base, id, "summary", diag_cb, NULL, &err), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT(diag_result != NULL);
    json_t *refused = json_object_get(diag_result, "egress_refused");
    ASSERT_EQ(json_array_size(refused), 1);
    json_t *one = json_array_get(refused, 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(one, "name")), "files.pythonhosted.org");
    ASSERT_EQ(json_integer_value(json_object_get(one, "port")), 443);
    ASSERT_STR_EQ(json_string_value(json_object_get(one, "decided_by")), "default deny");
    json_t *sb = json_object_get(diag_result, "sandbox");
    ASSERT(json_equal(json_object_get(sb, "network_policy"), pj));
    ASSERT(json_is_true(json_object_get(sb, "network")));
    json_decref(diag_result);
    diag_result = NULL;
    /* no refusals: no egress_refused member */
    insert_sandbox("sbx-egresspolicy0005", NULL);
    ASSERT_EQ(local_diagnose(&lb.base, "sbx-egresspolicy0005", "summary", diag_cb, NULL, &err), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT(json_object_get(diag_result, "egress_refused") == NULL);
    ASSERT(json_is_null(json_object_get(json_object_get(diag_result, "sandbox"), "network_policy")));
    json_decref(diag_result);
    diag_result = NULL;
    json_decref(pj);
    egress_policy_unref(p);
}

TEST(policy_in_force_follows_the_record)
{
    const char *id = "sbx-egresspolicy0006";
    struct egress_policy *p = policy_of(pypi_only);
    json_t *pj = egress_policy_to_json(p);
    insert_sandbox(id, pj);
    struct local_backend lb;
    memset(&lb, 0, sizeof lb);
    lb.base.store = st;
    struct lsbx *sb = xcalloc(1, sizeof *sb);
    sb->be = &lb;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    const struct egress_policy *now = local_egress_policy(sb);
    ASSERT(now != NULL);
    ASSERT(egress_policy_decide(now, "pypi.org", 443).allow);
    ASSERT(!egress_policy_decide(now, "github.com", 443).allow);
    /* another process changes the record */
    struct store_sandbox rec = {0};
    struct mcp_error err;
    ASSERT_EQ(store_sandbox_get(st, id, &rec, &err), 0);
    json_object_set_new(rec.record, "network_policy",
                        json_pack("{s:s, s:[]}", "default_action", "allow", "egress"));
    ASSERT_EQ(store_sandbox_update(st, &rec, &err), 0);
    store_sandbox_release(&rec);
    ASSERT(!egress_policy_decide(local_egress_policy(sb), "github.com", 443).allow); /* cached */
    sb->policy_checked_ms -= LOCAL_EGRESS_RELOAD_MS; /* the reload time has passed */
    ASSERT(egress_policy_decide(local_egress_policy(sb), "github.com", 443).allow);
    /* a record without a policy: NULL, which refuses */
    ASSERT_EQ(store_sandbox_get(st, id, &rec, &err), 0);
    json_object_del(rec.record, "network_policy");
    ASSERT_EQ(store_sandbox_update(st, &rec, &err), 0);
    store_sandbox_release(&rec);
    sb->policy_checked_ms -= LOCAL_EGRESS_RELOAD_MS;
    ASSERT(local_egress_policy(sb) == NULL);
    ASSERT(!egress_policy_decide(local_egress_policy(sb), "github.com", 443).allow);
    local_egress_forget(sb);
    free(sb);
    json_decref(pj);
    egress_policy_unref(p);
}

/* create takes a policy where the enforcement can run: the host's nft writes the sandbox's
 * rules (egress_netns.c); without it, a precise refusal naming the package. */
TEST(create_takes_a_policy_where_nft_is)
{
    struct egress_policy *p = policy_of(pypi_only);
    struct sandbox_spec spec = {.network_policy = p};
    struct mcp_error err;
    if (local_nft_path() != NULL) {
        ASSERT_EQ(local_egress_check(NULL, &spec, &err), 0);
    } else {
        ASSERT_EQ(local_egress_check(NULL, &spec, &err), -1);
        ASSERT_EQ(err.code, MCP_ERR_UNSUPPORTED);
        ASSERT_CONTAINS(err.msg, "apt install nftables");
    }
    spec.network_policy = NULL;
    ASSERT_EQ(local_egress_check(NULL, &spec, &err), 0);
    egress_policy_unref(p);
}

int main(void)
{
    struct mcp_error err;
    if (mkdtemp(dir_template) == NULL)
        return 1;
    st = store_open(dir_template, &err);
    if (st == NULL) {
        printf("# store_open: %s\n", err.msg);
        return 1;
    }
    uv_loop_init(&loop);
    RUN(refusal_events_name_domain_port_and_rule);
    RUN(repeats_within_a_minute_are_counted_as_they_happen);
    RUN(repeats_in_a_flood_are_counted_and_written_before_diagnose);
    RUN(hints_say_what_to_ask_for);
    RUN(diagnose_summary_shows_refusals);
    RUN(policy_in_force_follows_the_record);
    RUN(create_takes_a_policy_where_nft_is);
    uv_loop_close(&loop);
    store_close(st);
    if (rmtree(dir_template) < 0)
        printf("# could not remove %s\n", dir_template);
    return test_done();
}
