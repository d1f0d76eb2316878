/* The transport's connection handling over a real socket and loop, against a scripted core
 * (fake_core.c), with the timeouts and the session cap shrunk at compile time (see
 * CMakeLists.txt): timeouts for slow headers, an unfinished body and idle keep-alive, SSE
 * keep-alive comments, messages unrelated to a request on the GET stream, a client that stops
 * reading (dropped, its request cancelled), a POST closed before its reply, concurrent POSTs,
 * session expiry and the session cap. The loop runs on the main thread; the client on another. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "fake_core.h"
#include "lib/base/buf.h"
#include "lib/base/xalloc.h"
#include "server/config.h"
#include "mcp/http/http_transport.h"
#include "test.h"

#define CLIENT_BUF (256 * 1024)

static int port;
static uv_async_t done_async;
static struct mcp_server *srv;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        TEST_FAIL("connect: %s", strerror(errno));
    return fd;
}

static void send_str(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            TEST_FAIL("send: %s", strerror(errno));
        s += w;
        n -= (size_t)w;
    }
}

/* Reads into buf until needle shows up (true), or EOF/timeout (false). */
static bool read_until(int fd, char *buf, size_t *len, const char *needle, int timeout_ms)
{
    for (long end = now_ms() + timeout_ms; now_ms() < end;) {
        buf[*len] = '\0';
        if (strstr(buf, needle))
            return true;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0)
            continue;
        ssize_t r = recv(fd, buf + *len, CLIENT_BUF - 1 - *len, 0);
        if (r <= 0)
            return false;
        *len += (size_t)r;
    }
    buf[*len] = '\0';
    return strstr(buf, needle) != NULL;
}

static bool expect(int fd, const char *needle, int timeout_ms)
{
    static char buf[CLIENT_BUF];
    size_t len = 0;
    return read_until(fd, buf, &len, needle, timeout_ms);
}

/* True when the server closes (EOF or reset) within timeout_ms; data is discarded. */
static bool closed_within(int fd, int timeout_ms)
{
    char tmp[65536];
    for (long end = now_ms() + timeout_ms; now_ms() < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0)
            continue;
        if (recv(fd, tmp, sizeof(tmp), 0) <= 0)
            return true;
    }
    return false;
}

static char *post(const char *sid, const char *body)
{
    return xasprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "Accept: application/json, text/event-stream\r\n"
                     "Content-Type: application/json\r\n%s%s%sContent-Length: %zu\r\n\r\n%s",
                     port, sid ? "Mcp-Session-Id: " : "", sid ? sid : "", sid ? "\r\n" : "",
                     strlen(body), body);
}

static void request(int fd, const char *sid, const char *body)
{
    char *r = post(sid, body);
    send_str(fd, r);
    free(r);
}

static char sid[128];

