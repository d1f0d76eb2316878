/* Session dispatch: drives session_handle with a fake transport and checks every reply. */
#include "fake_transport.h"
#include "mcp/limits.h"
#include "mcp/registry.h"
#include "mcp/session-internal.h"
#include "test.h"

#define INIT_CAPS "{\"sampling\":{},\"elicitation\":{}}"

static json_t *result_of(json_t *reply)
{
    return json_object_get(reply, "result");
}

static const char *first_text(json_t *reply)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(result_of(reply), "content"), 0), "text"));
}

TEST(initialize_negotiates_versions)
{
    static const char *const asked[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
                                        "1999-01-01"};
    static const char *const got[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2025-11-25",
                                      "2025-11-25"};
    for (size_t i = 0; i < 5; i++) {
        struct fake f;
        char line[256];
        fake_open(&f);
        snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                                     "\"params\":{\"protocolVersion\":\"%s\",\"capabilities\":{},"
                                     "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
                 asked[i]);
        fake_feed(&f, line);
        json_t *r = result_of(fake_reply(&f, 1));
        ASSERT_STR_EQ(json_string_value(json_object_get(r, "protocolVersion")), got[i]);
        ASSERT_STR_EQ(session_protocol_version(f.s), got[i]);
        json_t *caps = json_object_get(r, "capabilities");
        ASSERT(json_is_true(json_object_get(json_object_get(caps, "tools"), "listChanged")));
        ASSERT(json_is_true(json_object_get(json_object_get(caps, "resources"), "subscribe")));
        ASSERT(json_object_get(caps, "logging") && json_object_get(caps, "completions"));
        ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")),
                      "mcpbox");
        ASSERT(json_string_length(json_object_get(r, "instructions")) > 0);
        fake_close(&f);
    }
}

TEST(requests_before_initialize_fail_except_ping)
{
    struct fake f;
    fake_open(&f);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 1)), -32600);
    ASSERT_CONTAINS(fake_error_message(fake_reply(&f, 1)), "not initialized");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
    ASSERT(json_is_object(result_of(fake_reply(&f, 2))));
    ASSERT(!session_is_initialized(f.s));
    fake_close(&f);
}

TEST(error_codes_and_ids_echoed)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, "{}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"str-id\",\"method\":\"nope/nope\"}");
    json_t *last = json_object_get(json_array_get(f.sent, json_array_size(f.sent) - 1), "msg");
    ASSERT_STR_EQ(json_string_value(json_object_get(last, "id")), "str-id");
    ASSERT_EQ(fake_error_code(last), -32601);
    ASSERT_CONTAINS(fake_error_message(last), "nope/nope");
    fake_feed(&f, "not json");
    last = json_object_get(json_array_get(f.sent, json_array_size(f.sent) - 1), "msg");
    ASSERT_EQ(fake_error_code(last), -32700);
    ASSERT(json_is_null(json_object_get(last, "id")));
    fake_feed(&f, "[{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}]");
    last = json_object_get(json_array_get(f.sent, json_array_size(f.sent) - 1), "msg");
    ASSERT_EQ(fake_error_code(last), -32600);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":3}}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 6)), -32602);
    ASSERT_CONTAINS(fake_error_message(fake_reply(&f, 6)), "\"name\" must be a string, got integer");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":[1]}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 7)), -32602);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"logging/setLevel\",\"params\":{"
                  "\"level\":\"loud\"}}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 8)), -32602);
    ASSERT_CONTAINS(fake_error_message(fake_reply(&f, 8)), "loud");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{"
                  "\"protocolVersion\":\"2025-11-25\"}}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 9)), -32600);
    /* notifications and stray responses get no reply */
    size_t n = json_array_size(f.sent);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}");
    ASSERT_EQ(json_array_size(f.sent), n);
    fake_close(&f);
}

