/* Unit tests of the OpenSandbox backend's pure parts: the event-stream parser, retry policy,
 * quantity and mode conversions, request bodies, error mapping. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/httpc/curl_loader.h"
#include "backend/opensandbox/osb.h"
#include "lib/base/utf8.h"
#include "backend/opensandbox/sse.h"
#include "test.h"

struct events {
    json_t *list;
};

static int collect(void *arg, json_t *ev)
{
    json_array_append(((struct events *)arg)->list, ev);
    return 0;
}

static json_t *parse_all(const char *stream, size_t chunk)
{
    struct events ev = {json_array()};
    struct osb_sse p;
    osb_sse_init(&p, collect, &ev);
    size_t n = strlen(stream);
    for (size_t i = 0; i < n; i += chunk)
        osb_sse_feed(&p, stream + i, n - i < chunk ? n - i : chunk);
    osb_sse_finish(&p);
    osb_sse_release(&p);
    return ev.list;
}

static const char *type_at(json_t *list, size_t i)
{
    return json_string_value(json_object_get(json_array_get(list, i), "type"));
}

TEST(sse_raw_json_lines)
{
    const char *s = "{\"type\":\"init\",\"text\":\"abc\"}\n\n{\"type\":\"stdout\",\"text\":\"hi\"}\n\n"
                    "{\"type\":\"ping\",\"text\":\"pong\"}\n\n"
                    "{\"type\":\"execution_complete\",\"execution_time\":3}\n\n";
    for (size_t chunk = 1; chunk <= 7; chunk += 3) { /* events split anywhere */
        json_t *l = parse_all(s, chunk);
        ASSERT_EQ(json_array_size(l), 4);
        ASSERT_STR_EQ(type_at(l, 0), "init");
        ASSERT_STR_EQ(type_at(l, 3), "execution_complete");
        json_decref(l);
    }
}

TEST(sse_data_frames_comments_crlf)
{
    const char *s = ": comment\r\nevent: message\r\nid: 1\r\ndata: {\"type\":\"init\",\r\n"
                    "data: \"text\":\"x\"}\r\n\r\nretry: 5\n"
                    "data:{\"type\":\"stderr\",\"text\":\"e\"}\n\nnot json at all\n\n"
                    "{\"type\":\"error\",\"error\":{\"evalue\":\"3\"}}";
    json_t *l = parse_all(s, 5);
    ASSERT_EQ(json_array_size(l), 3);
    ASSERT_STR_EQ(type_at(l, 0), "init"); /* multi-line data joined */
    ASSERT_STR_EQ(type_at(l, 1), "stderr");
    ASSERT_STR_EQ(type_at(l, 2), "error"); /* at EOF without its blank line */
    json_decref(l);
}

TEST(sse_ndjson_and_line_cap)
{
    json_t *l = parse_all("{\"a\":1}\n{\"a\":2}\n", 64);
    ASSERT_EQ(json_array_size(l), 2);
    json_decref(l);
    struct events ev = {json_array()};
    struct osb_sse p;
    osb_sse_init(&p, collect, &ev);
    char *big = malloc(OSB_SSE_LINE_MAX + 10);
    memset(big, 'x', OSB_SSE_LINE_MAX + 10);
    ASSERT_EQ(osb_sse_feed(&p, big, OSB_SSE_LINE_MAX + 10), -1); /* bounded */
    free(big);
    osb_sse_release(&p);
    json_decref(ev.list);
}

