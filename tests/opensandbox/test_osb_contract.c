/* Contract test: the backend's requests against Prism mocks of the official OpenSandbox specs
 * (specs/, served by prism_mocks.py). Prism answers a request that violates the spec with an
 * `sl-violations` header; none of ours may get one. Fails, saying what to install, without
 * Prism or PyYAML (scripts/install-deps.sh --test installs both).
 * Prism's answers are the specs' static examples, so only the requests are judged here; the
 * behaviour is tested against the fake server (test_osb_fake.c). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "backend/opensandbox/opensandbox.h"
#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "osb_support.h"
#include "test.h"
#include "lib/base/rmtree.h"

#define MOCK_SANDBOX "osb-sbx-0123456789" /* the mock spec's example id */

static uv_loop_t loop;
static struct backend *be;
static struct osb_wait w;
static char script[4096], run_dir[] = "/tmp/osb-prism-XXXXXX";

static void no_violations(const char *what)
{
    struct osb_backend *b = osb_of(be);
    if (b->contract_violations != 0)
        TEST_FAIL("%s: %u request(s) violated the spec; last: %s", what, b->contract_violations,
                  b->last_violation);
}

#define CALL(expr)                                                                                 \
    do {                                                                                           \
        struct mcp_error _e;                                                                       \
        osb_wait_reset(&w);                                                                        \
        if ((expr) != 0)                                                                           \
            TEST_FAIL("%s refused: %s", #expr, _e.msg);                                            \
        if (!osb_run_until(&loop, &w.done, 15000))                                                 \
            TEST_FAIL("%s: no callback", #expr);                                                   \
        no_violations(#expr);                                                                      \
        if (w.failed)                                                                              \
            printf("# %s: %s\n", #expr, w.err.msg);                                               \
    } while (0)
#define E (&_e)

static void ignore(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    *(bool *)arg = true;
}

/* The detector itself: a request that breaks the spec must be flagged. */
TEST(violations_are_detected)
{
    struct osb_backend *b = osb_of(be);
    json_t *body = json_pack("{s:s}", "expiresAt", "tomorrow");
    struct osb_call_opts o = {.method = "POST", .what = "a bad renew", .json = body};
    bool done = false;
    struct mcp_error e;
    ASSERT_EQ(osb_lifecycle_call(b, "/sandboxes/sbx-0123456789/renew-expiration", &o, ignore,
                                 &done, &e), 0);
    json_decref(body);
    osb_run_until(&loop, &done, 15000);
    ASSERT_EQ(b->contract_violations, 1);
    ASSERT_CONTAINS(b->last_violation, "date-time");
    b->contract_violations = 0;
}

TEST(lifecycle_requests)
{
    struct sandbox_spec spec = {.owner = "local:uid:1", .image = "python:3.11", .cpu = 0.5,
                                .memory_bytes = 256u << 20, .timeout_seconds = 600};
    json_t *env = json_pack("{s:s}", "A", "1");
    json_t *meta = json_pack("{s:s}", "project", "contract");
    spec.env = env;
    spec.metadata = meta;
    CALL(be->ops->create(be, &spec, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("create: %s", w.err.msg);
    spec.network = false; /* networkPolicy deny */
    spec.timeout_seconds = -1; /* no expiry: timeout omitted */
    CALL(be->ops->create(be, &spec, osb_wait_cb, &w, E));
    json_decref(env);
    json_decref(meta);
    CALL(be->ops->get(be, MOCK_SANDBOX, osb_wait_cb, &w, E));
    json_t *filter = json_pack("{s:s,s:{s:s,s:s}}", "state", "running", "metadata", "team",
                               "ml ops", "k&v", "a=b");
    CALL(be->ops->list(be, "local:uid:1", filter, osb_wait_cb, &w, E));
    json_decref(filter);
    CALL(be->ops->renew(be, MOCK_SANDBOX, 3600, osb_wait_cb, &w, E));
    CALL(be->ops->pause(be, MOCK_SANDBOX, osb_wait_cb, &w, E));
    CALL(be->ops->resume(be, MOCK_SANDBOX, osb_wait_cb, &w, E));
    CALL(be->ops->endpoint(be, MOCK_SANDBOX, 8080, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("endpoint: %s", w.err.msg);
}

static void obs_done(void *arg, json_t *res, const struct mcp_error *err)
{
    osb_wait_cb(arg, res, err);
}

TEST(execd_requests)
{
    json_t *env = json_pack("{s:s}", "PYTHONUNBUFFERED", "1");
    struct exec_request req = {.command = "echo hello", .cwd = "/tmp", .env = env,
                               .timeout_ms = 30000, .stdin_data = "x", .stdin_len = 1};
    struct exec_observer obs = {NULL, NULL, obs_done, &w};
    CALL(be->ops->exec(be, MOCK_SANDBOX, &req, &obs, NULL, E));
    json_decref(env);
    if (w.failed)
        TEST_FAIL("exec: %s", w.err.msg);
    ASSERT_STR_EQ(json_string_value(json_object_get(w.result, "status")), "exited");
    const char *cid = "2b1f0c8e9d7a4b3c8f1e2d3c4b5a6978";
    CALL(be->ops->command_kill(be, MOCK_SANDBOX, cid, 15, osb_wait_cb, &w, E));
    CALL(be->ops->command_get(be, MOCK_SANDBOX, "unknown-command", 0, 100, osb_wait_cb, &w, E));

    CALL(be->ops->file_write(be, MOCK_SANDBOX, "a.txt", "hello", 5, 0644, false, osb_wait_cb, &w,
                             E));
    if (w.failed)
        TEST_FAIL("upload: %s", w.err.msg);
    osb_wait_reset(&w);
    struct mcp_error e;
    ASSERT_EQ(be->ops->file_read(be, MOCK_SANDBOX, "a.txt", 1, 2, osb_read_cb, &w, &e), 0);
    osb_run_until(&loop, &w.done, 15000);
    no_violations("file_read");
    static const char *const ops[] = {
        "list", "{\"path\":\"/workspace\",\"depth\":2}",
        "search", "{\"path\":\"/workspace\",\"pattern\":\"*.py\"}",
        "replace", "{\"path\":\"c.yaml\",\"old\":\"localhost\",\"new\":\"0.0.0.0\"}",
        "move", "{\"source\":\"a\",\"destination\":\"b\",\"overwrite\":true}",
        "mkdir", "{\"path\":\"d\",\"mode\":\"0750\"}",
        "delete", "{\"path\":\"d\",\"recursive\":true}",
        "stat", "{\"path\":\"d\"}",
        "chmod", "{\"path\":\"s.sh\",\"mode\":\"755\"}",
    };
    for (size_t i = 0; i < ARRAY_SIZE(ops); i += 2) {
        json_t *args = json_loads(ops[i + 1], 0, NULL);
        CALL(be->ops->file_op(be, MOCK_SANDBOX, ops[i], args, osb_wait_cb, &w, E));
        json_decref(args);
    }
    CALL(be->ops->destroy(be, MOCK_SANDBOX, osb_wait_cb, &w, E));
}

TEST(snapshot_requests)
{
    json_t *a = json_pack("{s:s,s:s}", "sandbox_id", MOCK_SANDBOX, "name", "checkpoint");
    CALL(be->ops->snapshot(be, "local:uid:1", "create", a, osb_wait_cb, &w, E));
    json_decref(a);
    if (w.failed)
        TEST_FAIL("snapshot create: %s", w.err.msg);
    char snap[160];
    snprintf(snap, sizeof(snap), "%s", json_string_value(json_object_get(w.result, "snapshot_id")));
    a = json_pack("{s:s}", "sandbox_id", MOCK_SANDBOX); /* unnamed: body {} */
    CALL(be->ops->snapshot(be, "local:uid:1", "create", a, osb_wait_cb, &w, E));
    json_decref(a);
    a = json_pack("{s:s,s:s}", "sandbox_id", MOCK_SANDBOX, "state", "ready");
    CALL(be->ops->snapshot(be, "local:uid:1", "list", a, osb_wait_cb, &w, E));
    json_decref(a);
    if (w.failed)
        TEST_FAIL("snapshot list: %s", w.err.msg);
    a = json_pack("{s:s}", "snapshot_id", snap);
    CALL(be->ops->snapshot(be, "local:uid:1", "delete", a, osb_wait_cb, &w, E));
    json_decref(a);
    struct sandbox_spec spec = {.owner = "local:uid:1", .snapshot_id = snap, .cpu = 0.5,
                                .memory_bytes = 256u << 20, .timeout_seconds = 600};
    CALL(be->ops->create(be, &spec, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("restore: %s", w.err.msg);
}

TEST(metrics_and_code_requests)
{
    CALL(be->ops->metrics(be, MOCK_SANDBOX, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("metrics: %s", w.err.msg);
    struct code_request req = {.code = "print('hi')\n2+2", .language = "python",
                               .timeout_ms = 30000};
    struct exec_observer obs = {NULL, NULL, obs_done, &w};
    CALL(be->ops->code_run(be, MOCK_SANDBOX, &req, &obs, E)); /* list, create?, run */
    req.context_id = "session-abc123";
    CALL(be->ops->code_run(be, MOCK_SANDBOX, &req, &obs, E));
    json_t *a = json_pack("{s:s}", "language", "python");
    CALL(be->ops->code_context(be, MOCK_SANDBOX, "create", a, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("code context create: %s", w.err.msg);
    CALL(be->ops->code_context(be, MOCK_SANDBOX, "list", a, osb_wait_cb, &w, E));
    json_decref(a);
    if (w.failed)
        TEST_FAIL("code contexts: %s", w.err.msg);
    a = json_pack("{s:s}", "context_id", "session-abc123");
    CALL(be->ops->code_context(be, MOCK_SANDBOX, "interrupt", a, osb_wait_cb, &w, E));
    CALL(be->ops->code_context(be, MOCK_SANDBOX, "delete", a, osb_wait_cb, &w, E));
    json_decref(a);
}

static struct egress_policy *policy_of(const char *text)
{
    struct mcp_error err;
    json_t *j = json_loads(text, 0, NULL);
    struct egress_policy *p = egress_policy_parse(j, "network_policy", &err);
    json_decref(j);
    if (p == NULL)
        TEST_FAIL("policy: %s", err.msg);
    return p;
}

/* How often Prism's log (run_dir/execd.log) shows a request "method path" it received (it
 * writes "[HTTP SERVER] patch /policy ... Request received"; method in lower case). */
static int mock_requests(const char *method, const char *path)
{
    char file[256], line[1024], needle[128];
    snprintf(file, sizeof(file), "%s/execd.log", run_dir);
    snprintf(needle, sizeof(needle), "%s %s ", method, path);
    FILE *f = fopen(file, "r");
    int n = 0;
    for (char *c = needle; *c != ' '; c++)
        *c = (char)tolower((unsigned char)*c);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, needle) != NULL && strstr(line, "Request received") != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

/* network_policy: networkPolicy at create; set_network_policy through the sidecar's /policy
 * (the endpoint for 18080, GET, PATCH with the new rules, DELETE of the targets they drop). */
TEST(egress_policy_requests)
{
    struct egress_policy *p = policy_of(
        "{\"default_action\":\"deny\",\"egress\":[{\"action\":\"allow\","
        "\"target\":\"*.pythonhosted.org\"},{\"action\":\"deny\",\"target\":\"Bad.Example.\"}]}");
    struct sandbox_spec spec = {.owner = "local:uid:1", .image = "python:3.11",
                                .network_policy = p};
    CALL(be->ops->create(be, &spec, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("create: %s", w.err.msg);
    json_t *body = osb_network_policy_body(p, &(struct mcp_error){0});
    char *s = json_dumps(body, JSON_COMPACT);
    ASSERT_STR_EQ(s, "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
                     "\"target\":\"*.pythonhosted.org\"},{\"action\":\"deny\","
                     "\"target\":\"bad.example\"}]}");
    free(s);
    json_decref(body);

    int patches = mock_requests("PATCH", "/policy"), deletes = mock_requests("DELETE", "/policy");
    CALL(be->ops->set_network_policy(be, MOCK_SANDBOX, p, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("set_network_policy: %s", w.err.msg);
    ASSERT_STR_EQ(json_string_value(json_object_get(w.result, "sandbox_id")), MOCK_SANDBOX);
    ASSERT_EQ(mock_requests("PATCH", "/policy"), patches + 1);
    ASSERT_EQ(mock_requests("DELETE", "/policy"), deletes + 1); /* pypi.org, the mock's rule */
    egress_policy_unref(p);

    /* only deny by default and no rules: nothing to PATCH, pypi.org to DELETE */
    p = policy_of("{}");
    CALL(be->ops->set_network_policy(be, MOCK_SANDBOX, p, osb_wait_cb, &w, E));
    if (w.failed)
        TEST_FAIL("set_network_policy {}: %s", w.err.msg);
    ASSERT_EQ(mock_requests("PATCH", "/policy"), patches + 1);
    ASSERT_EQ(mock_requests("DELETE", "/policy"), deletes + 2);
    egress_policy_unref(p);

    /* ports: refused before any request, naming the rule */
    p = policy_of("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\"},"
                  "{\"action\":\"allow\",\"target\":\"b.org\",\"ports\":[443]}]}");
    struct mcp_error err;
    spec.network_policy = p;
    ASSERT_EQ(be->ops->create(be, &spec, osb_wait_cb, &w, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "network_policy.egress[1] limits ports");
    ASSERT_EQ(be->ops->set_network_policy(be, MOCK_SANDBOX, p, osb_wait_cb, &w, &err), -1);
    ASSERT_CONTAINS(err.msg, "network_policy.egress[1] limits ports");
    egress_policy_unref(p);
}

/* The launcher's own messages (what is missing) go to stderr, which ctest shows. */
static int prism(const char *verb, int lp, int ep)
{
    char cmd[8192];
    if (strcmp(verb, "start") == 0)
        snprintf(cmd, sizeof(cmd), "python3 %s start %s %d %d >/dev/null", script, run_dir, lp,
                 ep);
    else
        snprintf(cmd, sizeof(cmd), "python3 %s stop %s", script, run_dir);
    return system(cmd);
}

int main(void)
{
    xalloc_install();
    snprintf(script, sizeof(script), "%s/tests/opensandbox/prism_mocks.py", MCPBOX_SOURCE_DIR);
    int lp = osb_free_port(), ep = osb_free_port();
    if (mkdtemp(run_dir) == NULL || lp <= 0 || ep <= 0 || prism("start", lp, ep) != 0) {
        printf("Bail out! the Prism mocks did not start (see above; "
               "scripts/install-deps.sh --test installs Prism and PyYAML)\n");
        prism("stop", 0, 0);
        return 1;
    }
    uv_loop_init(&loop);
    char domain[64];
    snprintf(domain, sizeof(domain), "127.0.0.1:%d", lp);
    struct opensandbox_options opts = {.domain = domain, .api_key = "contract-key",
                                       .request_timeout_s = 10};
    struct opensandbox_tuning t;
    opensandbox_tuning_default(&t, &opts);
    t.retry_max = 0;
    struct mcp_error err;
    be = opensandbox_backend_new_tuned(&loop, NULL, &opts, &t, &err);
    RUN(violations_are_detected);
    RUN(lifecycle_requests);
    RUN(execd_requests);
    RUN(snapshot_requests);
    RUN(metrics_and_code_requests);
    RUN(egress_policy_requests);
    osb_wait_reset(&w);
    opensandbox_backend_free(be);
    uv_run(&loop, UV_RUN_NOWAIT);
    prism("stop", 0, 0);
    if (rmtree(run_dir) < 0)
        printf("# could not remove %s\n", run_dir);
    uv_loop_close(&loop);
    return test_done();
}
