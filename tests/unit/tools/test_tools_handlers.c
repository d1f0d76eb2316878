/* The tool handlers on a scripted backend and a real store: ownership, state errors, audit,
 * run_command's budget, cancellation, progress and output cap, file encodings and sha256. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fake.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"
#include "lib/store/store.h"
#include "mcp/tools/tools-internal.h"
#include "mcp/tools/tools.h"
#include "test.h"
#include "lib/base/rmtree.h"

/* ---- fixture ---- */

static uv_loop_t loop;
static struct mcp_context ctx;
static struct fake_backend *fb;
static char state_dir[] = "/tmp/mcpbox-tools-test-XXXXXX";

static void add_sandbox(const char *id, const char *owner, const char *state)
{
    struct store_sandbox sb = {.id = (char *)id, .backend = (char *)"local",
                               .owner = (char *)owner, .state = (char *)state,
                               .created_at_ms = now_wall_ms(), .record = json_object()};
    struct mcp_error err;
    if (store_sandbox_insert(ctx.store, &sb, &err) < 0)
        TEST_FAIL("insert: %s", err.msg);
    json_decref(sb.record);
}

static void setup(void)
{
    struct mcp_error err;
    uv_loop_init(&loop);
    if (mkdtemp(state_dir) == NULL)
        abort();
    ctx.loop = &loop;
    ctx.store = store_open(state_dir, &err);
    if (ctx.store == NULL) {
        fprintf(stderr, "store_open: %s\n", err.msg);
        exit(77);
    }
    struct backend *be = fake_backend_new(&loop, ctx.store);
    if (backend_set_add(&ctx.backends, be->ops, be, &err) < 0 ||
        backend_set_add(&ctx.backends, &fake_remote_ops, NULL, &err) < 0)
        TEST_FAIL("backend_set_add: %s", err.msg);
    fb = (struct fake_backend *)be;
    add_sandbox("sbx-a1", "alice", "running");
    add_sandbox("sbx-b1", "bob", "running");
    add_sandbox("sbx-p1", "alice", "paused");
}

static const struct tool_def *find_tool(const char *name)
{
    for (size_t i = 0; i < sandbox_tools_count; i++)
        if (strcmp(sandbox_tools[i].name, name) == 0)
            return &sandbox_tools[i];
    return NULL;
}

/* Calls tool as owner with args (a JSON text) and runs the loop until it answers.
 * cancel_after_ms > 0 cancels the call after that long. */
static struct tool_call *call_full(const char *owner, const char *tool, const char *args_json,
                                   bool progress, int cancel_after_ms)
{
    static struct tool_call call;
    json_decref(call.structured);
    memset(&call, 0, sizeof(call));
    call.ctx = &ctx;
    call.owner = owner;
    call.name = tool;
    call.wants_progress = progress;
    json_t *args = json_loads(args_json, 0, NULL);
    if (args == NULL || find_tool(tool) == NULL)
        TEST_FAIL("bad test call %s %s", tool, args_json);
    find_tool(tool)->handler(&call, args);
    json_decref(args);
    uint64_t start = now_mono_ms();
    while (!call.finished) {
        if (cancel_after_ms > 0 && !call.cancelled && call.cancel_fn &&
            now_mono_ms() - start >= (uint64_t)cancel_after_ms) {
            call.cancelled = true;
            call.cancel_fn(call.cancel_arg);
        }
        uv_run(&loop, UV_RUN_ONCE);
    }
    return &call;
}

static struct tool_call *call_tool(const char *owner, const char *tool, const char *args)
{
    return call_full(owner, tool, args, false, 0);
}

static const char *sget(struct tool_call *c, const char *key)
{
    return json_string_value(json_object_get(c->structured, key));
}

static long long iget(struct tool_call *c, const char *key)
{
    return json_integer_value(json_object_get(c->structured, key));
}

/* ---- tests ---- */

TEST(table_matches_schema_files)
{
    ASSERT_EQ(sandbox_tools_count, 24);
    for (size_t i = 0; i < sandbox_tools_count; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/schemas/tools/%s.json", MCPBOX_SOURCE_DIR,
                 sandbox_tools[i].name);
        json_t *def = json_load_file(path, 0, NULL);
        if (def == NULL)
            TEST_FAIL("no schema file %s", path);
        ASSERT_STR_EQ(json_string_value(json_object_get(def, "name")), sandbox_tools[i].name);
        /* unknown arguments are dropped and reported, not refused (mcp/tool_args.h); only a tool
         * without arguments says additionalProperties: false, which OpenAI's strict mode needs to
         * tell an empty closed object from an open map */
        json_t *in = json_object_get(def, "inputSchema");
        ASSERT(json_object_get(in, "additionalProperties") == NULL ||
               (json_is_false(json_object_get(in, "additionalProperties")) &&
                json_object_size(json_object_get(in, "properties")) == 0));
        ASSERT(json_is_object(json_object_get(def, "outputSchema")));
        json_decref(def);
    }
}

