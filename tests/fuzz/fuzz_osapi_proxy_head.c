/* libFuzzer target: what a sandbox's service answers the OpenSandbox server proxy
 * (osapi/osapi_proxy_head.c), read by http_parser as a response. Whatever comes in, the
 * header lines kept must be "token: value\r\n" with no control character in the value, none of
 * the dropped names, and within the size and count limits; a refused head says why. */
#include <http_parser.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "osapi/osapi-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_field(http_parser *p, const char *at, size_t len)
{
    return osapi_head_field(p->data, at, len);
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    return osapi_head_value(p->data, at, len);
}

/* Stops at the first final head, as the proxy answers it (an interim 1xx head is forgotten). */
static int on_headers_complete(http_parser *p)
{
    struct osapi_head *h = p->data;
    if (osapi_head_end(h) < 0)
        return -1;
    if (p->status_code < 200 && p->status_code != 101) {
        osapi_head_reset(h);
        return 0;
    }
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
};

/* Every kept line: a token, ": ", a value of visible characters, spaces and tabs, CRLF. */
static void check_lines(const struct osapi_head *h)
{
    const char *s = h->lines.data ? h->lines.data : "";
    size_t left = h->lines.len;
    unsigned lines = 0;
    if (left > 2 * OSAPI_HEAD_MAX_BYTES)
        abort();
    while (left > 0) {
        const char *end = memchr(s, '\n', left);
        if (!end || end == s || end[-1] != '\r')
            abort();
        size_t len = (size_t)(end - s) - 1;
        const char *colon = memchr(s, ':', len);
        if (!colon || !osapi_is_token(s, (size_t)(colon - s)) || colon + 1 >= s + len + 1)
            abort();
        char name[OSAPI_HEAD_MAX_BYTES + 1];
        memcpy(name, s, (size_t)(colon - s));
        name[colon - s] = '\0';
        if (osapi_head_dropped(name))
            abort();
        for (const char *v = colon + 1; v < s + len; v++)
            if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
                abort();
        lines++;
        left -= (size_t)(end - s) + 1;
        s = end + 1;
    }
    if (lines > OSAPI_HEAD_MAX_LINES)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct osapi_head h;
    osapi_head_init(&h);
    http_parser p;
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &h;
    http_parser_execute(&p, &settings, (const char *)data, size);
    if (h.bad[0] == '\0' || HTTP_PARSER_ERRNO(&p) == HPE_OK || HTTP_PARSER_ERRNO(&p) == HPE_PAUSED)
        check_lines(&h);
    if (h.bad[0] && strlen(h.bad) >= sizeof(h.bad))
        abort();
    osapi_head_release(&h);
    return 0;
}
