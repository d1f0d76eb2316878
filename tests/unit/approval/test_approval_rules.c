/* The person's approval settings (backend/approval_rules.h, issue 38): the serve options and
 * their errors, what egress reaches beyond the person's list, the apply directory, and the
 * cannot-ask answer with the option it names. */
#include <stdlib.h>
#include <string.h>

#include "backend/approval_rules.h"
#include "test.h"

static struct egress_policy *policy(const char *text)
{
    struct mcp_error err = {0};
    json_t *j = json_loads(text, 0, NULL);
    struct egress_policy *p = egress_policy_parse(j, "network_policy", &err);
    json_decref(j);
    if (p == NULL)
        TEST_FAIL("policy %s: %s", text, err.msg);
    return p;
}

static char *beyond_text(const struct approval_settings *s, const char *text, bool full)
{
    struct egress_policy *p = text ? policy(text) : NULL;
    json_t *b = approval_egress_beyond(s, p, full);
    char *out = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    egress_policy_unref(p);
    return out;
}

static void expect_beyond(const struct approval_settings *s, const char *text, bool full,
                          const char *want)
{
    char *got = beyond_text(s, text, full);
    ASSERT_STR_EQ(got, want);
    free(got);
}

TEST(defaults_ask_and_the_unasked_answers)
{
    struct approval_settings s;
    struct mcp_error err = {0};
    approval_settings_defaults(&s);
    for (int k = 0; k < APPROVAL_KINDS; k++)
        ASSERT_EQ(s.mode[k], APPROVAL_MODE_ASK);
    ASSERT(approval_unattended(&s, APPROVAL_APPLY, "apply", &err));
    ASSERT(approval_unattended(&s, APPROVAL_RW_MOUNT, "rw", &err));
    ASSERT(!approval_unattended(&s, APPROVAL_EGRESS, "egress to x", &err));
    ASSERT_CONTAINS(err.msg, "--approve-unasked egress=allow");
    ASSERT_CONTAINS(err.msg, "--approve-egress-allow");
    ASSERT(!approval_unattended(&s, APPROVAL_SECRET, "a secret", &err));
    ASSERT_EQ(s.timeout_s, APPROVAL_TIMEOUT_DEFAULT_S);
    approval_settings_release(&s);
}

TEST(options_and_their_errors)
{
    struct approval_settings s;
    struct mcp_error err = {0};
    approval_settings_defaults(&s);
    ASSERT_EQ(approval_settings_option(&s, "approve", "egress=refuse", &err), 0);
    ASSERT_EQ(s.mode[APPROVAL_EGRESS], APPROVAL_MODE_REFUSE);
    ASSERT_EQ(approval_settings_option(&s, "approve-unasked", "egress=allow", &err), 0);
    ASSERT(!approval_unattended(&s, APPROVAL_EGRESS, "egress", &err)); /* refuse wins */
    ASSERT_CONTAINS(err.msg, "--approve egress=refuse");
    ASSERT_EQ(approval_settings_option(&s, "approve", "rw-mount=allow", &err), 0);
    ASSERT_EQ(s.mode[APPROVAL_RW_MOUNT], APPROVAL_MODE_ALLOW);
    static const char *const bad[][2] = {
        {"approve", "egress"},
        {"approve", "egres=ask"},
        {"approve", "egress=maybe"},
        {"approve", "=ask"},
        {"approve-unasked", "apply=ask"},
        {"approve-egress-allow", "10.0.0.1"},
        {"approve-egress-allow", "*"},
        {"approve-egress-allow", "a..b"},
        {"approve-apply-dir", "relative"},
        {"approve-apply-dir", "/no/such/dir/x"},
        {"approve-timeout", "0"},
        {"approve-timeout", "86401"},
        {"approve-timeout", "5s"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        ASSERT_EQ(approval_settings_option(&s, bad[i][0], bad[i][1], &err), -1);
        ASSERT_CONTAINS(err.msg, bad[i][0]);
    }
    approval_settings_release(&s);
}

TEST(egress_beyond_the_list)
{
    struct approval_settings s;
    struct mcp_error err = {0};
    approval_settings_defaults(&s);
    ASSERT_EQ(approval_settings_option(&s, "approve-egress-allow", "PyPI.org.", &err), 0);
    ASSERT_EQ(approval_settings_option(&s, "approve-egress-allow", "*.pythonhosted.org", &err), 0);
    expect_beyond(&s, NULL, false, "[]");
    expect_beyond(&s, NULL, true, "[\"*\"]");
    expect_beyond(&s, "{\"default_action\":\"allow\"}", false, "[\"*\"]");
    expect_beyond(&s, "{\"egress\":[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}", false, "[]");
    expect_beyond(&s,
                  "{\"egress\":[{\"action\":\"allow\",\"target\":\"files.pythonhosted.org\"},"
                  "{\"action\":\"allow\",\"target\":\"*.a.pythonhosted.org\"},"
                  "{\"action\":\"allow\",\"target\":\"pythonhosted.org\"}]}",
                  false, "[]");
    /* a deny rule widens nothing; a look-alike is not the listed name */
    expect_beyond(&s,
                  "{\"egress\":[{\"action\":\"deny\",\"target\":\"evil.example\"},"
                  "{\"action\":\"allow\",\"target\":\"pypi.org.evil.example\"},"
                  "{\"action\":\"allow\",\"target\":\"evilpythonhosted.org\"},"
                  "{\"action\":\"allow\",\"target\":\"*.org\"}]}",
                  false, "[\"pypi.org.evil.example\",\"evilpythonhosted.org\",\"*.org\"]");
    approval_settings_release(&s);
}

TEST(apply_dir)
{
    struct approval_settings s;
    struct mcp_error err = {0};
    approval_settings_defaults(&s);
    ASSERT(!approval_apply_dir_covers(&s, "/tmp/x"));
    ASSERT_EQ(approval_settings_option(&s, "approve-apply-dir", "/tmp", &err), 0);
    ASSERT(approval_apply_dir_covers(&s, "/tmp/x"));
    ASSERT(approval_apply_dir_covers(&s, "/tmp/a/b"));
    ASSERT(!approval_apply_dir_covers(&s, "/tmpx/a"));
    ASSERT(!approval_apply_dir_covers(&s, "/tmp"));
    ASSERT(!approval_apply_dir_covers(&s, "/tmp/../etc/passwd"));
    ASSERT(!approval_apply_dir_covers(&s, NULL));
    approval_settings_release(&s);
}

TEST(zeroed_settings_allow_everything)
{
    struct approval_settings s;
    struct mcp_error err = {0};
    memset(&s, 0, sizeof s);
    for (int k = 0; k < APPROVAL_KINDS; k++)
        ASSERT(approval_unattended(&s, (enum approval_kind)k, "x", &err));
    ASSERT_STR_EQ(approval_kind_name(APPROVAL_RW_MOUNT), "rw-mount");
}

int main(void)
{
    RUN(defaults_ask_and_the_unasked_answers);
    RUN(options_and_their_errors);
    RUN(egress_beyond_the_list);
    RUN(apply_dir);
    RUN(zeroed_settings_allow_everything);
    return test_done();
}
