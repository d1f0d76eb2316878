/* Unit tests of named volumes' records (lib/store/store_volumes.h) on a real SQLite file: one
 * name per owner, another owner's invisible, persisted across a reopen, deleted by id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/rmtree.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "lib/store/store_volumes.h"
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

static void insert_ok(struct store *st, const char *id, const char *owner, const char *name)
{
    struct mcp_error err = {0};
    struct store_volume v = {.owner = (char *)owner, .size_limit = 1 << 20, .created_at_ms = 7};
    snprintf(v.id, sizeof v.id, "%s", id);
    snprintf(v.name, sizeof v.name, "%s", name);
    if (store_volume_insert(st, &v, &err) < 0)
        TEST_FAIL("insert %s/%s: %s", owner, name, err.msg);
}

TEST(one_name_per_owner_and_owners_apart)
{
    struct store *st = open_ok();
    struct mcp_error err = {0};
    insert_ok(st, "vol-1", "local:uid:1000", "cache");
    insert_ok(st, "vol-2", "local:uid:1001", "cache"); /* another owner: the same name is theirs */
    struct store_volume dup = {.owner = (char *)"local:uid:1000", .size_limit = 1};
    snprintf(dup.id, sizeof dup.id, "vol-3");
    snprintf(dup.name, sizeof dup.name, "cache");
    ASSERT_EQ(store_volume_insert(st, &dup, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(err.msg, "already have a volume called cache");
    struct store_volume v;
    ASSERT_EQ(store_volume_get(st, "local:uid:1001", "cache", &v, &err), 1);
    ASSERT_STR_EQ(v.id, "vol-2");
    store_volume_release(&v);
    ASSERT_EQ(store_volume_get(st, "local:uid:1002", "cache", &v, &err), 0);
    struct store_volume *list;
    size_t n;
    ASSERT_EQ(store_volume_list(st, "local:uid:1000", &list, &n, &err), 0);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(list[0].id, "vol-1");
    ASSERT_EQ(list[0].size_limit, 1 << 20);
    store_volume_list_free(list, n);
    ASSERT_EQ(store_volume_list(st, NULL, &list, &n, &err), 0);
    ASSERT_EQ(n, 2);
    store_volume_list_free(list, n);
    store_close(st);
}

TEST(kept_across_reopen_and_deleted_by_id)
{
    struct store *st = open_ok();
    struct mcp_error err = {0};
    struct store_volume v;
    ASSERT_EQ(store_volume_get(st, "local:uid:1000", "cache", &v, &err), 1);
    ASSERT_EQ(v.created_at_ms, 7);
    store_volume_release(&v);
    ASSERT_EQ(store_volume_delete(st, "vol-1", &err), 0);
    ASSERT_EQ(store_volume_get(st, "local:uid:1000", "cache", &v, &err), 0);
    ASSERT_EQ(store_volume_get(st, "local:uid:1001", "cache", &v, &err), 1);
    store_volume_release(&v);
    store_close(st);
}

int main(void)
{
    xalloc_install();
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/mcpbox-store-vol-XXXXXX", tmp ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(one_name_per_owner_and_owners_apart);
    RUN(kept_across_reopen_and_deleted_by_id);
    int rc = test_done();
    rmtree(scratch);
    return rc;
}
