/* mcp/modern*: the order and codes of the request checks, HTTP statuses, reply shaping, and the
 * sealed requestState (round trip, tampering, foreign or malformed seals). */
#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern-internal.h"
#include "mcp/modern.h"
#include "test.h"

#define META_OK "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
                "\"io.modelcontextprotocol/clientCapabilities\":{\"sampling\":{}}}"

/* Parses text and runs the check with headers h (NULL: stdio); returns the error code or 0. */
static int check(const char *text, const struct modern_headers *h, json_t **data)
{
    struct jsonrpc_msg msg;
    struct mcp_error err;
    jsonrpc_parse(text, strlen(text), &msg);
    int rc = modern_check_request(&msg, h, data, &err) < 0 ? err.code : 0;
    jsonrpc_msg_release(&msg);
    return rc;
}

TEST(stdio_meta_rules)
{
    json_t *data = NULL;
    ASSERT_EQ(check("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
                    META_OK "}}", NULL, &data), 0);
    ASSERT_EQ(check("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}", NULL,
                    &data), -32602);
    ASSERT_EQ(check("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
                    "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}", NULL, &data),
              -32602);
    ASSERT_EQ(check("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":"
                    "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                    "\"io.modelcontextprotocol/clientCapabilities\":{},"
                    "\"io.modelcontextprotocol/logLevel\":\"loud\"}}}", NULL, &data), -32602);
}

TEST(unsupported_version_lists_supported)
{
    json_t *data = NULL;
    ASSERT_EQ(check("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":"
                    "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2025-11-25\","
                    "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", NULL, &data),
              MODERN_ERR_UNSUPPORTED_VERSION);
    ASSERT(data != NULL);
    ASSERT_STR_EQ(json_string_value(json_object_get(data, "requested")), "2025-11-25");
    ASSERT_STR_EQ(json_string_value(json_array_get(json_object_get(data, "supported"), 0)),
                  "2026-07-28");
    json_decref(data);
}

TEST(http_header_order)
{
    const char *call = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":"
                       "{\"name\":\"greet\",\"_meta\":" META_OK "}}";
    struct modern_headers h = {"2026-07-28", "tools/call", " greet\t"};
    json_t *data = NULL;
    ASSERT_EQ(check(call, &h, &data), 0); /* whitespace around a value is allowed */
    h.name = "Greet";
    ASSERT_EQ(check(call, &h, &data), MODERN_ERR_HEADER_MISMATCH); /* values are exact */
    h.name = NULL;
    ASSERT_EQ(check(call, &h, &data), MODERN_ERR_HEADER_MISMATCH);
    h.name = "greet";
    h.method = "Tools/call";
    ASSERT_EQ(check(call, &h, &data), MODERN_ERR_HEADER_MISMATCH);
    h.method = "tools/call";
    h.version = NULL; /* a missing version header comes first */
    ASSERT_EQ(check("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{}}", &h,
                    &data), MODERN_ERR_HEADER_MISMATCH);
    h.version = "2026-07-28"; /* then the _meta keys */
    ASSERT_EQ(check("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{}}", &h,
                    &data), -32602);
    h.version = "2099-01-01"; /* then header against _meta */
    ASSERT_EQ(check(call, &h, &data), MODERN_ERR_HEADER_MISMATCH);
    ASSERT(data == NULL);
}

TEST(http_statuses)
{
    json_auto_t *ok = json_pack("{s:s, s:i, s:{}}", "jsonrpc", "2.0", "id", 1, "result");
    json_auto_t *nf = jsonrpc_error(NULL, -32601, "no", NULL);
    json_auto_t *inv = jsonrpc_error(NULL, -32602, "no", NULL);
    json_auto_t *cap = jsonrpc_error(NULL, MODERN_ERR_MISSING_CAPABILITY, "no", NULL);
    json_auto_t *internal = jsonrpc_error(NULL, -32603, "no", NULL);
    ASSERT_EQ(modern_http_status(ok), 200);
    ASSERT_EQ(modern_http_status(nf), 404);
    ASSERT_EQ(modern_http_status(inv), 400);
    ASSERT_EQ(modern_http_status(cap), 400);
    ASSERT_EQ(modern_http_status(internal), 500);
}

