/* Benchmark: the per-call cost of mcpbox's OpenSandbox backend against the same HTTP exchange
 * done with plain libcurl (easy handle, kept alive, blocking), both against the project's fake
 * server on loopback. Calls alternate (backend, curl, backend, ...) so drift hits both alike.
 *
 *   build-osb-bench/tests/opensandbox/bench_osb [iterations]
 *
 * Prints medians (microseconds) and the ratio per operation as a Markdown table. */
#include <stdlib.h>
#include <string.h>

#include "lib/httpc/httpc.h"
#include "backend/opensandbox/opensandbox.h"
#include "backend/opensandbox/osb.h"
#include "lib/base/xalloc.h"
#include "osb_support.h"

#define API_KEY "bench-key"

static uv_loop_t loop;
static struct backend *be;
static struct fake_server fs;
static char sid[160], rid[160];

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return n % 2 ? (double)v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* ---- the mcpbox side ------------------------------------------------------------------------- */

static struct osb_wait w;

/* The loop as a server runs it: no guard timer (that is test-harness cost, not mcpbox's). */
static void run_until_done(void)
{
    while (!w.done)
        uv_run(&loop, UV_RUN_ONCE);
}

/* Completion without the test harness's deep copy of the result (not mcpbox's cost). */
static void lean_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    w.done = true;
    w.failed = err != NULL;
    if (err)
        w.err = *err;
}

static void lean_read_cb(void *arg, const struct file_read_result *res,
                         const struct mcp_error *err)
{
    lean_cb(arg, NULL, err);
}

static int backend_get(void)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (be->ops->get(be, sid, lean_cb, &w, &e) != 0)
        return -1;
    run_until_done();
    return w.failed ? -1 : 0;
}

static int backend_exec(void)
{
    struct mcp_error e;
    struct exec_request req = {.command = "true"};
    struct exec_observer obs = {NULL, NULL, lean_cb, &w};
    osb_wait_reset(&w);
    if (be->ops->exec(be, sid, &req, &obs, NULL, &e) != 0)
        return -1;
    run_until_done();
    return w.failed ? -1 : 0;
}

static int backend_read(void)
{
    struct mcp_error e;
    osb_wait_reset(&w);
    if (be->ops->file_read(be, sid, "bench.txt", 0, 0, lean_read_cb, &w, &e) != 0)
        return -1;
    run_until_done();
    return w.failed ? -1 : 0;
}

/* The HTTP layer alone (http.c: curl multi on the loop), without the backend's mapping. */
static void raw_done(void *arg, struct httpc_response *resp)
{
    w.done = true;
    w.failed = resp->status != 200;
}

static char url_get_raw[256];

static int http_get(void)
{
    struct curl_slist *h = curl_slist_append(NULL, "OPEN-SANDBOX-API-KEY: " API_KEY);
    h = curl_slist_append(h, "Accept: application/json");
    struct httpc_req_opts o = {.method = "GET", .url = url_get_raw, .headers = h,
                             .deadline_ms = 30000, .body_cap = 1 << 20, .done = raw_done};
    osb_wait_reset(&w);
    if (httpc_start(osb_of(be)->http, &o) == NULL)
        return -1;
    run_until_done();
    return w.failed ? -1 : 0;
}

/* ---- the plain curl side --------------------------------------------------------------------- */

static CURL *easy;
static struct buf body;

static size_t sink(char *d, size_t s, size_t n, void *ud)
{
    buf_append(&body, d, s * n);
    /* like the backend, stop at the terminal event instead of waiting for execd's 1 s tail */
    if (ud != NULL && (strstr(buf_cstr(&body), "execution_complete") ||
                       strstr(buf_cstr(&body), "\"error\"")))
        return 0;
    return s * n;
}

static int curl_do(const char *method, const char *url, const char *json, struct curl_slist *h,
                   bool stream)
{
    buf_reset(&body);
    curl_easy_reset(easy);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, stream ? (void *)1 : NULL);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    if (json) {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, json);
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode rc = curl_easy_perform(easy);
    return rc == CURLE_OK || (stream && rc == CURLE_WRITE_ERROR) ? 0 : -1;
}

static struct curl_slist *lc_headers, *exec_headers;
static char url_get[256], url_cmd[256], url_info[256], url_dl[256];

static int curl_get(void)
{
    return curl_do("GET", url_get, NULL, lc_headers, false);
}

static int curl_exec(void)
{
    return curl_do("POST", url_cmd, "{\"command\":\"true\",\"cwd\":\"/workspace\"}", exec_headers,
                   true);
}

static int curl_read(void)
{
    if (curl_do("GET", url_info, NULL, NULL, false) != 0)
        return -1;
    return curl_do("GET", url_dl, NULL, NULL, false);
}

/* ---- driver ---------------------------------------------------------------------------------- */

struct pair {
    const char *name;
    int (*ours)(void);
    int (*floor)(void);
};

