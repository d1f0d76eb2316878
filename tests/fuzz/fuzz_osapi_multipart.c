/* libFuzzer target: what a client of mcpbox's OpenSandbox API sends to execd's /files/upload
 * (osapi/osapi_multipart.c) and in query strings (osapi_query.c). The first line of the
 * input is the Content-Type, the rest the body; every part found must lie inside the body. The
 * body is also read as a query string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "osapi/osapi-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    const char *nl = memchr(in, '\n', size);
    size_t hlen = nl ? (size_t)(nl - in) : size;
    char *ctype = malloc(hlen + 1);
    memcpy(ctype, in, hlen);
    ctype[hlen] = '\0';
    const char *body = nl ? nl + 1 : in + size;
    size_t blen = size - (size_t)(body - in);
    char boundary[72];
    struct osapi_part parts[8];
    if (osapi_multipart_boundary(ctype, boundary, sizeof(boundary)) == 0) {
        int n = osapi_multipart_parts(body, blen, boundary, parts, 8);
        for (int i = 0; i < n; i++)
            if (parts[i].data < body || parts[i].data + parts[i].len > body + blen ||
                strlen(parts[i].name) >= sizeof(parts[i].name))
                abort();
    }
    char *q = malloc(blen + 1);
    memcpy(q, body, blen);
    q[blen] = '\0';
    free(osapi_query_get(q, "path"));
    json_decref(osapi_query_all(q, "state"));
    free(q);
    free(ctype);
    return 0;
}
