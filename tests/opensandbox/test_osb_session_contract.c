/* Contract test for MCP sessions on execd's bash sessions (issue 35; backend/opensandbox/
 * session.c): the backend's POST /session, POST /session/{id}/run and DELETE /session/{id}
 * against Prism mocks of the official execd spec (prism_mocks.py). Prism flags a request that
 * breaks the spec with `sl-violations`; none of ours may get one. The mock's stream is a static
 * example without the session's end marker, so the run must also say that the cwd is unknown. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "backend/opensandbox/opensandbox.h"
#include "backend/opensandbox/osb.h"
#include "backend/shell_session_proc.h"
#include "lib/base/rmtree.h"
#include "lib/base/xalloc.h"
#include "osb_support.h"
#include "test.h"

#define MOCK_SANDBOX "osb-sbx-0123456789" /* the mock spec's example id */

static uv_loop_t loop;
static struct backend *be;
static struct osb_wait w;
static char script[4096], run_dir[] = "/tmp/osb-sess-prism-XXXXXX";
static char started_id[256];

static void no_violations(const char *what)
{
    struct osb_backend *b = osb_of(be);
    if (b->contract_violations != 0)
        TEST_FAIL("%s: %u request(s) violated the spec; last: %s", what, b->contract_violations,
                  b->last_violation);
}

static void on_started(void *arg, const char *command_id)
{
    snprintf(started_id, sizeof started_id, "%s", command_id);
}

/* One session command; the run's result in w, how it went in *res. */
static void session_command(const struct shell_session_request *req,
                            struct shell_session_result *res)
{
    struct exec_observer obs = {on_started, NULL, osb_wait_cb, &w};
    struct mcp_error err;
    osb_wait_reset(&w);
    if (be->ops->session_run(be, MOCK_SANDBOX, req, &obs, res, NULL, &err) != 0)
        TEST_FAIL("session_run refused: %s", err.msg);
    if (!osb_run_until(&loop, &w.done, 15000))
        TEST_FAIL("session_run: no callback");
    no_violations("session_run");
    if (w.failed)
        TEST_FAIL("session_run: %s", w.err.msg);
}

TEST(session_requests)
{
    json_t *env = json_pack("{s:s}", "A", "it's");
    struct shell_session_request req = {.name = "main",
                                        .command = "echo \"Hello\"",
                                        .cwd = "/tmp",
                                        .env = env,
                                        .stdin_data = "x",
                                        .stdin_len = 1,
                                        .timeout_s = 30};
    struct shell_session_result res;
    session_command(&req, &res); /* POST /session, then /session/{id}/run */
    ASSERT_STR_EQ(json_string_value(json_object_get(w.result, "status")), "exited");
    ASSERT_EQ(res.kind, SHELL_SESSION_NONE); /* the mock's stream has no end marker */
    ASSERT(res.note != NULL && strstr(res.note, "cwd unknown") != NULL);
    ASSERT(strncmp(started_id, "session-abc123#", 15) == 0);
    req = (struct shell_session_request){.name = "main", .command = "true"};
    session_command(&req, &res); /* the recorded session: only the run */
    json_decref(env);

    struct mcp_error err;
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->command_kill(be, MOCK_SANDBOX, started_id, 15, osb_wait_cb, &w, &err), 0);
    osb_run_until(&loop, &w.done, 15000);
    no_violations("command_kill (DELETE /session/{id})");
    ASSERT(!w.failed);
    ASSERT_STR_EQ(json_string_value(json_object_get(w.result, "status")), "killed");
}

TEST(bad_input_refused_before_any_request)
{
    struct exec_observer obs = {NULL, NULL, osb_wait_cb, &w};
    struct shell_session_result res;
    struct mcp_error err;
    struct shell_session_request req = {.name = "../x", .command = "true"};
    ASSERT_EQ(be->ops->session_run(be, MOCK_SANDBOX, &req, &obs, &res, NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "session: use a name");
    char *big = xmalloc(SHELL_SESSION_COMMAND_MAX + 2);
    memset(big, 'x', SHELL_SESSION_COMMAND_MAX + 1);
    big[SHELL_SESSION_COMMAND_MAX + 1] = '\0';
    req = (struct shell_session_request){.name = "big", .command = big};
    ASSERT_EQ(be->ops->session_run(be, MOCK_SANDBOX, &req, &obs, &res, NULL, &err), -1);
    ASSERT_CONTAINS(err.msg, "at most 64 KiB");
    free(big);
    ASSERT_EQ(be->ops->command_get(be, MOCK_SANDBOX, "gone#00000000", 0, 10, osb_wait_cb, &w, &err),
              -1);
    ASSERT_CONTAINS(err.msg, "execd keeps no output");
}

static int prism(const char *verb, int lp, int ep)
{
    char cmd[8192];
    if (strcmp(verb, "start") == 0)
        snprintf(cmd, sizeof(cmd), "python3 %s start %s %d %d >/dev/null", script, run_dir, lp, ep);
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
    struct opensandbox_options opts = {
        .domain = domain, .api_key = "contract-key", .request_timeout_s = 10};
    struct opensandbox_tuning t;
    opensandbox_tuning_default(&t, &opts);
    t.retry_max = 0;
    struct mcp_error err;
    be = opensandbox_backend_new_tuned(&loop, NULL, &opts, &t, &err);
    RUN(session_requests);
    RUN(bad_input_refused_before_any_request);
    osb_wait_reset(&w);
    opensandbox_backend_free(be);
    uv_run(&loop, UV_RUN_NOWAIT);
    prism("stop", 0, 0);
    if (rmtree(run_dir) < 0)
        printf("# could not remove %s\n", run_dir);
    uv_loop_close(&loop);
    return test_done();
}
