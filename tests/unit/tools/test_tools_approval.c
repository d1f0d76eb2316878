/* Approvals in the tool layer (issue 38) on a scripted backend and a real store, with a client
 * that cannot ask (the handler tests' tool_call declares no elicitation): the person's settings
 * decide before the backend is called; binding secrets; the audit rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "backend/secrets.h"
#include "fake.h"
#include "lib/base/rmtree.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "mcp/approval.h"
#include "mcp/tools/tools-internal.h"
#include "mcp/tools/tools.h"
#include "server/config.h"
#include "server/context.h"
#include "test.h"

static uv_loop_t loop;
static struct mcp_context ctx;
static struct mcp_config cfg;
static struct fake_backend *fb;
static char state_dir[] = "/tmp/mcpbox-approval-test-XXXXXX";

static void setup(void)
{
    struct mcp_error err;
    uv_loop_init(&loop);
    if (mkdtemp(state_dir) == NULL)
        abort();
    approval_settings_defaults(&cfg.approval);
    if (approval_settings_option(&cfg.approval, "approve-egress-allow", "pypi.org", &err) < 0)
        TEST_FAIL("%s", err.msg);
    ctx.loop = &loop;
    ctx.config = &cfg;
    if ((ctx.store = store_open(state_dir, &err)) == NULL)
        exit(77);
    struct backend *be = fake_backend_new(&loop, ctx.store);
    if (backend_set_add(&ctx.backends, be->ops, be, &err) < 0)
        TEST_FAIL("backend_set_add: %s", err.msg);
    fb = (struct fake_backend *)be;
    struct store_sandbox sb = {.id = (char *)"sbx-a1",
                               .backend = (char *)"local",
                               .owner = (char *)"alice",
                               .state = (char *)"running",
                               .created_at_ms = now_wall_ms(),
                               .record = json_object()};
    if (store_sandbox_insert(ctx.store, &sb, &err) < 0)
        TEST_FAIL("insert: %s", err.msg);
    json_decref(sb.record);
}

static struct tool_call *call_tool(const char *tool, const char *args_json)
{
    static struct tool_call call;
    json_decref(call.structured);
    memset(&call, 0, sizeof(call));
    call.ctx = &ctx, call.owner = "alice", call.name = tool;
    json_t *args = json_loads(args_json, 0, NULL);
    for (size_t i = 0; i < sandbox_tools_count; i++)
        if (strcmp(sandbox_tools[i].name, tool) == 0)
            sandbox_tools[i].handler(&call, args);
    json_decref(args);
    while (!call.finished)
        uv_run(&loop, UV_RUN_ONCE);
    return &call;
}

/* The number of audit rows of tool "approval" with outcome and a detail containing needle. */
static int approval_rows(const char *outcome, const char *needle)
{
    char path[256], *sql;
    sqlite3 *db;
    sqlite3_stmt *st;
    int n = 0;
    snprintf(path, sizeof path, "%s/mcpbox.db", state_dir);
    if (sqlite3_open(path, &db) != SQLITE_OK)
        TEST_FAIL("open %s", path);
    sql = sqlite3_mprintf("select count(*) from audit where tool='approval' and outcome=%Q and "
                          "instr(detail, %Q) > 0",
                          outcome, needle);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_free(sql);
    sqlite3_close(db);
    return n;
}

