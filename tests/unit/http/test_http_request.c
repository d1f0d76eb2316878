/* The HTTP request reader: good requests, every rejection, limits, pipelining, chunked bodies. */
#include <stdlib.h>
#include <string.h>

#include "server/http/http_request.h"
#include "test.h"

static struct http_reader rd;

/* Feeds all of s; returns the bytes used. */
static size_t feed(const char *s)
{
    return http_reader_feed(&rd, s, strlen(s));
}

static void reset(void)
{
    http_reader_release(&rd);
    http_reader_init(&rd);
}

TEST(simple_get)
{
    reset();
    const char *s = "GET /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nAccept: text/event-stream\r\n"
                    "X-Empty:\r\nX-Pad: v  \r\n\r\n";
    ASSERT_EQ(feed(s), strlen(s));
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_EQ(rd.req.method, HTTP_GET);
    ASSERT_STR_EQ(rd.req.target, "/mcp?x=1");
    ASSERT(rd.req.keep_alive);
    ASSERT_EQ(rd.req.nheaders, 4);
    ASSERT_STR_EQ(http_request_header(&rd.req, "host", NULL), "127.0.0.1:8765");
    ASSERT_STR_EQ(http_request_header(&rd.req, "accept", NULL), "text/event-stream");
    ASSERT_STR_EQ(http_request_header(&rd.req, "x-empty", NULL), "");
    ASSERT_STR_EQ(http_request_header(&rd.req, "x-pad", NULL), "v");
    ASSERT(http_request_header(&rd.req, "missing", NULL) == NULL);
    char path[64];
    ASSERT_EQ(http_request_path(&rd.req, path, sizeof(path)), 0);
    ASSERT_STR_EQ(path, "/mcp");
    ASSERT_EQ(rd.req.body.len, 0);
}

TEST(post_with_body_byte_by_byte)
{
    reset();
    const char *s = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: 17\r\n\r\n{\"jsonrpc\":\"2.0\"}";
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        ASSERT(rd.state != HTTP_READER_DONE);
        ASSERT_EQ(http_reader_feed(&rd, s + i, 1), 1);
        if (i == 0)
            ASSERT_EQ(rd.state, HTTP_READER_HEADERS);
    }
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_EQ(rd.req.method, HTTP_POST);
    ASSERT_EQ(rd.req.body.len, 17);
    ASSERT_STR_EQ(rd.req.body.data, "{\"jsonrpc\":\"2.0\"}");
}

TEST(headers_then_body_state)
{
    reset();
    ASSERT_EQ(rd.state, HTTP_READER_IDLE);
    feed("POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n");
    ASSERT_EQ(rd.state, HTTP_READER_BODY);
    feed("ab");
    ASSERT_EQ(rd.state, HTTP_READER_BODY);
    feed("cd");
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_STR_EQ(rd.req.body.data, "abcd");
}

TEST(chunked_body)
{
    reset();
    const char *s = "POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: ignored\r\n\r\n";
    ASSERT_EQ(feed(s), strlen(s));
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_EQ(rd.req.body.len, 12);
    ASSERT_STR_EQ(rd.req.body.data, "hello, world");
    ASSERT_EQ(rd.req.nheaders, 2);
    ASSERT(http_request_header(&rd.req, "x-trailer", NULL) == NULL);
}

TEST(pipelined_requests)
{
    reset();
    const char *a = "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\none";
    const char *b = "GET /two HTTP/1.1\r\nHost: a\r\n\r\n";
    const char *c = "DELETE /three HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    char all[512];
    snprintf(all, sizeof(all), "%s%s%s", a, b, c);
    size_t off = http_reader_feed(&rd, all, strlen(all));
    ASSERT_EQ(off, strlen(a));
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_STR_EQ(rd.req.body.data, "one");
    /* A finished reader takes nothing more until next(). */
    ASSERT_EQ(http_reader_feed(&rd, all + off, strlen(all) - off), 0);
    http_reader_next(&rd);
    size_t n = http_reader_feed(&rd, all + off, strlen(all) - off);
    ASSERT_EQ(n, strlen(b));
    ASSERT_STR_EQ(rd.req.target, "/two");
    ASSERT_EQ(rd.req.body.len, 0);
    off += n;
    http_reader_next(&rd);
    ASSERT_EQ(http_reader_feed(&rd, all + off, strlen(all) - off), strlen(c));
    ASSERT_EQ(rd.req.method, HTTP_DELETE);
    ASSERT(!rd.req.keep_alive);
}

TEST(http10_keep_alive_rules)
{
    reset();
    feed("GET /mcp HTTP/1.0\r\nHost: a\r\n\r\n");
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT(!rd.req.keep_alive);
    ASSERT_EQ(rd.req.http_minor, 0);
    http_reader_next(&rd);
    feed("GET /mcp HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n");
    ASSERT(rd.req.keep_alive);
}

TEST(repeated_header_is_reported)
{
    reset();
    feed("GET /mcp HTTP/1.1\r\nHost: a\r\nhOsT: b\r\n\r\n");
    bool dup = false;
    ASSERT_STR_EQ(http_request_header(&rd.req, "host", &dup), "a");
    ASSERT(dup);
}

TEST(upgrade_is_served_as_plain_request)
{
    reset();
    feed("GET /mcp HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n");
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
}

