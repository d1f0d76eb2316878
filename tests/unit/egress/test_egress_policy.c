/* The egress policy: parse + validate (precise errors), to JSON, decide, may_resolve. */
#include <stdlib.h>

#include "backend/egress_policy.h"
#include "test.h"

static struct egress_policy *parse_text(const char *text, struct mcp_error *err)
{
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    if (j == NULL) {
        printf("# bad test JSON: %s\n", jerr.text);
        return NULL;
    }
    struct egress_policy *p = egress_policy_parse(j, "network_policy", err);
    json_decref(j);
    return p;
}

/* Parses text, which must fail with an error that contains needle. */
static void expect_error(const char *text, const char *needle)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(text, &err);
    if (p != NULL) {
        egress_policy_unref(p);
        TEST_FAIL("accepted %s", text);
    }
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(err.msg, needle);
}

static const char *const pypi =
    "{\"default_action\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"PyPI.org.\"},"
    "{\"action\":\"allow\",\"target\":\"*.pythonhosted.org\",\"ports\":[443]},"
    "{\"action\":\"deny\",\"target\":\"evil.example.com\"},"
    "{\"action\":\"allow\",\"target\":\"*.example.com\",\"ports\":[80,443]}]}";

TEST(first_matching_rule_decides)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    struct egress_decision d = egress_policy_decide(p, "pypi.org", 443);
    ASSERT(d.allow);
    ASSERT_EQ(d.rule, 0);
    d = egress_policy_decide(p, "files.pythonhosted.org", 443);
    ASSERT(d.allow);
    ASSERT_EQ(d.rule, 1);
    d = egress_policy_decide(p, "evil.example.com", 443); /* deny before the wildcard allow */
    ASSERT(!d.allow);
    ASSERT_EQ(d.rule, 2);
    d = egress_policy_decide(p, "www.example.com", 80);
    ASSERT(d.allow);
    ASSERT_EQ(d.rule, 3);
    d = egress_policy_decide(p, "github.com", 443); /* no rule: the default */
    ASSERT(!d.allow);
    ASSERT_EQ(d.rule, -1);
    egress_policy_unref(p);
}

TEST(names_compare_case_insensitively_without_trailing_dot)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    ASSERT(egress_policy_decide(p, "PYPI.ORG", 443).allow);
    ASSERT(egress_policy_decide(p, "pypi.org.", 443).allow);
    ASSERT(egress_policy_decide(p, "Files.PythonHosted.Org.", 443).allow);
    egress_policy_unref(p);
}

TEST(wildcard_matches_below_the_domain_not_the_domain_itself)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    ASSERT(!egress_policy_decide(p, "pythonhosted.org", 443).allow); /* as OpenSandbox */
    ASSERT(egress_policy_decide(p, "a.b.pythonhosted.org", 443).allow);
    ASSERT(!egress_policy_decide(p, "notpythonhosted.org", 443).allow);
    ASSERT(!egress_policy_decide(p, "pythonhosted.org.evil.com", 443).allow);
    egress_policy_unref(p);
}

TEST(ports_limit_a_rule)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    struct egress_decision d = egress_policy_decide(p, "files.pythonhosted.org", 80);
    ASSERT(!d.allow);
    ASSERT_EQ(d.rule, -1); /* the ports rule did not match: the default decided */
    ASSERT(!egress_policy_decide(p, "www.example.com", 8080).allow);
    ASSERT(!egress_policy_decide(p, "files.pythonhosted.org", 0).allow); /* unknown port */
    ASSERT(egress_policy_decide(p, "pypi.org", 0).allow); /* no ports: every port */
    egress_policy_unref(p);
}

