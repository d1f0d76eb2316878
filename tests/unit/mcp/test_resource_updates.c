/* notifications/resources/updated after a tool call that may have changed a sandbox's files
 * (mcp_context.sandbox_changed, issue 39 item 5): each subscribed file of that sandbox, and only
 * to sessions of the sandbox's owner. The end-to-end test with the SDK client is
 * tests/e2e/tools/resource_updates_e2e.mjs; two owners on one server are shown here. */
#pragma GCC diagnostic ignored "-Wunused-function" /* fake_transport.h's helpers it needs not */
#include "fake_transport.h"
#include "server/context.h"
#include "mcp/session-internal.h"
#include "test.h"

#define OWNER "local:uid:1000" /* fake_open's */

static void open_as(struct fake *f, const char *owner)
{
    fake_open(f);
    session_set_owner(f->s, owner);
    fake_initialize(f, "{}");
}

TEST(subscribed_files_of_the_changed_sandbox_only)
{
    struct fake f;
    struct mcp_error err;
    open_as(&f, OWNER);
    ASSERT_EQ(session_subscribe(f.s, "sandbox://sbx-aa/workspace/a.txt", &err), 0);
    ASSERT_EQ(session_subscribe(f.s, "sandbox://sbx-aa/tmp/b", &err), 0);
    ASSERT_EQ(session_subscribe(f.s, "sandbox://sbx-aab/workspace/a.txt", &err), 0);
    struct mcp_context *ctx = server_context(fake_srv);
    ASSERT(ctx->sandbox_changed != NULL);
    ctx->sandbox_changed(ctx, OWNER, "sbx-aa");
    /* both files of sbx-aa, not the one of sbx-aab (whose id begins the same) */
    ASSERT_EQ(fake_count_method(&f, "notifications/resources/updated"), 2);
    session_unsubscribe(f.s, "sandbox://sbx-aa/tmp/b");
    ctx->sandbox_changed(ctx, OWNER, "sbx-aa");
    ASSERT_EQ(fake_count_method(&f, "notifications/resources/updated"), 3);
    fake_close(&f);
}

TEST(another_owner_is_never_told)
{
    struct fake mine, theirs;
    struct mcp_error err;
    open_as(&mine, OWNER);
    open_as(&theirs, "token:0123456789abcdef");
    const char *uri = "sandbox://sbx-cc/workspace/a.txt";
    ASSERT_EQ(session_subscribe(mine.s, uri, &err), 0);
    ASSERT_EQ(session_subscribe(theirs.s, uri, &err), 0); /* accepted: nothing to learn from it */
    struct mcp_context *ctx = server_context(fake_srv);
    ctx->sandbox_changed(ctx, OWNER, "sbx-cc");
    ASSERT_EQ(fake_count_method(&mine, "notifications/resources/updated"), 1);
    ASSERT_EQ(fake_count_method(&theirs, "notifications/resources/updated"), 0);
    fake_close(&mine);
    fake_close(&theirs);
}

int main(void)
{
    fake_server_start();
    RUN(subscribed_files_of_the_changed_sandbox_only);
    RUN(another_owner_is_never_told);
    fake_server_stop();
    return test_done();
}