/* DELETE of the current session (sid). */
static void end_session(void)
{
    int d = dial();
    char *del = xasprintf("DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                          "Mcp-Session-Id: %s\r\n\r\n", port, sid);
    send_str(d, del);
    free(del);
    ASSERT(expect(d, "HTTP/1.1 200", 2000));
    close(d);
}

static void new_session(void)
{
    static char buf[CLIENT_BUF];
    size_t len = 0;
    int fd = dial();
    request(fd, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
    ASSERT(read_until(fd, buf, &len, "2025-11-25", 2000));
    const char *h = strstr(buf, "Mcp-Session-Id: ");
    ASSERT(h != NULL);
    ASSERT_EQ(sscanf(h + 16, "%127[^\r]", sid), 1);
    close(fd);
}

TEST(echo_and_keep_alive_idle_close)
{
    new_session();
    int fd = dial();
    request(fd, sid, "{\"jsonrpc\":\"2.0\",\"id\":\"e\",\"method\":\"echo\",\"params\":{\"a\":1}}");
    ASSERT(expect(fd, "{\"jsonrpc\":\"2.0\",\"id\":\"e\",\"result\":{\"a\":1}}", 2000));
    /* Idle after the reply: closed once the keep-alive timeout passes, not before. */
    ASSERT(!closed_within(fd, HTTP_KEEPALIVE_TIMEOUT_MS / 2));
    ASSERT(closed_within(fd, 3000));
    close(fd);
}

TEST(silent_connection_closed)
{
    int fd = dial();
    ASSERT(closed_within(fd, 3000));
    close(fd);
}

TEST(slow_headers_get_408)
{
    int fd = dial();
    send_str(fd, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    ASSERT(expect(fd, "HTTP/1.1 408", 3000));
    ASSERT(closed_within(fd, 3000));
    close(fd);
}

TEST(unfinished_body_gets_408)
{
    int fd = dial();
    char *r = xasprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 100\r\n\r\n"
                        "{\"jsonrpc\"",
                        port);
    send_str(fd, r);
    free(r);
    ASSERT(expect(fd, "HTTP/1.1 408", 3000));
    close(fd);
}

TEST(get_stream_pings_and_unrelated_messages)
{
    new_session();
    int g = dial();
    char *r = xasprintf("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n"
                        "Mcp-Session-Id: %s\r\n\r\n",
                        port, sid);
    send_str(g, r);
    free(r);
    ASSERT(expect(g, "retry: ", 2000));
    ASSERT(expect(g, ": keep-alive", 3000));
    int p = dial();
    request(p, sid, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"broadcast\"}");
    ASSERT(expect(p, "\"result\":{}", 2000));
    ASSERT(expect(g, "notifications/tools/list_changed", 2000));
    close(p);
    close(g);
}

TEST(client_that_stops_reading_is_dropped_and_cancelled)
{
    new_session();
    int before = __atomic_load_n(&fake_cancelled, __ATOMIC_SEQ_CST);
    int fd = dial();
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    /* 48 MiB of notifications, never read. */
    request(fd, sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"flood\","
                     "\"params\":{\"count\":48,\"size\":1048576}}");
    for (int i = 0; i < 2000 && __atomic_load_n(&fake_cancelled, __ATOMIC_SEQ_CST) == before; i++)
        usleep(10000);
    ASSERT_EQ(__atomic_load_n(&fake_cancelled, __ATOMIC_SEQ_CST), before + 1);
    /* Reset, not a graceful close: the kernel must not keep megabytes for a peer whose
     * window stays shut (a 4 KiB receive buffer never opens one). */
    ASSERT(closed_within(fd, 3000));
    close(fd);
}

TEST(stalled_reader_is_dropped_and_cancelled)
{
    new_session();
    int before = __atomic_load_n(&fake_cancelled, __ATOMIC_SEQ_CST);
    int fd = dial();
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    /* 6 MiB: under the queue cap, but it never drains; the write-stall timeout ends it. */
    request(fd, sid, "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"flood\","
                     "\"params\":{\"count\":6,\"size\":1048576}}");
    usleep(HTTP_WRITE_STALL_MS * 1000 / 2);
    ASSERT_EQ(__atomic_load_n(&fake_cancelled, __ATOMIC_SEQ_CST), before);
    for (int i = 0; i < 2000 && __atomic_load_n(&fake_cancelled, __ATOMIC_SEQ_CST) == before; i++)
        usleep(10000);
    ASSERT_EQ(__atomic_load_n(&fake_cancelled, __ATOMIC_SEQ_CST), before + 1);
    ASSERT(closed_within(fd, 3000));
    close(fd);
}

TEST(post_closed_before_reply)
{
    new_session();
    int fd = dial();
    request(fd, sid, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"later\"}");
    close(fd);
    usleep(300000); /* the reply arrives after the connection is gone: dropped */
    fd = dial();
    request(fd, sid, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"echo\"}");
    ASSERT(expect(fd, "\"id\":5", 2000));
    close(fd);
}

static void cancel(const char *id_json)
{
    char body[160];
    int fd = dial();
    snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                                 "\"params\":{\"requestId\":%s}}", id_json);
    request(fd, sid, body);
    ASSERT(expect(fd, "HTTP/1.1 202", 2000));
    close(fd);
}

TEST(cancelled_requests_end_their_exchange)
{
    static char buf[CLIENT_BUF];
    size_t len = 0;
    new_session();
    /* an SSE stream already started ends (the terminating chunk); the connection stays up */
    int a = dial();
    request(a, sid, "{\"jsonrpc\":\"2.0\",\"id\":40,\"method\":\"hold\",\"params\":{"
                    "\"notify\":true}}");
    ASSERT(expect(a, "\"data\":\"held\"", 2000));
    cancel("40");
    ASSERT(expect(a, "0\r\n\r\n", 2000)); /* the last chunk (the data's came before) */
    request(a, sid, "{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"echo\"}");
    ASSERT(expect(a, "\"id\":41", 2000));
    close(a);
    /* a reply not yet started: an event stream with no events, not even a priming one */
    int b = dial();
    request(b, sid, "{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"hold\"}");
    struct pollfd quiet = {.fd = b, .events = POLLIN};
    ASSERT_EQ(poll(&quiet, 1, 100), 0); /* held: nothing comes */
    cancel("\"h\"");
    ASSERT(read_until(b, buf, &len, "\r\n0\r\n\r\n", 2000));
    ASSERT_CONTAINS(buf, "Content-Type: text/event-stream");
    ASSERT(strstr(buf, "retry:") == NULL && strstr(buf, "data:") == NULL);
    close(b);
    end_session(); /* now: the session cap test below needs the room */
}

TEST(concurrent_posts_on_one_session)
{
    new_session();
    int fds[3];
    char body[128];
    for (int i = 0; i < 3; i++) {
        fds[i] = dial();
        snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"later\"}",
                 10 + i);
        request(fds[i], sid, body);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(body, sizeof(body), "\"id\":%d,\"result\"", 10 + i);
        ASSERT(expect(fds[i], body, 2000));
        close(fds[i]);
    }
}

