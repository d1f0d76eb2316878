/* libFuzzer target: the first bytes of a sandbox's outbound connection, read for an HTTP
 * request's Host header (backend/local/egress_parse.c, used by egress_proxy.c). Every prefix
 * is tried, as the bytes may arrive in any number of pieces; a name, when found, must be a
 * NUL-terminated host name of at most 253 characters. */
#include <stdint.h>
#include <string.h>

#include "backend/local/egress_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name)
{
    size_t n = strnlen(name, EGRESS_HOST_MAX + 1);
    if (n == 0 || n > EGRESS_HOST_MAX)
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", name[i]) ==
            NULL)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[EGRESS_HOST_MAX + 1];
    size_t step = size > 64 ? size / 64 : 1;
    for (size_t n = 0; n <= size; n += step)
        if (egress_http_host(data, n, name) == EGRESS_PARSE_FOUND)
            check_name(name);
    if (egress_http_host(data, size, name) == EGRESS_PARSE_FOUND)
        check_name(name);
    return 0;
}
