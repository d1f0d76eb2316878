/* The OpenSandbox backend against the project's fake server (tests/opensandbox/fake-server.mjs)
 * on a real uv loop: every vtable operation, the quirks of the wire protocol, and every fault
 * (500, 429 + Retry-After, a stream cut mid-command, accept-and-never-answer, slow trickle,
 * malformed JSON, refused connections) ending in a clear error within its deadline. Run under
 * ASan, this also checks that nothing leaks. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "backend/opensandbox/opensandbox.h"
#include "backend/opensandbox/osb.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "osb_support.h"
#include "test.h"
#include "lib/base/rmtree.h"

#define API_KEY "osb-test-key-0123456789"
#define OWNER "local:uid:1000"
#define REQUEST_TIMEOUT_MS 1500
#define STREAM_IDLE_S 2
#define SLACK_MS 1500
#define FAKE_GRACE_MS 3000 /* how long the fake holds a stream open after the final event */
#define CURL_SPEED_WINDOW_S 5 /* libcurl's current-speed window */ /* scheduling slack on a loaded 2-core machine */

static struct fake_server fs;
static uv_loop_t loop;
static struct store *store;
static struct backend *be;
static char state_dir[] = "/tmp/osb-test-XXXXXX";
static char domain[64];
static char sid[160]; /* the sandbox most tests use */

static struct opensandbox_options test_options(const char *key, bool proxy)
{
    return (struct opensandbox_options){.domain = domain, .api_key = key, .protocol = "http",
                                        .request_timeout_s = 2, .use_server_proxy = proxy};
}

static struct opensandbox_tuning test_tuning(void)
{
    struct opensandbox_tuning t;
    opensandbox_tuning_default(&t, NULL);
    t.request_timeout_ms = REQUEST_TIMEOUT_MS;
    t.connect_timeout_ms = 1000;
    t.stream_idle_s = STREAM_IDLE_S;
    t.ready_timeout_ms = 4000;
    t.state_poll_ms = 50;
    t.ping_poll_ms = 50;
    t.retry_max = 3;
    t.retry_base_ms = 50;
    t.retry_cap_ms = 400;
    return t;
}

static struct backend *new_backend(const char *key, bool proxy)
{
    struct opensandbox_options opts = test_options(key, proxy);
    struct opensandbox_tuning t = test_tuning();
    struct mcp_error e;
    struct backend *b = opensandbox_backend_new_tuned(&loop, store, &opts, &t, &e);
    if (b == NULL)
        printf("# %s\n", e.msg);
    return b;
}

static void free_backend(struct backend *b)
{
    opensandbox_backend_free(b);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_run(&loop, UV_RUN_NOWAIT);
}

/* Runs one operation to completion (asserting it started and called back in time). */
#define WAIT(w, limit_ms)                                                                          \
    do {                                                                                           \
        if (!osb_run_until(&loop, &(w)->done, (limit_ms)))                                         \
            TEST_FAIL("no callback within %d ms", (int)(limit_ms));                                \
    } while (0)

#define EXPECT_OK(w)                                                                               \
    do {                                                                                           \
        if ((w)->failed)                                                                           \
            TEST_FAIL("unexpected error: %s", (w)->err.msg);                                       \
    } while (0)

#define EXPECT_ERR(w, code_)                                                                       \
    do {                                                                                           \
        if (!(w)->failed)                                                                          \
            TEST_FAIL("expected an error, got success");                                           \
        if ((w)->err.code != (code_))                                                              \
            TEST_FAIL("error code %d (%s), want %d", (w)->err.code, (w)->err.msg, (code_));        \
    } while (0)

static const char *jstr(json_t *j, const char *k)
{
    return json_string_value(json_object_get(j, k));
}

static int64_t jint(json_t *j, const char *k)
{
    return json_integer_value(json_object_get(j, k));
}

/* Requests the fake saw whose "METHOD url" contains needle. */
static int count_requests(const char *needle)
{
    json_t *log = fake_control(&fs, "GET", "/_log", NULL);
    size_t i;
    json_t *r;
    int n = 0;
    json_array_foreach(log, i, r) {
        char line[2048];
        snprintf(line, sizeof(line), "%s %s", jstr(r, "method"), jstr(r, "url"));
        if (strstr(line, needle))
            n++;
    }
    json_decref(log);
    return n;
}

static struct osb_wait w;

static void create_sandbox(struct backend *b, const char *image, json_t *env)
{
    struct sandbox_spec spec = {.owner = OWNER, .image = image, .cpu = 0.5,
                                .memory_bytes = 512u << 20, .network = true, .env = env};
    struct mcp_error e;
    osb_wait_reset(&w);
    if (b->ops->create(b, &spec, osb_wait_cb, &w, &e) != 0)
        TEST_FAIL("create refused: %s", e.msg);
    WAIT(&w, 8000);
}

/* ---- lifecycle --------------------------------------------------------------------------------- */

