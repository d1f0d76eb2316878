/* Argument mapping (sizes, modes, signals) and error mapping (state checks, the one "not yours"
 * message, audit outcomes). */
#include <signal.h>
#include <stdlib.h>

#include "mcp/tools/tools-internal.h"
#include "test.h"

static uint64_t size_of(json_t *v, int *rc)
{
    struct mcp_error err;
    uint64_t out = 0;
    *rc = tools_parse_size(v, "memory", &out, &err);
    json_decref(v);
    return out;
}

TEST(sizes)
{
    int rc;
    ASSERT_EQ(size_of(json_integer(4096), &rc), 4096);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(size_of(json_string("512m"), &rc), 512ull << 20);
    ASSERT_EQ(size_of(json_string("512MiB"), &rc), 512ull << 20);
    ASSERT_EQ(size_of(json_string("1.5g"), &rc), 3ull << 29);
    ASSERT_EQ(size_of(json_string("2GB"), &rc), 2ull << 30);
    ASSERT_EQ(size_of(json_string("100k"), &rc), 102400);
    ASSERT_EQ(size_of(json_string("77"), &rc), 77);
    ASSERT_EQ(size_of(json_string("1t"), &rc), 1ull << 40);
    ASSERT_EQ(rc, 0);
    const char *bad[] = {"", "abc", "12q", "-5m", "5mm", "1e400", "999999999999t"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_of(json_string(bad[i]), &rc);
        if (rc != -1)
            TEST_FAIL("size \"%s\" accepted", bad[i]);
    }
    struct mcp_error err;
    uint64_t out;
    json_t *v = json_string("lots");
    ASSERT_EQ(tools_parse_size(v, "disk", &out, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(err.msg, "disk: cannot read lots as a size");
    json_decref(v);
    v = json_true();
    ASSERT_EQ(tools_parse_size(v, "disk", &out, &err), -1);
    json_decref(v);
}

TEST(modes_and_signals)
{
    struct mcp_error err;
    uint32_t mode = 0;
    ASSERT_EQ(tools_parse_mode("755", &mode, &err), 0);
    ASSERT_EQ(mode, 0755);
    ASSERT_EQ(tools_parse_mode("0644", &mode, &err), 0);
    ASSERT_EQ(mode, 0644);
    ASSERT_EQ(tools_parse_mode("0999", &mode, &err), -1);
    ASSERT_CONTAINS(err.msg, "not an octal permission");
    ASSERT_EQ(tools_parse_mode("", &mode, &err), -1);
    ASSERT_EQ(tools_signal_number("KILL"), SIGKILL);
    ASSERT_EQ(tools_signal_number("SIGTERM"), SIGTERM);
    ASSERT_EQ(tools_signal_number("INT"), SIGINT);
    ASSERT_EQ(tools_signal_number("STOP"), -1);
}

TEST(int_args_clamped)
{
    json_t *args = json_pack("{s:i, s:s, s:b}", "n", 5000, "s", "x", "b", 1);
    ASSERT_EQ(tools_arg_int(args, "n", 1, 0, 100), 100);
    ASSERT_EQ(tools_arg_int(args, "missing", 7, 0, 100), 7);
    ASSERT_EQ(tools_arg_int(args, "s", 7, 0, 100), 7); /* wrong type: the default */
    ASSERT_STR_EQ(tools_arg_str(args, "s", NULL), "x");
    ASSERT(tools_arg_str(args, "n", NULL) == NULL);
    ASSERT(tools_arg_bool(args, "b", false));
    ASSERT(!tools_arg_bool(args, "n", false));
    json_decref(args);
}

TEST(state_errors_are_actionable)
{
    struct mcp_error err;
    ASSERT_EQ(tools_state_check("sbx-1", "running", TOOL_NEED_RUNNING, &err), 0);
    ASSERT_EQ(tools_state_check("sbx-1", "paused", TOOL_NEED_ANY, &err), 0);
    ASSERT_EQ(tools_state_check("sbx-1", "paused", TOOL_NEED_RUNNING, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_CONFLICT);
    ASSERT_STR_EQ(err.msg, "sandbox sbx-1 is paused; call update_sandbox with paused: false first");
    ASSERT_EQ(tools_state_check("sbx-1", "stopped", TOOL_NEED_RUNNING, &err), -1);
    ASSERT_CONTAINS(err.msg, "call diagnose_sandbox");
    ASSERT_EQ(tools_state_check("sbx-1", "creating", TOOL_NEED_RUNNING, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_UNAVAILABLE);
    ASSERT_EQ(tools_state_check("sbx-1", "destroyed", TOOL_NEED_RUNNING, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
}

TEST(not_found_message_and_outcome)
{
    struct mcp_error a, b;
    tools_error_no_sandbox(&a, "sbx-0123");
    tools_error_no_sandbox(&b, "sbx-0123");
    ASSERT_STR_EQ(a.msg, b.msg);
    ASSERT_EQ(a.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(a.msg, "list_sandboxes");
    ASSERT_STR_EQ(tools_outcome(&a), "error:not_found");
    mcp_error_set(&b, MCP_ERR_LIMIT, 0, "x");
    ASSERT_STR_EQ(tools_outcome(&b), "error:limit");
}

int main(void)
{
    RUN(sizes);
    RUN(modes_and_signals);
    RUN(int_args_clamped);
    RUN(state_errors_are_actionable);
    RUN(not_found_message_and_outcome);
    return test_done();
}
