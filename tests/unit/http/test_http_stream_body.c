/* The request reader's streamed bodies (the OpenSandbox proxy's uploads): with stop_after_head
 * it stops once the head is in when a body follows; with a body_sink the body's bytes go there
 * as they come (chunked decoded, no size limit) instead of into req.body; without one the body
 * is kept and limited as before. */
#include <stdlib.h>
#include <string.h>

#include "server/http/http_request.h"
#include "test.h"

static struct http_reader rd;
static char sunk[256];
static size_t nsunk, sink_calls;

static void sink(void *arg, const char *data, size_t len)
{
    (void)arg;
    if (nsunk + len < sizeof(sunk))
        memcpy(sunk + nsunk, data, len);
    nsunk += len;
    sink_calls++;
}

static void reset(void)
{
    http_reader_release(&rd);
    http_reader_init(&rd);
    rd.stop_after_head = true;
    memset(sunk, 0, sizeof(sunk));
    nsunk = sink_calls = 0;
}

static size_t feed(const char *s, size_t len)
{
    return http_reader_feed(&rd, s, len);
}

TEST(stops_after_the_head_then_sinks_the_body)
{
    reset();
    const char *head = "POST /sandboxes/x/proxy/8000/up HTTP/1.1\r\nHost: h\r\n"
                       "Content-Length: 10\r\n\r\n";
    const char *s = "POST /sandboxes/x/proxy/8000/up HTTP/1.1\r\nHost: h\r\n"
                    "Content-Length: 10\r\n\r\n0123456789GET / HTTP/1.1\r\n\r\n";
    size_t n = feed(s, strlen(s));
    ASSERT_EQ(rd.state, HTTP_READER_BODY);
    ASSERT(rd.head_paused);
    ASSERT(n < strlen(s) && n >= strlen(head) - 1); /* the head's last byte may be re-read */
    ASSERT_STR_EQ(http_request_header(&rd.req, "content-length", NULL), "10");
    rd.body_sink = sink;
    size_t m = feed(s + n, strlen(s) - n);
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_EQ(n + m, strlen(head) + 10); /* the pipelined request is left for later */
    ASSERT_EQ(nsunk, 10);
    ASSERT_STR_EQ(sunk, "0123456789");
    ASSERT_EQ(rd.req.body.len, 0); /* nothing kept */
}

TEST(chunked_body_decoded_into_the_sink_piece_by_piece)
{
    reset();
    const char *s = "PUT /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    size_t used = 0, len = strlen(s);
    used += feed(s, len);
    ASSERT(rd.head_paused);
    rd.body_sink = sink;
    for (; used < len && rd.state == HTTP_READER_BODY; used++) /* byte by byte */
        ASSERT_EQ(feed(s + used, 1), 1);
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_STR_EQ(sunk, "abcdefg");
    ASSERT(sink_calls >= 2);
}

TEST(no_sink_keeps_the_body_as_before)
{
    reset();
    const char *s = "POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}";
    size_t n = feed(s, strlen(s));
    ASSERT(rd.head_paused);
    n += feed(s + n, strlen(s) - n);
    ASSERT_EQ(n, strlen(s));
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_EQ(rd.req.body.len, 2);
    ASSERT_EQ(nsunk, 0);
}

TEST(a_declared_length_over_the_limit_is_refused_only_when_kept)
{
    char s[256];
    snprintf(s, sizeof(s), "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: %zu\r\n\r\nab",
             (size_t)HTTP_MAX_BODY_BYTES + 1);
    reset();
    size_t n = feed(s, strlen(s));
    ASSERT(rd.head_paused);
    feed(s + n, strlen(s) - n);
    ASSERT_EQ(rd.state, HTTP_READER_ERROR);
    ASSERT_EQ(rd.error_status, 413);
    reset();
    n = feed(s, strlen(s));
    rd.body_sink = sink; /* streamed: no limit on the whole */
    feed(s + n, strlen(s) - n);
    ASSERT_EQ(rd.state, HTTP_READER_BODY);
    ASSERT_EQ(nsunk, 2);
}

TEST(bodiless_requests_do_not_stop)
{
    reset();
    const char *s = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
    ASSERT_EQ(feed(s, strlen(s)), strlen(s));
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT(!rd.head_paused);
}

TEST(next_forgets_the_sink)
{
    reset();
    const char *s = "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nz";
    size_t n = feed(s, strlen(s));
    rd.body_sink = sink;
    feed(s + n, strlen(s) - n);
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    http_reader_next(&rd);
    ASSERT(rd.body_sink == NULL && !rd.head_paused && rd.stop_after_head);
}

int main(void)
{
    http_reader_init(&rd);
    RUN(stops_after_the_head_then_sinks_the_body);
    RUN(chunked_body_decoded_into_the_sink_piece_by_piece);
    RUN(no_sink_keeps_the_body_as_before);
    RUN(a_declared_length_over_the_limit_is_refused_only_when_kept);
    RUN(bodiless_requests_do_not_stop);
    RUN(next_forgets_the_sink);
    http_reader_release(&rd);
    return test_done();
}
