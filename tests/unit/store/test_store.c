/* Unit tests of the state store (lib/store/store.h) on real SQLite files in a scratch dir. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "lib/store/store_internal.h"
#include "test.h"
#include "lib/base/rmtree.h"

#define CHILDREN 4
#define SLOTS_PER_CHILD 8

static char scratch[256];

static char *scratch_dir(const char *name)
{
    char *d = xasprintf("%s/%s", scratch, name);
    return d;
}

static struct store *open_ok(const char *dir)
{
    struct mcp_error err = {0};
    struct store *st = store_open(dir, &err);
    if (st == NULL)
        TEST_FAIL("store_open(%s): %s", dir, err.msg);
    return st;
}

static void sandbox_fill(struct store_sandbox *sb, const char *id, const char *backend,
                         const char *owner, int64_t created)
{
    memset(sb, 0, sizeof(*sb));
    sb->id = xstrdup(id);
    sb->backend = xstrdup(backend);
    sb->owner = xstrdup(owner);
    sb->state = xstrdup("running");
    sb->created_at_ms = created;
    sb->expires_at_ms = created + 1000;
    sb->idle_timeout_s = 60;
    sb->last_active_ms = created;
    sb->record = json_pack("{s:s, s:i}", "image", "host", "slot", 3);
}

static void insert_ok(struct store *st, const char *id, const char *backend, const char *owner,
                      int64_t created)
{
    struct store_sandbox sb;
    struct mcp_error err = {0};
    sandbox_fill(&sb, id, backend, owner, created);
    int r = store_sandbox_insert(st, &sb, &err);
    store_sandbox_release(&sb);
    if (r != 0)
        TEST_FAIL("insert %s: %s", id, err.msg);
}

TEST(open_creates_private_dir_and_file)
{
    char *dir = scratch_dir("a/b/state");
    struct store *st = open_ok(dir);
    struct stat sb;
    ASSERT_EQ(stat(dir, &sb), 0);
    ASSERT_EQ(sb.st_mode & 0777, 0700);
    char *db = xasprintf("%s/mcpbox.db", dir);
    ASSERT_EQ(stat(db, &sb), 0);
    ASSERT_EQ(sb.st_mode & 0777, 0600);
    ASSERT_STR_EQ(store_state_dir(st), dir);
    ASSERT(store_db(st) != NULL);
    sqlite3_stmt *s = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(store_db(st), "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    /* the page cache is bounded (256 KiB), not SQLite's 2 MiB: a long-running server's heap grew
     * with the events and audit tables until that */
    ASSERT_EQ(sqlite3_prepare_v2(store_db(st), "PRAGMA cache_size", -1, &s, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(s, 0), -256);
    sqlite3_finalize(s);
    store_close(st);
    free(db);
    free(dir);
}

