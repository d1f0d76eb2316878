/* The HTTP listener of server/http/ serves a front-end that is not MCP: it knows no protocol.
 * Two listeners on one loop, over real sockets: a bare front-end (a route hook and nothing
 * else) gets plain-text refusals and no MCP header; a front-end with every hook sees its route,
 * its head lines, its error body, a record per connection that lives across keep-alive
 * requests, exchange_end once per exchange (aborted when the client stops reading) and stop
 * once. The loop runs on the main thread; the client on another. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "server/config.h"
#include "server/http/http_conn.h"
#include "server/http/http_server.h"
#include "server/server.h"
#include "test.h"

/* The runtime the listener asks for (server/server.h): a loop and one stop hook per listener. */
struct mcp_server {
    uv_loop_t *loop;
    server_stop_fn *stop_fn;
    void *stop_arg;
};

uv_loop_t *server_loop(struct mcp_server *srv)
{
    return srv->loop;
}

void server_on_stop(struct mcp_server *srv, server_stop_fn *fn, void *arg)
{
    srv->stop_fn = fn;
    srv->stop_arg = arg;
}

static struct mcp_server bare_srv, full_srv;
static int bare_port, full_port;
static uv_async_t done_async;
static atomic_int routed, ended, aborted_ends, stopped, errors;

static void route_hello(void *arg, struct http_conn *c, const char *path)
{
    (void)arg;
    char body[128];
    routed++;
    snprintf(body, sizeof body, "hello %s", path ? path : "(no path)");
    http_conn_respond(c, 200, "text/plain", NULL, body, strlen(body));
}

/* The record: how many requests this connection has had, or a stream that never ends. */
struct record {
    int requests;
};

static void route_counting(void *arg, struct http_conn *c, const char *path)
{
    struct record *r = c->frontend;
    char body[64];
    (void)arg;
    routed++;
    if (path && strcmp(path, "/stream") == 0) {
        /* 32 MiB of events to a client that reads none: past the output cap, it is dropped */
        char *event = malloc(1u << 20);
        memset(event, 'x', 1u << 20);
        c->mode = EX_GET;
        http_conn_sse_start(c, false);
        for (int i = 0; i < 32 && !c->closing; i++)
            http_conn_sse_message(c, event, 1u << 20);
        free(event);
        return;
    }
    snprintf(body, sizeof body, "request %d", ++r->requests);
    http_conn_respond(c, 200, "text/plain", NULL, body, strlen(body));
}

static void end_counting(void *arg, struct http_conn *c, bool aborted)
{
    (void)arg;
    (void)c;
    ended++;
    if (aborted)
        aborted_ends++;
}

static void stop_counting(void *arg)
{
    (void)arg;
    stopped++;
}

static void head_line(void *arg, struct http_conn *c, struct buf *h)
{
    (void)arg;
    (void)c;
    buf_append_str(h, "X-Front: yes\r\n");
}

static void error_json(void *arg, struct http_conn *c, int status, const char *extra,
                       const char *msg)
{
    char body[600];
    (void)arg;
    errors++;
    snprintf(body, sizeof body, "{\"refused\":\"%s\"}", msg);
    http_conn_respond(c, status, "application/json", extra, body, strlen(body));
}

static const struct http_frontend bare_fe = {.endpoint = "/", .route = route_hello};
static const struct http_frontend full_fe = {
    .conn_size = sizeof(struct record),
    .endpoint = "/",
    .route = route_counting,
    .exchange_end = end_counting,
    .stop = stop_counting,
    .head = head_line,
    .error = error_json,
};

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        TEST_FAIL("connect: %s", strerror(errno));
    return fd;
}

/* Sends req and reads one response (up to its body's needle, or close) into out. */
static void exchange(int fd, const char *req, const char *needle, char *out, size_t size)
{
    size_t len = 0;
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
        TEST_FAIL("send: %s", strerror(errno));
    out[0] = '\0';
    for (long end = now_ms() + 3000; now_ms() < end && !strstr(out, needle);) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0)
            continue;
        ssize_t r = recv(fd, out + len, size - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        out[len] = '\0';
    }
    if (!strstr(out, needle))
        TEST_FAIL("no '%s' in the reply: %s", needle, out);
}

