/* Admission rules: Host and Origin against DNS rebinding, the bearer token, Accept and
 * Content-Type negotiation, MCP-Protocol-Version. */
#include "server/http/http_policy.h"
#include "mcp/http/http_version.h"
#include "test.h"

static const struct http_policy loop = {.loopback = true, .port = 8765, .token = NULL};
static const struct http_policy wide = {.loopback = false, .port = 8765, .token = "s3cret"};

TEST(host_on_loopback)
{
    ASSERT(http_policy_host_ok(&loop, "127.0.0.1:8765"));
    ASSERT(http_policy_host_ok(&loop, "localhost:8765"));
    ASSERT(http_policy_host_ok(&loop, "LOCALHOST:8765"));
    ASSERT(http_policy_host_ok(&loop, "[::1]:8765"));
    ASSERT(http_policy_host_ok(&loop, "localhost"));
    ASSERT(http_policy_host_ok(&loop, "[::1]"));
    ASSERT(!http_policy_host_ok(&loop, NULL));
    ASSERT(!http_policy_host_ok(&loop, ""));
    ASSERT(!http_policy_host_ok(&loop, "evil.example.com"));
    ASSERT(!http_policy_host_ok(&loop, "evil.example.com:8765"));
    ASSERT(!http_policy_host_ok(&loop, "localhost.evil.com:8765"));
    ASSERT(http_policy_host_ok(&loop, "127.0.0.1:9999")); /* a tunnel's local port */
    ASSERT(!http_policy_host_ok(&loop, "127.0.0.1:"));
    ASSERT(!http_policy_host_ok(&loop, "127.0.0.1:87x"));
    ASSERT(!http_policy_host_ok(&loop, "127.0.0.1:99999"));
    ASSERT(!http_policy_host_ok(&loop, "[::1"));
    ASSERT(!http_policy_host_ok(&loop, "[::1]x"));
    ASSERT(!http_policy_host_ok(&loop, "user@127.0.0.1:8765"));
    ASSERT(!http_policy_host_ok(&loop, "127.0.0.1 :8765"));
    ASSERT(!http_policy_host_ok(&loop, "0.0.0.0:8765"));
}

TEST(host_elsewhere)
{
    ASSERT(http_policy_host_ok(&wide, "mcp.internal:8765"));
    ASSERT(http_policy_host_ok(&wide, "10.0.0.5"));
    ASSERT(!http_policy_host_ok(&wide, NULL));
    ASSERT(!http_policy_host_ok(&wide, "a b"));
    ASSERT(!http_policy_host_ok(&wide, "host:port"));
}

TEST(origin_on_loopback)
{
    ASSERT(http_policy_origin_ok(&loop, NULL, "127.0.0.1:8765"));
    ASSERT(http_policy_origin_ok(&loop, "http://127.0.0.1:8765", "127.0.0.1:8765"));
    ASSERT(http_policy_origin_ok(&loop, "http://localhost:6274", "127.0.0.1:8765"));
    ASSERT(http_policy_origin_ok(&loop, "https://localhost", "127.0.0.1:8765"));
    ASSERT(http_policy_origin_ok(&loop, "http://[::1]:3000", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "http://evil.example.com", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "http://localhost.evil.com", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "null", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "file://", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "ftp://localhost", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "http://", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "http://localhost/path", "127.0.0.1:8765"));
    ASSERT(!http_policy_origin_ok(&loop, "http://evil@localhost", "127.0.0.1:8765"));
}

TEST(origin_elsewhere)
{
    ASSERT(http_policy_origin_ok(&wide, "https://mcp.internal:8765", "mcp.internal:8765"));
    ASSERT(!http_policy_origin_ok(&wide, "https://evil.example", "mcp.internal:8765"));
    /* off loopback the Origin names Host exactly, port included (docs/security.md, http.md) */
    ASSERT(!http_policy_origin_ok(&wide, "https://mcp.internal:9999", "mcp.internal:8765"));
    ASSERT(!http_policy_origin_ok(&wide, "https://mcp.internal:8765", NULL));
}

TEST(bearer_token)
{
    ASSERT(http_policy_auth_ok(&loop, NULL)); /* no token configured */
    ASSERT(http_policy_auth_ok(&wide, "Bearer s3cret"));
    ASSERT(http_policy_auth_ok(&wide, "bearer s3cret"));
    ASSERT(!http_policy_auth_ok(&wide, NULL));
    ASSERT(!http_policy_auth_ok(&wide, ""));
    ASSERT(!http_policy_auth_ok(&wide, "Bearer"));
    ASSERT(!http_policy_auth_ok(&wide, "Bearer "));
    ASSERT(!http_policy_auth_ok(&wide, "Bearer s3cre"));
    ASSERT(!http_policy_auth_ok(&wide, "Bearer s3cret2"));
    ASSERT(!http_policy_auth_ok(&wide, "Basic czNjcmV0"));
    ASSERT(!http_policy_auth_ok(&wide, "s3cret"));
}

