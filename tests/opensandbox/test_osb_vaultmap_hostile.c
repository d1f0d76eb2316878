/* Secrets on the opensandbox backend (issue 37) against a hostile server: the project's fake
 * OpenSandbox server (fake-server.mjs) made to answer the vault's POST with the request repeated
 * (as text, after a prefix that puts the cut of the error snippet inside the value, and in the
 * `sl-violations` header the backend reports). No value, nor the start of one, may reach the
 * error, the kept contract report or the log; the half-made sandbox is deleted; a sidecar
 * without a vault (the fake has none) is named as such, and so is a create refused. Skips (77) without Node.js. */
#include <stdlib.h>
#include <string.h>

#include "backend/opensandbox/opensandbox.h"
#include "backend/opensandbox/osb.h"
#include "backend/secrets.h"
#include "lib/base/rmtree.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "osb_support.h"
#include "test.h"

/* 40 bytes; its first 6 are what a cut snippet may hold */
#define VALUE "Hx7Qv2LmP9sKd4Tw8ZbN1cRf6YgJ3eUa5WoXiQzM"
/* The POST body up to the value: {"credentials":[{"name":"mcpbox-tok","source":{"type":
 * "inline","value":" is 73 bytes; errors.c keeps 200 of an error's text: a prefix of 117 puts
 * the cut 10 bytes into the value. */
#define CUT_PREFIX_LEN 117

static uv_loop_t loop;
static struct fake_server fs;
static struct backend *be;
static struct store *st;
static struct osb_wait w;
static char state_dir[] = "/tmp/osb-vaultmap-hostile-XXXXXX", domain[64];

static void create_with_secret(void)
{
    json_t *names = json_pack("[s]", "tok");
    struct sandbox_spec spec = {.owner = "local:uid:1", .image = "fake:1", .secrets = names};
    struct mcp_error e;
    osb_wait_reset(&w);
    if (be->ops->create(be, &spec, osb_wait_cb, &w, &e) != 0)
        TEST_FAIL("create refused: %s", e.msg);
    json_decref(names);
    if (!osb_run_until(&loop, &w.done, 20000))
        TEST_FAIL("create: no callback");
    if (!w.failed)
        TEST_FAIL("a create whose vault the server refused succeeded");
}

static int remote_sandboxes(void)
{
    json_t *j = fake_control(&fs, "GET", "/_stats", NULL);
    int n = (int)json_integer_value(json_object_get(j, "sandboxes"));
    json_decref(j);
    return n;
}

static void no_value_in(const char *what, const char *text)
{
    char start[7];
    memcpy(start, VALUE, 6);
    start[6] = '\0';
    if (strstr(text, start) != NULL)
        TEST_FAIL("%s holds (the start of) the value: %s", what, text);
}

/* The server repeats the whole request in its error (text: a JSON body without a message would
 * be shown as "no details"). */
TEST(echo_masked)
{
    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"credential-vault\",\"kind\":\"echo\",\"status\":400,"
                    "\"prefix\":\"rejected: \"}]");
    create_with_secret();
    printf("# %s\n", w.err.msg);
    no_value_in("the error", w.err.msg);
    ASSERT_CONTAINS(w.err.msg, "\"value\":\"****************************************\"");
    ASSERT_CONTAINS(w.err.msg, "was destroyed");
    ASSERT_EQ(remote_sandboxes(), 0);
}

/* ... and in the contract report (Prism's sl-violations header), which is logged. */
TEST(violations_report_not_kept)
{
    fake_reset(&fs);
    osb_of(be)->contract_violations = 0;
    fake_fault(&fs, "[{\"match\":\"credential-vault\",\"kind\":\"echo\",\"status\":400,"
                    "\"violations\":true}]");
    create_with_secret();
    no_value_in("the error", w.err.msg);
    ASSERT_EQ(osb_of(be)->contract_violations, 1);
    no_value_in("the contract report", osb_of(be)->last_violation);
    ASSERT_CONTAINS(osb_of(be)->last_violation, "not shown");
    ASSERT_EQ(remote_sandboxes(), 0);
}