TEST(reply_shaping)
{
    json_auto_t *list = json_pack("{s:s, s:i, s:{s:[]}}", "jsonrpc", "2.0", "id", 1, "result",
                                  "tools");
    modern_decorate_reply("tools/list", list);
    json_t *r = json_object_get(list, "result");
    ASSERT_STR_EQ(json_string_value(json_object_get(r, "resultType")), "complete");
    ASSERT_EQ(json_integer_value(json_object_get(r, "ttlMs")), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(r, "cacheScope")), "public");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(
                      json_object_get(r, "_meta"), MODERN_META_SERVER_INFO), "name")), "mcpbox");

    json_auto_t *irr = json_pack("{s:s, s:i, s:{s:s}}", "jsonrpc", "2.0", "id", 1, "result",
                                 "resultType", "input_required");
    modern_decorate_reply("tools/call", irr);
    r = json_object_get(irr, "result");
    ASSERT_STR_EQ(json_string_value(json_object_get(r, "resultType")), "input_required");
    ASSERT(json_object_get(r, "ttlMs") == NULL);

    json_auto_t *missing = jsonrpc_error(NULL, MCP_ERR_RESOURCE_NOT_FOUND, "gone", NULL);
    modern_decorate_reply("resources/read", missing);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(missing, "error"), "code")),
              -32602);
}

TEST(capabilities_and_log_level)
{
    json_auto_t *meta = json_pack("{s:{s:{}, s:{s:{}}}, s:s}", MODERN_META_CAPS, "sampling",
                                  "extensions", MODERN_TASKS_EXTENSION, MODERN_META_LOG_LEVEL,
                                  "warning");
    ASSERT(modern_meta_has_capability(meta, "sampling"));
    ASSERT(!modern_meta_has_capability(meta, "elicitation"));
    ASSERT(modern_meta_has_capability(meta, "extensions/" MODERN_TASKS_EXTENSION));
    ASSERT(!modern_meta_has_capability(meta, "extensions/other"));
    ASSERT_EQ(modern_meta_log_level(meta), 3);
    json_object_del(meta, MODERN_META_LOG_LEVEL);
    ASSERT_EQ(modern_meta_log_level(meta), -1);
}

TEST(sealed_state)
{
    json_auto_t *state = json_pack("{s:s, s:i}", "tool", "t", "round", 2);
    cleanup_free char *sealed = modern_state_seal(state);
    json_auto_t *back = modern_state_open(sealed);
    ASSERT(back != NULL && json_equal(back, state));

    cleanup_free char *tampered = malloc(strlen(sealed) + 16);
    strcpy(tampered, sealed);
    tampered[0] = tampered[0] == 'e' ? 'f' : 'e'; /* the payload */
    ASSERT(modern_state_open(tampered) == NULL);
    strcpy(tampered, sealed);
    tampered[strlen(tampered) - 1] ^= 1; /* the MAC */
    ASSERT(modern_state_open(tampered) == NULL);
    strcpy(tampered, sealed);
    strcat(tampered, "-TAMPERED");
    ASSERT(modern_state_open(tampered) == NULL);
    ASSERT(modern_state_open("") == NULL);
    ASSERT(modern_state_open("no-dot-at-all") == NULL);
    ASSERT(modern_state_open(NULL) == NULL);
}

static const char *param_value;

static const char *one_param(void *arg, const char *lname)
{
    return strcmp(lname, "mcp-param-region") == 0 ? param_value : NULL;
}

static int params(const char *header, const char *body_region)
{
    json_auto_t *schema = json_pack("{s:{s:{s:s, s:s}}}", "properties", "region", "type",
                                    "string", "x-mcp-header", "Region");
    json_auto_t *args = body_region ? json_pack("{s:s}", "region", body_region) : json_object();
    struct mcp_error err;
    param_value = header;
    return modern_check_param_headers(schema, args, one_param, NULL, &err) < 0 ? err.code : 0;
}

TEST(custom_param_headers)
{
    ASSERT_EQ(params("eu-west", "eu-west"), 0);
    ASSERT_EQ(params(" eu-west ", "eu-west"), 0);
    ASSERT_EQ(params("=?base64?SGVsbG8=?=", "Hello"), 0);
    ASSERT_EQ(params("=?base64?SGVsbG8?=", "Hello"), MODERN_ERR_HEADER_MISMATCH); /* padding */
    ASSERT_EQ(params("=?base64?SGVs!!!bG8=?=", "Hello"), MODERN_ERR_HEADER_MISMATCH);
    ASSERT_EQ(params("SGVsbG8=", "SGVsbG8="), 0);                   /* no wrapper: literal */
    ASSERT_EQ(params("=?base64?SGVsbG8=", "=?base64?SGVsbG8="), 0); /* no suffix: literal */
    ASSERT_EQ(params(NULL, "eu-west"), MODERN_ERR_HEADER_MISMATCH);
    ASSERT_EQ(params("us-east", "eu-west"), MODERN_ERR_HEADER_MISMATCH);
    ASSERT_EQ(params("eu-west", NULL), MODERN_ERR_HEADER_MISMATCH);
    ASSERT_EQ(params(NULL, NULL), 0);
}

int main(void)
{
    RUN(stdio_meta_rules);
    RUN(unsupported_version_lists_supported);
    RUN(http_header_order);
    RUN(http_statuses);
    RUN(reply_shaping);
    RUN(capabilities_and_log_level);
    RUN(sealed_state);
    RUN(custom_param_headers);
    return test_done();
}
