/* lib/httpc: a request started from inside curl's own callbacks (a streaming sink) must still
 * run. curl_multi_add_handle refuses there (CURLM_RECURSIVE_API_CALL); this once left the second
 * request unsent until its deadline (issue 35: a terminal's start on an osb- sandbox, whose
 * settling read was started from the start's event-stream sink, hung for 60 s). */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "lib/httpc/httpc.h"
#include "test.h"

static const char ANSWER[] = "HTTP/1.1 200 OK\r\n"
                             "Content-Type: text/plain\r\n"
                             "Content-Length: 2\r\n"
                             "Connection: close\r\n\r\nok";

struct conn {
    uv_tcp_t tcp;
    uv_write_t wr;
};

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *b)
{
    (void)h, (void)size;
    static char buf[4096];
    *b = uv_buf_init(buf, sizeof buf);
}

static void conn_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = s->data;
    if (n < 0) {
        uv_close((uv_handle_t *)s, conn_closed);
        return;
    }
    if (n == 0 || memmem(b->base, (size_t)n, "\r\n\r\n", 4) == NULL)
        return;
    uv_read_stop(s);
    uv_buf_t out = uv_buf_init((char *)ANSWER, sizeof ANSWER - 1);
    uv_write(&c->wr, s, &out, 1, NULL);
    uv_close((uv_handle_t *)s, conn_closed); /* after the queued write */
}

/* Every connection gets the answer (each request its own connection). */
static void on_connection(uv_stream_t *l, int status)
{
    struct conn *c = calloc(1, sizeof(*c));
    uv_tcp_init(l->loop, &c->tcp);
    c->tcp.data = c;
    if (status == 0 && uv_accept(l, (uv_stream_t *)&c->tcp) == 0)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    else
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

struct state {
    struct httpc *h;
    char url[64];
    bool first_done, second_done, second_started;
    long second_status;
};

static void on_second_done(void *arg, struct httpc_response *resp)
{
    struct state *s = arg;
    s->second_done = true;
    s->second_status = resp->status;
}

static void on_first_done(void *arg, struct httpc_response *resp)
{
    (void)resp;
    ((struct state *)arg)->first_done = true;
}

static struct httpc_req_opts opts(struct state *s, httpc_done_fn *done)
{
    return (struct httpc_req_opts){.method = "GET",
                                   .url = s->url,
                                   .deadline_ms = 20000,
                                   .connect_timeout_ms = 2000,
                                   .body_cap = 1024,
                                   .retry = HTTPC_RETRY_NONE,
                                   .done = done,
                                   .arg = s};
}

/* The first request's sink runs inside curl: it starts the second request there. */
static int sink_starts_another(void *arg, const char *data, size_t len)
{
    (void)data, (void)len;
    struct state *s = arg;
    if (!s->second_started) {
        s->second_started = true;
        struct httpc_req_opts o = opts(s, on_second_done);
        ASSERT(httpc_start(s->h, &o) != NULL);
    }
    return 0;
}

static void on_give_up(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

TEST(a_request_started_inside_a_sink_runs)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_tcp_t listener;
    struct sockaddr_in a, bound;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(&loop, &listener);
    ASSERT_EQ(uv_tcp_bind(&listener, (struct sockaddr *)&a, 0), 0);
    ASSERT_EQ(uv_listen((uv_stream_t *)&listener, 8, on_connection), 0);
    int len = sizeof bound;
    uv_tcp_getsockname(&listener, (struct sockaddr *)&bound, &len);
    struct mcp_error err;
    struct state s = {0};
    s.h = httpc_new(&loop, &err);
    ASSERT(s.h != NULL);
    snprintf(s.url, sizeof s.url, "http://127.0.0.1:%d/x", ntohs(bound.sin_port));
    struct httpc_req_opts o = opts(&s, on_first_done);
    o.sink = sink_starts_another;
    ASSERT(httpc_start(s.h, &o) != NULL);
    uv_timer_t give_up; /* well before the second request's own deadline */
    uv_timer_init(&loop, &give_up);
    bool gave_up = false;
    give_up.data = &gave_up;
    uv_timer_start(&give_up, on_give_up, 5000, 0);
    while (!s.second_done && !gave_up)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&give_up, NULL);
    ASSERT(s.first_done);
    ASSERT(s.second_started);
    ASSERT(s.second_done);
    ASSERT_EQ(s.second_status, 200);
    httpc_free(s.h);
    uv_close((uv_handle_t *)&listener, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

int main(void)
{
    RUN(a_request_started_inside_a_sink_runs);
    return test_done();
}