static int measure(const struct pair *p, size_t n)
{
    uint64_t *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
    for (size_t i = 0; i < 5; i++) /* warm-up: connections, caches */
        if (p->ours() != 0 || p->floor() != 0) {
            fprintf(stderr, "%s failed: %s\n", p->name, w.err.msg);
            return -1;
        }
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = now_us();
        if (p->ours() != 0) {
            fprintf(stderr, "%s (mcpbox) failed: %s\n", p->name, w.err.msg);
            return -1;
        }
        uint64_t t1 = now_us();
        if (p->floor() != 0) {
            fprintf(stderr, "%s (curl) failed\n", p->name);
            return -1;
        }
        uint64_t t2 = now_us();
        a[i] = t1 - t0;
        b[i] = t2 - t1;
    }
    double ma = median(a, n), mb = median(b, n);
    printf("| %s | %zu | %.0f | %.0f | %.2fx |\n", p->name, n, ma, mb, ma / mb);
    free(a);
    free(b);
    return 0;
}

static int setup(void)
{
    char domain[64];
    snprintf(domain, sizeof(domain), "127.0.0.1:%d", fs.port);
    struct opensandbox_options opts = {.domain = domain, .api_key = API_KEY};
    struct mcp_error e;
    be = opensandbox_backend_new(&loop, NULL, &opts, &e);
    struct sandbox_spec spec = {.owner = "bench", .image = "ubuntu", .network = true};
    osb_wait_reset(&w);
    if (be == NULL || be->ops->create(be, &spec, osb_wait_cb, &w, &e) != 0)
        return -1;
    osb_run_until(&loop, &w.done, 20000);
    if (w.failed) {
        fprintf(stderr, "create: %s\n", w.err.msg);
        return -1;
    }
    snprintf(sid, sizeof(sid), "%s", json_string_value(json_object_get(w.result, "sandbox_id")));
    snprintf(rid, sizeof(rid), "%s", sid + 4);
    osb_wait_reset(&w);
    const char text[] = "benchmark file contents\n";
    if (be->ops->file_write(be, sid, "bench.txt", text, sizeof(text) - 1, 0644, false,
                            osb_wait_cb, &w, &e) != 0)
        return -1;
    osb_run_until(&loop, &w.done, 10000);
    const char *ep = "/direct/%s/proxy/44772";
    char exec_base[256];
    snprintf(exec_base, sizeof(exec_base), ep, rid);
    snprintf(url_get, sizeof(url_get), "%s/v1/sandboxes/%s", fs.base, rid);
    snprintf(url_get_raw, sizeof(url_get_raw), "%s", url_get);
    snprintf(url_cmd, sizeof(url_cmd), "%s%s/command", fs.base, exec_base);
    snprintf(url_info, sizeof(url_info), "%s%s/files/info?path=%%2Fworkspace%%2Fbench.txt",
             fs.base, exec_base);
    snprintf(url_dl, sizeof(url_dl), "%s%s/files/download?path=%%2Fworkspace%%2Fbench.txt",
             fs.base, exec_base);
    lc_headers = curl_slist_append(NULL, "OPEN-SANDBOX-API-KEY: " API_KEY);
    lc_headers = curl_slist_append(lc_headers, "Accept: application/json");
    exec_headers = curl_slist_append(NULL, "Content-Type: application/json");
    exec_headers = curl_slist_append(exec_headers, "Accept: text/event-stream");
    return 0;
}

int main(int argc, char **argv)
{
    xalloc_install();
    size_t n = argc > 1 ? (size_t)atoi(argv[1]) : 300;
    const char *env[] = {NULL};
    if (fake_start(&fs, env) != 0) {
        fprintf(stderr, "no Node.js for the fake server\n");
        return 77;
    }
    uv_loop_init(&loop);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    easy = curl_easy_init();
    buf_init(&body, 1 << 24);
    if (setup() != 0) {
        fake_stop(&fs);
        return 1;
    }
    printf("| operation | calls | mcpbox median (us) | plain libcurl median (us) | ratio |\n");
    printf("|---|---|---|---|---|\n");
    const struct pair pairs[] = {
        {"get_sandbox (GET /v1/sandboxes/{id})", backend_get, curl_get},
        {"the same GET through http.c alone", http_get, curl_get},
        {"run_command `true` (POST /command, stream to the final event)", backend_exec,
         curl_exec},
        {"read_file 24 B (GET /files/info + /files/download)", backend_read, curl_read},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]) && rc == 0; i++)
        rc = measure(&pairs[i], pairs[i].ours == backend_exec ? n / 3 : n);
    osb_wait_reset(&w);
    opensandbox_backend_free(be);
    uv_run(&loop, UV_RUN_NOWAIT);
    curl_slist_free_all(lc_headers);
    curl_slist_free_all(exec_headers);
    curl_easy_cleanup(easy);
    buf_release(&body);
    fake_stop(&fs);
    return rc == 0 ? 0 : 1;
}
