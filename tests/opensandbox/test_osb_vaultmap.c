/* Secrets on the opensandbox backend (issue 37) against Prism mocks of the official specs
 * (prism_mocks.py): the create with credentialProxy, the sidecar's POST, GET and PATCH
 * /credential-vault as egress-api.yaml has them (Prism flags any request that breaks the spec
 * with `sl-violations`; none of ours may get one), and a server whose sidecar has no vault
 * (the same mocks without those routes: Prism answers 404): the create fails naming what the
 * server lacks, and the sandbox it made is deleted. Fails, saying what to install, without
 * Prism or PyYAML (scripts/install-deps.sh --test installs both). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "backend/opensandbox/opensandbox.h"
#include "backend/opensandbox/osb.h"
#include "backend/secrets.h"
#include "lib/base/cleanup.h"
#include "lib/base/rmtree.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "osb_support.h"
#include "test.h"

#define MOCK_SANDBOX "osb-sbx-0123456789" /* the mock spec's example id */
#define VALUE "vaultmap-contract-value-5f1c"

static uv_loop_t loop;
static struct backend *be;
static struct store *st;
static struct osb_wait w;
static char script[4096], run_dir[] = "/tmp/osb-vaultmap-XXXXXX", state[4200];

/* How often Prism's log (run_dir/NAME.log) shows a request "method path" it received. */
static int mock_requests(const char *name, const char *method, const char *path)
{
    char file[4400], line[1024], needle[160];
    snprintf(file, sizeof(file), "%s/%s.log", run_dir, name);
    snprintf(needle, sizeof(needle), "%s %s ", method, path);
    for (char *c = needle; *c != ' '; c++)
        *c = (char)tolower((unsigned char)*c);
    FILE *f = fopen(file, "r");
    int n = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, needle) != NULL && strstr(line, "Request received") != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

static int prism(const char *verb, int lp, int ep, bool vault)
{
    char cmd[8192];
    if (strcmp(verb, "start") == 0)
        snprintf(cmd, sizeof(cmd), "python3 %s start %s %d %d%s >/dev/null", script, run_dir, lp,
                 ep, vault ? " --vault" : "");
    else
        snprintf(cmd, sizeof(cmd), "python3 %s stop %s", script, run_dir);
    return system(cmd);
}

static void run(int (*call)(struct mcp_error *e), const char *what)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (call(&e) != 0)
        TEST_FAIL("%s refused: %s", what, e.msg);
    if (!osb_run_until(&loop, &w.done, 30000))
        TEST_FAIL("%s: no callback", what);
    struct osb_backend *b = osb_of(be);
    if (b->contract_violations != 0)
        TEST_FAIL("%s: %u request(s) violated the spec; last: %s", what, b->contract_violations,
                  b->last_violation);
}

static json_t *names_of(const char *a, const char *b, const char *c)
{
    json_t *n = json_pack("[s]", a);
    if (b)
        json_array_append_new(n, json_string(b));
    if (c)
        json_array_append_new(n, json_string(c));
    return n;
}

static json_t *bound_names;

static int create_call(struct mcp_error *e)
{
    struct sandbox_spec spec = {.owner = "local:uid:1",
                                .image = "python:3.11",
                                .timeout_seconds = 600,
                                .secrets = bound_names};
    return be->ops->create(be, &spec, osb_wait_cb, &w, e);
}

static int bind_call(struct mcp_error *e)
{
    return be->ops->bind_secrets(be, MOCK_SANDBOX, bound_names, osb_wait_cb, &w, e);
}

static int destroy_call(struct mcp_error *e)
{
    return be->ops->destroy(be, MOCK_SANDBOX, osb_wait_cb, &w, e);
}

/* bearer, apiKey and a custom template at create; then a PATCH of the vault. */
TEST(vault_requests_follow_the_spec)
{
    int posts = mock_requests("execd", "POST", "/credential-vault");
    bound_names = names_of("tok", "key", NULL);
    run(create_call, "create with secrets");
    json_decref(bound_names);
    if (w.failed)
        TEST_FAIL("create with secrets: %s", w.err.msg);
    ASSERT_EQ(mock_requests("execd", "POST", "/credential-vault"), posts + 1);
    int patches = mock_requests("execd", "PATCH", "/credential-vault");
    bound_names = names_of("tok", "cust", NULL);
    run(bind_call, "bind_secrets");
    json_decref(bound_names);
    if (w.failed)
        TEST_FAIL("bind_secrets: %s", w.err.msg);
    ASSERT_EQ(mock_requests("execd", "PATCH", "/credential-vault"), patches + 1);
    run(destroy_call, "destroy");
    if (w.failed)
        TEST_FAIL("destroy: %s", w.err.msg);
}

