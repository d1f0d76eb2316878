/* Command-line and environment configuration of `mcpbox serve`. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "server/config.h"
#include "test.h"

static int parse(struct mcp_config *cfg, const char *a1, const char *a2, const char *a3,
                 struct mcp_error *err)
{
    char serve[] = "serve";
    char *argv[] = {serve, (char *)a1, (char *)a2, (char *)a3, NULL};
    int argc = 1 + (a1 != NULL) + (a2 != NULL) + (a3 != NULL);

    return config_parse_args(cfg, argc, argv, err);
}

TEST(defaults_and_environment)
{
    struct mcp_config cfg;
    setenv("XDG_STATE_HOME", "/xdg", 1);
    setenv("MCPBOX_TOKEN", "envtok", 1);
    unsetenv("OPEN_SANDBOX_DOMAIN");
    config_init(&cfg);
    ASSERT_STR_EQ(cfg.state_dir, "/xdg/mcpbox");
    ASSERT_STR_EQ(cfg.token, "envtok");
    ASSERT(cfg.local_enabled && !cfg.osapi_enabled && !cfg.http_listen);
    ASSERT(cfg.opensandbox_domain == NULL);
    config_release(&cfg);
    unsetenv("XDG_STATE_HOME");
    setenv("HOME", "/home/u", 1);
    unsetenv("MCPBOX_TOKEN");
    config_init(&cfg);
    ASSERT_STR_EQ(cfg.state_dir, "/home/u/.local/state/mcpbox");
    ASSERT(cfg.token == NULL);
    config_release(&cfg);
}

TEST(options)
{
    struct mcp_config cfg;
    struct mcp_error err;
    config_init(&cfg);
    ASSERT_EQ(parse(&cfg, "--http=127.0.0.1:0", "--opensandbox-api", NULL, &err), 0);
    ASSERT_STR_EQ(cfg.http_listen, "127.0.0.1:0");
    ASSERT(cfg.osapi_enabled);
    /* The product knows nothing of the test binary's fixtures, not even to refuse them. */
    ASSERT_EQ(parse(&cfg, "--conformance-fixtures", NULL, NULL, &err), -1);
    ASSERT_EQ(parse(&cfg, "--state-dir", "/s", "--no-local", &err), 0);
    ASSERT_STR_EQ(cfg.state_dir, "/s");
    ASSERT(!cfg.local_enabled);
    ASSERT_EQ(parse(&cfg, "--log-level", "debug", NULL, &err), 0);
    ASSERT_EQ(cfg.log_level, LOG_LEVEL_DEBUG);
    config_release(&cfg);
}

TEST(option_errors_name_the_option)
{
    struct mcp_config cfg;
    struct mcp_error err;
    config_init(&cfg);
    ASSERT_EQ(parse(&cfg, "--bogus", NULL, NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "--bogus");
    ASSERT_EQ(parse(&cfg, "--http", NULL, NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "--http needs an argument");
    ASSERT_EQ(parse(&cfg, "--http", "nohost", NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "ADDR:PORT");
    ASSERT_EQ(parse(&cfg, "--http", "127.0.0.1:99999", NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "port");
    ASSERT_EQ(parse(&cfg, "--log-level", "loud", NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "--log-level");
    ASSERT_EQ(parse(&cfg, "--no-local=1", NULL, NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "takes no argument");
    config_release(&cfg);
}

TEST(non_loopback_http_needs_token)
{
    struct mcp_config cfg;
    struct mcp_error err;
    unsetenv("MCPBOX_TOKEN");
    config_init(&cfg);
    ASSERT_EQ(parse(&cfg, "--http", "0.0.0.0:8765", NULL, &err), 0);
    ASSERT_EQ(config_check(&cfg, &err), -1);
    ASSERT_CONTAINS(err.msg, "--token");
    ASSERT_EQ(parse(&cfg, "--token", "t", NULL, &err), 0);
    ASSERT_EQ(config_check(&cfg, &err), 0);
    config_release(&cfg);
    config_init(&cfg);
    static const char *const ok[] = {"127.0.0.1:1", "127.1.2.3:1", "[::1]:1", "localhost:1"};
    for (size_t i = 0; i < 4; i++) {
        ASSERT_EQ(parse(&cfg, "--http", ok[i], NULL, &err), 0);
        ASSERT_EQ(config_check(&cfg, &err), 0);
    }
    ASSERT_EQ(parse(&cfg, "--http", "[::]:1", NULL, &err), 0);
    ASSERT_EQ(config_check(&cfg, &err), -1);
    config_release(&cfg);
}

int main(void)
{
    RUN(defaults_and_environment);
    RUN(options);
    RUN(option_errors_name_the_option);
    RUN(non_loopback_http_needs_token);
    return test_done();
}
