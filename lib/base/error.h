/* Errors: a fixed-size struct filled once by the function that fails.
 *
 * A fallible function returns 0 (or a non-NULL pointer) on success and -1 (or NULL) on failure;
 * it takes `struct mcp_error *err` last and fills it exactly once on failure. Only the JSON-RPC
 * layer turns an mcp_error into a wire error; the tool layer turns it into an isError result. */
#ifndef MCP_BASE_ERROR_H
#define MCP_BASE_ERROR_H

#include <stddef.h>

enum mcp_error_code {
    /* JSON-RPC 2.0 */
    MCP_ERR_PARSE = -32700,
    MCP_ERR_INVALID_REQUEST = -32600,
    MCP_ERR_METHOD_NOT_FOUND = -32601,
    MCP_ERR_INVALID_PARAMS = -32602,
    MCP_ERR_INTERNAL = -32603,
    /* MCP / implementation-defined server errors (-32000 .. -32099) */
    MCP_ERR_SERVER = -32000,
    MCP_ERR_RESOURCE_NOT_FOUND = -32002,
    /* Domain errors. They become tool results with isError, never JSON-RPC errors. */
    MCP_ERR_NOT_FOUND = 1,   /* no such sandbox, command, file */
    MCP_ERR_CONFLICT,        /* wrong state: paused, stopped, already exists */
    MCP_ERR_DENIED,          /* ownership, permissions, path escapes */
    MCP_ERR_LIMIT,           /* a cap or quota was hit */
    MCP_ERR_TIMEOUT,         /* a deadline passed */
    MCP_ERR_UNAVAILABLE,     /* backend or host cannot do it right now; retry may work */
    MCP_ERR_UNSUPPORTED,     /* this backend or host cannot do it at all */
    MCP_ERR_IO,              /* a system call failed */
    MCP_ERR_BACKEND,         /* the backend (or remote server) failed */
    MCP_ERR_INVALID,         /* bad argument value detected past schema validation */
};

#define MCP_ERROR_MSG_MAX 512

struct mcp_error {
    int code;      /* enum mcp_error_code */
    int sys_errno; /* 0 when not from a system call */
    char msg[MCP_ERROR_MSG_MAX];
};

/* Fill err (if not NULL) and return -1. The message should say what went wrong and, where it
 * can, what the caller should do next. */
int mcp_error_set(struct mcp_error *err, int code, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prepend context to an already set error ("creating sandbox: <old message>"); returns -1. */
int mcp_error_prefix(struct mcp_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Copy src into dst (both may be NULL-safe on dst). */
void mcp_error_copy(struct mcp_error *dst, const struct mcp_error *src);

/* "not_found", "conflict", ... for machine-readable error fields. */
const char *mcp_error_code_name(int code);

#endif