/* What the vault cannot express is refused before anything is made. */
TEST(placeholder_refused_before_create)
{
    int creates = mock_requests("lifecycle", "POST", "/v1/sandboxes");
    struct mcp_error e;
    bound_names = names_of("tok", "ph", NULL);
    struct sandbox_spec spec = {.owner = "local:uid:1", .secrets = bound_names};
    ASSERT_EQ(be->ops->create(be, &spec, osb_wait_cb, &w, &e), -1);
    json_decref(bound_names);
    ASSERT_CONTAINS(e.msg, "placeholder");
    bound_names = names_of("nope", NULL, NULL);
    spec.secrets = bound_names;
    ASSERT_EQ(be->ops->create(be, &spec, osb_wait_cb, &w, &e), -1);
    json_decref(bound_names);
    ASSERT_CONTAINS(e.msg, "cust, key, ph, tok");
    ASSERT_EQ(mock_requests("lifecycle", "POST", "/v1/sandboxes"), creates);
}

/* The sidecar without /credential-vault: the error names it, the sandbox is deleted. */
TEST(no_vault_named_and_sandbox_deleted)
{
    int deletes = mock_requests("lifecycle", "DELETE", "/v1/sandboxes/sbx-0123456789");
    bound_names = names_of("tok", NULL, NULL);
    run(create_call, "create with secrets, no vault");
    json_decref(bound_names);
    if (!w.failed)
        TEST_FAIL("a create with secrets succeeded on a server without a vault");
    ASSERT_CONTAINS(w.err.msg, "has no Credential Vault");
    ASSERT_CONTAINS(w.err.msg, "answered 404");
    ASSERT_CONTAINS(w.err.msg, "was destroyed");
    ASSERT(strstr(w.err.msg, VALUE) == NULL);
    ASSERT_EQ(mock_requests("lifecycle", "DELETE", "/v1/sandboxes/sbx-0123456789"), deletes + 1);
}

static void define_secrets(void)
{
    struct mcp_error e;
    json_t *defs = json_pack(
        "{s:{s:[s], s:s, s:{s:s}}, s:{s:[s], s:s, s:{s:s}}, s:{s:[s], s:s, s:{s:s}},"
        " s:{s:[s], s:b, s:{s:s}}}",
        "tok", "hosts", "api.example.com", "header", "Authorization: Bearer {}", "from", "value",
        VALUE, "key", "hosts", "*.example.org", "header", "X-Api-Key: {}", "from", "value", VALUE,
        "cust", "hosts", "api.example.com", "header", "X-Custom: tk-{}", "from", "value", VALUE,
        "ph", "hosts", "api.example.com", "placeholder", true, "from", "value", VALUE);
    if (secrets_save(state, defs, &e) != 0)
        TEST_FAIL("secrets_save: %s", e.msg);
    json_decref(defs);
}

static bool start(bool vault)
{
    int lp = osb_free_port(), ep = osb_free_port();
    if (lp <= 0 || ep <= 0 || prism("start", lp, ep, vault) != 0) {
        printf("Bail out! the Prism mocks did not start (see above; "
               "scripts/install-deps.sh --test installs Prism and PyYAML)\n");
        return false;
    }
    char domain[64];
    snprintf(domain, sizeof(domain), "127.0.0.1:%d", lp);
    struct opensandbox_options opts = {
        .domain = domain, .api_key = "contract-key", .request_timeout_s = 10};
    struct opensandbox_tuning t;
    opensandbox_tuning_default(&t, &opts);
    t.retry_max = 0;
    struct mcp_error err;
    be = opensandbox_backend_new_tuned(&loop, st, &opts, &t, &err);
    return be != NULL;
}

static void stop(void)
{
    osb_wait_reset(&w);
    opensandbox_backend_free(be);
    uv_run(&loop, UV_RUN_NOWAIT);
    prism("stop", 0, 0, false);
}

int main(void)
{
    xalloc_install();
    snprintf(script, sizeof(script), "%s/tests/opensandbox/prism_mocks.py", MCPBOX_SOURCE_DIR);
    struct mcp_error e;
    if (mkdtemp(run_dir) == NULL)
        return 1;
    snprintf(state, sizeof state, "%s/state", run_dir);
    uv_loop_init(&loop);
    if ((st = store_open(state, &e)) == NULL) {
        printf("Bail out! store_open: %s\n", e.msg);
        return 1;
    }
    define_secrets();
    if (!start(true))
        return prism("stop", 0, 0, false), 1;
    RUN(vault_requests_follow_the_spec);
    RUN(placeholder_refused_before_create);
    stop();
    if (!start(false))
        return prism("stop", 0, 0, false), 1;
    RUN(no_vault_named_and_sandbox_deleted);
    stop();
    store_close(st);
    if (rmtree(run_dir) < 0)
        printf("# could not remove %s\n", run_dir);
    uv_loop_close(&loop);
    return test_done();
}
