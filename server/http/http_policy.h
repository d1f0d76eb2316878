/* Request admission rules of the HTTP listener, kept pure for unit tests: DNS-rebinding
 * defence (Host, Origin), the bearer token and content negotiation. (MCP's protocol versions
 * are mcp/http/http_version.h.) */
#ifndef MCPBOX_HTTP_POLICY_H
#define MCPBOX_HTTP_POLICY_H

#include <stdbool.h>

struct http_policy {
    bool loopback;     /* bound to a loopback address: only loopback names are valid Hosts */
    int port;          /* the port we listen on (informational: Host may name any port) */
    const char *token; /* borrowed; required bearer token, or NULL */
};

/* Host header: on loopback it must name localhost, 127.0.0.1 or [::1] (any port or none).
 * Elsewhere any syntactically valid host is accepted (the token guards the server). */
bool http_policy_host_ok(const struct http_policy *pol, const char *host);
/* Origin header (NULL = absent = allowed): http(s)://localhost|127.0.0.1|[::1][:port] on
 * loopback; elsewhere it must name the same host as the Host header. */
bool http_policy_origin_ok(const struct http_policy *pol, const char *origin, const char *host);
/* Authorization header against the token, in constant time. True when no token is set. */
bool http_policy_auth_ok(const struct http_policy *pol, const char *authorization);

/* Whether an Accept header lists media type `type` (exact type/subtype, parameters ignored). */
bool http_accepts(const char *accept, const char *type);
/* Whether the Accept header prefers media type a over b: a higher q value, or the same q and
 * listed first. False when a is not listed. */
bool http_accept_prefers(const char *accept, const char *a, const char *b);
/* For a POST: whether Accept lists both application/json and text/event-stream, and in
 * *prefer_sse whether it prefers the latter (http_accepts twice and http_accept_prefers, in
 * one pass). */
bool http_accept_post(const char *accept, bool *prefer_sse);
/* Whether Content-Type is application/json (parameters such as charset allowed). */
bool http_content_type_is_json(const char *content_type);
#endif