TEST(tools_list_sorted_with_fixtures_verbatim)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, "{}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    json_t *tools = json_object_get(result_of(fake_reply(&f, 1)), "tools");
    ASSERT(json_array_size(tools) >= 14);
    const char *prev = "";
    size_t i;
    json_t *t;
    json_t *schema2020 = NULL;
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        ASSERT(strcmp(prev, name) < 0);
        ASSERT(json_string_length(json_object_get(t, "description")) > 0);
        prev = name;
        if (strcmp(name, "json_schema_2020_12_tool") == 0)
            schema2020 = json_object_get(t, "inputSchema");
    }
    ASSERT(schema2020);
    ASSERT_STR_EQ(json_string_value(json_object_get(schema2020, "$schema")),
                  "https://json-schema.org/draft/2020-12/schema");
    ASSERT(json_object_get(json_object_get(schema2020, "$defs"), "address"));
    ASSERT(json_is_false(json_object_get(schema2020, "additionalProperties")));
    /* SEP-2106 keywords, served verbatim */
    ASSERT_STR_EQ(json_string_value(json_object_get(
                      json_object_get(json_object_get(schema2020, "$defs"), "address"), "$anchor")),
                  "addressDef");
    ASSERT(json_object_get(json_array_get(json_object_get(schema2020, "allOf"), 0), "anyOf"));
    ASSERT(json_object_get(schema2020, "if") && json_object_get(schema2020, "then") &&
           json_object_get(schema2020, "else"));
    fake_close(&f);
}

TEST(tools_call_results_and_errors)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, "{}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_simple_text\"}}");
    ASSERT_STR_EQ(first_text(fake_reply(&f, 1)), "This is a simple text response for testing.");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"no_such_tool\"}}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 2)), -32602);
    ASSERT_CONTAINS(fake_error_message(fake_reply(&f, 2)), "no_such_tool");
    /* invalid arguments: a tool result with isError, naming the field (SEP-1303) */
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_sampling\",\"arguments\":{\"prompt\":5}}}");
    ASSERT(json_is_true(json_object_get(result_of(fake_reply(&f, 3)), "isError")));
    ASSERT_STR_EQ(first_text(fake_reply(&f, 3)),
                  "Invalid arguments: arguments.prompt: must be a string, got integer");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_error_handling\",\"arguments\":{}}}");
    ASSERT(json_is_true(json_object_get(result_of(fake_reply(&f, 4)), "isError")));
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"json_schema_2020_12_tool\",\"arguments\":{\"name\":\"n\",\"address\":{"
                  "\"city\":\"c\"},\"email\":\"n@example.com\"}}}");
    json_t *sc = json_object_get(result_of(fake_reply(&f, 5)), "structuredContent");
    ASSERT_STR_EQ(json_string_value(json_object_get(sc, "name")), "n");
    ASSERT_CONTAINS(first_text(fake_reply(&f, 5)), "\"city\":\"c\"");
    /* the schema's anyOf and if/then/else are enforced */
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"json_schema_2020_12_tool\",\"arguments\":{\"name\":\"n\"}}}");
    ASSERT(json_is_true(json_object_get(result_of(fake_reply(&f, 6)), "isError")));
    ASSERT_CONTAINS(first_text(fake_reply(&f, 6)), "(anyOf)");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"json_schema_2020_12_tool\",\"arguments\":{\"contactMethod\":\"phone\","
                  "\"email\":\"n@example.com\"}}}");
    ASSERT(json_is_true(json_object_get(result_of(fake_reply(&f, 7)), "isError")));
    ASSERT_CONTAINS(first_text(fake_reply(&f, 7)), "missing required property \"phone\"");
    fake_close(&f);
}

TEST(progress_with_integer_and_string_tokens)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, "{}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_tool_with_progress\",\"_meta\":{\"progressToken\":42}}}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_tool_with_progress\",\"_meta\":{\"progressToken\":\"tok\"}}}");
    ASSERT_EQ(session_inflight(f.s), 2);
    ASSERT(fake_wait(&f, 1) && fake_wait(&f, 2));
    ASSERT_EQ(fake_count_method(&f, "notifications/progress"), 6);
    double last_int = -1, last_str = -1;
    size_t i;
    json_t *e;
    json_array_foreach(f.sent, i, e) {
        json_t *m = json_object_get(e, "msg");
        json_t *p = json_object_get(m, "params");
        json_t *tok = json_object_get(p, "progressToken");
        if (!tok)
            continue;
        double v = json_number_value(json_object_get(p, "progress"));
        /* each progress notification is related to (sent on the stream of) its request */
        json_t *rel = json_object_get(e, "related");
        if (json_is_integer(tok)) {
            ASSERT_EQ(json_integer_value(tok), 42);
            ASSERT_EQ(json_integer_value(rel), 1);
            ASSERT(v > last_int);
            last_int = v;
        } else {
            ASSERT_STR_EQ(json_string_value(tok), "tok");
            ASSERT_EQ(json_integer_value(rel), 2);
            ASSERT(v > last_str);
            last_str = v;
        }
    }
    ASSERT(json_is_true(json_object_get(json_array_get(f.sent, json_array_size(f.sent) - 1),
                                        "final")));
    fake_close(&f);
}