/* The error snippet ends inside the value: its start is masked all the same. */
TEST(cut_value_masked)
{
    char faults[400];
    fake_reset(&fs);
    snprintf(faults, sizeof faults,
             "[{\"match\":\"credential-vault\",\"kind\":\"echo\",\"status\":400,"
             "\"prefix\":\"%0*d\"}]",
             CUT_PREFIX_LEN, 0);
    fake_fault(&fs, faults);
    create_with_secret();
    printf("# %s\n", w.err.msg);
    no_value_in("the error", w.err.msg);
    ASSERT_CONTAINS(w.err.msg, "inline\",\"value\":\"***");
    ASSERT_EQ(remote_sandboxes(), 0);
}

/* A server that refuses the create with credentialProxy: nothing made, the error says why. */
TEST(create_refused)
{
    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"POST /v1/sandboxes\",\"kind\":\"status\",\"status\":400,"
                    "\"message\":\"unknown field credentialProxy\"}]");
    create_with_secret();
    ASSERT_CONTAINS(w.err.msg, "unknown field credentialProxy");
    ASSERT_CONTAINS(w.err.msg, "the create asked for credentialProxy");
    ASSERT_EQ(remote_sandboxes(), 0);
}

/* The fake's sidecar serves /policy only: a server without a vault, named as such. */
TEST(no_vault)
{
    fake_reset(&fs);
    create_with_secret();
    ASSERT_CONTAINS(w.err.msg, "has no Credential Vault");
    ASSERT_CONTAINS(w.err.msg, "answered 404");
    ASSERT_CONTAINS(w.err.msg, "was destroyed");
    ASSERT_EQ(remote_sandboxes(), 0);
}

static int setup(void)
{
    struct mcp_error e;
    char key[] = "FAKE_API_KEY=hostile-key", ping[] = "FAKE_PING_MS=300";
    const char *env[] = {key, ping, NULL};
    if (osb_node_path() == NULL || fake_start(&fs, env) != 0)
        return 77;
    if (mkdtemp(state_dir) == NULL || (st = store_open(state_dir, &e)) == NULL)
        return 1;
    json_t *defs = json_pack("{s:{s:[s], s:s, s:{s:s}}}", "tok", "hosts", "api.example.com",
                             "header", "Authorization: Bearer {}", "from", "value", VALUE);
    int rc = secrets_save(state_dir, defs, &e);
    json_decref(defs);
    snprintf(domain, sizeof domain, "127.0.0.1:%d", fs.port);
    struct opensandbox_options opts = {
        .domain = domain, .api_key = "hostile-key", .request_timeout_s = 5};
    struct opensandbox_tuning t;
    opensandbox_tuning_default(&t, &opts);
    t.retry_max = 0;
    t.ready_timeout_ms = 8000;
    t.state_poll_ms = t.ping_poll_ms = 50;
    be = opensandbox_backend_new_tuned(&loop, st, &opts, &t, &e);
    return rc == 0 && be != NULL ? 0 : 1;
}

int main(void)
{
    xalloc_install();
    uv_loop_init(&loop);
    int rc = setup();
    if (rc == 77) {
        printf("1..0 # SKIP no Node.js to run the fake OpenSandbox server\n");
        return 77;
    }
    if (rc != 0) {
        printf("Bail out! set-up failed\n");
        fake_stop(&fs);
        return 1;
    }
    RUN(echo_masked);
    RUN(violations_report_not_kept);
    RUN(cut_value_masked);
    RUN(no_vault);
    RUN(create_refused);
    osb_wait_reset(&w);
    opensandbox_backend_free(be);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_run(&loop, UV_RUN_NOWAIT);
    store_close(st);
    fake_stop(&fs);
    rmtree(state_dir);
    uv_loop_close(&loop);
    return test_done();
}