TEST(retry_policy)
{
    ASSERT(httpc_retryable(HTTPC_RETRY_IDEMPOTENT, 503, CURLE_OK));
    ASSERT(httpc_retryable(HTTPC_RETRY_IDEMPOTENT, 0, CURLE_RECV_ERROR));
    ASSERT(httpc_retryable(HTTPC_RETRY_SAFE, 429, CURLE_OK));
    ASSERT(httpc_retryable(HTTPC_RETRY_SAFE, 0, CURLE_COULDNT_CONNECT));
    ASSERT(!httpc_retryable(HTTPC_RETRY_SAFE, 503, CURLE_OK));    /* may have acted */
    ASSERT(!httpc_retryable(HTTPC_RETRY_SAFE, 0, CURLE_RECV_ERROR));
    ASSERT(!httpc_retryable(HTTPC_RETRY_NONE, 429, CURLE_OK));
    ASSERT(!httpc_retryable(HTTPC_RETRY_IDEMPOTENT, 500, CURLE_OK));
    ASSERT(!httpc_retryable(HTTPC_RETRY_IDEMPOTENT, 404, CURLE_OK));
    for (unsigned n = 1; n <= 6; n++) {
        uint32_t w = httpc_backoff_ms(n, 100, 1000, -1);
        double base = fmin(100.0 * pow(2, n - 1), 1000.0);
        ASSERT(w >= base * 0.74 && w <= base * 1.26);
    }
    ASSERT(httpc_backoff_ms(1, 100, 1000, 2.5) >= 2500);
    ASSERT(fabs(httpc_parse_retry_after("7") - 7) < 1e-9);
    ASSERT(httpc_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0); /* past */
    ASSERT(httpc_parse_retry_after("soon") < 0);
}

TEST(quantities_modes_paths)
{
    ASSERT(fabs(osb_parse_cpu("500m") - 0.5) < 1e-9);
    ASSERT(fabs(osb_parse_cpu("2") - 2) < 1e-9);
    ASSERT(osb_parse_cpu("two") < 0);
    ASSERT_EQ(osb_parse_quantity("512Mi"), 512LL << 20);
    ASSERT_EQ(osb_parse_quantity("2Gi"), 2LL << 30);
    ASSERT_EQ(osb_parse_quantity("1G"), 1000000000LL);
    ASSERT_EQ(osb_parse_quantity("5Qi"), -1);
    ASSERT_EQ(osb_mode_from_execd(755), 0755);
    ASSERT_EQ(osb_mode_from_execd(644), 0644);
    ASSERT_EQ(osb_mode_to_execd(0640), 640);
    char *p = osb_sandbox_path("a/b.txt");
    ASSERT_STR_EQ(p, "/workspace/a/b.txt");
    free(p);
    p = osb_sandbox_path("/etc/x");
    ASSERT_STR_EQ(p, "/etc/x");
    free(p);
    ASSERT_EQ(osb_state_map("Running"), SANDBOX_RUNNING);
    ASSERT_EQ(osb_state_map("Allocated"), SANDBOX_RUNNING);
    ASSERT_EQ(osb_state_map("Pending"), SANDBOX_CREATING);
    ASSERT_EQ(osb_state_map("Paused"), SANDBOX_PAUSED);
    ASSERT_EQ(osb_state_map("Failed"), SANDBOX_FAILED);
    ASSERT_EQ(osb_state_map("SomethingNew"), SANDBOX_STOPPED);
    char *u = osb_endpoint_url("http", "10.0.0.5:44772/proxy/44772/");
    ASSERT_STR_EQ(u, "http://10.0.0.5:44772/proxy/44772");
    free(u);
    u = osb_endpoint_url("http", "https://gw.example.com/x");
    ASSERT_STR_EQ(u, "https://gw.example.com/x");
    free(u);
}

TEST(remote_ids)
{
    struct mcp_error e;
    ASSERT_STR_EQ(osb_remote_id("osb-6f1c2f7e-3b7a", &e), "6f1c2f7e-3b7a");
    ASSERT(osb_remote_id("sbx-1234", &e) == NULL);
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
    ASSERT(osb_remote_id("osb-../../etc", &e) == NULL);
    ASSERT(osb_remote_id("osb-a/b", &e) == NULL);
    ASSERT(osb_remote_id("osb-", &e) == NULL);
}

