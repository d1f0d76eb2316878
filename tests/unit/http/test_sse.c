/* SSE framing: message events, multi-line data, priming, comments, refusal of line breaks in
 * field values, the buffer limit. */
#include <string.h>

#include "lib/base/buf.h"
#include "server/http/sse.h"
#include "test.h"

TEST(message_event)
{
    struct buf b;
    buf_init(&b, 1024);
    const char *json = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
    ASSERT_EQ(sse_event(&b, "message", "3-2", json, strlen(json)), 0);
    ASSERT_STR_EQ(buf_cstr(&b),
                  "event: message\nid: 3-2\n"
                  "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
    buf_release(&b);
}

TEST(multi_line_data)
{
    struct buf b;
    buf_init(&b, 1024);
    const char *d = "a\nb\r\nc\rd";
    ASSERT_EQ(sse_event(&b, NULL, NULL, d, strlen(d)), 0);
    ASSERT_STR_EQ(buf_cstr(&b), "data: a\ndata: b\ndata: c\ndata: d\n\n");
    buf_reset(&b);
    ASSERT_EQ(sse_event(&b, NULL, NULL, "", 0), 0);
    ASSERT_STR_EQ(buf_cstr(&b), "data: \n\n");
    buf_reset(&b);
    ASSERT_EQ(sse_event(&b, NULL, NULL, "x\n", 2), 0);
    ASSERT_STR_EQ(buf_cstr(&b), "data: x\ndata: \n\n");
    buf_release(&b);
}

TEST(priming_and_comment)
{
    struct buf b;
    buf_init(&b, 1024);
    ASSERT_EQ(sse_priming(&b, "1-1", SSE_RETRY_MS), 0);
    ASSERT_STR_EQ(buf_cstr(&b), "id: 1-1\nretry: 1000\ndata: \n\n");
    buf_reset(&b);
    ASSERT_EQ(sse_comment(&b, "keep-alive"), 0);
    ASSERT_STR_EQ(buf_cstr(&b), ": keep-alive\n\n");
    buf_release(&b);
}

TEST(refuses_line_breaks_in_fields)
{
    struct buf b;
    buf_init(&b, 1024);
    ASSERT_EQ(sse_event(&b, "mess\nage", NULL, "x", 1), -1);
    ASSERT_EQ(sse_event(&b, NULL, "1\r2", "x", 1), -1);
    ASSERT_EQ(sse_priming(&b, "a\nb", 1), -1);
    ASSERT_EQ(sse_comment(&b, "x\ny"), -1);
    ASSERT_EQ(b.len, 0);
    buf_release(&b);
}

TEST(buffer_limit)
{
    struct buf b;
    buf_init(&b, 16);
    ASSERT_EQ(sse_event(&b, "message", "1", "0123456789", 10), -1);
    buf_release(&b);
}

int main(void)
{
    RUN(message_event);
    RUN(multi_line_data);
    RUN(priming_and_comment);
    RUN(refuses_line_breaks_in_fields);
    RUN(buffer_limit);
    return test_done();
}
