/* The head of a sandbox's reply to the server proxy (osapi_proxy.c), header by header as
 * http_parser reads it: hostile input, so it is bounded (bytes, lines), every name must be a
 * token and every value free of control characters, and only headers that concern the proxied
 * response itself are kept. What is kept is exactly what was checked, written here as
 * "Name: value\r\n" lines. A fuzz target drives it (tests/fuzz/fuzz_osapi_proxy_head.c). */
#include "osapi/osapi-internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Response headers not passed on: hop-by-hop ones, ours, and those that act on mcpbox's whole
 * origin (every other sandbox's proxy and the APIs share it) rather than on this response. */
static const char response_drop[] =
    " connection keep-alive proxy-connection proxy-authenticate te trailer "
    "transfer-encoding upgrade content-length set-cookie set-cookie2 "
    "strict-transport-security public-key-pins public-key-pins-report-only expect-ct "
    "clear-site-data alt-svc service-worker-allowed nel report-to reporting-endpoints "
    "origin-agent-cluster www-authenticate mcp-session-id x-request-id ";

bool osapi_word_in(const char *name, const char *list)
{
    char word[64];
    size_t n = strlen(name);
    if (n + 3 > sizeof(word))
        return false;
    word[0] = ' ';
    for (size_t i = 0; i < n; i++)
        word[i + 1] = (char)tolower((unsigned char)name[i]);
    word[n + 1] = ' ';
    word[n + 2] = '\0';
    return strstr(list, word) != NULL;
}

bool osapi_head_dropped(const char *name)
{
    return osapi_word_in(name, response_drop);
}

bool osapi_is_token(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && !strchr("!#$%&'*+-.^_`|~", ch))
            return false;
    }
    return true;
}

/* Visible characters, spaces and tabs only (no CR, LF, NUL or other controls). */
static bool is_field_value(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

bool osapi_has_token(const char *list, const char *token)
{
    size_t n = strlen(token);
    for (const char *s = list; s && *s;) {
        s += strspn(s, " \t,");
        size_t len = strcspn(s, " \t,");
        if (len == n && strncasecmp(s, token, n) == 0)
            return true;
        s += len;
    }
    return false;
}

void osapi_head_init(struct osapi_head *h)
{
    memset(h, 0, sizeof(*h));
    buf_init(&h->name, OSAPI_HEAD_MAX_BYTES);
    buf_init(&h->value, OSAPI_HEAD_MAX_BYTES);
    buf_init(&h->lines, 2 * OSAPI_HEAD_MAX_BYTES);
}

void osapi_head_release(struct osapi_head *h)
{
    buf_release(&h->name);
    buf_release(&h->value);
    buf_release(&h->lines);
}

void osapi_head_reset(struct osapi_head *h)
{
    buf_reset(&h->lines);
    buf_reset(&h->name);
    buf_reset(&h->value);
    h->in_value = false;
    h->count = 0;
    h->bytes = 0;
    h->upgrade_websocket = false;
    h->bad[0] = '\0';
}

static void refuse(struct osapi_head *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void refuse(struct osapi_head *h, const char *fmt, ...)
{
    if (h->bad[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->bad, sizeof(h->bad), fmt, ap);
    va_end(ap);
}

/* One complete header line: checked, then kept or dropped. */
static void take_header(struct osapi_head *h)
{
    if (!h->in_value && h->name.len == 0)
        return;
    const char *name = buf_cstr(&h->name), *value = buf_cstr(&h->value);
    size_t vlen = h->value.len;
    while (vlen && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
        vlen--;
    while (vlen && (*value == ' ' || *value == '\t'))
        value++, vlen--;
    if (++h->count > OSAPI_HEAD_MAX_LINES)
        refuse(h, "its response has more than %u headers (the proxy's limit)",
               (unsigned)OSAPI_HEAD_MAX_LINES);
    else if (!osapi_is_token(name, h->name.len))
        refuse(h, "its response has a header name that is not a token");
    else if (!is_field_value(value, vlen))
        refuse(h, "its response has a header value with control characters");
    else if (strcasecmp(name, "upgrade") == 0)
        h->upgrade_websocket = osapi_has_token(value, "websocket");
    if (!h->bad[0] && !osapi_head_dropped(name))
        buf_printf(&h->lines, "%s: %.*s\r\n", name, (int)vlen, value);
    buf_reset(&h->name);
    buf_reset(&h->value);
    h->in_value = false;
}

static int count_bytes(struct osapi_head *h, size_t len)
{
    h->bytes += len;
    if (h->bytes > OSAPI_HEAD_MAX_BYTES) {
        refuse(h, "its response head is over %u bytes (the proxy's limit)",
               (unsigned)OSAPI_HEAD_MAX_BYTES);
        return -1;
    }
    return 0;
}

int osapi_head_field(struct osapi_head *h, const char *at, size_t len)
{
    if (h->in_value)
        take_header(h);
    if (count_bytes(h, len) < 0)
        return -1;
    buf_append(&h->name, at, len);
    return 0;
}

int osapi_head_value(struct osapi_head *h, const char *at, size_t len)
{
    h->in_value = true;
    if (count_bytes(h, len) < 0)
        return -1;
    buf_append(&h->value, at, len);
    return 0;
}

int osapi_head_end(struct osapi_head *h)
{
    take_header(h);
    return h->bad[0] ? -1 : 0;
}
