/* multipart/form-data bodies (execd's /files/upload): the boundary of a Content-Type and the
 * parts of a body. Pure (no I/O); fuzzed (tests/fuzz/fuzz_osapi_multipart.c). */
#include "osapi/osapi-internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int osapi_multipart_boundary(const char *ctype, char *out, size_t size)
{
    const char *b = ctype ? strcasestr(ctype, "boundary=") : NULL;
    if (!ctype || strncasecmp(ctype, "multipart/form-data", 19) != 0 || !b)
        return -1;
    b += 9;
    bool quoted = *b == '"';
    b += quoted;
    size_t n = strcspn(b, quoted ? "\"" : "; \t");
    if (n == 0 || n + 1 > size)
        return -1;
    memcpy(out, b, n);
    out[n] = '\0';
    return 0;
}

/* memmem: linear time on a 32 MiB body, whatever the boundary. */
static const char *find_bytes(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
    return memmem(hay, hlen, needle, nlen);
}

int osapi_multipart_parts(const char *body, size_t len, const char *boundary, struct osapi_part *parts,
                           int max)
{
    char delim[96];
    int dlen = snprintf(delim, sizeof(delim), "--%s", boundary), n = 0;
    const char *p = find_bytes(body, len, delim, (size_t)dlen), *end = body + len;
    while (p) {
        p += dlen;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            return n; /* closing delimiter */
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n' || n >= max)
            return -1;
        p += 2;
        const char *hend = find_bytes(p, (size_t)(end - p), "\r\n\r\n", 4);
        if (!hend)
            return -1;
        struct osapi_part *pt = &parts[n];
        memset(pt, 0, sizeof(*pt));
        const char *nm = find_bytes(p, (size_t)(hend - p), "name=\"", 6);
        if (nm) {
            nm += 6;
            size_t k = 0;
            while (nm + k < hend && nm[k] != '"' && k + 1 < sizeof(pt->name))
                k++;
            memcpy(pt->name, nm, k);
        }
        pt->data = hend + 4;
        char next[100];
        int nlen = snprintf(next, sizeof(next), "\r\n%s", delim);
        const char *q = find_bytes(pt->data, (size_t)(end - pt->data), next, (size_t)nlen);
        if (!q)
            return -1;
        pt->len = (size_t)(q - pt->data);
        n++;
        p = q + 2;
    }
    return -1;
}