TEST(create_get_list)
{
    json_t *env = json_pack("{s:s}", "GREETING", "hello");
    create_sandbox(be, "ubuntu:24.04", env);
    json_decref(env);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "state"), "running");
    ASSERT_STR_EQ(jstr(w.result, "backend"), "opensandbox");
    ASSERT(strncmp(jstr(w.result, "sandbox_id"), "osb-", 4) == 0);
    ASSERT(json_is_string(json_object_get(w.result, "expires_at")));
    json_t *lim = json_object_get(w.result, "limits");
    ASSERT_EQ(jint(lim, "memory_bytes"), 512 << 20);
    snprintf(sid, sizeof(sid), "%s", jstr(w.result, "sandbox_id"));
    /* recorded in the store with its owner */
    struct store_sandbox sb = {0};
    struct mcp_error e;
    ASSERT_EQ(store_sandbox_get(store, sid, &sb, &e), 0);
    ASSERT_STR_EQ(sb.owner, OWNER);
    ASSERT_STR_EQ(sb.state, "running");
    store_sandbox_release(&sb);
    /* create sent image, entrypoint, string limits, timeout, metadata owner label */
    json_t *log = fake_control(&fs, "GET", "/_log", NULL);
    json_t *first = json_array_get(log, 0);
    ASSERT_STR_EQ(jstr(first, "method"), "POST");
    ASSERT_STR_EQ(jstr(json_object_get(first, "headers"), "open-sandbox-api-key"), API_KEY);
    ASSERT_STR_EQ(jstr(json_object_get(first, "headers"), "content-type"), "application/json");
    json_decref(log);

    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->get(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "state"), "running");
    ASSERT_STR_EQ(jstr(w.result, "image"), "ubuntu:24.04");

    /* list: mine only, with state and metadata filters */
    struct sandbox_spec other = {.owner = "someone-else", .image = "alpine", .network = false};
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->create(be, &other, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 8000);
    EXPECT_OK(&w);
    ASSERT_EQ(json_is_false(json_object_get(w.result, "network")), 1);
    char other_id[160];
    snprintf(other_id, sizeof(other_id), "%s", jstr(w.result, "sandbox_id"));
    json_t *filter = json_pack("{s:s}", "state", "running");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->list(be, OWNER, filter, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    json_t *items = json_object_get(w.result, "sandboxes");
    ASSERT_EQ(json_array_size(items), 1);
    ASSERT_STR_EQ(jstr(json_array_get(items, 0), "sandbox_id"), sid);
    json_object_set_new(filter, "state", json_string("paused"));
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->list(be, OWNER, filter, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    ASSERT_EQ(json_array_size(json_object_get(w.result, "sandboxes")), 0);
    json_decref(filter);
    ASSERT(count_requests("metadata=mcpbox-owner%3D") >= 2);
    /* pagination: pages of one sandbox each, followed to the end */
    json_decref(fake_control(&fs, "POST", "/_config", "{\"pageMax\":1}"));
    struct sandbox_spec mine = {.owner = OWNER, .image = "alpine", .network = true};
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->create(be, &mine, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 8000);
    EXPECT_OK(&w);
    char second[160];
    snprintf(second, sizeof(second), "%s", jstr(w.result, "sandbox_id"));
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->list(be, OWNER, NULL, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_EQ(json_array_size(json_object_get(w.result, "sandboxes")), 2);
    ASSERT(count_requests("&page=2&") >= 1);
    json_decref(fake_control(&fs, "POST", "/_config", "{\"pageMax\":0}"));
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->destroy(be, second, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->destroy(be, other_id, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
}

TEST(renew_pause_resume_endpoint_diagnose)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->renew(be, sid, 7200, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    int64_t exp;
    ASSERT_EQ(parse_rfc3339_ms(jstr(w.result, "expires_at"), &exp), 0);
    ASSERT(exp > now_wall_ms() + 7000 * 1000LL);

    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->pause(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "state"), "paused");
    osb_wait_reset(&w); /* pausing twice: a conflict that says what to do */
    ASSERT_EQ(be->ops->pause(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(w.err.msg, "update_sandbox with paused: false");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->resume(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 6000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "state"), "running");

    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->endpoint(be, sid, 8080, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_CONTAINS(jstr(w.result, "url"), "http://127.0.0.1:");
    ASSERT_CONTAINS(jstr(w.result, "url"), "/proxy/8080");

    static const char *const whats[] = {"summary", "logs", "events", "inspect"};
    for (size_t i = 0; i < 4; i++) {
        osb_wait_reset(&w);
        ASSERT_EQ(be->ops->diagnose(be, sid, whats[i], osb_wait_cb, &w, &e), 0);
        WAIT(&w, 3000);
        EXPECT_OK(&w);
        ASSERT(strlen(jstr(w.result, "content")) > 0);
        ASSERT_STR_EQ(jstr(w.result, "state"), "running");
    }
    ASSERT(count_requests("diagnostics/logs?scope=all") == 1); /* 501 -> legacy text */
    ASSERT(count_requests("diagnostics/logs?tail=") == 1);
}

/* ---- commands ---------------------------------------------------------------------------------- */

struct run {
    struct osb_wait done;
    struct buf out, err;
    char id[64];
    int chunks;
};

static void on_started(void *arg, const char *id)
{
    snprintf(((struct run *)arg)->id, 64, "%s", id);
}

static void on_output(void *arg, enum exec_stream s, const char *data, size_t len)
{
    struct run *r = arg;
    buf_append(s == EXEC_STDOUT ? &r->out : &r->err, data, len);
    r->chunks++;
}

static void on_done(void *arg, json_t *res, const struct mcp_error *err)
{
    osb_wait_cb(&((struct run *)arg)->done, res, err);
}

static struct exec_handle *run_start(struct run *r, const struct exec_request *req)
{
    memset(r, 0, sizeof(*r));
    osb_wait_reset(&r->done);
    buf_init(&r->out, 1 << 24);
    buf_init(&r->err, 1 << 24);
    struct exec_observer obs = {on_started, on_output, on_done, r};
    struct exec_handle *h = NULL;
    struct mcp_error e;
    if (be->ops->exec(be, sid, req, &obs, &h, &e) != 0)
        printf("# exec refused: %s\n", e.msg);
    return h;
}

static void run_release(struct run *r)
{
    buf_release(&r->out);
    buf_release(&r->err);
    osb_wait_reset(&r->done);
}

TEST(exec_streams_and_exit_codes)
{
    struct run r;
    struct exec_request req = {.command = "echo one; echo; echo two >&2; printf 'no-newline'"};
    ASSERT(run_start(&r, &req) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "exited");
    ASSERT_EQ(jint(r.done.result, "exit_code"), 0);
    ASSERT_STR_EQ(buf_cstr(&r.out), "one\n\nno-newline\n");
    ASSERT_STR_EQ(buf_cstr(&r.err), "two\n");
    ASSERT_EQ(strlen(r.id), 32);
    ASSERT_STR_EQ(jstr(r.done.result, "command_id"), r.id);
    /* reported at the final event, not when execd closes the stream after its grace period */
    ASSERT(r.done.elapsed_ms < FAKE_GRACE_MS - 500);
    run_release(&r);

    struct exec_request fail = {.command = "echo oops >&2; exit 3"};
    ASSERT(run_start(&r, &fail) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_EQ(jint(r.done.result, "exit_code"), 3);
    ASSERT_STR_EQ(buf_cstr(&r.err), "oops\n");
    run_release(&r);

    /* env, cwd, stdin; the API key is nowhere in the sandbox's environment */
    json_t *env = json_pack("{s:s}", "EXTRA", "x1");
    struct exec_request io = {.command = "mkdir -p sub && cd sub && pwd >/dev/null; "
                                         "echo $GREETING $EXTRA; tr a-z A-Z; env",
                              .env = env, .stdin_data = "piped input\n", .stdin_len = 12};
    ASSERT(run_start(&r, &io) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_CONTAINS(buf_cstr(&r.out), "hello x1\nPIPED INPUT\n");
    ASSERT(strstr(buf_cstr(&r.out), API_KEY) == NULL);
    json_decref(env);
    run_release(&r);
    json_t *log = fake_control(&fs, "GET", "/_log", NULL);
    size_t i;
    json_t *q;
    json_array_foreach(log, i, q) { /* execd never receives the lifecycle API key */
        if (strstr(jstr(q, "url"), "/proxy/44772"))
            ASSERT(json_object_get(json_object_get(q, "headers"), "open-sandbox-api-key") == NULL);
    }
    json_decref(log);

    struct exec_request badcwd = {.command = "true", .cwd = "/does/not/exist"};
    ASSERT(run_start(&r, &badcwd) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_ERR(&r.done, MCP_ERR_INVALID);
    ASSERT_CONTAINS(r.done.err.msg, "working directory does not exist");
    run_release(&r);
}

TEST(exec_timeout_kill_detach_get)
{
    struct run r;
    struct mcp_error e;
    struct exec_request slow = {.command = "echo start; sleep 5", .timeout_ms = 400};
    ASSERT(run_start(&r, &slow) != NULL);
    WAIT(&r.done, 4000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "timed_out");
    ASSERT(json_is_null(json_object_get(r.done.result, "exit_code")));
    run_release(&r);

    struct exec_request longrun = {.command = "echo begin; sleep 30"};
    ASSERT(run_start(&r, &longrun) != NULL);
    while (r.id[0] == '\0' || r.out.len == 0)
        uv_run(&loop, UV_RUN_ONCE);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->command_kill(be, sid, r.id, 15, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "status"), "killed");
    WAIT(&r.done, 6000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "killed");
    ASSERT_EQ(jint(r.done.result, "signal"), 15);
    run_release(&r);

    /* detach: the command goes on; command_get serves its output by offset */
    struct exec_request bg = {.command = "for i in 1 2 3; do echo line$i; sleep 0.2; done"};
    struct exec_handle *h = run_start(&r, &bg);
    ASSERT(h != NULL);
    while (r.id[0] == '\0')
        uv_run(&loop, UV_RUN_ONCE);
    char id[64];
    snprintf(id, sizeof(id), "%s", r.id);
    be->ops->exec_detach(h);
    uint64_t deadline = now_mono_ms() + 5000;
    json_t *page = NULL;
    while (now_mono_ms() < deadline) {
        osb_wait_reset(&w);
        ASSERT_EQ(be->ops->command_get(be, sid, id, 0, 1 << 20, osb_wait_cb, &w, &e), 0);
        WAIT(&w, 3000);
        EXPECT_OK(&w);
        if (json_is_true(json_object_get(w.result, "eof"))) {
            page = json_incref(w.result);
            break;
        }
        uv_sleep(50);
    }
    ASSERT(page != NULL);
    ASSERT_STR_EQ(jstr(page, "output"), "line1\nline2\nline3\n");
    ASSERT_STR_EQ(jstr(page, "status"), "exited");
    ASSERT_EQ(jint(page, "total_bytes"), 18);
    json_decref(page);
    ASSERT_EQ(r.done.done, false); /* no observer callback after detach */
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->command_get(be, sid, id, 6, 6, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    ASSERT_STR_EQ(jstr(w.result, "output"), "line2\n");
    ASSERT_EQ(jint(w.result, "next_offset"), 12);
    run_release(&r);

    osb_wait_reset(&w); /* unknown here and to execd */
    ASSERT_EQ(be->ops->command_get(be, sid, "0123456789abcdef", 0, 100, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);
}

/* A command this process never watched (execd background, as another client would start it):
 * status and output come from execd, the output by byte cursor. */
TEST(command_get_from_execd)
{
    struct buf raw;
    buf_init(&raw, 1 << 20);
    char path[256];
    snprintf(path, sizeof(path), "/direct/%s/proxy/44772/command", sid + 4);
    fake_raw(&fs, "POST", path,
             "{\"command\":\"echo x; echo yy\",\"background\":true,\"cwd\":\"/workspace\"}",
             &raw);
    json_t *init = json_loadb(buf_cstr(&raw), strcspn(buf_cstr(&raw), "\n"), 0, NULL);
    buf_release(&raw);
    ASSERT(init != NULL);
    char id[64];
    snprintf(id, sizeof(id), "%s", jstr(init, "text"));
    json_decref(init);
    struct backend *fresh = new_backend(API_KEY, false);
    struct mcp_error e;
    uint64_t deadline = now_mono_ms() + 5000;
    do {
        osb_wait_reset(&w);
        ASSERT_EQ(fresh->ops->command_get(fresh, sid, id, 0, 100, osb_wait_cb, &w, &e), 0);
        WAIT(&w, 3000);
        EXPECT_OK(&w);
    } while (!json_is_true(json_object_get(w.result, "eof")) && now_mono_ms() < deadline);
    ASSERT_STR_EQ(jstr(w.result, "status"), "exited");
    ASSERT_EQ(jint(w.result, "exit_code"), 0);
    ASSERT_STR_EQ(jstr(w.result, "output"), "x\nyy\n");
    ASSERT_EQ(jint(w.result, "total_bytes"), 5);
    osb_wait_reset(&w);
    ASSERT_EQ(fresh->ops->command_get(fresh, sid, id, 2, 100, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    ASSERT_STR_EQ(jstr(w.result, "output"), "yy\n");
    ASSERT_EQ(jint(w.result, "next_offset"), 5);
    ASSERT_EQ(count_requests("/logs?cursor=2"), 1);
    free_backend(fresh);
}

TEST(exec_long_output_and_sse_data_frames)
{
    struct run r;
    /* 200k lines: streamed, retained within the cap */
    struct exec_request many = {.command = "seq 1 200000"};
    ASSERT(run_start(&r, &many) != NULL);
    WAIT(&r.done, 60000);
    EXPECT_OK(&r.done);
    ASSERT_EQ(jint(r.done.result, "stdout_bytes"), 1288895);
    ASSERT_EQ(r.out.len, 1288895);
    run_release(&r);

    json_decref(fake_control(&fs, "POST", "/_config", "{\"sse\":\"data\"}"));
    struct exec_request hi = {.command = "echo framed"};
    ASSERT(run_start(&r, &hi) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(buf_cstr(&r.out), "framed\n");
    run_release(&r);
    json_decref(fake_control(&fs, "POST", "/_config", "{\"sse\":\"raw\",\"route\":\"header\"}"));
    osb_endpoint_forget(osb_of(be), sid + 4);
    ASSERT(run_start(&r, &hi) != NULL); /* the endpoint's headers route the request */
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(buf_cstr(&r.out), "framed\n");
    run_release(&r);
    fake_reset(&fs);
    osb_endpoint_forget(osb_of(be), sid + 4);
}

/* ---- files ------------------------------------------------------------------------------------- */

static json_t *file_op(const char *op, json_t *args)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (be->ops->file_op(be, sid, op, args, osb_wait_cb, &w, &e) != 0) {
        w.failed = true;
        w.err = e;
        json_decref(args);
        return NULL;
    }
    json_decref(args);
    osb_run_until(&loop, &w.done, 5000);
    return w.failed ? NULL : w.result;
}

TEST(files_roundtrip)
{
    struct mcp_error e;
    const char *text = "alpha beta alpha gamma alpha\n";
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_write(be, sid, "dir/a.txt", text, strlen(text), 0640, false,
                                  osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "path"), "/workspace/dir/a.txt");
    char hex[65];
    sha256_hex(text, strlen(text), hex);
    ASSERT_STR_EQ(jstr(w.result, "sha256"), hex);

    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_read(be, sid, "dir/a.txt", 6, 4, osb_read_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(w.data, "beta");
    ASSERT_EQ(w.rr.size, strlen(text));
    ASSERT_EQ(w.rr.mode, 0640);
    ASSERT(w.rr.truncated);
    ASSERT_EQ(count_requests("/files/download"), 1);

    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_write(be, sid, "dir/a.txt", "more\n", 5, 0, true, osb_wait_cb, &w,
                                  &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_EQ(jint(w.result, "size"), (int64_t)strlen(text) + 5);

    json_t *res = file_op("replace", json_pack("{s:s,s:s,s:s}", "path", "dir/a.txt", "old",
                                               "alpha", "new", "A"));
    ASSERT(res != NULL);
    ASSERT_EQ(jint(res, "replacements"), 3);
    res = file_op("replace", json_pack("{s:s,s:s,s:s,s:i}", "path", "dir/a.txt", "old", "A",
                                       "new", "Z", "count", 1));
    ASSERT(res != NULL);
    ASSERT_EQ(jint(res, "replacements"), 1);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_read(be, sid, "/workspace/dir/a.txt", 0, 0, osb_read_cb, &w, &e), 0);
    WAIT(&w, 3000);
    ASSERT_STR_EQ(w.data, "Z beta A gamma A\nmore\n");
    ASSERT(!w.rr.truncated);

    res = file_op("stat", json_pack("{s:s}", "path", "dir/a.txt"));
    ASSERT(res != NULL);
    ASSERT_STR_EQ(jstr(res, "type"), "file");
    res = file_op("mkdir", json_pack("{s:s,s:s}", "path", "dir/sub/deeper", "mode", "0750"));
    ASSERT(res != NULL);
    ASSERT(json_is_true(json_object_get(res, "created")));
    res = file_op("move", json_pack("{s:s,s:s}", "source", "dir/a.txt", "destination",
                                    "dir/sub/b.txt"));
    ASSERT(res != NULL);
    res = file_op("list", json_pack("{s:s,s:i}", "path", "dir", "depth", 3));
    ASSERT(res != NULL);
    ASSERT_EQ(json_array_size(json_object_get(res, "entries")), 3);
    res = file_op("search", json_pack("{s:s,s:s}", "path", "/workspace", "pattern", "*.txt"));
    ASSERT(res != NULL);
    ASSERT_STR_EQ(json_string_value(json_array_get(json_object_get(res, "matches"), 0)),
                  "/workspace/dir/sub/b.txt");
    res = file_op("chmod", json_pack("{s:s,s:s}", "path", "dir/sub/b.txt", "mode", "600"));
    ASSERT(res != NULL);
    res = file_op("delete", json_pack("{s:s}", "path", "dir"));
    ASSERT(res == NULL);
    ASSERT_EQ(w.err.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(w.err.msg, "recursive");
    res = file_op("delete", json_pack("{s:s,s:b}", "path", "dir", "recursive", 1));
    ASSERT(res != NULL);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_read(be, sid, "dir/sub/b.txt", 0, 0, osb_read_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(w.err.msg, "/workspace/dir/sub/b.txt");
    /* reads are bounded: without a length, at most OSB_READ_DEFAULT bytes, marked truncated */
    size_t big_len = OSB_READ_DEFAULT + 4096;
    char *big = xmalloc(big_len);
    memset(big, 'b', big_len);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_write(be, sid, "big", big, big_len, 0, false, osb_wait_cb, &w, &e),
              0);
    free(big);
    WAIT(&w, 5000);
    EXPECT_OK(&w);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_read(be, sid, "big", 0, 0, osb_read_cb, &w, &e), 0);
    WAIT(&w, 5000);
    EXPECT_OK(&w);
    ASSERT_EQ(w.len, OSB_READ_DEFAULT);
    ASSERT(w.rr.truncated);
    ASSERT_EQ(w.rr.size, big_len);
    /* binary content survives */
    const char bin[] = {0, 1, 2, (char)0xff, '\n', 0};
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_write(be, sid, "bin", bin, sizeof(bin), 0, false, osb_wait_cb, &w,
                                  &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_read(be, sid, "bin", 0, 0, osb_read_cb, &w, &e), 0);
    WAIT(&w, 3000);
    ASSERT_EQ(w.len, sizeof(bin));
    ASSERT(memcmp(w.data, bin, sizeof(bin)) == 0);
}

/* ---- faults -------------------------------------------------------------------------------------- */

static void get_sandbox(struct backend *b)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (b->ops->get(b, sid, osb_wait_cb, &w, &e) != 0)
        TEST_FAIL("get refused: %s", e.msg);
    WAIT(&w, 10000);
}

TEST(fault_500_and_retries)
{
    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"status\",\"status\":500}]");
    get_sandbox(be);
    EXPECT_ERR(&w, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(w.err.msg, "500");
    ASSERT_CONTAINS(w.err.msg, "request id"); /* X-Request-ID kept */
    ASSERT_EQ(count_requests("GET /v1/sandboxes/"), 1); /* 500 is not retried */

    fake_reset(&fs); /* two 503s, then the real answer */
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"status\",\"status\":503,"
                    "\"times\":2}]");
    get_sandbox(be);
    EXPECT_OK(&w);
    ASSERT_EQ(count_requests("GET /v1/sandboxes/"), 3);

    fake_reset(&fs); /* 503 forever: the retries run out */
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"status\",\"status\":503,"
                    "\"times\":100}]");
    get_sandbox(be);
    EXPECT_ERR(&w, MCP_ERR_UNAVAILABLE);
    ASSERT_CONTAINS(w.err.msg, "4 attempts");

    fake_reset(&fs); /* 429 with Retry-After: 1 -> waits at least 1 s, then succeeds */
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"status\",\"status\":429,"
                    "\"retryAfter\":1}]");
    uint64_t t0 = now_mono_ms();
    get_sandbox(be);
    EXPECT_OK(&w);
    ASSERT(now_mono_ms() - t0 >= 1000);

    fake_reset(&fs); /* Retry-After beyond the call's deadline: a clear rate-limit error */
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"status\",\"status\":429,"
                    "\"retryAfter\":30}]");
    get_sandbox(be);
    EXPECT_ERR(&w, MCP_ERR_LIMIT);
    ASSERT_CONTAINS(w.err.msg, "30 s");
    ASSERT(w.elapsed_ms < REQUEST_TIMEOUT_MS); /* fails at once instead of waiting */

    fake_reset(&fs); /* a dropped connection on an idempotent request is retried */
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"drop\"}]");
    get_sandbox(be);
    EXPECT_OK(&w);

    fake_reset(&fs); /* ... but a command is never blindly retried */
    fake_fault(&fs, "[{\"match\":\"POST /direct/\",\"kind\":\"status\",\"status\":503}]");
    struct run r;
    struct exec_request req = {.command = "echo once"};
    ASSERT(run_start(&r, &req) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_ERR(&r.done, MCP_ERR_UNAVAILABLE);
    ASSERT_EQ(count_requests("/command"), 1);
    run_release(&r);
    fake_reset(&fs); /* 429 on a command: rejected before it started, so retried */
    fake_fault(&fs, "[{\"match\":\"/command\",\"kind\":\"status\",\"status\":429,"
                    "\"retryAfter\":0}]");
    ASSERT(run_start(&r, &req) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_EQ(count_requests("/command"), 2);
    run_release(&r);
}

TEST(fault_hang_trickle_badjson)
{
    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"hang\",\"times\":10}]");
    get_sandbox(be);
    EXPECT_ERR(&w, MCP_ERR_TIMEOUT);
    ASSERT_CONTAINS(w.err.msg, "did not answer within");
    ASSERT(w.elapsed_ms >= REQUEST_TIMEOUT_MS - 50 && w.elapsed_ms < REQUEST_TIMEOUT_MS + SLACK_MS);

    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"trickle\",\"times\":10}]");
    get_sandbox(be);
    EXPECT_ERR(&w, MCP_ERR_TIMEOUT);
    ASSERT(w.elapsed_ms < REQUEST_TIMEOUT_MS + SLACK_MS);

    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"badjson\"}]");
    get_sandbox(be);
    EXPECT_ERR(&w, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(w.err.msg, "malformed JSON");

    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"text500\"}]");
    get_sandbox(be);
    EXPECT_ERR(&w, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(w.err.msg, "Internal Server Error");
    fake_reset(&fs);
}

TEST(fault_streams)
{
    struct run r;
    /* the stream is cut after the first line: the command is reported lost, promptly */
    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"/command\",\"kind\":\"cut\",\"after\":1}]");
    struct exec_request req = {.command = "echo first; sleep 10; echo second"};
    ASSERT(run_start(&r, &req) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "lost");
    ASSERT_CONTAINS(jstr(r.done.result, "error"), "get_command");
    ASSERT_STR_EQ(buf_cstr(&r.out), "first\n");
    ASSERT(r.done.elapsed_ms < 5000); /* long before the command would have ended */
    run_release(&r);

    /* init, then silence (no pings): the low-speed limit ends it. libcurl averages the speed
     * over its last 5 s, so the bytes of init delay the verdict by up to that much. */
    fake_fault(&fs, "[{\"match\":\"/command\",\"kind\":\"silent\"}]");
    struct exec_request quiet = {.command = "sleep 20"};
    ASSERT(run_start(&r, &quiet) != NULL);
    WAIT(&r.done, (STREAM_IDLE_S + CURL_SPEED_WINDOW_S + 4) * 1000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "lost");
    ASSERT_CONTAINS(jstr(r.done.result, "error"), "silent");
    ASSERT(r.done.elapsed_ms < (STREAM_IDLE_S + CURL_SPEED_WINDOW_S) * 1000 + SLACK_MS);
    run_release(&r);

    /* accepted, never answered: no headers at all -> error within the stream idle limit (the
     * request body we sent counts in libcurl's speed window too) */
    fake_fault(&fs, "[{\"match\":\"/command\",\"kind\":\"hang\"}]");
    ASSERT(run_start(&r, &quiet) != NULL);
    WAIT(&r.done, (STREAM_IDLE_S + CURL_SPEED_WINDOW_S + 4) * 1000);
    EXPECT_ERR(&r.done, MCP_ERR_TIMEOUT);
    ASSERT(r.done.elapsed_ms < (STREAM_IDLE_S + CURL_SPEED_WINDOW_S) * 1000 + SLACK_MS);
    run_release(&r);

    /* a long command with pings every 300 ms outlives the idle limit */
    struct exec_request pinged = {.command = "sleep 3; echo late"};
    ASSERT(run_start(&r, &pinged) != NULL);
    WAIT(&r.done, 8000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(buf_cstr(&r.out), "late\n");
    run_release(&r);
    fake_reset(&fs);
}

TEST(fault_auth_refused_image_quota)
{
    struct mcp_error e;
    struct backend *bad = new_backend("wrong-key-456", false);
    ASSERT(bad != NULL);
    get_sandbox(bad);
    EXPECT_ERR(&w, MCP_ERR_DENIED);
    ASSERT_CONTAINS(w.err.msg, "OPEN_SANDBOX_API_KEY");
    ASSERT(strstr(w.err.msg, "wrong-key-456") == NULL);
    free_backend(bad);

    /* nothing listens there: refused, retried, then a message naming OPEN_SANDBOX_DOMAIN */
    snprintf(domain, sizeof(domain), "127.0.0.1:1");
    bad = new_backend(API_KEY, false);
    snprintf(domain, sizeof(domain), "127.0.0.1:%d", fs.port);
    get_sandbox(bad);
    EXPECT_ERR(&w, MCP_ERR_UNAVAILABLE);
    ASSERT_CONTAINS(w.err.msg, "OPEN_SANDBOX_DOMAIN");
    free_backend(bad);

    create_sandbox(be, "pullfail/nope:1", NULL);
    EXPECT_ERR(&w, MCP_ERR_INVALID);
    ASSERT_CONTAINS(w.err.msg, "pull the image");

    create_sandbox(be, "crash:latest", NULL);
    EXPECT_ERR(&w, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(w.err.msg, "Failed");
    ASSERT_CONTAINS(w.err.msg, "deleted again");
    bool flag = false; /* the clean-up DELETE goes out after the error is reported */
    osb_run_until(&loop, &flag, 300);
    ASSERT(count_requests("DELETE /v1/sandboxes/") >= 1);

    struct sandbox_spec pids = {.owner = OWNER, .pids = 64};
    ASSERT_EQ(be->ops->create(be, &pids, osb_wait_cb, &w, &e), -1);
    ASSERT_EQ(e.code, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(e.msg, "pids");
    struct sandbox_spec shortlived = {.owner = OWNER, .timeout_seconds = 30};
    ASSERT_EQ(be->ops->create(be, &shortlived, osb_wait_cb, &w, &e), -1);
    ASSERT_EQ(e.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(e.msg, ">= 60");
    /* Host directories (issue #13): refused, saying what to use instead. */
    json_t *mounts = json_pack("[{s:s, s:s}]", "source", "/tmp", "target", "/workspace/t");
    struct sandbox_spec mounted = {.owner = OWNER, .mounts = mounts};
    ASSERT_EQ(be->ops->create(be, &mounted, osb_wait_cb, &w, &e), -1);
    json_decref(mounts);
    ASSERT_EQ(e.code, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(e.msg, "write_file");
    ASSERT_CONTAINS(e.msg, "local");

    fake_fault(&fs, "[{\"match\":\"POST /v1/sandboxes\",\"kind\":\"status\",\"status\":403,"
                    "\"code\":\"SANDBOX::QUOTA_EXCEEDED\",\"message\":\"quota of 1 exceeded\"}]");
    create_sandbox(be, "ubuntu", NULL);
    EXPECT_ERR(&w, MCP_ERR_LIMIT);
    ASSERT_CONTAINS(w.err.msg, "quota");
    fake_reset(&fs);
}

TEST(server_proxy_mode)
{
    struct backend *px = new_backend(API_KEY, true);
    ASSERT(px != NULL);
    struct backend *saved = be;
    be = px;
    struct run r;
    struct exec_request req = {.command = "echo via-proxy"};
    ASSERT(run_start(&r, &req) != NULL);
    WAIT(&r.done, 5000);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(buf_cstr(&r.out), "via-proxy\n");
    run_release(&r);
    be = saved;
    ASSERT(count_requests("endpoints/44772?use_server_proxy=true") == 1);
    ASSERT(count_requests(" /sandboxes/") >= 1); /* execd through /sandboxes/{id}/proxy/44772 */
    free_backend(px);
}

/* ---- snapshots, metrics, code interpreter ---------------------------------------------------- */

static void snap_call(const char *owner, const char *action, json_t *args)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (be->ops->snapshot(be, owner, action, args, osb_wait_cb, &w, &e) != 0) {
        w.done = w.failed = true;
        w.err = e;
    }
    json_decref(args);
    WAIT(&w, 8000);
}

static void write_text(const char *id, const char *path, const char *text)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_write(be, id, path, text, strlen(text), 0644, false, osb_wait_cb, &w,
                                  &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
}

static void destroy_quietly(const char *id)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (be->ops->destroy(be, id, osb_wait_cb, &w, &e) == 0)
        WAIT(&w, 3000);
}

TEST(snapshot_create_list_restore)
{
    write_text(sid, "snap.txt", "before");
    snap_call(OWNER, "create", json_pack("{s:s,s:s}", "sandbox_id", sid, "name", "cp1"));
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "state"), "ready");
    ASSERT_STR_EQ(jstr(w.result, "name"), "cp1");
    ASSERT_STR_EQ(jstr(w.result, "sandbox_id"), sid);
    ASSERT(json_is_string(json_object_get(w.result, "created_at")));
    char snap[160];
    snprintf(snap, sizeof(snap), "%s", jstr(w.result, "snapshot_id"));
    ASSERT(strncmp(snap, "snap_", 5) == 0);
    ASSERT(count_requests("GET /v1/snapshots/snap_") >= 1); /* polled until Ready */
    write_text(sid, "snap.txt", "after"); /* the snapshot keeps what was there before */

    snap_call(OWNER, "list", json_pack("{s:s,s:s}", "sandbox_id", sid, "state", "ready"));
    EXPECT_OK(&w);
    json_t *items = json_object_get(w.result, "snapshots");
    ASSERT_EQ(json_array_size(items), 1);
    ASSERT_STR_EQ(jstr(json_array_get(items, 0), "snapshot_id"), snap);
    ASSERT(count_requests("state=Ready") == 1);
    snap_call("local:uid:4242", "list", json_object()); /* another owner sees none of them */
    EXPECT_OK(&w);
    ASSERT_EQ(json_array_size(json_object_get(w.result, "snapshots")), 0);

    /* restore: a sandbox from the snapshot has the file as it was */
    struct sandbox_spec spec = {.owner = OWNER, .snapshot_id = snap, .network = true};
    struct mcp_error e;
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->create(be, &spec, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 8000);
    EXPECT_OK(&w);
    char restored[160];
    snprintf(restored, sizeof(restored), "%s", jstr(w.result, "sandbox_id"));
    ASSERT_STR_EQ(jstr(w.result, "state"), "running");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->file_read(be, restored, "snap.txt", 0, 0, osb_read_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(w.data, "before");
    destroy_quietly(restored);
    spec.owner = "local:uid:4242"; /* not theirs: exactly like a missing one */
    ASSERT_EQ(be->ops->create(be, &spec, osb_wait_cb, &w, &e), -1);
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(e.msg, "no snapshot");

    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", snap));
    EXPECT_OK(&w);
    ASSERT(json_is_true(json_object_get(w.result, "deleted")));
    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", snap));
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(w.err.msg, "action \"list\"");
}

TEST(snapshot_pages_and_retries)
{
    /* polling survives a 503 burst (reads are retried) */
    fake_reset(&fs);
    fake_fault(&fs, "[{\"match\":\"GET /v1/snapshots/\",\"kind\":\"status\",\"status\":503,"
                    "\"times\":2}]");
    snap_call(OWNER, "create", json_pack("{s:s}", "sandbox_id", sid));
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "state"), "ready");
    char a[160], b[160];
    snprintf(a, sizeof(a), "%s", jstr(w.result, "snapshot_id"));
    snap_call(OWNER, "create", json_pack("{s:s}", "sandbox_id", sid));
    EXPECT_OK(&w);
    snprintf(b, sizeof(b), "%s", jstr(w.result, "snapshot_id"));
    /* one snapshot per page: every page is read */
    json_decref(fake_control(&fs, "POST", "/_config", "{\"pageMax\":1}"));
    snap_call(OWNER, "list", json_pack("{s:s}", "sandbox_id", sid));
    EXPECT_OK(&w);
    ASSERT_EQ(json_array_size(json_object_get(w.result, "snapshots")), 2);
    ASSERT(count_requests("/v1/snapshots?sandboxId=") >= 2);
    ASSERT(count_requests("page=2") >= 1);
    fake_reset(&fs);
    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", a));
    EXPECT_OK(&w);
    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", b));
    EXPECT_OK(&w);
}

/* The owner cannot be recorded: the snapshot made on the server is deleted, the call fails. */
static void snapshot_unrecorded(void)
{
    sqlite3 *db = store_db(store);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TEMP TRIGGER snap_full BEFORE INSERT ON osb_snapshots "
                           "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
                           NULL, NULL, NULL), SQLITE_OK);
    int deletes = count_requests("DELETE /v1/snapshots/");
    snap_call(OWNER, "create", json_pack("{s:s}", "sandbox_id", sid));
    ASSERT_EQ(sqlite3_exec(db, "DROP TRIGGER snap_full", NULL, NULL, NULL), SQLITE_OK);
    EXPECT_ERR(&w, MCP_ERR_IO);
    ASSERT_CONTAINS(w.err.msg, "could not record snapshot");
    ASSERT_CONTAINS(w.err.msg, "disk is full");
    for (int i = 0; i < 100 && count_requests("DELETE /v1/snapshots/") == deletes; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(20 * 1000);
    }
    ASSERT_EQ(count_requests("DELETE /v1/snapshots/"), deletes + 1);
}

TEST(snapshot_errors)
{
    /* not ready within the wait: returned as "creating" with a note; delete is 409 until ready */
    struct osb_backend *b = osb_of(be);
    uint32_t saved = b->t.ready_timeout_ms;
    b->t.ready_timeout_ms = 1;
    snap_call(OWNER, "create", json_pack("{s:s}", "sandbox_id", sid));
    b->t.ready_timeout_ms = saved;
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "state"), "creating");
    ASSERT_CONTAINS(jstr(w.result, "note"), "still being created");
    ASSERT(json_is_null(json_object_get(w.result, "name")));
    char snap[160];
    snprintf(snap, sizeof(snap), "%s", jstr(w.result, "snapshot_id"));
    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", snap));
    EXPECT_ERR(&w, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(w.err.msg, "still being created");
    usleep(400 * 1000);
    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", snap));
    EXPECT_OK(&w);

    /* the server's 404, for an id mcpbox believes exists */
    struct mcp_error e;
    ASSERT_EQ(osb_snap_record(b, "snap_gone", OWNER, sid, &e), 0);
    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", "snap_gone"));
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(w.err.msg, "SNAPSHOT::NOT_FOUND");
    ASSERT_EQ(osb_snap_owned(b, "snap_gone", OWNER, &e), -1); /* its owner row went too */
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
    snap_call(OWNER, "delete", json_pack("{s:s}", "snapshot_id", "../x"));
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);

    snapshot_unrecorded();

    /* a runtime without snapshots */
    json_decref(fake_control(&fs, "POST", "/_config", "{\"snapshots\":\"unsupported\"}"));
    snap_call(OWNER, "create", json_pack("{s:s}", "sandbox_id", sid));
    fake_reset(&fs);
    EXPECT_ERR(&w, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(w.err.msg, "cannot snapshot");
    ASSERT_CONTAINS(w.err.msg, "read_file");

    /* a paused source */
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->pause(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    snap_call(OWNER, "create", json_pack("{s:s}", "sandbox_id", sid));
    EXPECT_ERR(&w, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(w.err.msg, "update_sandbox with paused: false");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->resume(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 5000);
    EXPECT_OK(&w);

    /* a capture that fails */
    create_sandbox(be, "snapfail:1", NULL);
    EXPECT_OK(&w);
    char bad[160];
    snprintf(bad, sizeof(bad), "%s", jstr(w.result, "sandbox_id"));
    snap_call(OWNER, "create", json_pack("{s:s}", "sandbox_id", bad));
    EXPECT_ERR(&w, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(w.err.msg, "snapshot_capture_failed");
    destroy_quietly(bad);
    snap_call(OWNER, "bogus", json_object());
    EXPECT_ERR(&w, MCP_ERR_INVALID);
}

TEST(metrics)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->metrics(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT_STR_EQ(jstr(w.result, "sandbox_id"), sid);
    ASSERT(jint(w.result, "cpu_count") >= 1);
    ASSERT(jint(w.result, "memory_used_bytes") > 0);
    ASSERT(jint(w.result, "memory_total_bytes") >= jint(w.result, "memory_used_bytes"));
    ASSERT(json_is_number(json_object_get(w.result, "cpu_used_pct")));
    ASSERT(json_is_string(json_object_get(w.result, "timestamp")));
    fake_fault(&fs, "[{\"match\":\"GET /direct/\",\"kind\":\"badjson\"}]");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->metrics(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_BACKEND);
    /* JSON without mem_used_mib: said so, with where else to look */
    fake_fault(&fs, "[{\"match\":\"GET /direct/\",\"kind\":\"status\",\"status\":200}]");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->metrics(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(w.err.msg, "no \"mem_used_mib\"");
    ASSERT_CONTAINS(w.err.msg, "run_command");
    fake_reset(&fs);
}

static void code_start(struct run *r, const char *id, const struct code_request *req)
{
    memset(r, 0, sizeof(*r));
    osb_wait_reset(&r->done);
    buf_init(&r->out, 1 << 24);
    buf_init(&r->err, 1 << 24);
    struct exec_observer obs = {on_started, on_output, on_done, r};
    struct mcp_error e;
    if (be->ops->code_run(be, id, req, &obs, &e) != 0) {
        r->done.done = r->done.failed = true;
        r->done.err = e;
    }
    WAIT(&r->done, 8000);
}

static void ctx_call(const char *id, const char *action, json_t *args)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (be->ops->code_context(be, id, action, args, osb_wait_cb, &w, &e) != 0) {
        w.done = w.failed = true;
        w.err = e;
    }
    json_decref(args);
    WAIT(&w, 5000);
}

static void code_runs(const char *cid)
{
    struct run r;
    struct code_request req = {.code = "x = 21\nprint('hi')\nx * 2", .timeout_ms = 5000};
    code_start(&r, cid, &req);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "ok");
    ASSERT_STR_EQ(buf_cstr(&r.out), "hi\n");
    ASSERT_EQ(jint(r.done.result, "execution_count"), 1);
    ASSERT_STR_EQ(jstr(json_array_get(json_object_get(r.done.result, "results"), 0), "text"), "42");
    ASSERT_STR_EQ(jstr(r.done.result, "context_id"), r.id);
    ASSERT_STR_EQ(jstr(r.done.result, "language"), "python");
    ASSERT(r.done.elapsed_ms < FAKE_GRACE_MS - 500); /* at the final event, not the close */
    run_release(&r);
    /* the default context is found again: state kept, no second context */
    struct code_request again = {.code = "x"};
    code_start(&r, cid, &again);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(json_array_get(json_object_get(r.done.result, "results"), 0), "text"), "21");
    ASSERT_EQ(jint(r.done.result, "execution_count"), 2);
    ASSERT_EQ(count_requests("POST /direct/"), 3); /* one context, two runs */
    run_release(&r);
    struct code_request boom = {.code = "1 / 0"};
    code_start(&r, cid, &boom);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "error");
    ASSERT_STR_EQ(jstr(json_object_get(r.done.result, "error"), "name"), "ZeroDivisionError");
    run_release(&r);
    /* results are kept up to 1 MiB (images come base64): the rest are counted, not kept */
    struct code_request big = {.code = "for i in range(5): display(str(i) * 300000)"};
    code_start(&r, cid, &big);
    EXPECT_OK(&r.done);
    json_t *results = json_object_get(r.done.result, "results");
    ASSERT_EQ(json_array_size(results), 3);
    ASSERT_EQ(strlen(jstr(json_array_get(results, 2), "text")), 300000);
    ASSERT_EQ(jint(r.done.result, "results_dropped"), 2);
    run_release(&r);
}

static void code_timeout_and_contexts(const char *cid)
{
    struct run r;
    struct code_request slow = {.code = "import time\nfor i in range(100):\n    print(i)\n"
                                        "    time.sleep(0.05)\n",
                                .timeout_ms = 700};
    code_start(&r, cid, &slow);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(r.done.result, "status"), "timed_out");
    ASSERT_STR_EQ(jstr(json_object_get(r.done.result, "error"), "name"), "KeyboardInterrupt");
    ASSERT(r.chunks > 3); /* streamed as it ran */
    ASSERT(r.done.elapsed_ms >= 600 && r.done.elapsed_ms < 700 + SLACK_MS);
    char ctx[80];
    snprintf(ctx, sizeof(ctx), "%s", r.id);
    run_release(&r);

    ctx_call(cid, "list", json_pack("{s:s}", "language", "python"));
    EXPECT_OK(&w);
    json_t *first = json_array_get(json_object_get(w.result, "contexts"), 0);
    ASSERT_STR_EQ(jstr(first, "context_id"), ctx);
    ctx_call(cid, "interrupt", json_pack("{s:s}", "context_id", ctx));
    EXPECT_OK(&w);
    ASSERT(json_is_true(json_object_get(w.result, "interrupted")));
    ctx_call(cid, "delete", json_pack("{s:s}", "context_id", ctx));
    EXPECT_OK(&w);
    ctx_call(cid, "delete", json_pack("{s:s}", "context_id", ctx));
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(w.err.msg, "no code context");
    struct code_request unknown = {.code = "1", .context_id = ctx};
    code_start(&r, cid, &unknown);
    EXPECT_ERR(&r.done, MCP_ERR_NOT_FOUND);
    run_release(&r);
    ctx_call(cid, "delete", json_object());
    EXPECT_ERR(&w, MCP_ERR_INVALID);
    ctx_call(cid, "create", json_object()); /* a fresh context: nothing from before */
    EXPECT_OK(&w);
    struct code_request fresh = {.code = "'x' in globals()",
                                 .context_id = jstr(w.result, "context_id")};
    code_start(&r, cid, &fresh);
    EXPECT_OK(&r.done);
    ASSERT_STR_EQ(jstr(json_array_get(json_object_get(r.done.result, "results"), 0), "text"),
                  "False");
    run_release(&r);
}