TEST(accept_header)
{
    const char *sdk = "application/json, text/event-stream";
    ASSERT(http_accepts(sdk, "application/json"));
    ASSERT(http_accepts(sdk, "text/event-stream"));
    ASSERT(http_accepts("text/event-stream;q=0.9,application/json", "application/json"));
    ASSERT(http_accepts("Application/JSON ; charset=utf-8", "application/json"));
    ASSERT(!http_accepts("application/json", "text/event-stream"));
    ASSERT(!http_accepts(NULL, "application/json"));
    ASSERT(!http_accepts("", "application/json"));
    ASSERT(!http_accepts("application/jsonx", "application/json"));
    ASSERT(!http_accepts("text/html", "application/json"));
}

TEST(accept_preference)
{
    const char *sse = "text/event-stream", *json = "application/json";
    ASSERT(!http_accept_prefers("application/json, text/event-stream", sse, json));
    ASSERT(http_accept_prefers("text/event-stream, application/json", sse, json));
    ASSERT(http_accept_prefers("application/json;q=0.5, text/event-stream", sse, json));
    ASSERT(!http_accept_prefers("text/event-stream;q=0.2, application/json;q=0.9", sse, json));
    ASSERT(!http_accept_prefers("text/event-stream;q=0, application/json", sse, json));
    ASSERT(http_accept_prefers("text/event-stream", sse, json));
    ASSERT(!http_accept_prefers("application/json", sse, json));
    ASSERT(!http_accept_prefers(NULL, sse, json));
}

/* The one-pass POST check agrees with http_accepts (both types) and http_accept_prefers. */
TEST(accept_post_matches_the_separate_checks)
{
    static const char *const lists[] = {
        "application/json, text/event-stream", "text/event-stream, application/json",
        "application/json;q=0.5, text/event-stream", "text/event-stream;q=0, application/json",
        "text/event-stream;q=0.2, application/json;q=0.9", "text/event-stream",
        "application/json", "", "text/html, */*", "Text/Event-Stream ; q=1,APPLICATION/json",
        "application/json, application/json;q=0, text/event-stream;q=0.5",
        "text/event-stream;q=0.5, text/event-stream, application/json;q=0.5",
    };
    const char *sse = "text/event-stream", *json = "application/json";
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        bool prefer = true;
        bool both = http_accepts(lists[i], json) && http_accepts(lists[i], sse);
        ASSERT_EQ(http_accept_post(lists[i], &prefer), both);
        ASSERT_EQ(prefer, http_accept_prefers(lists[i], sse, json));
    }
    bool prefer = true;
    ASSERT(!http_accept_post(NULL, &prefer));
    ASSERT(!prefer);
}

TEST(content_type)
{
    ASSERT(http_content_type_is_json("application/json"));
    ASSERT(http_content_type_is_json("application/json; charset=utf-8"));
    ASSERT(http_content_type_is_json("APPLICATION/JSON"));
    ASSERT(!http_content_type_is_json(NULL));
    ASSERT(!http_content_type_is_json("text/plain"));
    ASSERT(!http_content_type_is_json("application/json-seq"));
    ASSERT(!http_content_type_is_json("application/json, text/plain"));
}

TEST(protocol_version)
{
    ASSERT(http_protocol_version_ok("2025-11-25"));
    ASSERT(http_protocol_version_ok("2025-06-18"));
    ASSERT(http_protocol_version_ok("2025-03-26"));
    ASSERT(!http_protocol_version_ok("2024-11-05"));
    ASSERT(!http_protocol_version_ok("1999-01-01"));
    ASSERT(!http_protocol_version_ok(""));
    ASSERT(!http_protocol_version_ok(NULL));
    ASSERT(http_protocol_has_priming("2025-11-25"));
    ASSERT(!http_protocol_has_priming("2025-06-18"));
    ASSERT(!http_protocol_has_priming(NULL));
}

int main(void)
{
    RUN(host_on_loopback);
    RUN(host_elsewhere);
    RUN(origin_on_loopback);
    RUN(origin_elsewhere);
    RUN(bearer_token);
    RUN(accept_header);
    RUN(accept_preference);
    RUN(accept_post_matches_the_separate_checks);
    RUN(content_type);
    RUN(protocol_version);
    return test_done();
}