TEST(no_name_or_ip_literal_gets_the_default)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    struct egress_decision d = egress_policy_decide(p, NULL, 443);
    ASSERT(!d.allow);
    ASSERT_EQ(d.rule, -1);
    ASSERT(!egress_policy_decide(p, "", 443).allow);
    ASSERT(!egress_policy_decide(p, "151.101.0.223", 443).allow);
    ASSERT(!egress_policy_decide(p, "2a04:4e42::223", 443).allow);
    egress_policy_unref(p);
    p = parse_text("{\"default_action\":\"allow\",\"egress\":[{\"action\":\"deny\","
                   "\"target\":\"bad.example.com\"}]}", &err);
    ASSERT(p != NULL);
    ASSERT(egress_policy_decide(p, "10.0.0.1", 443).allow); /* the default allows */
    ASSERT(!egress_policy_decide(p, "BAD.example.com", 443).allow);
    ASSERT(egress_policy_decide(p, "good.example.com", 443).allow);
    egress_policy_unref(p);
    ASSERT(!egress_policy_decide(NULL, "anything", 1).allow); /* no policy found: fail closed */
}

TEST(defaults)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text("{}", &err); /* deny, as OpenSandbox's sidecar */
    ASSERT(p != NULL);
    ASSERT(!egress_policy_decide(p, "pypi.org", 443).allow);
    json_t *j = egress_policy_to_json(p);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    ASSERT_STR_EQ(s, "{\"default_action\":\"deny\",\"egress\":[]}");
    free(s);
    json_decref(j);
    egress_policy_unref(p);
    p = parse_text("{\"default_action\":\"allow\"}", &err);
    ASSERT(p != NULL);
    ASSERT(egress_policy_decide(p, "pypi.org", 443).allow);
    egress_policy_unref(p);
}

TEST(to_json_is_normalized_and_parses_back_the_same)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    json_t *j = egress_policy_to_json(p);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    ASSERT_STR_EQ(s, "{\"default_action\":\"deny\",\"egress\":["
                     "{\"action\":\"allow\",\"target\":\"pypi.org\"},"
                     "{\"action\":\"allow\",\"ports\":[443],\"target\":\"*.pythonhosted.org\"},"
                     "{\"action\":\"deny\",\"target\":\"evil.example.com\"},"
                     "{\"action\":\"allow\",\"ports\":[80,443],\"target\":\"*.example.com\"}]}");
    struct egress_policy *q = egress_policy_parse(j, "x", &err);
    ASSERT(q != NULL);
    json_t *j2 = egress_policy_to_json(q);
    ASSERT(json_equal(j, j2));
    json_decref(j2);
    egress_policy_unref(q);
    free(s);
    json_decref(j);
    egress_policy_unref(p);
}

TEST(refcount_keeps_a_policy_alive)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    struct egress_policy *held = egress_policy_ref(p);
    egress_policy_unref(p);
    ASSERT(egress_policy_decide(held, "pypi.org", 443).allow); /* ASan: still valid */
    egress_policy_unref(held);
    egress_policy_unref(NULL);
}

TEST(may_resolve_follows_some_port)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    ASSERT(egress_policy_may_resolve(p, "pypi.org"));
    ASSERT(egress_policy_may_resolve(p, "files.pythonhosted.org")); /* on 443 */
    ASSERT(!egress_policy_may_resolve(p, "evil.example.com"));
    ASSERT(!egress_policy_may_resolve(p, "github.com"));
    ASSERT(!egress_policy_may_resolve(p, "not a name"));
    egress_policy_unref(p);
    /* a deny on some ports leaves the others to the default */
    p = parse_text("{\"default_action\":\"allow\",\"egress\":[{\"action\":\"deny\","
                   "\"target\":\"x.org\",\"ports\":[25]}]}", &err);
    ASSERT(p != NULL);
    ASSERT(egress_policy_may_resolve(p, "x.org"));
    ASSERT(!egress_policy_decide(p, "x.org", 25).allow);
    ASSERT(egress_policy_decide(p, "x.org", 443).allow);
    egress_policy_unref(p);
    ASSERT(!egress_policy_may_resolve(NULL, "x.org"));
    /* the decision behind a lookup names the rule that settled it */
    p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    struct egress_decision d = egress_policy_decide_lookup(p, "evil.example.com");
    ASSERT(!d.allow);
    ASSERT_EQ(d.rule, 2);
    d = egress_policy_decide_lookup(p, "files.pythonhosted.org"); /* allowed on 443 */
    ASSERT(d.allow);
    ASSERT_EQ(d.rule, 1);
    d = egress_policy_decide_lookup(p, "github.com");
    ASSERT(!d.allow);
    ASSERT_EQ(d.rule, -1);
    egress_policy_unref(p);
}