TEST(sandbox_crud)
{
    char *dir = scratch_dir("crud");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    insert_ok(st, "sbx-1", "local", "local:uid:1", 100);
    struct store_sandbox sb;
    ASSERT_EQ(store_sandbox_get(st, "sbx-1", &sb, &err), 0);
    ASSERT_STR_EQ(sb.backend, "local");
    ASSERT_STR_EQ(sb.owner, "local:uid:1");
    ASSERT_STR_EQ(sb.state, "running");
    ASSERT_EQ(sb.created_at_ms, 100);
    ASSERT_EQ(sb.expires_at_ms, 1100);
    ASSERT_EQ(sb.idle_timeout_s, 60);
    ASSERT_STR_EQ(json_string_value(json_object_get(sb.record, "image")), "host");
    /* update rewrites every column */
    free(sb.state);
    sb.state = xstrdup("paused");
    sb.expires_at_ms = 0;
    json_object_set_new(sb.record, "extra", json_true());
    ASSERT_EQ(store_sandbox_update(st, &sb, &err), 0);
    store_sandbox_release(&sb);
    ASSERT_EQ(store_sandbox_get(st, "sbx-1", &sb, &err), 0);
    ASSERT_STR_EQ(sb.state, "paused");
    ASSERT_EQ(sb.expires_at_ms, 0);
    ASSERT(json_is_true(json_object_get(sb.record, "extra")));
    store_sandbox_release(&sb);
    ASSERT_EQ(store_sandbox_set_state(st, "sbx-1", "stopped", &err), 0);
    int64_t before = now_wall_ms();
    ASSERT_EQ(store_sandbox_touch(st, "sbx-1", &err), 0);
    ASSERT_EQ(store_sandbox_get(st, "sbx-1", &sb, &err), 0);
    ASSERT_STR_EQ(sb.state, "stopped");
    ASSERT(sb.last_active_ms >= before);
    store_sandbox_release(&sb);
    /* peek: the same columns, without the record */
    ASSERT_EQ(store_sandbox_peek(st, "sbx-1", &sb, &err), 0);
    ASSERT_STR_EQ(sb.owner, "local:uid:1");
    ASSERT_STR_EQ(sb.state, "stopped");
    ASSERT(sb.last_active_ms >= before);
    ASSERT(sb.record == NULL);
    store_sandbox_release(&sb);
    ASSERT_EQ(store_sandbox_delete(st, "sbx-1", &err), 0);
    ASSERT_EQ(store_sandbox_get(st, "sbx-1", &sb, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    ASSERT_EQ(store_sandbox_peek(st, "sbx-1", &sb, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err.msg, "list_sandboxes");
    store_close(st);
    free(dir);
}

TEST(sandbox_errors)
{
    char *dir = scratch_dir("errors");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    insert_ok(st, "sbx-dup", "local", "o", 1);
    struct store_sandbox sb;
    sandbox_fill(&sb, "sbx-dup", "local", "o", 2);
    ASSERT_EQ(store_sandbox_insert(st, &sb, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(err.msg, "sbx-dup");
    free(sb.id);
    sb.id = xstrdup("sbx-missing");
    ASSERT_EQ(store_sandbox_update(st, &sb, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err.msg, "sbx-missing");
    ASSERT_CONTAINS(err.msg, "list_sandboxes");
    json_decref(sb.record);
    sb.record = json_array();
    ASSERT_EQ(store_sandbox_insert(st, &sb, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    store_sandbox_release(&sb);
    ASSERT_EQ(store_sandbox_set_state(st, "sbx-missing", "running", &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    ASSERT_EQ(store_sandbox_touch(st, "sbx-missing", &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    ASSERT_EQ(store_sandbox_delete(st, "sbx-missing", &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_NOT_FOUND);
    store_close(st);
    free(dir);
}

TEST(sandbox_list_filters_and_order)
{
    char *dir = scratch_dir("list");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    insert_ok(st, "sbx-c", "local", "alice", 30);
    insert_ok(st, "osb-a", "opensandbox", "alice", 10);
    insert_ok(st, "sbx-b", "local", "bob", 20);
    struct store_sandbox *list;
    size_t n;
    ASSERT_EQ(store_sandbox_list(st, NULL, NULL, &list, &n, &err), 0);
    ASSERT_EQ(n, 3);
    ASSERT_STR_EQ(list[0].id, "osb-a");
    ASSERT_STR_EQ(list[1].id, "sbx-b");
    ASSERT_STR_EQ(list[2].id, "sbx-c");
    store_sandbox_list_free(list, n);
    ASSERT_EQ(store_sandbox_list(st, "local", NULL, &list, &n, &err), 0);
    ASSERT_EQ(n, 2);
    store_sandbox_list_free(list, n);
    ASSERT_EQ(store_sandbox_list(st, "local", "alice", &list, &n, &err), 0);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(list[0].id, "sbx-c");
    store_sandbox_list_free(list, n);
    ASSERT_EQ(store_sandbox_list(st, NULL, "nobody", &list, &n, &err), 0);
    ASSERT_EQ(n, 0);
    store_sandbox_list_free(list, n);
    store_close(st);
    free(dir);
}

TEST(slots_lowest_free_and_exhaustion)
{
    char *dir = scratch_dir("slots");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    uint32_t s;
    ASSERT_EQ(store_slot_acquire(st, "a", 3, &s, &err), 0);
    ASSERT_EQ(s, 0);
    ASSERT_EQ(store_slot_acquire(st, "b", 3, &s, &err), 0);
    ASSERT_EQ(s, 1);
    ASSERT_EQ(store_slot_acquire(st, "a", 3, &s, &err), 0); /* same sandbox: same slot */
    ASSERT_EQ(s, 0);
    ASSERT_EQ(store_slot_acquire(st, "c", 3, &s, &err), 0);
    ASSERT_EQ(s, 2);
    ASSERT_EQ(store_slot_acquire(st, "d", 3, &s, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_LIMIT);
    ASSERT_CONTAINS(err.msg, "slots");
    ASSERT_EQ(store_slot_release(st, "b", &err), 0);
    ASSERT_EQ(store_slot_release(st, "b", &err), 0); /* twice is harmless */
    ASSERT_EQ(store_slot_acquire(st, "d", 3, &s, &err), 0);
    ASSERT_EQ(s, 1); /* the hole is reused */
    ASSERT_EQ(store_slot_release(st, "a", &err), 0);
    ASSERT_EQ(store_slot_acquire(st, "e", 3, &s, &err), 0);
    ASSERT_EQ(s, 0);
    store_close(st);
    free(dir);
}

/* The record and its slot go in together or not at all: an insert that conflicts leaves the
 * slot unrecorded (the create unleases it) and the other sandbox's row and slot unchanged. */
TEST(insert_with_slot_is_one_transaction)
{
    char *dir = scratch_dir("insert-slot");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    struct store_sandbox sb;
    uint32_t s = 99;
    sandbox_fill(&sb, "sbx-a", "local", "o", 100);
    ASSERT_EQ(store_sandbox_insert_with_slot(st, &sb, 7, &err), 0);
    ASSERT_EQ(store_slot_of(st, "sbx-a", &s, &err), 1);
    ASSERT_EQ(s, 7);
    /* the same id again, with another slot: refused, nothing of it stays */
    ASSERT_EQ(store_sandbox_insert_with_slot(st, &sb, 8, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_CONFLICT);
    ASSERT_EQ(store_slot_of(st, "sbx-a", &s, &err), 1);
    ASSERT_EQ(s, 7);
    store_sandbox_release(&sb);
    /* the store is usable afterwards (no transaction left open) */
    insert_ok(st, "sbx-b", "local", "o", 200);
    ASSERT_EQ(store_slot_of(st, "sbx-b", &s, &err), 0);
    store_close(st);
    free(dir);
}

/* A child process takes SLOTS_PER_CHILD slots through its own handle; exits 0 on success. */
static int child_take_slots(const char *dir, int child)
{
    struct mcp_error err = {0};
    struct store *st = store_open(dir, &err);
    if (st == NULL)
        return 2;
    for (int i = 0; i < SLOTS_PER_CHILD; i++) {
        char id[64];
        uint32_t slot;
        snprintf(id, sizeof(id), "sbx-child%d-%d", child, i);
        if (store_slot_acquire(st, id, 1000, &slot, &err) < 0) {
            fprintf(stderr, "child %d: %s\n", child, err.msg);
            store_close(st);
            return 3;
        }
    }
    store_close(st);
    return 0;
}

TEST(two_processes_share_one_file)
{
    char *dir = scratch_dir("shared");
    struct store *a = open_ok(dir);
    struct store *b = open_ok(dir);
    struct mcp_error err = {0};
    insert_ok(a, "sbx-from-a", "local", "o", 1);
    struct store_sandbox sb;
    ASSERT_EQ(store_sandbox_get(b, "sbx-from-a", &sb, &err), 0);
    store_sandbox_release(&sb);
    ASSERT_EQ(store_sandbox_set_state(b, "sbx-from-a", "paused", &err), 0);
    ASSERT_EQ(store_sandbox_get(a, "sbx-from-a", &sb, &err), 0);
    ASSERT_STR_EQ(sb.state, "paused");
    store_sandbox_release(&sb);
    pid_t pids[CHILDREN];
    for (int c = 0; c < CHILDREN; c++) {
        pids[c] = fork();
        ASSERT(pids[c] >= 0);
        if (pids[c] == 0)
            _exit(child_take_slots(dir, c));
    }
    for (int c = 0; c < CHILDREN; c++) {
        int status;
        ASSERT_EQ(waitpid(pids[c], &status, 0), pids[c]);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* Every slot distinct and dense: 0..N-1 each exactly once. */
    sqlite3_stmt *s = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(store_db(a),
                                 "SELECT COUNT(*), COUNT(DISTINCT slot), MAX(slot) FROM slots",
                                 -1, &s, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(s, 0), CHILDREN * SLOTS_PER_CHILD);
    ASSERT_EQ(sqlite3_column_int(s, 1), CHILDREN * SLOTS_PER_CHILD);
    ASSERT_EQ(sqlite3_column_int(s, 2), CHILDREN * SLOTS_PER_CHILD - 1);
    sqlite3_finalize(s);
    store_close(a);
    store_close(b);
    free(dir);
}

#define WRITERS 4
#define WRITES_PER_WRITER 150

/* A child writes rows, events and audit entries through its own handle, as an mcpbox process
 * would, and updates each row right after; 0 when every call succeeded. */
static int child_write_rows(const char *dir, int child)
{
    struct mcp_error err = {0};
    struct store *st = store_open(dir, &err);
    if (st == NULL)
        return 2;
    int rc = 0;
    for (int i = 0; i < WRITES_PER_WRITER && rc == 0; i++) {
        char id[64];
        snprintf(id, sizeof(id), "sbx-w%d-%d", child, i);
        struct store_sandbox sb;
        sandbox_fill(&sb, id, "local", "o", i);
        if (store_sandbox_insert(st, &sb, &err) < 0 ||
            store_sandbox_set_state(st, id, "paused", &err) < 0 ||
            store_event_add(st, id, "created", NULL, &err) < 0 ||
            store_audit(st, "o", "create_sandbox", id, "ok", 1, NULL, &err) < 0) {
            fprintf(stderr, "writer %d: %s\n", child, err.msg);
            rc = 3;
        }
        store_sandbox_release(&sb);
    }
    store_close(st);
    return rc;
}

TEST(concurrent_writers_never_fail)
{
    char *dir = scratch_dir("writers");
    struct store *st = open_ok(dir);
    pid_t pids[WRITERS];
    for (int c = 0; c < WRITERS; c++) {
        pids[c] = fork();
        ASSERT(pids[c] >= 0);
        if (pids[c] == 0)
            _exit(child_write_rows(dir, c));
    }
    for (int c = 0; c < WRITERS; c++) {
        int status;
        ASSERT_EQ(waitpid(pids[c], &status, 0), pids[c]);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    struct store_sandbox *list;
    size_t n;
    struct mcp_error err = {0};
    ASSERT_EQ(store_sandbox_list(st, NULL, NULL, &list, &n, &err), 0);
    ASSERT_EQ(n, WRITERS * WRITES_PER_WRITER);
    for (size_t i = 0; i < n; i++)
        ASSERT_STR_EQ(list[i].state, "paused");
    store_sandbox_list_free(list, n);
    store_close(st);
    free(dir);
}

static int64_t module_version(struct store *st, const char *module)
{
    sqlite3_stmt *s = NULL;
    int64_t v = -1;
    sqlite3_prepare_v2(store_db(st), "SELECT version FROM schema_version WHERE module = ?1", -1,
                       &s, NULL);
    sqlite3_bind_text(s, 1, module, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

TEST(migrations_idempotent_and_incremental)
{
    static const char *const v2[] = {
        "CREATE TABLE things (id INTEGER PRIMARY KEY)",
        "ALTER TABLE things ADD COLUMN name TEXT",
    };
    char *dir = scratch_dir("migrate");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    ASSERT_EQ(module_version(st, "store"), 1);
    ASSERT_EQ(store_migrate_module(st, "mod", v2, 1, &err), 0);
    ASSERT_EQ(module_version(st, "mod"), 1);
    ASSERT_EQ(store_migrate_module(st, "mod", v2, 1, &err), 0); /* again: nothing to do */
    ASSERT_EQ(store_migrate_module(st, "mod", v2, 2, &err), 0); /* one more appended */
    ASSERT_EQ(module_version(st, "mod"), 2);
    ASSERT_EQ(store_migrate_module(st, "mod", v2, 2, &err), 0);
    ASSERT_EQ(sqlite3_exec(store_db(st), "INSERT INTO things(name) VALUES ('x')", NULL, NULL,
                           NULL),
              SQLITE_OK);
    /* A database newer than the code: a clear refusal. */
    ASSERT_EQ(store_migrate_module(st, "mod", v2, 1, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "newer mcpbox");
    store_close(st);
    st = open_ok(dir); /* reopening applies nothing twice */
    ASSERT_EQ(module_version(st, "store"), 1);
    store_close(st);
    free(dir);
}

TEST(migration_failure_rolls_back)
{
    static const char *const bad[] = {
        "CREATE TABLE good (id INTEGER)",
        "CREATE TABLE half (id INTEGER); THIS IS NOT SQL",
    };
    char *dir = scratch_dir("badmigrate");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    ASSERT_EQ(store_migrate_module(st, "bad", bad, 2, &err), -1);
    ASSERT_CONTAINS(err.msg, "migration 2 of module 'bad'");
    ASSERT_EQ(module_version(st, "bad"), 1);
    /* The half-applied script left nothing behind. */
    ASSERT(sqlite3_exec(store_db(st), "SELECT * FROM half", NULL, NULL, NULL) != SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(store_db(st), "SELECT * FROM good", NULL, NULL, NULL), SQLITE_OK);
    ASSERT_EQ(store_migrate_module(st, "", bad, 1, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    store_close(st);
    free(dir);
}

TEST(events_bounded_oldest_first)
{
    char *dir = scratch_dir("events");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    json_t *data = json_pack("{s:s}", "command", "sleep 1");
    ASSERT_EQ(store_event_add(st, "sbx-e", "created", NULL, &err), 0);
    ASSERT_EQ(store_event_add(st, "sbx-e", "oom_kill", data, &err), 0);
    ASSERT_EQ(store_event_add(st, "sbx-other", "created", NULL, &err), 0);
    json_decref(data);
    json_t *list = NULL;
    ASSERT_EQ(store_event_list(st, "sbx-e", 10, &list, &err), 0);
    ASSERT_EQ(json_array_size(list), 2);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(list, 0), "kind")),
                  "created");
    ASSERT(json_is_null(json_object_get(json_array_get(list, 0), "data")));
    json_t *d = json_object_get(json_array_get(list, 1), "data");
    ASSERT_STR_EQ(json_string_value(json_object_get(d, "command")), "sleep 1");
    int64_t t;
    ASSERT_EQ(parse_rfc3339_ms(
                  json_string_value(json_object_get(json_array_get(list, 0), "time")), &t),
              0);
    json_decref(list);
    ASSERT_EQ(store_event_list(st, "sbx-e", 1, &list, &err), 0); /* the newest one */
    ASSERT_EQ(json_array_size(list), 1);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(list, 0), "kind")),
                  "oom_kill");
    json_decref(list);
    for (int i = 0; i < STORE_EVENTS_PER_SANDBOX_MAX + 20; i++) {
        json_t *n = json_integer(i);
        ASSERT_EQ(store_event_add(st, "sbx-many", "exit", n, &err), 0);
        json_decref(n);
    }
    ASSERT_EQ(store_event_list(st, "sbx-many", 100000, &list, &err), 0);
    ASSERT_EQ(json_array_size(list), STORE_EVENTS_PER_SANDBOX_MAX);
    json_t *last = json_object_get(json_array_get(list, json_array_size(list) - 1), "data");
    ASSERT_EQ(json_integer_value(last), STORE_EVENTS_PER_SANDBOX_MAX + 19);
    json_decref(list);
    store_close(st);
    free(dir);
}

TEST(audit_rows)
{
    char *dir = scratch_dir("audit");
    struct store *st = open_ok(dir);
    struct mcp_error err = {0};
    ASSERT_EQ(store_audit(st, "local:uid:1", "create_sandbox", "sbx-1", "ok", 12, NULL, &err), 0);
    ASSERT_EQ(store_audit(st, "local:uid:1", "list_sandboxes", NULL, "error", 1, "denied", &err),
              0);
    ASSERT_EQ(store_audit(st, NULL, "x", NULL, "ok", 0, NULL, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    sqlite3_stmt *s = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(store_db(st),
                                 "SELECT owner, tool, sandbox_id, outcome, duration_ms, detail "
                                 "FROM audit ORDER BY seq",
                                 -1, &s, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(s, 1), "create_sandbox");
    ASSERT_STR_EQ((const char *)sqlite3_column_text(s, 2), "sbx-1");
    ASSERT_EQ(sqlite3_column_int(s, 4), 12);
    ASSERT_EQ(sqlite3_column_type(s, 5), SQLITE_NULL);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_type(s, 2), SQLITE_NULL);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(s, 5), "denied");
    ASSERT_EQ(sqlite3_step(s), SQLITE_DONE);
    sqlite3_finalize(s);
    store_close(st);
    free(dir);
}

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
    close(fd);
}

TEST(corrupt_or_bad_files_give_clear_errors)
{
    struct mcp_error err = {0};
    char *dir = scratch_dir("corrupt");
    ASSERT_EQ(mkdir(dir, 0700), 0);
    char *db = xasprintf("%s/mcpbox.db", dir);
    write_file(db, "this is not a database, just some text that is long enough to matter......"
                   "................................................................");
    ASSERT(store_open(dir, &err) == NULL);
    ASSERT_EQ(err.code, MCP_ERR_IO);
    ASSERT_CONTAINS(err.msg, "corrupt or not a SQLite database");
    ASSERT_CONTAINS(err.msg, db);
    /* the file is left alone */
    struct stat sb;
    ASSERT_EQ(stat(db, &sb), 0);
    ASSERT(sb.st_size > 0);
    /* state dir that is a file */
    ASSERT(store_open(db, &err) == NULL);
    ASSERT_CONTAINS(err.msg, "not a directory");
    /* a symlinked database file is refused */
    char *dir2 = scratch_dir("symlinked");
    ASSERT_EQ(mkdir(dir2, 0700), 0);
    char *link = xasprintf("%s/mcpbox.db", dir2);
    ASSERT_EQ(symlink(db, link), 0);
    ASSERT(store_open(dir2, &err) == NULL);
    ASSERT_EQ(err.sys_errno, ELOOP);
    ASSERT(store_open("", &err) == NULL);
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    free(link);
    free(dir2);
    free(db);
    free(dir);
}

int main(void)
{
    xalloc_install();
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof(scratch), "%s/mcpbox-store-test-XXXXXX", tmp ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(open_creates_private_dir_and_file);
    RUN(sandbox_crud);
    RUN(sandbox_errors);
    RUN(sandbox_list_filters_and_order);
    RUN(slots_lowest_free_and_exhaustion);
    RUN(insert_with_slot_is_one_transaction);
    RUN(two_processes_share_one_file);
    RUN(concurrent_writers_never_fail);
    RUN(migrations_idempotent_and_incremental);
    RUN(migration_failure_rolls_back);
    RUN(events_bounded_oldest_first);
    RUN(audit_rows);
    RUN(corrupt_or_bad_files_give_clear_errors);
    int rc = test_done();
    if (rmtree(scratch) < 0)
        fprintf(stderr, "could not remove %s\n", scratch);
    return rc;
}