TEST(command_body)
{
    struct mcp_error e;
    json_t *env = json_pack("{s:s}", "A", "1");
    struct exec_request r = {.command = "cat", .env = env, .stdin_data = "hi'x", .stdin_len = 4,
                             .timeout_ms = 1500};
    json_t *b = osb_command_body(&r, &e);
    ASSERT(b != NULL);
    ASSERT_CONTAINS(json_string_value(json_object_get(b, "command")), "aGkneA==");
    ASSERT_CONTAINS(json_string_value(json_object_get(b, "command")), "base64 -d");
    ASSERT_STR_EQ(json_string_value(json_object_get(b, "cwd")), "/workspace");
    ASSERT_EQ(json_integer_value(json_object_get(b, "timeout")), 1500);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(b, "envs"), "A")), "1");
    json_decref(b);
    r.stdin_len = OSB_STDIN_MAX + 1;
    ASSERT(osb_command_body(&r, &e) == NULL);
    ASSERT_EQ(e.code, MCP_ERR_LIMIT);
    json_decref(env);
}

static void map(long status, const char *body, bool execd, struct mcp_error *e)
{
    static char key[] = "sk-very-secret";
    struct osb_backend b = {.api_key = key, .domain = (char *)"h:1",
                            .t = {.request_timeout_ms = 1000}};
    struct httpc_response r = {.status = status, .curl_code = CURLE_OK, .retry_after_s = -1,
                             .attempts = 1};
    buf_init(&r.body, 1 << 20);
    buf_append_str(&r.body, body);
    strcpy(r.request_id, "req-1");
    osb_error_from_response(&b, &r, "doing it", "osb-x", execd, e);
    buf_release(&r.body);
}

