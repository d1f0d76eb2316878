#include "lib/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int mcp_error_set(struct mcp_error *err, int code, int sys_errno, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    err->code = code;
    err->sys_errno = sys_errno;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    if (sys_errno != 0 && n >= 0 && (size_t)n < sizeof(err->msg))
        snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", strerror(sys_errno));
    return -1;
}

int mcp_error_prefix(struct mcp_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    char prefix[MCP_ERROR_MSG_MAX];
    char old[MCP_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
    return -1;
}

void mcp_error_copy(struct mcp_error *dst, const struct mcp_error *src)
{
    if (dst != NULL && src != NULL && dst != src)
        *dst = *src;
}

const char *mcp_error_code_name(int code)
{
    switch (code) {
    case MCP_ERR_PARSE: return "parse_error";
    case MCP_ERR_INVALID_REQUEST: return "invalid_request";
    case MCP_ERR_METHOD_NOT_FOUND: return "method_not_found";
    case MCP_ERR_INVALID_PARAMS: return "invalid_params";
    case MCP_ERR_INTERNAL: return "internal_error";
    case MCP_ERR_SERVER: return "server_error";
    case MCP_ERR_RESOURCE_NOT_FOUND: return "resource_not_found";
    case MCP_ERR_NOT_FOUND: return "not_found";
    case MCP_ERR_CONFLICT: return "conflict";
    case MCP_ERR_DENIED: return "denied";
    case MCP_ERR_LIMIT: return "limit";
    case MCP_ERR_TIMEOUT: return "timeout";
    case MCP_ERR_UNAVAILABLE: return "unavailable";
    case MCP_ERR_UNSUPPORTED: return "unsupported";
    case MCP_ERR_IO: return "io_error";
    case MCP_ERR_BACKEND: return "backend_error";
    case MCP_ERR_INVALID: return "invalid_argument";
    default: return "error";
    }
}
