/* JSON-RPC 2.0 framing: parse one message, build responses. Pure: no I/O, no globals.
 * A fuzz target (tests/fuzz/fuzz_jsonrpc.c) drives jsonrpc_parse with arbitrary bytes. */
#ifndef MCPBOX_JSONRPC_H
#define MCPBOX_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

#include "lib/base/error.h"

enum jsonrpc_kind {
    JSONRPC_INVALID,      /* err says why: MCP_ERR_PARSE (-32700) or MCP_ERR_INVALID_REQUEST */
    JSONRPC_REQUEST,      /* method + id */
    JSONRPC_NOTIFICATION, /* method, no id */
    JSONRPC_RESPONSE,     /* id + result or error (a reply to a server-to-client request) */
};

struct jsonrpc_msg {
    enum jsonrpc_kind kind;
    json_t *root;       /* owned: the whole message (NULL if it did not parse) */
    json_t *id;         /* borrowed from root: string or integer id, or NULL (also for a
                           JSONRPC_INVALID message whose id could be recovered) */
    const char *method; /* borrowed from root, or NULL */
    json_t *params;     /* borrowed from root: object/array, or NULL if absent */
    json_t *result;     /* borrowed (responses) */
    json_t *error;      /* borrowed (error responses) */
    struct mcp_error err; /* when kind == JSONRPC_INVALID */
};

/* Parses one message of len bytes (no NUL needed). Never fails to return: a malformed message
 * yields kind JSONRPC_INVALID with err filled and id recovered when possible. Batches (arrays)
 * are JSONRPC_INVALID (-32600: MCP 2025-06-18+ removed batching). Always release the msg. */
void jsonrpc_parse(const char *data, size_t len, struct jsonrpc_msg *out);
void jsonrpc_msg_release(struct jsonrpc_msg *msg);

/* New references. id may be NULL (serialised as null). */
json_t *jsonrpc_result(const json_t *id, json_t *result /* stolen */);
json_t *jsonrpc_error(const json_t *id, int code, const char *message, json_t *data /* stolen, may be NULL */);
json_t *jsonrpc_notification(const char *method, json_t *params /* stolen, may be NULL */);
json_t *jsonrpc_request(const json_t *id, const char *method, json_t *params /* stolen */);

#endif