TEST(egress_beyond_the_list_is_refused_before_the_backend)
{
    struct tool_call *c =
        call_tool("create_sandbox", "{\"network_policy\": {\"egress\": "
                                    "[{\"action\": \"allow\", \"target\": \"evil.example\"}]}}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "cannot ask them");
    ASSERT_CONTAINS(c->text, "--approve-unasked egress=allow");
    ASSERT(fb->last_create_policy == NULL);
    ASSERT_EQ(approval_rows("refused", "by=unattended"), 1);
    c = call_tool("update_sandbox", "{\"sandbox_id\": \"sbx-a1\", \"network_policy\": "
                                    "{\"default_action\": \"allow\"}}");
    ASSERT(c->is_error);
    ASSERT(fb->last_set_policy == NULL);
    c = call_tool("create_sandbox", "{\"network\": true}");
    ASSERT(c->is_error);
    ASSERT_CONTAINS(c->text, "any address on the internet");
}

TEST(egress_within_the_list_and_by_settings)
{
    struct tool_call *c =
        call_tool("create_sandbox", "{\"network_policy\": {\"egress\": "
                                    "[{\"action\": \"allow\", \"target\": \"pypi.org\"}]}}");
    ASSERT(!c->is_error);
    ASSERT(fb->last_create_policy != NULL);
    cfg.approval.mode[APPROVAL_EGRESS] = APPROVAL_MODE_ALLOW;
    c = call_tool("update_sandbox",
                  "{\"sandbox_id\": \"sbx-a1\", \"network_policy\": "
                  "{\"egress\": [{\"action\": \"allow\", \"target\": \"x.example\"}]}}");
    ASSERT(!c->is_error);
    ASSERT(fb->last_set_policy != NULL);
    ASSERT(approval_rows("allowed", "by=settings") >= 1);
    cfg.approval.mode[APPROVAL_EGRESS] = APPROVAL_MODE_ASK;
}

static bool hook_allowed;
static char hook_msg[1024];
static void hook_done(void *arg, bool allowed, const struct mcp_error *refusal)
{
    struct tool_call *call = arg;
    hook_allowed = allowed;
    snprintf(hook_msg, sizeof hook_msg, "%s", refusal ? refusal->msg : "");
    call->finished = true;
}

/* Binding secrets asks as "secret": refused unattended by default, by the settings when they
 * say refuse, allowed when they say allow; the question names the secret, never a value. */
static void secrets_gate(const char *tool, enum approval_mode mode)
{
    struct tool_call call = {.ctx = &ctx, .owner = "alice", .name = tool};
    cfg.approval.mode[APPROVAL_SECRET] = mode;
    struct tool_job *job = tool_job_new(&call, NULL);
    json_auto_t *names = json_pack("[s]", "NPM_TOKEN");
    struct sandbox_spec spec = {.owner = "alice", .secrets = names};
    hook_allowed = false, hook_msg[0] = '\0';
    tools_gate_create(job, &spec, hook_done, &call);
    ASSERT(call.finished);
    tool_job_abandon(job, tool);
}

TEST(binding_secrets_asks)
{
    struct mcp_error err;
    json_auto_t *defs = json_pack("{s:{s:[s], s:b, s:{s:s}}}", "NPM_TOKEN", "hosts",
                                  "registry.npmjs.org", "placeholder", 1, "from", "value", "x");
    ASSERT_EQ(secrets_save(state_dir, defs, &err), 0);
    secrets_gate("create_sandbox", APPROVAL_MODE_ASK);
    ASSERT(!hook_allowed);
    ASSERT_CONTAINS(hook_msg, "NPM_TOKEN");
    ASSERT_CONTAINS(hook_msg, "--approve-unasked secret=allow");
    ASSERT_EQ(approval_rows("refused", "kind=secret"), 1);
    secrets_gate("create_sandbox", APPROVAL_MODE_REFUSE);
    ASSERT(!hook_allowed);
    ASSERT_CONTAINS(hook_msg, "--approve secret=refuse");
    secrets_gate("create_sandbox", APPROVAL_MODE_ALLOW);
    ASSERT(hook_allowed);
    /* a name the person never defined: nothing to ask, the backend refuses it by name */
    json_object_del(defs, "NPM_TOKEN");
    ASSERT_EQ(secrets_save(state_dir, defs, &err), 0);
    secrets_gate("create_sandbox", APPROVAL_MODE_ASK);
    ASSERT(hook_allowed);
}

TEST(names_are_shown_safely)
{
    char *s = approval_safe_text("a\nb\tc\x7f d\xe2\x80\xae e\xe2\x81\xa6 f\xe2\x80\x8b \xc3\xa9");
    ASSERT_STR_EQ(s, "a\\x0ab\\x09c\\x7f d\\u{202E} e\\u{2066} f\\u{200B} \xc3\xa9");
    free(s);
    s = approval_safe_text("\xe2\x80"); /* cut short: kept as it is */
    ASSERT_STR_EQ(s, "\xe2\x80");
    free(s);
}

int main(void)
{
    xalloc_install();
    setup();
    RUN(egress_beyond_the_list_is_refused_before_the_backend);
    RUN(egress_within_the_list_and_by_settings);
    RUN(binding_secrets_asks);
    RUN(names_are_shown_safely);
    while (uv_run(&loop, UV_RUN_ONCE))
        ;
    store_close(ctx.store);
    backend_set_free(&ctx.backends);
    uv_loop_close(&loop);
    approval_settings_release(&cfg.approval);
    if (rmtree(state_dir) < 0)
        return 1;
    return test_done();
}