/* Pipelined requests in one send, more than one resume takes at a time (16), with a reply
 * that comes later in the middle and a last request asking to close: every reply arrives, in
 * order, each exactly once, and the connection closes only after the last one. */
TEST(pipelined_requests_answered_in_order)
{
    enum { N = 40, LATER_AT = 20 };
    static char buf[CLIENT_BUF];
    size_t len = 0;
    new_session();
    int fd = dial();
    struct buf all;
    buf_init(&all, (size_t)-1);
    for (int i = 0; i < N; i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\"}", 100 + i,
                 i == LATER_AT ? "later" : "echo");
        char *r = post(sid, body);
        const char *line = "POST /mcp HTTP/1.1\r\n";
        ASSERT(strncmp(r, line, strlen(line)) == 0);
        buf_append_str(&all, line);
        if (i == N - 1) /* the last one ends the connection */
            buf_append_str(&all, "Connection: close\r\n");
        buf_append_str(&all, r + strlen(line));
        free(r);
    }
    send_str(fd, buf_cstr(&all));
    buf_release(&all);
    char last[64];
    snprintf(last, sizeof(last), "\"id\":%d,\"result\"", 100 + N - 1);
    ASSERT(read_until(fd, buf, &len, last, 3000));
    const char *at = buf;
    for (int i = 0; i < N; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\"id\":%d,\"result\"", 100 + i);
        const char *hit = strstr(at, want);
        ASSERT(hit != NULL);
        ASSERT(strstr(hit + 1, want) == NULL); /* exactly once */
        at = hit;
    }
    ASSERT(strstr(at, "Connection: close") == NULL); /* the last head precedes its body */
    ASSERT(closed_within(fd, 2000));
    close(fd);
    end_session(); /* the session cap test below needs the room */
}

/* A client that pipelines requests and reads none of the replies: once the replies queued for
 * it pass HTTP_MAX_QUEUED_OUTPUT, the server stops reading its requests (the client's sends
 * block) instead of queueing replies without end. Before, it read and answered every request
 * and queued all the replies until the write-stall timeout dropped the client. */
