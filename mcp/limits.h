/* Every limit the protocol core enforces, in one place. Hitting one yields a precise error for
 * the client that hit it; the server keeps serving. */
#ifndef MCPBOX_LIMITS_H
#define MCPBOX_LIMITS_H

/* Largest JSON-RPC message accepted on any transport (one stdio line, one HTTP body). 32 MiB
 * leaves room for write_file with a base64 payload of ~24 MiB while bounding what one peer can
 * make us buffer. A longer stdio line is answered with -32600 and skipped up to its newline
 * without being buffered. */
#define MCP_MAX_MESSAGE_BYTES (32u * 1024u * 1024u)

/* Client requests handled at once per session; more get -32000 "too many requests in flight". */
#define MCP_MAX_INFLIGHT_PER_SESSION 64

/* Server-to-client requests (sampling, elicitation) awaiting a reply, per session. */
#define MCP_MAX_PENDING_CLIENT_REQUESTS 16

/* Resource subscriptions per session. */
#define MCP_MAX_SUBSCRIPTIONS_PER_SESSION 256

/* Longest URI accepted in resources/read and resources/subscribe. */
#define MCP_MAX_URI_BYTES 4096

/* stdio: bytes of replies queued to stdout before we stop reading stdin (backpressure). */
#define MCP_STDIO_MAX_WRITE_QUEUE (64u * 1024u * 1024u)

/* stdio: after EOF on stdin, how long in-flight requests may run before they are cancelled. */
#define MCP_STDIO_DRAIN_TIMEOUT_MS 10000

/* Depth of nested JSON Schema evaluation ($ref chains, nested objects) before we give up. */
#define MCP_SCHEMA_MAX_DEPTH 64

#endif