TEST(logging_respects_level)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, "{}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\",\"params\":{"
                  "\"level\":\"error\"}}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_tool_with_logging\"}}");
    ASSERT(fake_wait(&f, 2));
    ASSERT_EQ(fake_count_method(&f, "notifications/message"), 0);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\",\"params\":{"
                  "\"level\":\"debug\"}}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_tool_with_logging\"}}");
    ASSERT(fake_wait(&f, 4));
    ASSERT_EQ(fake_count_method(&f, "notifications/message"), 3);
    fake_close(&f);
}

TEST(cancellation_calls_handler_and_suppresses_reply)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, "{}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"tools/call\",\"params\":{"
                  "\"name\":\"test_tool_with_progress\",\"_meta\":{\"progressToken\":1}}}");
    ASSERT_EQ(session_inflight(f.s), 1);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                  "\"requestId\":\"c1\",\"reason\":\"test\"}}");
    ASSERT_EQ(session_inflight(f.s), 0); /* the fixture's cancel callback finished the call */
    for (int i = 0; i < 5; i++)
        uv_run(server_loop(fake_srv), UV_RUN_NOWAIT);
    size_t i;
    json_t *e;
    json_array_foreach(f.sent, i, e) {
        json_t *id = json_object_get(json_object_get(e, "msg"), "id");
        ASSERT(!json_is_string(id)); /* no reply to "c1" */
    }
    /* the transport learnt once that "c1" gets no reply (so HTTP can end its stream) */
    ASSERT_EQ(json_array_size(f.dropped), 1);
    ASSERT_STR_EQ(json_string_value(json_array_get(f.dropped, 0)), "c1");
    /* cancelling an unknown or finished id is ignored */
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                  "\"requestId\":\"c1\"}}");
    ASSERT_EQ(json_array_size(f.dropped), 1);
    /* a request answered normally is never reported dropped */
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                  "\"name\":\"test_tool_with_progress\"}}");
    ASSERT(fake_wait(&f, 2));
    ASSERT_EQ(json_array_size(f.dropped), 1);
    fake_close(&f);
}

TEST(cancel_while_waiting_for_the_client)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, INIT_CAPS);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_sampling\",\"arguments\":{\"prompt\":\"hello\"}}}");
    ASSERT_EQ(session_inflight(f.s), 1);
    /* failing the pending sampling request finishes the call inside the cancellation */
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                  "\"requestId\":5}}");
    ASSERT_EQ(session_inflight(f.s), 0);
    ASSERT(!fake_reply(&f, 5));
    ASSERT_EQ(json_array_size(f.dropped), 1);
    ASSERT_EQ(json_integer_value(json_array_get(f.dropped, 0)), 5);
    /* requests cut short by the session's end are not reported (the transport is going) */
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_sampling\",\"arguments\":{\"prompt\":\"hello\"}}}");
    json_t *dropped = json_incref(f.dropped);
    fake_close(&f);
    ASSERT_EQ(json_array_size(dropped), 1);
    json_decref(dropped);
}

TEST(sampling_round_trip)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, INIT_CAPS);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_sampling\",\"arguments\":{\"prompt\":\"hello\"}}}");
    json_t *req = json_object_get(json_array_get(f.sent, json_array_size(f.sent) - 1), "msg");
    ASSERT_STR_EQ(json_string_value(json_object_get(req, "method")), "sampling/createMessage");
    json_int_t sid = json_integer_value(json_object_get(req, "id"));
    char line[256];
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT ",\"result\":{\"role\":"
             "\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"hi there\"},\"model\":\"m\"}}",
             sid);
    fake_feed(&f, line);
    ASSERT_STR_EQ(first_text(fake_reply(&f, 1)), "LLM response: hi there");
    fake_close(&f);
}

