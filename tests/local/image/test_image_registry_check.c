/* Which registries a pull may reach without the person's opt-in (registry_check_reference):
 * hosts given as loopback, private or reserved addresses, or localhost, need MCPBOX_REGISTRIES
 * (or MCPBOX_INSECURE_REGISTRIES); public hosts and names do not (their connections are checked
 * when opened, which local_image_registry_optin covers end to end). */
#include <stdlib.h>

#include "backend/local/image/registry.h"
#include "test.h"

static int check(const char *text)
{
    struct image_ref r;
    struct mcp_error err = {0};
    if (image_ref_parse(text, &r, &err) < 0)
        TEST_FAIL("'%s' refused by the parser: %s", text, err.msg);
    return registry_check_reference(&r, &err);
}

static const char *const inside[] = {
    "127.0.0.1:5000/a/b:1",     "localhost:5000/a/b:1",  "LOCALHOST:5000/a/b:1",
    "127.9.9.9:80/a/b",         "10.1.2.3:5000/a/b",     "192.168.1.1/a/b",
    "169.254.169.254/latest/x", "[::1]:5000/a/b",        "[::ffff:127.0.0.1]:5000/a/b",
    "[fd00::1]:5000/a/b",       "198.51.100.7:5000/a/b", "0.0.0.0:5000/a/b",
};

static const char *const outside[] = {
    "python:3.12-slim", "docker.io/library/busybox:1", "ghcr.io/a/b:1",
    "8.8.8.8:5000/a/b", "[2001:4860::1]:5000/a/b",     "registry.example.com:5000/a/b",
};

TEST(addresses_inside_need_the_opt_in)
{
    unsetenv(REGISTRY_LOCAL_ENV);
    unsetenv(REGISTRY_INSECURE_ENV);
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++)
        if (check(inside[i]) == 0)
            TEST_FAIL("%s passed without the opt-in", inside[i]);
}

TEST(public_hosts_and_names_pass)
{
    unsetenv(REGISTRY_LOCAL_ENV);
    unsetenv(REGISTRY_INSECURE_ENV);
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
        if (check(outside[i]) != 0)
            TEST_FAIL("%s refused", outside[i]);
}

TEST(the_person_names_them)
{
    setenv(REGISTRY_LOCAL_ENV, "127.0.0.1, localhost:5000", 1);
    unsetenv(REGISTRY_INSECURE_ENV);
    ASSERT_EQ(check("127.0.0.1:5000/a/b"), 0); /* a host alone: every port */
    ASSERT_EQ(check("127.0.0.1:6000/a/b"), 0);
    ASSERT_EQ(check("localhost:5000/a/b"), 0);
    ASSERT(check("localhost:6000/a/b") < 0); /* host:port: that port only */
    ASSERT(check("127.0.0.2:5000/a/b") < 0);
    unsetenv(REGISTRY_LOCAL_ENV);
    setenv(REGISTRY_INSECURE_ENV, "10.1.2.3:5000", 1); /* a plain-HTTP one counts too */
    ASSERT_EQ(check("10.1.2.3:5000/a/b"), 0);
    ASSERT(check("10.1.2.3:5001/a/b") < 0);
    unsetenv(REGISTRY_INSECURE_ENV);
}

int main(void)
{
    RUN(addresses_inside_need_the_opt_in);
    RUN(public_hosts_and_names_pass);
    RUN(the_person_names_them);
    return test_done();
}