TEST(describe_names_the_rule)
{
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(pypi, &err);
    ASSERT(p != NULL);
    char buf[128];
    ASSERT_STR_EQ(egress_decision_describe(p, egress_policy_decide(p, "x.example.com", 80), buf,
                                           sizeof(buf)),
                  "egress[3] (allow *.example.com ports 80,443)");
    ASSERT_STR_EQ(egress_decision_describe(p, egress_policy_decide(p, "evil.example.com", 1), buf,
                                           sizeof(buf)),
                  "egress[2] (deny evil.example.com)");
    ASSERT_STR_EQ(egress_decision_describe(p, egress_policy_decide(p, "github.com", 443), buf,
                                           sizeof(buf)),
                  "default deny");
    char tiny[8];
    egress_decision_describe(p, egress_policy_decide(p, "x.example.com", 80), tiny,
                             sizeof(tiny));
    ASSERT_EQ(strlen(tiny), 7);
    egress_policy_unref(p);
}

TEST(bad_shapes_get_precise_errors)
{
    expect_error("[]", "network_policy must be an object");
    expect_error("{\"defaultAction\":\"deny\"}", "unknown field \"defaultAction\"");
    expect_error("{\"default_action\":\"block\"}",
                 "network_policy.default_action must be \"allow\" or \"deny\"");
    expect_error("{\"egress\":{}}", "network_policy.egress must be a list");
    expect_error("{\"egress\":[\"pypi.org\"]}", "network_policy.egress[0] must be an object");
    expect_error("{\"egress\":[{\"target\":\"pypi.org\"}]}", "needs both \"action\"");
    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\",\"port\":1}]}",
                 "unknown field \"port\"");
    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\"},"
                 "{\"action\":\"Allow\",\"target\":\"b.org\"}]}",
                 "network_policy.egress[1].action must be");
    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":5}]}",
                 "egress[0].target must be a string");
}

TEST(bad_targets_get_precise_errors)
{
    static const struct {
        const char *target, *needle;
    } cases[] = {
        {"", "is empty"},
        {"*", "set default_action to \\\"allow\\\""},
        {"1.2.3.4", "is an IP address"},
        {"10.0.0.0/8", "CIDR"},
        {"::1", "IPv6 addresses are not targets"},
        {"[::1]", "IPv6"},
        {"https://pypi.org", "CIDR or a URL"},
        {"pypi.org:443", "ports go in"},
        {"pypi..org", "empty label"},
        {".pypi.org", "empty label"},
        {"foo.*.org", "only \\\"*.example.com\\\" wildcards"},
        {"*pypi.org", "only \\\"*.example.com\\\" wildcards"},
        {"*.*.org", "only \\\"*.example.com\\\" wildcards"},
        {"-a.org", "starts or ends with"},
        {"py pi.org", "character other than"},
        {"b\\u00fccher.de", "xn-- form"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.org", "63"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512], needle[128];
        snprintf(text, sizeof(text),
                 "{\"egress\":[{\"action\":\"allow\",\"target\":\"%s\"}]}", cases[i].target);
        /* the needles are written JSON-escaped; errors are plain text */
        size_t k = 0;
        for (const char *c = cases[i].needle; *c && k + 1 < sizeof(needle); c++)
            if (*c != '\\')
                needle[k++] = *c;
        needle[k] = '\0';
        expect_error(text, needle);
    }
    /* the accepted forms */
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"*.com\"},"
        "{\"action\":\"allow\",\"target\":\"_dmarc.example.com\"},"
        "{\"action\":\"allow\",\"target\":\"xn--bcher-kva.de\"},"
        "{\"action\":\"allow\",\"target\":\"localhost\"}]}", &err);
    ASSERT(p != NULL);
    egress_policy_unref(p);
}