TEST(pipelining_client_that_never_reads_is_pushed_back)
{
    enum { N = 2000, PARAM = 32 * 1024 };
    new_session();
    int fd = dial();
    char *param = xmalloc(PARAM + 1);
    memset(param, 'x', PARAM);
    param[PARAM] = '\0';
    int sent = 0;
    size_t off = 0;
    char *req = NULL;
    long blocked_since = 0;
    bool pushed_back = false;
    while (!pushed_back && sent < N) {
        if (req == NULL) {
            char *body = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"echo\","
                                   "\"params\":{\"p\":\"%s\"}}", sent, param);
            req = post(sid, body), off = 0;
            free(body);
        }
        ssize_t w = send(fd, req + off, strlen(req) - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            blocked_since = 0;
            if ((off += (size_t)w) == strlen(req))
                free(req), req = NULL, sent++;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            break; /* dropped while the server was still reading: no push-back */
        if (!blocked_since)
            blocked_since = now_ms();
        pushed_back = now_ms() - blocked_since > 200; /* well before the write-stall drop */
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, 1);
    }
    free(req);
    free(param);
    printf("# %d of %d requests sent before the server pushed back\n", sent, N);
    ASSERT(pushed_back);
    ASSERT(sent < N);
    ASSERT(closed_within(fd, 3000)); /* reading lets it answer the rest, then idle-close */
    close(fd);
    end_session();
}

/* The session's standalone GET stream, open (the session is in use while it is). */
static int open_get_stream(const char *id)
{
    int g = dial();
    char *r = xasprintf("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n"
                        "Mcp-Session-Id: %s\r\n\r\n",
                        port, id);
    send_str(g, r);
    free(r);
    ASSERT(expect(g, "retry: ", 2000));
    return g;
}

static int echo_status(const char *id)
{
    static char buf[CLIENT_BUF];
    size_t len = 0;
    int fd = dial();
    request(fd, id, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"echo\"}");
    int status = read_until(fd, buf, &len, "\r\n", 2000) ? atoi(buf + 9) : -1;
    close(fd);
    return status;
}

/* Idle sessions expire; at the cap (issue #18.6: 128 idle sessions locked everyone out for up
 * to 30 minutes) a new session ends the owner's least recently used idle one, and only when
 * every session is in use is an initialize refused, with 503 naming the limit. */