TEST(code_interpreter)
{
    create_sandbox(be, "opensandbox/code-interpreter:v1.0.1", NULL);
    EXPECT_OK(&w);
    char cid[160];
    snprintf(cid, sizeof(cid), "%s", jstr(w.result, "sandbox_id"));
    fake_reset(&fs);
    code_runs(cid);
    code_timeout_and_contexts(cid);
    destroy_quietly(cid);
}

TEST(code_without_jupyter)
{
    struct run r;
    struct code_request req = {.code = "print(1)"};
    code_start(&r, sid, &req);
    EXPECT_ERR(&r.done, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(r.done.err.msg, "no code interpreter");
    ASSERT_CONTAINS(r.done.err.msg, "run_command");
    run_release(&r);
    /* execd retrying its kernel connection forever: the call's deadline ends it */
    json_decref(fake_control(&fs, "POST", "/_config", "{\"noJupyter\":\"hang\"}"));
    code_start(&r, sid, &req);
    fake_reset(&fs);
    EXPECT_ERR(&r.done, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(r.done.err.msg, "code-interpreter");
    ASSERT(r.done.elapsed_ms >= REQUEST_TIMEOUT_MS - 50 &&
           r.done.elapsed_ms < REQUEST_TIMEOUT_MS + SLACK_MS);
    run_release(&r);
}

TEST(shutdown_with_requests_in_flight)
{
    struct backend *b = new_backend(API_KEY, false);
    fake_fault(&fs, "[{\"match\":\"GET /v1/sandboxes/\",\"kind\":\"hang\"}]");
    struct mcp_error e;
    osb_wait_reset(&w);
    ASSERT_EQ(b->ops->get(b, sid, osb_wait_cb, &w, &e), 0);
    for (int i = 0; i < 5; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    free_backend(b); /* the pending call completes with an error, nothing leaks */
    ASSERT(w.done);
    EXPECT_ERR(&w, MCP_ERR_UNAVAILABLE);
    ASSERT_CONTAINS(w.err.msg, "shutting down");
    fake_reset(&fs);
}

/* A shutdown while a snapshot waits between polls: the poll timer then fires with no HTTP
 * client left, and the wait must end with an error (it dereferenced a NULL client). */
TEST(shutdown_during_snapshot_wait)
{
    struct backend *b = new_backend(API_KEY, false);
    osb_of(b)->t.state_poll_ms = 1000; /* the POST answers long before the first poll */
    struct mcp_error e;
    osb_wait_reset(&w);
    json_t *args = json_pack("{s:s}", "sandbox_id", sid);
    ASSERT_EQ(b->ops->snapshot(b, OWNER, "create", args, osb_wait_cb, &w, &e), 0);
    json_decref(args);
    for (int i = 0; i < 50 && !w.done; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(5 * 1000);
    }
    ASSERT(!w.done); /* 202 Creating: waiting for the poll timer */
    b->ops->shutdown(b);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_UNAVAILABLE);
    ASSERT_CONTAINS(w.err.msg, "shutting down");
    free_backend(b);
}

/* ---- network policy ------------------------------------------------------------------------ */

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

/* What the fake's sidecar enforces now, as compact JSON (sorted keys). */
static char *sidecar_policy(const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/_policy?id=%s", id + strlen("osb-"));
    json_t *j = fake_control(&fs, "GET", path, NULL);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(j);
    return s;
}

/* create with a policy, then replace it: the sidecar ends with exactly the new rules, in order
 * (PATCH puts them first, DELETE drops the old targets they do not name), and get_sandbox shows
 * the new policy. A change of default_action, ports, and a sandbox made without a policy are
 * refused before any request. */
TEST(network_policy_create_and_replace)
{
    struct egress_policy *p = policy_of(
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\"},"
        "{\"action\":\"allow\",\"target\":\"b.org\"},{\"action\":\"deny\",\"target\":\"*.c.org\"}]}");
    struct sandbox_spec spec = {.owner = OWNER, .image = "ubuntu", .network_policy = p};
    struct mcp_error e;
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->create(be, &spec, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 8000);
    EXPECT_OK(&w);
    char id[128];
    snprintf(id, sizeof(id), "%s", jstr(w.result, "sandbox_id"));
    ASSERT(json_is_true(json_object_get(w.result, "network")));
    json_t *want = egress_policy_to_json(p);
    ASSERT(json_equal(json_object_get(w.result, "network_policy"), want));
    json_decref(want);
    char *s = sidecar_policy(id);
    ASSERT_STR_EQ(s, "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":"
                     "\"a.org\"},{\"action\":\"allow\",\"target\":\"b.org\"},{\"action\":\"deny\","
                     "\"target\":\"*.c.org\"}]}");
    free(s);
    egress_policy_unref(p);

    p = policy_of("{\"egress\":[{\"action\":\"deny\",\"target\":\"b.org\"},"
                  "{\"action\":\"allow\",\"target\":\"*.pythonhosted.org\"}]}");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->set_network_policy(be, id, p, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 5000);
    EXPECT_OK(&w);
    s = sidecar_policy(id);
    ASSERT_STR_EQ(s, "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"deny\",\"target\":"
                     "\"b.org\"},{\"action\":\"allow\",\"target\":\"*.pythonhosted.org\"}]}");
    free(s);
    want = egress_policy_to_json(p);
    ASSERT(json_equal(json_object_get(w.result, "network_policy"), want));
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->get(be, id, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    ASSERT(json_equal(json_object_get(w.result, "network_policy"), want));
    json_decref(want);
    egress_policy_unref(p);

    p = policy_of("{\"default_action\":\"allow\"}");
    ASSERT_EQ(be->ops->set_network_policy(be, id, p, osb_wait_cb, &w, &e), -1);
    ASSERT_EQ(e.code, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(e.msg, "cannot change default_action of a running sandbox");
    egress_policy_unref(p);
    p = policy_of("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\",\"ports\":[443]}]}");
    ASSERT_EQ(be->ops->set_network_policy(be, id, p, osb_wait_cb, &w, &e), -1);
    ASSERT_CONTAINS(e.msg, "network_policy.egress[0] limits ports");
    egress_policy_unref(p);
    p = policy_of("{}");
    ASSERT_EQ(be->ops->set_network_policy(be, sid, p, osb_wait_cb, &w, &e), -1); /* network: true */
    ASSERT_EQ(e.code, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(e.msg, "created without network_policy");
    /* {} on the policy sandbox: nothing to PATCH, every old target deleted */
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->set_network_policy(be, id, p, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 5000);
    EXPECT_OK(&w);
    s = sidecar_policy(id);
    ASSERT_STR_EQ(s, "{\"defaultAction\":\"deny\",\"egress\":[]}");
    free(s);
    egress_policy_unref(p);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->destroy(be, id, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
}

TEST(destroy)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->destroy(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_OK(&w);
    ASSERT(json_is_true(json_object_get(w.result, "destroyed")));
    struct store_sandbox sb = {0};
    ASSERT_EQ(store_sandbox_get(store, sid, &sb, &e), -1);
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->get(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(w.err.msg, "list_sandboxes");
    osb_wait_reset(&w);
    ASSERT_EQ(be->ops->destroy(be, sid, osb_wait_cb, &w, &e), 0);
    WAIT(&w, 3000);
    EXPECT_ERR(&w, MCP_ERR_NOT_FOUND);
}

int main(void)
{
    xalloc_install();
    if (getenv("OSB_TEST_DEBUG") != NULL)
        log_set_level(LOG_LEVEL_DEBUG);
    char ping[] = "FAKE_PING_MS=300", grace[] = "FAKE_GRACE_MS=3000", key[] = "FAKE_API_KEY=" API_KEY;
    const char *env[] = {ping, grace, key, NULL};
    if (osb_node_path() == NULL || fake_start(&fs, env) != 0) {
        printf("1..0 # SKIP no Node.js to run the fake OpenSandbox server\n");
        return 77;
    }
    uv_loop_init(&loop);
    struct mcp_error e;
    if (mkdtemp(state_dir) == NULL || (store = store_open(state_dir, &e)) == NULL) {
        printf("# store: %s\n", e.msg);
        return 1;
    }
    snprintf(domain, sizeof(domain), "127.0.0.1:%d", fs.port);
    be = new_backend(API_KEY, false);
    RUN(create_get_list);
    if (sid[0] != '\0') {
        RUN(renew_pause_resume_endpoint_diagnose);
        RUN(exec_streams_and_exit_codes);
        RUN(exec_timeout_kill_detach_get);
        RUN(command_get_from_execd);
        RUN(exec_long_output_and_sse_data_frames);
        RUN(files_roundtrip);
        RUN(fault_500_and_retries);
        RUN(fault_hang_trickle_badjson);
        RUN(fault_streams);
        RUN(fault_auth_refused_image_quota);
        RUN(server_proxy_mode);
        RUN(snapshot_create_list_restore);
        RUN(snapshot_pages_and_retries);
        RUN(snapshot_errors);
        RUN(metrics);
        RUN(code_interpreter);
        RUN(code_without_jupyter);
        RUN(shutdown_with_requests_in_flight);
        RUN(shutdown_during_snapshot_wait);
        RUN(network_policy_create_and_replace);
        RUN(destroy);
    }
    osb_wait_reset(&w);
    free_backend(be);
    store_close(store);
    if (rmtree(state_dir) < 0)
        printf("# could not remove %s\n", state_dir);
    fake_stop(&fs);
    int rc = uv_loop_close(&loop);
    if (rc != 0) {
        printf("# handles left open on the loop: %s\n", uv_strerror(rc));
        return 1;
    }
    return test_done();
}