static void expect_error(const char *s, int status)
{
    reset();
    feed(s);
    ASSERT_EQ(rd.state, HTTP_READER_ERROR);
    ASSERT_EQ(rd.error_status, status);
    ASSERT(rd.error_msg != NULL);
    /* A reader in error takes nothing more. */
    ASSERT_EQ(feed("GET / HTTP/1.1\r\n\r\n"), 0);
}

TEST(rejects_garbage)
{
    expect_error("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400); /* a TLS hello */
    expect_error("HELLO WORLD\r\n\r\n", 400);
    expect_error("GET /mcp HTTP/1.1\r\nBad Header Name: x\r\n\r\n", 400);
    expect_error("GET /mcp HTTP/1.1\r\nX-Ctl: a\x01b\r\n\r\n", 400);
    expect_error("GET /mcp HTTP/1.1\r\nX(bad): a\r\n\r\n", 400);
    expect_error("GET /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", 400);
    expect_error("POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                 400);
    expect_error("POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n",
                 400);
    expect_error("POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400);
}

TEST(rejects_http2_version)
{
    expect_error("GET /mcp HTTP/2.0\r\nHost: a\r\n\r\n", 505);
}

TEST(limit_target)
{
    char *s = malloc(HTTP_MAX_TARGET_BYTES + 64);
    strcpy(s, "GET /");
    memset(s + 5, 'a', HTTP_MAX_TARGET_BYTES);
    s[5 + HTTP_MAX_TARGET_BYTES] = '\0';
    expect_error(s, 414);
    free(s);
}

TEST(limit_header_count)
{
    char s[8192] = "GET /mcp HTTP/1.1\r\n";
    for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
        snprintf(s + strlen(s), sizeof(s) - strlen(s), "X-%d: v\r\n", i);
    strcat(s, "\r\n");
    expect_error(s, 431);
    /* Exactly the maximum is fine. */
    reset();
    char ok[8192] = "GET /mcp HTTP/1.1\r\n";
    for (int i = 0; i < HTTP_MAX_HEADERS; i++)
        snprintf(ok + strlen(ok), sizeof(ok) - strlen(ok), "X-%d: v\r\n", i);
    strcat(ok, "\r\n");
    feed(ok);
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    ASSERT_EQ(rd.req.nheaders, HTTP_MAX_HEADERS);
}

TEST(limit_header_bytes)
{
    size_t n = HTTP_MAX_HEADER_BYTES + 100;
    char *s = malloc(n + 64);
    strcpy(s, "GET /mcp HTTP/1.1\r\nX-Big: ");
    size_t l = strlen(s);
    memset(s + l, 'b', n);
    strcpy(s + l + n, "\r\n\r\n");
    expect_error(s, 431);
    free(s);
}

TEST(limit_body_declared)
{
    char s[256];
    snprintf(s, sizeof(s), "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: %zu\r\n\r\n",
             HTTP_MAX_BODY_BYTES + 1);
    /* Refused on the headers alone, before any body byte. */
    expect_error(s, 413);
    reset();
    snprintf(s, sizeof(s), "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: %zu\r\n\r\n",
             HTTP_MAX_BODY_BYTES);
    feed(s);
    ASSERT_EQ(rd.state, HTTP_READER_BODY);
}

TEST(limit_body_chunked)
{
    reset();
    feed("POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    size_t piece = 1u << 20;
    char *data = malloc(piece);
    memset(data, 'x', piece);
    char head[32];
    snprintf(head, sizeof(head), "%zx\r\n", piece);
    size_t fed = 0;
    while (rd.state == HTTP_READER_BODY && fed <= HTTP_MAX_BODY_BYTES) {
        feed(head);
        http_reader_feed(&rd, data, piece);
        feed("\r\n");
        fed += piece;
    }
    free(data);
    ASSERT_EQ(rd.state, HTTP_READER_ERROR);
    ASSERT_EQ(rd.error_status, 413);
    ASSERT(rd.req.body.len <= HTTP_MAX_BODY_BYTES);
}

TEST(next_releases_large_body)
{
    reset();
    char s[128];
    size_t n = 1u << 20;
    snprintf(s, sizeof(s), "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: %zu\r\n\r\n", n);
    feed(s);
    char *data = calloc(1, n);
    http_reader_feed(&rd, data, n);
    free(data);
    ASSERT_EQ(rd.state, HTTP_READER_DONE);
    http_reader_next(&rd);
    ASSERT(rd.req.body.cap < n);
    ASSERT_EQ(rd.state, HTTP_READER_IDLE);
}

TEST(path_rules)
{
    reset();
    feed("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
    char path[8];
    ASSERT_EQ(http_request_path(&rd.req, path, sizeof(path)), -1);
    reset();
    feed("GET /much-too-long-for-the-buffer HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_EQ(http_request_path(&rd.req, path, sizeof(path)), -1);
}

int main(void)
{
    http_reader_init(&rd);
    RUN(simple_get);
    RUN(post_with_body_byte_by_byte);
    RUN(headers_then_body_state);
    RUN(chunked_body);
    RUN(pipelined_requests);
    RUN(http10_keep_alive_rules);
    RUN(repeated_header_is_reported);
    RUN(upgrade_is_served_as_plain_request);
    RUN(rejects_garbage);
    RUN(rejects_http2_version);
    RUN(limit_target);
    RUN(limit_header_count);
    RUN(limit_header_bytes);
    RUN(limit_body_declared);
    RUN(limit_body_chunked);
    RUN(next_releases_large_body);
    RUN(path_rules);
    http_reader_release(&rd);
    return test_done();
}