TEST(session_expiry_and_cap)
{
    new_session();
    char old[128];
    snprintf(old, sizeof(old), "%s", sid);
    usleep((HTTP_SESSION_IDLE_MS + 4 * HTTP_SWEEP_INTERVAL_MS) * 1000);
    ASSERT_EQ(echo_status(old), 404);
    ASSERT_EQ(__atomic_load_n(&fake_sessions_open, __ATOMIC_SEQ_CST), 0);
    char ids[HTTP_MAX_SESSIONS + 1][128];
    for (int i = 0; i < HTTP_MAX_SESSIONS; i++) {
        new_session();
        snprintf(ids[i], sizeof ids[i], "%s", sid);
        usleep(20000); /* distinct last-activity times */
    }
    ASSERT_EQ(echo_status(ids[1]), 200); /* now ids[0] is the least recently used */
    new_session(); /* at the cap: replaces ids[0] */
    snprintf(ids[HTTP_MAX_SESSIONS], sizeof ids[0], "%s", sid);
    ASSERT_EQ(echo_status(ids[0]), 404);
    for (int i = 1; i <= HTTP_MAX_SESSIONS; i++)
        ASSERT_EQ(echo_status(ids[i]), 200);
    int streams[HTTP_MAX_SESSIONS];
    for (int i = 0; i < HTTP_MAX_SESSIONS; i++)
        streams[i] = open_get_stream(ids[i + 1]);
    int fd = dial();
    request(fd, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
    ASSERT(expect(fd, "too many sessions (limit 4)", 2000));
    close(fd);
    for (int i = 0; i < HTTP_MAX_SESSIONS; i++)
        close(streams[i]);
}

/* Issue #18.6: HTTP_MAX_CONNECTIONS connections that never send a byte locked a real client
 * out; at the limit the oldest connection without a complete request makes room. */
TEST(connection_cap_evicts_the_oldest_without_a_request)
{
    int idle[HTTP_MAX_CONNECTIONS];
    for (int i = 0; i < HTTP_MAX_CONNECTIONS; i++)
        idle[i] = dial();
    send_str(idle[1], "POST /mcp HTTP/1.1\r\n"); /* half a request: no exchange either */
    new_session(); /* a real client, within the header timeout of the idle ones */
    ASSERT_EQ(echo_status(sid), 200);
    ASSERT(closed_within(idle[0], 100)); /* the oldest made room first */
    for (int i = 0; i < HTTP_MAX_CONNECTIONS; i++)
        close(idle[i]);
    end_session();
}

static bool stop_sent;

static void stop_server(void)
{
    if (!stop_sent)
        uv_async_send(&done_async);
    stop_sent = true;
}

/* Issue #18.9: SIGTERM answered in-flight POSTs with 404 "Session terminated", which clients
 * read as an expired session; a stop is 503 with Retry-After (and a JSON-RPC error on an SSE
 * stream), naming the request. Last: it stops the server. */
TEST(stop_answers_requests_in_flight_with_503)
{
    static char buf[CLIENT_BUF];
    size_t len = 0;
    new_session();
    int p = dial();
    request(p, sid, "{\"jsonrpc\":\"2.0\",\"id\":\"held\",\"method\":\"hold\"}");
    int q = dial();
    request(q, sid, "{\"jsonrpc\":\"2.0\",\"id\":\"streamed\",\"method\":\"hold\","
                    "\"params\":{\"notify\":true}}");
    ASSERT(expect(q, "notifications/message", 2000));
    usleep(100000); /* the first request has reached the core too */
    stop_server();
    ASSERT(read_until(p, buf, &len, "shutting down", 3000));
    ASSERT_CONTAINS(buf, "HTTP/1.1 503");
    ASSERT_CONTAINS(buf, "Retry-After: 5");
    ASSERT_CONTAINS(buf, "\"id\":\"held\"");
    len = 0;
    ASSERT(read_until(q, buf, &len, "shutting down", 3000));
    ASSERT_CONTAINS(buf, "\"id\":\"streamed\"");
    close(p);
    close(q);
}

static void *client_main(void *arg)
{
    RUN(echo_and_keep_alive_idle_close);
    RUN(silent_connection_closed);
    RUN(slow_headers_get_408);
    RUN(unfinished_body_gets_408);
    RUN(get_stream_pings_and_unrelated_messages);
    RUN(client_that_stops_reading_is_dropped_and_cancelled);
    RUN(stalled_reader_is_dropped_and_cancelled);
    RUN(post_closed_before_reply);
    RUN(cancelled_requests_end_their_exchange);
    RUN(concurrent_posts_on_one_session);
    RUN(pipelined_requests_answered_in_order);
    RUN(pipelining_client_that_never_reads_is_pushed_back);
    RUN(connection_cap_evicts_the_oldest_without_a_request);
    RUN(session_expiry_and_cap);
    RUN(stop_answers_requests_in_flight_with_503);
    stop_server();
    return NULL;
}

static void on_done(uv_async_t *a)
{
    fake_server_stop(srv);
    uv_close((uv_handle_t *)a, NULL);
}

int main(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    srv = fake_server_new(&loop);
    port = free_port();
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    struct mcp_config cfg = {.http_listen = listen};
    struct mcp_error err;
    if (http_transport_start(srv, &cfg, NULL, &err) < 0) {
        printf("Bail out! %s\n", err.msg);
        return 1;
    }
    uv_async_init(&loop, &done_async, on_done);
    pthread_t client;
    pthread_create(&client, NULL, client_main, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(client, NULL);
    uv_loop_close(&loop);
    return test_done();
}
