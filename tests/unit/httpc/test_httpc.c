/* lib/httpc against a real HTTP server on loopback, served from the same libuv loop: the client
 * keeps exactly the response headers its caller names (keep_headers, any case) besides its
 * generic ones, and nothing of a caller's in particular. */
#include <string.h>
#include <uv.h>

#include "lib/httpc/httpc.h"
#include "test.h"

/* One canned answer to whatever arrives, then the connection closes. */
static const char ANSWER[] = "HTTP/1.1 200 OK\r\n"
                             "Content-Type: text/plain\r\n"
                             "X-Request-Id: req-7\r\n"
                             "WWW-Authenticate: Bearer realm=\"r\"\r\n"
                             "Execd-Commands-Tail-Cursor: 42\r\n"
                             "X-Kept: kept value\r\n"
                             "X-Other: not asked for\r\n"
                             "Content-Length: 2\r\n"
                             "Connection: close\r\n\r\nok";

struct server {
    uv_tcp_t listener;
    uv_tcp_t conn;
    uv_write_t wr;
    int port;
};

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *b)
{
    static char buf[4096];
    *b = uv_buf_init(buf, sizeof buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct server *srv = s->data;
    if (n <= 0 || memmem(b->base, (size_t)n, "\r\n\r\n", 4) == NULL)
        return;
    uv_read_stop(s);
    uv_buf_t out = uv_buf_init((char *)ANSWER, sizeof ANSWER - 1);
    uv_write(&srv->wr, s, &out, 1, NULL);
    uv_close((uv_handle_t *)s, NULL); /* after the queued write */
}

static void on_connection(uv_stream_t *l, int status)
{
    struct server *srv = l->data;
    uv_tcp_init(l->loop, &srv->conn);
    srv->conn.data = srv;
    if (status == 0 && uv_accept(l, (uv_stream_t *)&srv->conn) == 0)
        uv_read_start((uv_stream_t *)&srv->conn, on_alloc, on_read);
}

static void server_start(uv_loop_t *loop, struct server *srv)
{
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    ASSERT_EQ(uv_tcp_bind(&srv->listener, (struct sockaddr *)&a, 0), 0);
    ASSERT_EQ(uv_listen((uv_stream_t *)&srv->listener, 4, on_connection), 0);
    struct sockaddr_in bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len);
    srv->port = ntohs(bound.sin_port);
}

struct seen {
    bool done;
    long status;
    char request_id[64], content_type[128];
    char kept[64], kept_upper[64], other[64], challenge[64], cursor[64];
};

static void copy(char *dst, const char *src)
{
    snprintf(dst, 64, "%s", src);
}

static void on_done(void *arg, struct httpc_response *resp)
{
    struct seen *s = arg;
    s->done = true;
    s->status = resp->status;
    copy(s->request_id, resp->request_id);
    copy(s->content_type, resp->content_type);
    copy(s->kept, httpc_response_header(resp, "x-kept"));
    copy(s->kept_upper, httpc_response_header(resp, "X-KEPT"));
    copy(s->other, httpc_response_header(resp, "x-other"));
    copy(s->challenge, httpc_response_header(resp, "www-authenticate"));
    copy(s->cursor, httpc_response_header(resp, "execd-commands-tail-cursor"));
}

static struct seen fetch(const char *const *keep)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct server srv = {0};
    server_start(&loop, &srv);
    struct mcp_error err;
    struct httpc *h = httpc_new(&loop, &err);
    ASSERT(h != NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", srv.port);
    struct seen s = {0};
    struct httpc_req_opts o = {.method = "GET",
                               .url = url,
                               .deadline_ms = 5000,
                               .connect_timeout_ms = 2000,
                               .body_cap = 1024,
                               .retry = HTTPC_RETRY_NONE,
                               .done = on_done,
                               .arg = &s,
                               .keep_headers = keep};
    ASSERT(httpc_start(h, &o) != NULL);
    for (int i = 0; i < 10000 && !s.done; i++)
        uv_run(&loop, UV_RUN_ONCE);
    ASSERT(s.done);
    httpc_free(h);
    uv_close((uv_handle_t *)&srv.listener, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    return s;
}

/* The caller names the headers it reads: those come back, in any case of the name asked. */
TEST(keeps_the_headers_the_caller_names)
{
    static const char *const keep[] = {"X-Kept", "www-authenticate", NULL};
    struct seen s = fetch(keep);
    ASSERT_EQ(s.status, 200);
    ASSERT_STR_EQ(s.kept, "kept value");
    ASSERT_STR_EQ(s.kept_upper, "kept value");
    ASSERT_STR_EQ(s.challenge, "Bearer realm=\"r\"");
    ASSERT_STR_EQ(s.other, ""); /* sent, but not asked for */
    ASSERT_STR_EQ(s.cursor, "");
    ASSERT_STR_EQ(s.request_id, "req-7"); /* the generic ones stay */
    ASSERT_STR_EQ(s.content_type, "text/plain");
}

/* Without keep_headers, no header of a particular caller is kept: the client knows none. */
TEST(keeps_no_caller_header_unasked)
{
    struct seen s = fetch(NULL);
    ASSERT_EQ(s.status, 200);
    ASSERT_STR_EQ(s.kept, "");
    ASSERT_STR_EQ(s.challenge, "");
    ASSERT_STR_EQ(s.cursor, "");
    ASSERT_STR_EQ(s.request_id, "req-7");
}

int main(void)
{
    RUN(keeps_the_headers_the_caller_names);
    RUN(keeps_no_caller_header_unasked);
    return test_done();
}