static void wait_for(atomic_int *counter, int value)
{
    for (long end = now_ms() + 3000; now_ms() < end && *counter < value;)
        usleep(5000);
    ASSERT_EQ(*counter, value);
}

TEST(a_bare_front_end_gets_its_route_and_plain_refusals)
{
    char out[4096];
    int fd = dial(bare_port);
    exchange(fd, "GET /any/path?q=1 HTTP/1.1\r\nHost: localhost\r\n\r\n", "hello /any/path", out,
             sizeof out);
    ASSERT(strstr(out, "HTTP/1.1 200 OK\r\n") == out);
    ASSERT(!strstr(out, "Mcp-Session-Id"));
    exchange(fd, "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", "evil.example", out, sizeof out);
    ASSERT(strstr(out, "HTTP/1.1 403 Forbidden\r\n") == out);
    ASSERT(strstr(out, "Content-Type: text/plain"));
    ASSERT(strstr(out, "\r\n\r\nForbidden: invalid Host header: evil.example"));
    ASSERT(!strstr(out, "jsonrpc"));
    close(fd);
    fd = dial(bare_port);
    exchange(fd, "GET / HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", "header", out,
             sizeof out);
    ASSERT(strstr(out, "HTTP/1.1 400 Bad Request\r\n") == out);
    ASSERT(strstr(out, "\r\n\r\nBad Request: repeated host header"));
    close(fd);
    ASSERT_EQ(routed, 1);
}

TEST(a_front_end_with_hooks_sees_its_exchanges)
{
    char out[4096];
    int fd = dial(full_port);
    int before = ended;
    exchange(fd, "GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "request 1", out, sizeof out);
    ASSERT(strstr(out, "X-Front: yes\r\n"));
    exchange(fd, "GET /b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "request 2", out, sizeof out);
    exchange(fd, "GET /c HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n\r\n", "}",
             out, sizeof out);
    ASSERT(strstr(out, "HTTP/1.1 403 Forbidden\r\n") == out);
    ASSERT(strstr(out, "X-Front: yes\r\n"));
    ASSERT(strstr(out, "{\"refused\":\"Forbidden: invalid Origin header: http://evil.example\"}"));
    ASSERT_EQ(errors, 1);
    wait_for(&ended, before + 3); /* once per exchange, the refused one too (the loop's thread) */
    close(fd);
    fd = dial(full_port); /* a new connection: a new record */
    exchange(fd, "GET /d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "request 1", out, sizeof out);
    close(fd);
}

TEST(a_client_that_stops_reading_ends_its_exchange_aborted)
{
    int fd = dial(full_port);
    int rcvbuf = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    const char *req = "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ASSERT_EQ(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    wait_for(&aborted_ends, 1);
    close(fd);
}

static void *client_main(void *arg)
{
    (void)arg;
    RUN(a_bare_front_end_gets_its_route_and_plain_refusals);
    RUN(a_front_end_with_hooks_sees_its_exchanges);
    RUN(a_client_that_stops_reading_ends_its_exchange_aborted);
    uv_async_send(&done_async);
    return NULL;
}

static void on_done(uv_async_t *a)
{
    bare_srv.stop_fn(bare_srv.stop_arg);
    full_srv.stop_fn(full_srv.stop_arg);
    uv_close((uv_handle_t *)a, NULL);
}

/* A listener on a free loopback port; its port, or 0. */
static int listen_on(struct mcp_server *srv, const struct http_frontend *fe)
{
    char listen[] = "127.0.0.1:0";
    struct mcp_config cfg = {.http_listen = listen};
    struct mcp_error err;
    struct http_server *hs = http_server_listen(srv, &cfg, fe, NULL, &err);
    if (!hs) {
        printf("Bail out! %s\n", err.msg);
        return 0;
    }
    return hs->policy.port;
}

int main(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    bare_srv.loop = full_srv.loop = &loop;
    bare_port = listen_on(&bare_srv, &bare_fe);
    full_port = listen_on(&full_srv, &full_fe);
    if (!bare_port || !full_port)
        return 1;
    uv_async_init(&loop, &done_async, on_done);
    pthread_t client;
    pthread_create(&client, NULL, client_main, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(client, NULL);
    uv_loop_close(&loop);
    if (stopped != 1) {
        printf("not ok - the front-end's stop hook ran %d times\n", (int)stopped);
        return 1;
    }
    return test_done();
}