TEST(elicitation_error_reply_and_missing_capability)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, INIT_CAPS);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_elicitation\",\"arguments\":{\"message\":\"who?\"}}}");
    json_t *req = json_object_get(json_array_get(f.sent, json_array_size(f.sent) - 1), "msg");
    ASSERT_STR_EQ(json_string_value(json_object_get(req, "method")), "elicitation/create");
    char line[256];
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT ",\"error\":{\"code\":-1,"
             "\"message\":\"declined\"}}",
             json_integer_value(json_object_get(req, "id")));
    fake_feed(&f, line);
    ASSERT(json_is_true(json_object_get(result_of(fake_reply(&f, 1)), "isError")));
    ASSERT_CONTAINS(first_text(fake_reply(&f, 1)), "declined");
    fake_close(&f);

    fake_open(&f);
    fake_initialize(&f, "{}"); /* no sampling capability: the tool fails cleanly */
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_sampling\",\"arguments\":{\"prompt\":\"x\"}}}");
    ASSERT(json_is_true(json_object_get(result_of(fake_reply(&f, 1)), "isError")));
    ASSERT_CONTAINS(first_text(fake_reply(&f, 1)), "sampling");
    fake_close(&f);
}

TEST(session_close_fails_pending_client_requests)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, INIT_CAPS);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"test_sampling\",\"arguments\":{\"prompt\":\"x\"}}}");
    ASSERT_EQ(session_inflight(f.s), 1);
    size_t n = json_array_size(f.sent);
    session_close(f.s); /* the sampling callback finishes the call; its reply is dropped */
    ASSERT_EQ(json_array_size(f.sent), n);
    ASSERT_EQ(json_array_size(f.dropped), 0);
    json_decref(f.sent);
    json_decref(f.dropped);
}

TEST(pending_client_request_limit_and_input_closed)
{
    struct fake f;
    char line[256];
    fake_open(&f);
    fake_initialize(&f, INIT_CAPS);
    for (int i = 1; i <= MCP_MAX_PENDING_CLIENT_REQUESTS + 1; i++) {
        snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
                                     "\"params\":{\"name\":\"test_sampling\",\"arguments\":{"
                                     "\"prompt\":\"p\"}}}", i);
        fake_feed(&f, line);
    }
    ASSERT_EQ(fake_count_method(&f, "sampling/createMessage"), MCP_MAX_PENDING_CLIENT_REQUESTS);
    json_t *over = fake_reply(&f, MCP_MAX_PENDING_CLIENT_REQUESTS + 1);
    ASSERT(json_is_true(json_object_get(result_of(over), "isError")));
    ASSERT_CONTAINS(first_text(over), "limit 16");
    ASSERT_EQ(session_inflight(f.s), MCP_MAX_PENDING_CLIENT_REQUESTS);
    session_input_closed(f.s); /* EOF: every waiting call finishes with an error at once */
    ASSERT_EQ(session_inflight(f.s), 0);
    ASSERT(json_is_true(json_object_get(result_of(fake_reply(&f, 1)), "isError")));
    ASSERT_CONTAINS(first_text(fake_reply(&f, 1)), "closed its input");
    fake_close(&f);
}

TEST(duplicate_inflight_id_and_inflight_limit)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, INIT_CAPS);
    char line[256];
    for (int i = 1; i <= MCP_MAX_INFLIGHT_PER_SESSION; i++) {
        snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
                                     "\"params\":{\"name\":\"test_tool_with_logging\"}}", i);
        fake_feed(&f, line);
    }
    ASSERT_EQ(session_inflight(f.s), MCP_MAX_INFLIGHT_PER_SESSION);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 1)), -32600);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":100000,\"method\":\"ping\"}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 100000)), -32000);
    ASSERT_CONTAINS(fake_error_message(fake_reply(&f, 100000)), "limit 64");
    fake_close(&f);
}