TEST(long_names_and_limits)
{
    char name[300], text[600];
    memset(name, 'a', sizeof(name));
    for (int i = 63; i < 300; i += 64)
        name[i] = '.';
    name[253] = '\0'; /* 253 characters: the longest name */
    snprintf(text, sizeof(text), "{\"egress\":[{\"action\":\"allow\",\"target\":\"%s\"}]}",
             name);
    struct mcp_error err = {0};
    struct egress_policy *p = parse_text(text, &err);
    ASSERT(p != NULL);
    ASSERT(egress_policy_decide(p, name, 1).allow);
    egress_policy_unref(p);
    name[253] = 'a';
    name[254] = '\0';
    snprintf(text, sizeof(text), "{\"egress\":[{\"action\":\"allow\",\"target\":\"%s\"}]}",
             name);
    expect_error(text, "longer than 253");

    json_t *rules = json_array();
    for (int i = 0; i <= EGRESS_POLICY_MAX_RULES; i++)
        json_array_append_new(rules, json_pack("{s:s, s:s}", "action", "allow", "target", "a.org"));
    json_t *j = json_pack("{s:o}", "egress", rules);
    ASSERT(egress_policy_parse(j, "network_policy", &err) == NULL);
    ASSERT_CONTAINS(err.msg, "has 257 rules; at most 256");
    json_array_remove(rules, 0);
    p = egress_policy_parse(j, "network_policy", &err);
    ASSERT(p != NULL);
    ASSERT_EQ(p->n_rules, 256);
    egress_policy_unref(p);
    json_decref(j);

    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\",\"ports\":[]}]}",
                 "list of 1 to 16 port numbers");
    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\",\"ports\":[1,2,3,4,5,"
                 "6,7,8,9,10,11,12,13,14,15,16,17]}]}",
                 "list of 1 to 16 port numbers");
    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\",\"ports\":[443,0]}]}",
                 "network_policy.egress[0].ports[1] must be a port number from 1 to 65535");
    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\",\"ports\":[65536]}]}",
                 "from 1 to 65535");
    expect_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\",\"ports\":[\"443\"]}]}",
                 "from 1 to 65535");
}

TEST(normalize)
{
    char out[EGRESS_NAME_MAX + 1];
    ASSERT(egress_name_normalize("WWW.Example.COM.", out));
    ASSERT_STR_EQ(out, "www.example.com");
    ASSERT(!egress_name_normalize("127.0.0.1", out));
    ASSERT_STR_EQ(out, "");
    ASSERT(!egress_name_normalize("a..b", out));
    ASSERT(!egress_name_normalize(".", out));
    ASSERT(!egress_name_normalize(NULL, out));
}

int main(void)
{
    RUN(first_matching_rule_decides);
    RUN(names_compare_case_insensitively_without_trailing_dot);
    RUN(wildcard_matches_below_the_domain_not_the_domain_itself);
    RUN(ports_limit_a_rule);
    RUN(no_name_or_ip_literal_gets_the_default);
    RUN(defaults);
    RUN(to_json_is_normalized_and_parses_back_the_same);
    RUN(refcount_keeps_a_policy_alive);
    RUN(may_resolve_follows_some_port);
    RUN(describe_names_the_rule);
    RUN(bad_shapes_get_precise_errors);
    RUN(bad_targets_get_precise_errors);
    RUN(long_names_and_limits);
    RUN(normalize);
    return test_done();
}