TEST(other_owner_looks_like_missing)
{
    struct tool_call *c = call_tool("alice", "get_sandbox", "{\"sandbox_id\":\"sbx-b1\"}");
    ASSERT(c->is_error);
    char theirs[2048];
    snprintf(theirs, sizeof(theirs), "%s", c->text);
    c = call_tool("alice", "get_sandbox", "{\"sandbox_id\":\"sbx-zz\"}");
    ASSERT(c->is_error);
    char missing[2048];
    snprintf(missing, sizeof(missing), "%s", c->text);
    /* Same words apart from the id itself. */
    ASSERT_CONTAINS(theirs, "no sandbox sbx-b1 among yours");
    ASSERT_CONTAINS(missing, "no sandbox sbx-zz among yours");
    ASSERT_STR_EQ(strstr(theirs, " among"), strstr(missing, " among"));
    c = call_tool("bob", "get_sandbox", "{\"sandbox_id\":\"sbx-b1\"}");
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(sget(c, "sandbox_id"), "sbx-b1");
    c = call_tool("alice", "get_sandbox", "{\"sandbox_id\":\"nope\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "list_sandboxes");
}

/* A backend without the optional operations: each tool names the backend and the alternative,
 * after the ownership and state checks (no existence oracle through them). */
TEST(optional_ops_unsupported)
{
    struct tool_call *c = call_tool("alice", "snapshot_sandbox",
                                    "{\"action\":\"create\",\"sandbox_id\":\"sbx-a1\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "the local backend has no snapshots");
    ASSERT_CONTAINS(c->text, "read_file");
    /* the hint names the backend of the table that keeps snapshots, running or not */
    ASSERT_CONTAINS(c->text, "snapshots need a sandbox on the opensandbox backend (create_sandbox "
                             "backend \"opensandbox\")");
    c = call_tool("alice", "snapshot_sandbox", "{\"action\":\"create\",\"sandbox_id\":\"sbx-b1\"}");
    ASSERT_CONTAINS(c->text, "no sandbox sbx-b1 among yours");
    c = call_tool("alice", "snapshot_sandbox", "{\"action\":\"list\"}");
    ASSERT_CONTAINS(c->text, "OPEN_SANDBOX_DOMAIN");
    c = call_tool("alice", "create_sandbox", "{\"snapshot_id\":\"snap_1\",\"backend\":\"local\"}");
    ASSERT_CONTAINS(c->text, "the local backend has no snapshots to restore");
    /* image and snapshot_id: refused on every backend, before any backend is asked */
    c = call_tool("alice", "create_sandbox", "{\"snapshot_id\":\"snap_1\",\"image\":\"alpine\","
                  "\"backend\":\"local\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "image or snapshot_id, not both");
    c = call_tool("alice", "run_code", "{\"sandbox_id\":\"sbx-a1\",\"code\":\"1\"}");
    ASSERT_CONTAINS(c->text, "the local backend has no code interpreter contexts");
    ASSERT_CONTAINS(c->text, "run_command");
    c = call_tool("alice", "run_code", "{\"sandbox_id\":\"sbx-p1\",\"code\":\"1\"}");
    ASSERT_STR_EQ(c->text,
                  "sandbox sbx-p1 is paused; call update_sandbox with paused: false first");
    c = call_tool("alice", "diagnose_sandbox", "{\"sandbox_id\":\"sbx-a1\",\"what\":\"metrics\"}");
    ASSERT_CONTAINS(c->text, "the local backend has no live metrics");
    ASSERT_CONTAINS(c->text, "get_sandbox");
    /* review and apply of copy-on-write mounts: any state (a paused sandbox's layer is there),
     * owner checked first, then the backend's answer with what to use instead */
    c = call_tool("alice", "review_changes", "{\"sandbox_id\":\"sbx-p1\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "has no copy-on-write mounts to review or apply");
    ASSERT_CONTAINS(c->text, "read_file");
    c = call_tool("alice", "apply_changes", "{\"sandbox_id\":\"sbx-b1\",\"overwrite\":true}");
    ASSERT_CONTAINS(c->text, "no sandbox sbx-b1 among yours");
}

TEST(paused_sandbox_refuses_commands)
{
    struct tool_call *c = call_tool("alice", "run_command",
                                    "{\"sandbox_id\":\"sbx-p1\",\"command\":\"exit:0\"}");
    ASSERT(c->is_error);
    ASSERT_STR_EQ(c->text,
                  "sandbox sbx-p1 is paused; call update_sandbox with paused: false first");
    c = call_tool("alice", "update_sandbox", "{\"sandbox_id\":\"sbx-p1\",\"paused\":false}");
    ASSERT(!c->is_error);
}

TEST(run_command_completes)
{
    struct tool_call *c = call_tool("alice", "run_command",
                                    "{\"sandbox_id\":\"sbx-a1\",\"command\":\"exit:3\"}");
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(sget(c, "status"), "exited");
    ASSERT_EQ(iget(c, "exit_code"), 3);
    ASSERT_STR_EQ(sget(c, "stdout"), "out\n");
    ASSERT_STR_EQ(sget(c, "stderr"), "err\n");
    ASSERT_STR_EQ(sget(c, "command_id"), "cmd-1");
    ASSERT(json_is_false(json_object_get(c->structured, "truncated")));
}

TEST(run_command_budget_goes_background_with_progress)
{
    int detached = fb->detach_count;
    struct tool_call *c = call_full("alice", "run_command",
                                    "{\"sandbox_id\":\"sbx-a1\",\"command\":\"sleep:4000\","
                                    "\"wait_seconds\":3}",
                                    true, 0);
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(sget(c, "status"), "running");
    ASSERT(json_is_null(json_object_get(c->structured, "exit_code")));
    ASSERT_CONTAINS(sget(c, "stdout"), "tick\n");
    ASSERT_CONTAINS(sget(c, "note"), "get_command");
    ASSERT_EQ(fb->detach_count, detached + 1);
    ASSERT(c->progress_count >= 1);
    ASSERT_CONTAINS(c->last_progress, "last output: tick");
    /* get_command with wait_seconds follows it to the end. */
    c = call_tool("alice", "get_command",
                  "{\"sandbox_id\":\"sbx-a1\",\"command_id\":\"cmd-1\",\"wait_seconds\":10}");
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(sget(c, "status"), "exited");
}

TEST(run_command_background_returns_at_once)
{
    uint64_t t0 = now_mono_ms();
    struct tool_call *c = call_tool("alice", "run_command",
                                    "{\"sandbox_id\":\"sbx-a1\",\"command\":\"sleep:1000\","
                                    "\"background\":true}");
    ASSERT(now_mono_ms() - t0 < 900);
    ASSERT_STR_EQ(sget(c, "status"), "running");
    ASSERT_STR_EQ(sget(c, "command_id"), "cmd-1");
    while (uv_run(&loop, UV_RUN_ONCE)) /* let the detached command end */
        ;
}

TEST(run_command_cancel_kills)
{
    int kills = fb->kill_count;
    struct tool_call *c = call_full("alice", "run_command",
                                    "{\"sandbox_id\":\"sbx-a1\",\"command\":\"sleep:5000\"}",
                                    false, 300);
    ASSERT_EQ(fb->kill_count, kills + 1);
    ASSERT_EQ(fb->last_kill_signal, SIGKILL);
    ASSERT_STR_EQ(sget(c, "status"), "killed");
}

TEST(run_command_caps_output)
{
    struct tool_call *c = call_tool("alice", "run_command",
                                    "{\"sandbox_id\":\"sbx-a1\",\"command\":\"big:104857600\","
                                    "\"max_output_bytes\":4096}");
    ASSERT(!c->is_error);
    const char *out = sget(c, "stdout");
    ASSERT(strlen(out) <= 4096 + 120);
    ASSERT(strncmp(out, "BEGIN", 5) == 0);
    ASSERT(strcmp(out + strlen(out) - 3, "END") == 0);
    ASSERT_CONTAINS(out, "bytes cut; call get_command with offset");
    ASSERT(json_is_true(json_object_get(c->structured, "truncated")));
    ASSERT_EQ(iget(c, "stdout_bytes"), 104857600);
}

TEST(files_round_trip_and_encodings)
{
    unsigned char bin[4096];
    random_bytes(bin, sizeof(bin));
    bin[0] = 0xff; /* never valid UTF-8 */
    char *b64 = xmalloc(base64_encoded_len(sizeof(bin)) + 1);
    base64_encode(bin, sizeof(bin), b64);
    char sha[65];
    sha256_hex(bin, sizeof(bin), sha);
    char *args = xasprintf("{\"sandbox_id\":\"sbx-a1\",\"path\":\"a.bin\",\"content\":\"%s\","
                           "\"encoding\":\"base64\"}", b64);
    struct tool_call *c = call_tool("alice", "write_file", args);
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(sget(c, "sha256"), sha);
    ASSERT_EQ(iget(c, "bytes_written"), sizeof(bin));
    /* Asked for utf-8, binary comes back as base64 and says so. */
    c = call_tool("alice", "read_file",
                  "{\"sandbox_id\":\"sbx-a1\",\"path\":\"a.bin\",\"encoding\":\"utf-8\"}");
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(sget(c, "encoding"), "base64");
    ASSERT(json_is_true(json_object_get(c->structured, "binary")));
    ASSERT_STR_EQ(sget(c, "content"), b64);
    ASSERT_STR_EQ(sget(c, "sha256"), sha);
    /* Ranges. */
    c = call_tool("alice", "read_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"a.bin\","
                                        "\"offset\":100,\"length\":10}");
    ASSERT_EQ(iget(c, "offset"), 100);
    ASSERT_EQ(iget(c, "length"), 10);
    ASSERT_EQ(iget(c, "size"), sizeof(bin));
    ASSERT(json_is_true(json_object_get(c->structured, "truncated")));
    /* path_base64 (a name that is not UTF-8, as list_files gives it) overrides path */
    c = call_tool("alice", "read_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"x?\","
                                        "\"path_base64\":\"YS5iaW4=\",\"length\":10}");
    ASSERT(!c->is_error);
    ASSERT_EQ(iget(c, "size"), sizeof(bin));
    c = call_tool("alice", "read_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"x?\","
                                        "\"path_base64\":\"not base64!\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "path_base64 is not the base64 of a path");
    free(args);
    free(b64);
    /* Text, and a range ending inside a character stops before it. */
    c = call_tool("alice", "write_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"t.txt\","
                                         "\"content\":\"h\u00e9llo\"}");
    ASSERT(!c->is_error);
    c = call_tool("alice", "read_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"t.txt\","
                                        "\"length\":2}");
    ASSERT_STR_EQ(sget(c, "encoding"), "utf-8");
    ASSERT_STR_EQ(sget(c, "content"), "h");
    ASSERT_EQ(iget(c, "length"), 1);
    c = call_tool("alice", "read_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"t.txt\"}");
    ASSERT_STR_EQ(sget(c, "content"), "h\xC3\xA9llo");
    ASSERT(json_is_false(json_object_get(c->structured, "truncated")));
}

TEST(big_results_are_not_repeated_in_text)
{
    enum { N = 200000 };
    char *b64 = xmalloc(base64_encoded_len(N) + 1);
    unsigned char *bin = xcalloc(1, N);
    base64_encode(bin, N, b64);
    char *args = xasprintf("{\"sandbox_id\":\"sbx-a1\",\"path\":\"z.bin\",\"content\":\"%s\","
                           "\"encoding\":\"base64\"}", b64);
    struct tool_call *c = call_tool("alice", "write_file", args);
    ASSERT(!c->is_error);
    c = call_tool("alice", "read_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"z.bin\","
                                        "\"length\":200000}");
    ASSERT(!c->is_error);
    ASSERT_EQ(strlen(sget(c, "content")), base64_encoded_len(N));
    ASSERT_CONTAINS(c->text, "bytes: see structuredContent.content]");
    ASSERT(strlen(c->text) < 2048);
    free(args);
    free(b64);
    free(bin);
}

TEST(file_errors)
{
    struct tool_call *c = call_tool("alice", "write_file",
                                    "{\"sandbox_id\":\"sbx-a1\",\"path\":\"x\",\"content\":\"@@@\","
                                    "\"encoding\":\"base64\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "not valid base64");
    c = call_tool("alice", "write_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"short.bin\","
                                         "\"content\":\"abcdef\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "write it again");
    c = call_tool("alice", "write_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"../x\","
                                         "\"content\":\"a\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "leaves the sandbox");
    c = call_tool("alice", "read_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"missing\"}");
    ASSERT(c->is_error);
    c = call_tool("alice", "write_file", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"m\","
                                         "\"content\":\"a\",\"mode\":\"999\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "octal");
}

TEST(file_ops_map_arguments)
{
    struct tool_call *c = call_tool("alice", "list_files", "{\"sandbox_id\":\"sbx-a1\"}");
    ASSERT(!c->is_error);
    json_t *a = json_object_get(c->structured, "args");
    ASSERT_STR_EQ(sget(c, "op"), "list");
    ASSERT(json_object_get(a, "sandbox_id") == NULL);
    ASSERT_STR_EQ(json_string_value(json_object_get(a, "path")), ".");
    ASSERT_EQ(json_integer_value(json_object_get(a, "max_entries")), TOOLS_DEFAULT_LIST_ENTRIES);
    c = call_tool("alice", "make_directory", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"d\","
                                             "\"mode\":\"750\"}");
    ASSERT_STR_EQ(sget(c, "op"), "mkdir");
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(c->structured, "args"), "mode")),
              0750);
    const char *ops[][2] = {{"search_files", "search"}, {"replace_in_file", "replace"},
                            {"move_path", "move"},      {"delete_path", "delete"}};
    const char *argv[] = {"{\"sandbox_id\":\"sbx-a1\",\"pattern\":\"*.c\"}",
                          "{\"sandbox_id\":\"sbx-a1\",\"path\":\"f\",\"old\":\"a\",\"new\":\"b\"}",
                          "{\"sandbox_id\":\"sbx-a1\",\"source\":\"a\",\"destination\":\"b\"}",
                          "{\"sandbox_id\":\"sbx-a1\",\"path\":\"f\"}"};
    for (size_t i = 0; i < 4; i++) {
        c = call_tool("alice", ops[i][0], argv[i]);
        ASSERT(!c->is_error);
        ASSERT_STR_EQ(sget(c, "op"), ops[i][1]);
    }
    c = call_tool("bob", "delete_path", "{\"sandbox_id\":\"sbx-a1\",\"path\":\"f\"}");
    ASSERT(c->is_error);
}

TEST(lifecycle_and_audit)
{
    struct tool_call *c = call_tool("alice", "create_sandbox", "{\"memory\":\"256m\"}");
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(sget(c, "sandbox_id"), "sbx-new");
    c = call_tool("alice", "create_sandbox", "{\"memory\":\"lots\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "memory: cannot read lots as a size");
    c = call_tool("alice", "create_sandbox", "{\"backend\":\"opensandbox\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "OPEN_SANDBOX_DOMAIN");
    c = call_tool("alice", "list_sandboxes", "{}");
    ASSERT(!c->is_error);
    ASSERT_EQ(json_array_size(json_object_get(c->structured, "sandboxes")), 1);
    c = call_tool("alice", "destroy_sandbox", "{\"sandbox_id\":\"sbx-a1\"}");
    ASSERT(!c->is_error);
    ASSERT(json_is_true(json_object_get(c->structured, "destroyed")));
    c = call_tool("alice", "diagnose_sandbox", "{\"sandbox_id\":\"sbx-a1\"}");
    ASSERT_STR_EQ(sget(c, "what"), "summary");
    c = call_tool("alice", "get_endpoint", "{\"sandbox_id\":\"sbx-a1\",\"port\":8080}");
    ASSERT_EQ(iget(c, "port"), 8080);
    c = call_tool("alice", "kill_command", "{\"sandbox_id\":\"sbx-a1\",\"command_id\":\"cmd-1\","
                                           "\"signal\":\"TERM\"}");
    ASSERT(!c->is_error);
    ASSERT_EQ(fb->last_kill_signal, SIGTERM);

    /* Every call above left an audit row; none holds file contents. */
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(store_db(ctx.store),
                                 "SELECT count(*), sum(outcome LIKE 'error:%'), "
                                 "sum(detail LIKE '%abcdef%') FROM audit WHERE owner = 'alice'",
                                 -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT(sqlite3_column_int(st, 0) >= 30);
    ASSERT(sqlite3_column_int(st, 1) >= 8);
    ASSERT_EQ(sqlite3_column_int(st, 2), 0);
    sqlite3_finalize(st);
    ASSERT_EQ(sqlite3_prepare_v2(store_db(ctx.store),
                                 "SELECT count(*) FROM audit WHERE tool = 'create_sandbox' "
                                 "AND sandbox_id = 'sbx-new' AND outcome = 'ok'",
                                 -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
}

TEST(network_policy_create_and_set)
{
    /* create: the policy reaches the backend normalized, with network false (fail closed) */
    struct tool_call *c = call_tool(
        "alice", "create_sandbox",
        "{\"network\":true,\"network_policy\":{\"egress\":[{\"action\":\"allow\","
        "\"target\":\"PyPI.org.\",\"ports\":[443]}]}}");
    ASSERT(!c->is_error);
    ASSERT(!fb->last_network);
    char *s = json_dumps(fb->last_create_policy, JSON_SORT_KEYS | JSON_COMPACT);
    ASSERT_STR_EQ(s, "{\"default_action\":\"deny\",\"egress\":[{\"action\":\"allow\","
                     "\"ports\":[443],\"target\":\"pypi.org\"}]}");
    free(s);
    c = call_tool("alice", "create_sandbox", "{\"network\":true}");
    ASSERT(fb->last_network && fb->last_create_policy == NULL);
    c = call_tool("alice", "create_sandbox",
                  "{\"network\":false,\"network_policy\":{\"default_action\":\"allow\"}}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "network: false turns egress off entirely");
    c = call_tool("alice", "create_sandbox",
                  "{\"network_policy\":{\"egress\":[{\"action\":\"allow\","
                  "\"target\":\"10.0.0.1\"}]}}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "network_policy.egress[0].target \"10.0.0.1\" is an IP address");
    /* update_sandbox network_policy: owner-checked, validated, handed to the backend */
    c = call_tool("alice", "update_sandbox",
                  "{\"sandbox_id\":\"sbx-a1\",\"network_policy\":{\"default_action\":"
                  "\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":"
                  "\"*.pythonhosted.org\"}]}}");
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(json_string_value(json_object_get(
                      json_array_get(json_object_get(json_object_get(c->structured,
                                                                     "network_policy"),
                                                     "egress"),
                                     0),
                      "target")),
                  "*.pythonhosted.org");
    c = call_tool("alice", "update_sandbox", "{\"sandbox_id\":\"sbx-b1\",\"paused\":true}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "no sandbox sbx-b1 among yours");
    /* an empty policy would deny everything: refused, as is a call that changes nothing */
    c = call_tool("alice", "update_sandbox", "{\"sandbox_id\":\"sbx-a1\",\"network_policy\":{}}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "network_policy needs default_action and/or egress");
    c = call_tool("alice", "update_sandbox", "{\"sandbox_id\":\"sbx-a1\"}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "changes nothing without paused, timeout_seconds or network_policy");
    c = call_tool("alice", "update_sandbox",
                  "{\"sandbox_id\":\"sbx-a1\",\"network_policy\":{\"default_action\":\"deny\"}}");
    ASSERT(!c->is_error);
    /* several at once: each backend call in turn, the answer is the last one's */
    c = call_tool("alice", "update_sandbox",
                  "{\"sandbox_id\":\"sbx-a1\",\"network_policy\":{\"default_action\":\"deny\"},"
                  "\"timeout_seconds\":60,\"paused\":true}");
    ASSERT(!c->is_error);
    ASSERT_STR_EQ(json_string_value(json_object_get(c->structured, "sandbox_id")), "sbx-a1");
    c = call_tool("alice", "update_sandbox",
                  "{\"sandbox_id\":\"sbx-a1\",\"network_policy\":{\"egress\":"
                  "[{\"action\":\"allow\",\"target\":\"*\"}]}}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "set default_action to \"allow\" instead");
}

int main(void)
{
    xalloc_install();
    setup();
    RUN(table_matches_schema_files);
    RUN(other_owner_looks_like_missing);
    RUN(paused_sandbox_refuses_commands);
    RUN(optional_ops_unsupported);
    RUN(run_command_completes);
    RUN(run_command_budget_goes_background_with_progress);
    RUN(run_command_background_returns_at_once);
    RUN(run_command_cancel_kills);
    RUN(run_command_caps_output);
    RUN(files_round_trip_and_encodings);
    RUN(big_results_are_not_repeated_in_text);
    RUN(file_errors);
    RUN(file_ops_map_arguments);
    RUN(lifecycle_and_audit);
    RUN(network_policy_create_and_set);
    while (uv_run(&loop, UV_RUN_ONCE))
        ;
    store_close(ctx.store);
    backend_set_free(&ctx.backends);
    uv_loop_close(&loop);
    if (rmtree(state_dir) < 0)
        return 1;
    return test_done();
}
