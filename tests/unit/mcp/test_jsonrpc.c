/* JSON-RPC framing: parse every message kind, every error class, build replies. */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/jsonrpc.h"
#include "test.h"

static struct jsonrpc_msg parse(const char *s)
{
    struct jsonrpc_msg m;

    jsonrpc_parse(s, strlen(s), &m);
    return m;
}

TEST(request_with_integer_id)
{
    struct jsonrpc_msg m = parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}");
    ASSERT_EQ(m.kind, JSONRPC_REQUEST);
    ASSERT_STR_EQ(m.method, "ping");
    ASSERT(json_is_integer(m.id) && json_integer_value(m.id) == 7);
    ASSERT(m.params == NULL);
    jsonrpc_msg_release(&m);
}

TEST(request_with_string_id_and_params)
{
    struct jsonrpc_msg m =
        parse("{\"jsonrpc\":\"2.0\",\"id\":\"a-1\",\"method\":\"tools/call\",\"params\":{\"x\":1}}");
    ASSERT_EQ(m.kind, JSONRPC_REQUEST);
    ASSERT_STR_EQ(json_string_value(m.id), "a-1");
    ASSERT(json_is_object(m.params));
    jsonrpc_msg_release(&m);
}

TEST(notification)
{
    struct jsonrpc_msg m = parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    ASSERT_EQ(m.kind, JSONRPC_NOTIFICATION);
    ASSERT(m.id == NULL);
    jsonrpc_msg_release(&m);
}

TEST(responses)
{
    struct jsonrpc_msg m = parse("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}");
    ASSERT_EQ(m.kind, JSONRPC_RESPONSE);
    ASSERT(json_is_object(m.result) && m.error == NULL);
    jsonrpc_msg_release(&m);
    m = parse("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}");
    ASSERT_EQ(m.kind, JSONRPC_RESPONSE);
    ASSERT(json_is_object(m.error));
    jsonrpc_msg_release(&m);
}

TEST(parse_errors)
{
    const char *bad[] = {"", "garbage", "{\"jsonrpc\":\"2.0\"", "{\"a\":1,\"a\":2}", "\xff\xfe",
                         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct jsonrpc_msg m = parse(bad[i]);
        ASSERT_EQ(m.kind, JSONRPC_INVALID);
        ASSERT_EQ(m.err.code, MCP_ERR_PARSE);
        ASSERT_CONTAINS(m.err.msg, "Parse error");
        jsonrpc_msg_release(&m);
    }
}

static void expect_invalid(const char *s, const char *needle, bool has_id)
{
    struct jsonrpc_msg m = parse(s);

    if (m.kind != JSONRPC_INVALID || m.err.code != MCP_ERR_INVALID_REQUEST)
        TEST_FAIL("%s: kind %d code %d", s, m.kind, m.err.code);
    ASSERT_CONTAINS(m.err.msg, needle);
    ASSERT_EQ(m.id != NULL, has_id);
    jsonrpc_msg_release(&m);
}

/* Issue #18.8: \u0000 is valid JSON; it was answered with -32700 "Parse error". It is now -32602
 * naming the argument (with the request's id), and a response carrying it still parses. */
TEST(nul_escape_is_invalid_params_not_a_parse_error)
{
    struct jsonrpc_msg m = parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":"
                                 "{\"name\":\"write_file\",\"arguments\":{\"path\":\"a\","
                                 "\"content\":\"x\\u0000y\"}}}");
    ASSERT_EQ(m.kind, JSONRPC_INVALID);
    ASSERT_EQ(m.err.code, MCP_ERR_INVALID_PARAMS);
    ASSERT_CONTAINS(m.err.msg, "params.arguments.content contains NUL");
    ASSERT(m.id != NULL && json_integer_value(m.id) == 7);
    jsonrpc_msg_release(&m);
    m = parse("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"x\",\"params\":{\"l\":[\"ok\",\"\\u0000\"]}}");
    ASSERT_EQ(m.err.code, MCP_ERR_INVALID_PARAMS);
    ASSERT_CONTAINS(m.err.msg, "params.l[1] contains NUL");
    jsonrpc_msg_release(&m);
    m = parse("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"x\",\"params\":{\"a\\u0000\":1}}");
    ASSERT_EQ(m.kind, JSONRPC_INVALID);
    ASSERT_EQ(m.err.code, MCP_ERR_INVALID_PARAMS);
    ASSERT_CONTAINS(m.err.msg, "object key contains NUL");
    jsonrpc_msg_release(&m);
    m = parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"a\\u0000b\"}}");
    ASSERT_EQ(m.kind, JSONRPC_RESPONSE);
    jsonrpc_msg_release(&m);
}

TEST(invalid_requests)
{
    expect_invalid("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", "batch", false);
    expect_invalid("[]", "batch", false);
    expect_invalid("42", "JSON object", false);
    expect_invalid("{\"id\":1,\"method\":\"ping\"}", "\"jsonrpc\"", true);
    expect_invalid("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", "2.0", true);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", "\"method\" must be a string",
                   true);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", "id", false);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", "id", false);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", "id", false);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":3}", "params",
                   true);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1}", "missing \"method\"", true);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{}}", "not both", true);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"result\":1}", "id", false);
}

TEST(build_result_and_error)
{
    json_t *id = json_string("x");
    json_t *r = jsonrpc_result(id, json_pack("{s:i}", "a", 1));
    char *s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
    ASSERT_STR_EQ(s, "{\"id\":\"x\",\"jsonrpc\":\"2.0\",\"result\":{\"a\":1}}");
    free(s);
    json_decref(r);
    r = jsonrpc_error(NULL, -32601, "Method not found: x", NULL);
    s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
    ASSERT_STR_EQ(s, "{\"error\":{\"code\":-32601,\"message\":\"Method not found: x\"},"
                     "\"id\":null,\"jsonrpc\":\"2.0\"}");
    free(s);
    json_decref(r);
    r = jsonrpc_error(id, -32602, "bad", json_pack("{s:s}", "field", "name"));
    ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(json_object_get(r, "error"),
                                                                    "data"), "field")), "name");
    json_decref(r);
    json_decref(id);
}

TEST(build_notification_and_request)
{
    json_t *n = jsonrpc_notification("notifications/progress", json_pack("{s:i}", "p", 1));
    ASSERT(json_object_get(n, "id") == NULL);
    ASSERT_STR_EQ(json_string_value(json_object_get(n, "method")), "notifications/progress");
    json_decref(n);
    json_t *id = json_integer(12);
    json_t *q = jsonrpc_request(id, "sampling/createMessage", json_object());
    ASSERT_EQ(json_integer_value(json_object_get(q, "id")), 12);
    json_decref(q);
    json_decref(id);
}

TEST(large_integer_id_roundtrip)
{
    struct jsonrpc_msg m =
        parse("{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"ping\"}");
    ASSERT_EQ(m.kind, JSONRPC_REQUEST);
    json_t *r = jsonrpc_result(m.id, NULL);
    char *s = json_dumps(r, JSON_COMPACT);
    ASSERT_CONTAINS(s, "9007199254740993");
    free(s);
    json_decref(r);
    jsonrpc_msg_release(&m);
}

int main(void)
{
    RUN(request_with_integer_id);
    RUN(request_with_string_id_and_params);
    RUN(notification);
    RUN(responses);
    RUN(parse_errors);
    RUN(invalid_requests);
    RUN(nul_escape_is_invalid_params_not_a_parse_error);
    RUN(build_result_and_error);
    RUN(build_notification_and_request);
    RUN(large_integer_id_roundtrip);
    return test_done();
}
