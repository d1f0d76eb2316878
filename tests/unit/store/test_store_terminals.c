/* Unit tests of terminals' records (lib/store/store_terminals.h) on a real SQLite file: a name
 * once per sandbox, the cap counting live terminals only, the read position kept across a
 * reopen, rows of a sandbox the store no longer has dropped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/rmtree.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "lib/store/store_terminals.h"
#include "test.h"

static char scratch[256];

static struct store *open_ok(void)
{
    struct mcp_error err = {0};
    struct store *st = store_open(scratch, &err);
    if (st == NULL)
        TEST_FAIL("store_open(%s): %s", scratch, err.msg);
    return st;
}

static void sandbox_ok(struct store *st, const char *id)
{
    struct mcp_error err = {0};
    struct store_sandbox sb = {.id = (char *)id, .backend = (char *)"local",
                               .owner = (char *)"local:uid:0", .state = (char *)"running",
                               .created_at_ms = 1};
    if (store_sandbox_insert(st, &sb, &err) < 0)
        TEST_FAIL("sandbox %s: %s", id, err.msg);
}

static void reserve_ok(struct store *st, const char *sid, const char *tid)
{
    struct mcp_error err = {0};
    if (store_terminal_reserve(st, sid, tid, 2, &err) < 0)
        TEST_FAIL("reserve %s/%s: %s", sid, tid, err.msg);
}

TEST(names_per_sandbox_and_the_cap_of_live_ones)
{
    struct store *st = open_ok();
    struct mcp_error err = {0};
    sandbox_ok(st, "sbx-a");
    sandbox_ok(st, "sbx-b");
    reserve_ok(st, "sbx-a", "t1");
    reserve_ok(st, "sbx-b", "t1"); /* another sandbox: the same name is its own */
    ASSERT_EQ(store_terminal_reserve(st, "sbx-a", "t1", 2, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_CONFLICT);
    reserve_ok(st, "sbx-a", "t2");
    ASSERT_EQ(store_terminal_reserve(st, "sbx-a", "t3", 2, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_LIMIT);
    ASSERT_CONTAINS(err.msg, "close one first");
    ASSERT_EQ(store_terminal_set_command(st, "sbx-a", "t1", "cmd-1", &err), 0);
    ASSERT_EQ(store_terminal_set_seen(st, "sbx-a", "t1", 42, true, &err), 0); /* exited */
    reserve_ok(st, "sbx-a", "t3");
    struct store_terminal *live;
    size_t n;
    ASSERT_EQ(store_terminal_live(st, "sbx-a", &live, &n, &err), 0);
    ASSERT_EQ(n, 2);
    free(live);
    store_close(st);
}

TEST(kept_across_reopen_and_dropped_with_the_sandbox)
{
    struct store *st = open_ok();
    struct mcp_error err = {0};
    struct store_terminal t;
    ASSERT_EQ(store_terminal_get(st, "sbx-a", "t1", &t, &err), 0);
    ASSERT_STR_EQ(t.command_id, "cmd-1");
    ASSERT_EQ(t.seen, 42);
    ASSERT_EQ(t.exited, true);
    ASSERT_EQ(store_terminal_delete(st, "sbx-a", "t1", &err), 0);
    ASSERT_EQ(store_terminal_get(st, "sbx-a", "t1", &t, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err.msg, "no terminal with this terminal_id");
    ASSERT_EQ(store_terminal_delete(st, "sbx-a", "t2", &err), 0); /* a place for t4 */
    ASSERT_EQ(store_sandbox_delete(st, "sbx-b", &err), 0);
    reserve_ok(st, "sbx-a", "t4"); /* a reservation drops the rows of sandboxes gone */
    ASSERT_EQ(store_terminal_get(st, "sbx-b", "t1", &t, &err), -1);
    store_close(st);
}

int main(void)
{
    xalloc_install();
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/mcpbox-store-term-XXXXXX", tmp ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(names_per_sandbox_and_the_cap_of_live_ones);
    RUN(kept_across_reopen_and_dropped_with_the_sandbox);
    int rc = test_done();
    rmtree(scratch);
    return rc;
}
