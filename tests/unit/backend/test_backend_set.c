/* The table of backends (backend/backend.c): lookups by name and by a sandbox id's prefix, the
 * messages for a backend that is not running or unknown, the default slots, and the checks that
 * keep every slot filled. Uses the scripted backend of the tool tests (tests/unit/tools). */
#include <stdlib.h>
#include <uv.h>

#include "backend/backend.h"
#include "fake.h"
#include "test.h"

static uv_loop_t loop;

/* A table as the composition root makes it: a running "local" first, then an "opensandbox"
 * that keeps snapshots but is not configured. */
static struct backend *fill(struct backend_set *set)
{
    struct mcp_error err;
    struct backend *be = fake_backend_new(&loop, NULL);
    *set = (struct backend_set){0};
    ASSERT_EQ(backend_set_add(set, be->ops, be, &err), 0);
    ASSERT_EQ(backend_set_add(set, &fake_remote_ops, NULL, &err), 0);
    return be;
}

TEST(lookups)
{
    struct backend_set set;
    struct backend *local = fill(&set);
    struct mcp_error err;
    ASSERT(backend_by_name(&set, "local", &err) == local);
    ASSERT(backend_by_name(&set, NULL, &err) == local); /* the first is the default */
    ASSERT(backend_for_sandbox_id(&set, "sbx-0123", &err) == local);

    ASSERT(backend_by_name(&set, "opensandbox", &err) == NULL);
    ASSERT_EQ(err.code, MCP_ERR_UNAVAILABLE);
    ASSERT_CONTAINS(err.msg, "the opensandbox backend is not enabled in this mcpbox server: set "
                             "OPEN_SANDBOX_DOMAIN");
    ASSERT(backend_for_sandbox_id(&set, "osb-abc", &err) == NULL);
    ASSERT_EQ(err.code, MCP_ERR_UNAVAILABLE);
    ASSERT_CONTAINS(err.msg, "sandbox osb-abc belongs to the opensandbox backend");

    ASSERT(backend_by_name(&set, "docker", &err) == NULL);
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    ASSERT_STR_EQ(err.msg, "unknown backend \"docker\": use \"local\" or \"opensandbox\"");
    ASSERT(backend_for_sandbox_id(&set, "xyz-1", &err) == NULL);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err.msg, "sandbox ids start with \"sbx-\" (local) or \"osb-\" (opensandbox)");

    /* a restore goes to the first backend that keeps snapshots, here one that is not running */
    ASSERT(!backend_has(local->ops, BACKEND_SNAPSHOTS));
    ASSERT(!backend_has(local->ops, BACKEND_CODE));
    ASSERT(backend_set_having(&set, BACKEND_SNAPSHOTS) == &fake_remote_ops);
    ASSERT(backend_has(&fake_remote_ops, BACKEND_SNAPSHOTS));
    ASSERT(backend_for_snapshots(&set, &err) == NULL);
    ASSERT_CONTAINS(err.msg, "OPEN_SANDBOX_DOMAIN");
    backend_set_free(&set);
    ASSERT_EQ(set.n, 0);
}

TEST(default_slots_say_what_is_missing)
{
    struct backend_set set;
    struct backend *local = fill(&set);
    struct mcp_error err;
    ASSERT_EQ(local->ops->snapshot(local, "alice", "list", NULL, NULL, NULL, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_UNSUPPORTED);
    ASSERT_STR_EQ(err.msg, "the local backend has no snapshots");
    ASSERT_EQ(local->ops->code_run(local, "sbx-1", NULL, NULL, &err), -1);
    ASSERT_STR_EQ(err.msg, "the local backend has no code interpreter contexts");
    ASSERT(local->ops->host_check("/nonexistent") == NULL);
    backend_set_free(&set);
}

TEST(the_table_refuses_what_would_make_callers_test)
{
    struct backend_set set;
    struct backend *local = fill(&set);
    struct mcp_error err;
    struct backend_ops holey = fake_remote_ops;
    holey.name = "holey";
    holey.id_prefix = "hol-";
    holey.metrics = NULL;
    ASSERT_EQ(backend_set_add(&set, &holey, NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "the holey backend leaves an operation empty");
    struct backend_ops twin = fake_remote_ops;
    twin.name = "twin";
    twin.id_prefix = "sbx-x"; /* a prefix of local's ids would steal them */
    ASSERT_EQ(backend_set_add(&set, &twin, NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "share a name or an id prefix");
    ASSERT_EQ(set.n, 2);
    (void)local;
    backend_set_free(&set);
}

/* backend_defer: later, from the loop, with its own reference to the result. */
static int deferred_calls;
static void deferred_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    deferred_calls++;
    ASSERT(err == NULL);
    ASSERT_EQ(json_integer_value(json_object_get(result, "n")), 7);
}

TEST(defer_calls_back_later_with_a_borrowed_result)
{
    struct backend_set set;
    struct backend *local = fill(&set);
    json_t *res = json_pack("{s:i}", "n", 7);
    deferred_calls = 0;
    backend_defer(local, deferred_cb, NULL, res, NULL);
    json_decref(res); /* the caller's reference; the deferred call keeps its own */
    ASSERT_EQ(deferred_calls, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(deferred_calls, 1);
    backend_set_free(&set);
}

int main(void)
{
    uv_loop_init(&loop);
    RUN(lookups);
    RUN(default_slots_say_what_is_missing);
    RUN(the_table_refuses_what_would_make_callers_test);
    RUN(defer_calls_back_later_with_a_borrowed_result);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return test_done();
}