TEST(resources_prompts_completion)
{
    struct fake f;
    fake_open(&f);
    fake_initialize(&f, "{}");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{"
                  "\"uri\":\"test://template/123/data\"}}");
    json_t *c = json_array_get(json_object_get(result_of(fake_reply(&f, 1)), "contents"), 0);
    ASSERT_CONTAINS(json_string_value(json_object_get(c, "text")), "Data for ID: 123");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{"
                  "\"uri\":\"test://missing\"}}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 2)), -32002);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/subscribe\",\"params\":{"
                  "\"uri\":\"test://watched-resource\"}}");
    ASSERT(json_is_object(result_of(fake_reply(&f, 3))));
    server_notify_resource_updated(fake_srv, "test://watched-resource");
    ASSERT_EQ(fake_count_method(&f, "notifications/resources/updated"), 1);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/get\",\"params\":{"
                  "\"name\":\"test_prompt_with_arguments\",\"arguments\":{\"arg1\":\"A\"}}}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 4)), -32602);
    ASSERT_CONTAINS(fake_error_message(fake_reply(&f, 4)), "arg2");
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"prompts/get\",\"params\":{"
                  "\"name\":\"test_prompt_with_arguments\",\"arguments\":{\"arg1\":\"A\","
                  "\"arg2\":\"B\"}}}");
    char *s = json_dumps(result_of(fake_reply(&f, 5)), JSON_COMPACT);
    ASSERT_CONTAINS(s, "arg1='A', arg2='B'");
    free(s);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"completion/complete\",\"params\":{"
                  "\"ref\":{\"type\":\"ref/prompt\",\"name\":\"test_prompt_with_arguments\"},"
                  "\"argument\":{\"name\":\"arg1\",\"value\":\"testV\"}}}");
    json_t *comp = json_object_get(result_of(fake_reply(&f, 6)), "completion");
    ASSERT_EQ(json_array_size(json_object_get(comp, "values")), 2);
    ASSERT(json_is_false(json_object_get(comp, "hasMore")));
    fake_close(&f);
}

static void broken_handler(struct tool_call *call, json_t *args)
{
    tool_call_finish_result(call, json_pack("{s:s}", "not", "a CallToolResult"));
}

TEST(internal_error_and_dynamic_tools)
{
    struct fake f;
    struct mcp_error err;
    fake_open(&f);
    fake_initialize(&f, "{}");
    json_t *def = json_pack("{s:s, s:s, s:{s:s}}", "name", "broken", "description",
                            "returns a malformed result", "inputSchema", "type", "object");
    ASSERT_EQ(registry_add_tool(server_registry(fake_srv), def, broken_handler, &err), 0);
    json_decref(def);
    /* adding a tool while sessions are live tells them */
    ASSERT_EQ(fake_count_method(&f, "notifications/tools/list_changed"), 1);
    fake_feed(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"broken\"}}");
    ASSERT_EQ(fake_error_code(fake_reply(&f, 1)), -32603);
    ASSERT_CONTAINS(fake_error_message(fake_reply(&f, 1)), "malformed");
    ASSERT_EQ(registry_remove_tool(server_registry(fake_srv), "broken"), 0);
    ASSERT_EQ(fake_count_method(&f, "notifications/tools/list_changed"), 2);
    fake_close(&f);
}

TEST(list_changed_broadcast_only_to_initialized_sessions)
{
    struct fake a, b;
    fake_open(&a);
    fake_open(&b);
    fake_initialize(&a, "{}");
    server_notify_list_changed(fake_srv, "tools");
    ASSERT_EQ(fake_count_method(&a, "notifications/tools/list_changed"), 1);
    ASSERT_EQ(fake_count_method(&b, "notifications/tools/list_changed"), 0);
    fake_close(&a);
    fake_close(&b);
}

int main(void)
{
    fake_server_start();
    RUN(initialize_negotiates_versions);
    RUN(requests_before_initialize_fail_except_ping);
    RUN(error_codes_and_ids_echoed);
    RUN(tools_list_sorted_with_fixtures_verbatim);
    RUN(tools_call_results_and_errors);
    RUN(progress_with_integer_and_string_tokens);
    RUN(logging_respects_level);
    RUN(cancellation_calls_handler_and_suppresses_reply);
    RUN(cancel_while_waiting_for_the_client);
    RUN(sampling_round_trip);
    RUN(elicitation_error_reply_and_missing_capability);
    RUN(session_close_fails_pending_client_requests);
    RUN(pending_client_request_limit_and_input_closed);
    RUN(duplicate_inflight_id_and_inflight_limit);
    RUN(resources_prompts_completion);
    RUN(internal_error_and_dynamic_tools);
    RUN(list_changed_broadcast_only_to_initialized_sessions);
    fake_server_stop();
    return test_done();
}