TEST(error_mapping)
{
    struct mcp_error e;
    map(401, "{\"code\":\"INVALID_API_KEY\",\"message\":\"bad\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_DENIED);
    ASSERT_CONTAINS(e.msg, "OPEN_SANDBOX_API_KEY");
    ASSERT_CONTAINS(e.msg, "req-1");
    map(404, "{\"code\":\"DOCKER::SANDBOX_NOT_FOUND\",\"message\":\"Sandbox x not found.\"}", false,
        &e);
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(e.msg, "list_sandboxes");
    map(404, "{\"code\":\"GENERAL::UNKNOWN_ERROR\",\"message\":\"Not Found\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_UNSUPPORTED); /* a route the server lacks, not a lost sandbox */
    map(422, "{\"detail\":[{\"type\":\"value_error\",\"loc\":[\"body\"],\"msg\":\"Exactly one\"}]}",
        false, &e);
    ASSERT_EQ(e.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(e.msg, "Exactly one");
    map(500, "{\"code\":\"DOCKER::SANDBOX_IMAGE_PULL_FAILED\",\"message\":\"manifest unknown\"}",
        false, &e);
    ASSERT_EQ(e.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(e.msg, "image");
    map(403, "{\"code\":\"SANDBOX::QUOTA_EXCEEDED\",\"message\":\"too many\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_LIMIT);
    map(409, "{\"code\":\"DOCKER::SANDBOX_NOT_RUNNING\",\"message\":\"no\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(e.msg, "update_sandbox with paused: false");
    map(500, "Internal Server Error", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(e.msg, "Internal Server Error");
    map(401, "{\"error\":\"Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN\"}", true,
        &e);
    ASSERT_EQ(e.code, MCP_ERR_DENIED);
    ASSERT_CONTAINS(e.msg, "X-EXECD-ACCESS-TOKEN");
    map(400, "{\"code\":\"X\",\"message\":\"your key sk-very-secret is odd\"}", false, &e);
    ASSERT(strstr(e.msg, "sk-very-secret") == NULL); /* never echoed */
    ASSERT_CONTAINS(e.msg, "***");
}

TEST(snapshot_error_mapping)
{
    struct mcp_error e;
    map(501, "{\"code\":\"SNAPSHOT::NOT_IMPLEMENTED\",\"message\":\"k8s cannot\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(e.msg, "cannot snapshot");
    ASSERT_CONTAINS(e.msg, "read_file");
    map(409, "{\"code\":\"SNAPSHOT::INVALID_SOURCE_STATE\",\"message\":\"paused\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(e.msg, "update_sandbox with paused: false");
    map(409, "{\"code\":\"SNAPSHOT::INVALID_STATE\",\"message\":\"creating\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(e.msg, "still being created");
    /* restoring from (or deleting) a Failed or Deleting snapshot: it never becomes ready */
    map(409, "{\"code\":\"SNAPSHOT::INVALID_STATE\",\"message\":\"Snapshot s1 is Failed, not "
        "Ready.\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_CONFLICT);
    ASSERT(strstr(e.msg, "still being created") == NULL);
    ASSERT_CONTAINS(e.msg, "pick a ready snapshot, or create a new one");
    map(409, "{\"code\":\"SNAPSHOT::INVALID_STATE\",\"message\":\"Snapshot s1 is Deleting\"}",
        false, &e);
    ASSERT_CONTAINS(e.msg, "failed or is being deleted");
    map(404, "{\"code\":\"SNAPSHOT::NOT_FOUND\",\"message\":\"gone\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(e.msg, "snapshot_sandbox");
    ASSERT(strstr(e.msg, "list_sandboxes") == NULL); /* not mistaken for a lost sandbox */
    map(500, "{\"code\":\"SNAPSHOT::UNKNOWN_ERROR\",\"message\":\"commit failed\"}", false, &e);
    ASSERT_EQ(e.code, MCP_ERR_BACKEND);
    ASSERT_CONTAINS(e.msg, "commit failed");
    ASSERT_CONTAINS(e.msg, "then try again"); /* says what to do next */
}

TEST(snapshot_and_metrics_shapes)
{
    json_t *remote = json_loads("{\"id\":\"snap_1\",\"sandboxId\":\"abc\",\"status\":{\"state\":"
                                "\"Failed\",\"reason\":\"snapshot_capture_failed\",\"message\":"
                                "\"disk\"},\"createdAt\":\"2026-01-02T03:04:05.123456Z\"}",
                                0, NULL);
    json_t *info = osb_snapshot_info(remote);
    ASSERT_STR_EQ(json_string_value(json_object_get(info, "snapshot_id")), "snap_1");
    ASSERT_STR_EQ(json_string_value(json_object_get(info, "sandbox_id")), "osb-abc");
    ASSERT_STR_EQ(json_string_value(json_object_get(info, "state")), "failed");
    ASSERT_STR_EQ(json_string_value(json_object_get(info, "reason")), "snapshot_capture_failed");
    ASSERT_STR_EQ(json_string_value(json_object_get(info, "created_at")),
                  "2026-01-02T03:04:05.123Z");
    ASSERT(json_is_null(json_object_get(info, "name")));
    json_decref(info);
    json_decref(remote);
    struct mcp_error e;
    ASSERT_EQ(osb_snapshot_id_check("snap_0-1.a", &e), 0);
    ASSERT_EQ(osb_snapshot_id_check("../etc", &e), -1);
    ASSERT_EQ(osb_snapshot_id_check("a/b", &e), -1);
    ASSERT_EQ(osb_snapshot_id_check("", &e), -1);

    json_t *m = json_loads("{\"cpu_count\":4.0,\"cpu_used_pct\":45.5,\"mem_total_mib\":8192.0,"
                           "\"mem_used_mib\":1.5,\"timestamp\":1700000000000}", 0, NULL);
    json_t *out = osb_metrics_info("osb-x", m);
    ASSERT_EQ(json_integer_value(json_object_get(out, "cpu_count")), 4);
    ASSERT(json_real_value(json_object_get(out, "cpu_used_pct")) == 45.5);
    ASSERT_EQ(json_integer_value(json_object_get(out, "memory_total_bytes")), 8192LL << 20);
    ASSERT_EQ(json_integer_value(json_object_get(out, "memory_used_bytes")), 3LL << 19);
    ASSERT_STR_EQ(json_string_value(json_object_get(out, "timestamp")), "2023-11-14T22:13:20.000Z");
    json_decref(out);
    json_decref(m);
    m = json_loads("{\"mem_used_mib\":2}", 0, NULL); /* missing figures are null, not 0 */
    out = osb_metrics_info("osb-x", m);
    ASSERT(json_is_null(json_object_get(out, "cpu_count")));
    ASSERT(json_is_null(json_object_get(out, "memory_total_bytes")));
    json_decref(out);
    json_decref(m);
}

TEST(json_text_sanitises)
{
    json_t *j = utf8_json_text("ok\xff\xc3(\0z", 7);
    ASSERT(j != NULL);
    ASSERT_STR_EQ(json_string_value(j), "ok\xEF\xBF\xBD\xEF\xBF\xBD(\xEF\xBF\xBDz");
    json_decref(j);
}

static void refused_done(void *arg, struct httpc_response *resp)
{
    *(long *)arg = resp->curl_code;
}

/* A transfer that fails at once (a refused connect on loopback) still completes from the loop,
 * never inside httpc_start; and the engine frees cleanly. */
TEST(http_never_completes_inside_start)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct httpc *h = httpc_new(&loop, NULL);
    long code = -1;
    struct httpc_req_opts o = {.method = "GET", .url = "http://127.0.0.1:1/x", .deadline_ms = 2000,
                             .connect_timeout_ms = 1000, .body_cap = 1024,
                             .retry = HTTPC_RETRY_NONE, .done = refused_done, .arg = &code};
    ASSERT(httpc_start(h, &o) != NULL);
    ASSERT_EQ(code, -1);
    for (int i = 0; i < 1000 && code == -1; i++)
        uv_run(&loop, UV_RUN_ONCE);
    ASSERT_EQ(code, CURLE_COULDNT_CONNECT);
    ASSERT_EQ(httpc_active(h), 0);
    code = -1; /* a transfer curl fails within its first step (a scheme we refuse) */
    o.url = "ftp://127.0.0.1/x";
    ASSERT(httpc_start(h, &o) != NULL);
    ASSERT_EQ(code, -1);
    for (int i = 0; i < 1000 && code == -1; i++)
        uv_run(&loop, UV_RUN_ONCE);
    ASSERT_EQ(code, CURLE_UNSUPPORTED_PROTOCOL);
    httpc_free(h);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* libcurl is loaded on first use: a missing library, or one without curl's functions, is a
 * clear error naming it, and leaves nothing loaded (a later load still works). Runs before any
 * test that loads the real libcurl. */
TEST(curl_loader_errors)
{
    struct mcp_error e = {0};
    ASSERT_EQ(httpc_curl_load_from("libcurl-mcpbox-missing.so.4", &e), -1);
    ASSERT_EQ(e.code, MCP_ERR_UNAVAILABLE);
    ASSERT(strstr(e.msg, "needs libcurl (libcurl-mcpbox-missing.so.4") != NULL);
    ASSERT(httpc_curl.easy_init == NULL);
    memset(&e, 0, sizeof(e));
    ASSERT_EQ(httpc_curl_load_from("libc.so.6", &e), -1); /* loads, but is not libcurl */
    ASSERT(strstr(e.msg, "it has no curl_global_init") != NULL);
    ASSERT(httpc_curl.easy_init == NULL);
    ASSERT_EQ(httpc_curl_load(&e), 0);
    ASSERT(httpc_curl.easy_init != NULL && httpc_curl.mime_data != NULL);
    ASSERT_EQ(httpc_curl_load(&e), 0); /* once */
}

int main(void)
{
    RUN(curl_loader_errors);
    RUN(sse_raw_json_lines);
    RUN(sse_data_frames_comments_crlf);
    RUN(sse_ndjson_and_line_cap);
    RUN(retry_policy);
    RUN(quantities_modes_paths);
    RUN(remote_ids);
    RUN(command_body);
    RUN(error_mapping);
    RUN(snapshot_error_mapping);
    RUN(snapshot_and_metrics_shapes);
    RUN(json_text_sanitises);
    RUN(http_never_completes_inside_start);
    return test_done();
}
