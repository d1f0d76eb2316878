/* Rewriting a request head and masking values in replies (egress_inject.h). */
#include "backend/local/egress_inject.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

/* The output head, bounded by EGRESS_INJECT_OUT_MAX. */
struct head_out {
    uint8_t *p;
    size_t len;
    bool full;
};

static void put(struct head_out *o, const void *s, size_t n)
{
    if (o->full || o->len + n > EGRESS_INJECT_OUT_MAX) {
        o->full = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* s[0..n) with each secret's placeholder replaced by its value. */
static void put_substituted(struct head_out *o, const uint8_t *s, size_t n,
                            const struct egress_inject *inj, size_t k)
{
    size_t i = 0;
    while (i < n) {
        size_t hit = k;
        for (size_t j = 0; j < k && hit == k; j++) {
            size_t pl = inj[j].placeholder ? strlen(inj[j].placeholder) : 0;
            if (pl > 0 && pl <= n - i && memcmp(s + i, inj[j].placeholder, pl) == 0)
                hit = j;
        }
        if (hit == k) {
            put(o, s + i++, 1);
            continue;
        }
        put(o, inj[hit].value, inj[hit].value_len);
        i += strlen(inj[hit].placeholder);
    }
}

static bool is_tchar(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static uint8_t lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

static bool name_is(const uint8_t *l, size_t n, const char *name, size_t name_len)
{
    if (n != name_len)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(l[i]) != lower((uint8_t)name[i]))
            return false;
    return true;
}

/* Headers the proxy sets itself: each secret's, and the connection's. */
static bool dropped(const uint8_t *l, size_t n, const struct egress_inject *inj, size_t k)
{
    static const char *const own[] = {"connection", "keep-alive", "proxy-connection", "upgrade",
                                      "accept-encoding"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (name_is(l, n, own[i], strlen(own[i])))
            return true;
    for (size_t j = 0; j < k; j++)
        if (inj[j].header_name && name_is(l, n, inj[j].header_name, inj[j].header_name_len))
            return true;
    return false;
}

/* The request line: METHOD SP target SP HTTP/1.x, visible characters only. */
static bool request_line_ok(const uint8_t *l, size_t n)
{
    size_t m = 0;
    while (m < n && m < 16 && l[m] >= 'A' && l[m] <= 'Z')
        m++;
    if (m == 0 || m >= n || l[m] != ' ' || n < m + 1 + 1 + 9)
        return false;
    for (size_t i = m + 1; i < n - 9; i++)
        if (l[i] <= ' ' || l[i] >= 0x7f)
            return false;
    return memcmp(l + n - 9, " HTTP/1.", 8) == 0 && (l[n - 1] == '0' || l[n - 1] == '1');
}

/* One header line; false when it is not "name: visible text" (folded, control characters). */
static bool header_line(struct head_out *o, const uint8_t *l, size_t n,
                        const struct egress_inject *inj, size_t k)
{
    size_t c = 0;
    while (c < n && is_tchar(l[c]))
        c++;
    if (c == 0 || c >= n || l[c] != ':')
        return false;
    for (size_t i = c + 1; i < n; i++)
        if ((l[i] < ' ' && l[i] != '\t') || l[i] == 0x7f)
            return false;
    if (dropped(l, c, inj, k))
        return true;
    put_substituted(o, l, n, inj, k);
    put(o, "\r\n", 2);
    return true;
}

static void added_headers(struct head_out *o, const struct egress_inject *inj, size_t k)
{
    for (size_t j = 0; j < k; j++) {
        if (inj[j].header_name == NULL)
            continue;
        put(o, inj[j].header_name, inj[j].header_name_len);
        put(o, ":", 1);
        const char *t = inj[j].header_tmpl, *at = strstr(t, "{}");
        put(o, t, (size_t)(at - t));
        put(o, inj[j].value, inj[j].value_len);
        put(o, at + 2, strlen(at + 2));
        put(o, "\r\n", 2);
    }
    put(o, "Connection: close\r\n\r\n", 21);
}

enum egress_parse_rc egress_inject_head(const uint8_t *p, size_t n, const struct egress_inject *inj,
                                        size_t k, uint8_t **out, size_t *out_len, size_t *head_len)
{
    struct head_out o = {.p = xmalloc(EGRESS_INJECT_OUT_MAX)};
    size_t off = 0, line = 0;
    enum egress_parse_rc rc = n >= EGRESS_INJECT_HEAD_MAX ? EGRESS_PARSE_NONE : EGRESS_PARSE_MORE;
    while (off < n && off < EGRESS_INJECT_HEAD_MAX) {
        const uint8_t *eol = memchr(p + off, '\n', n - off);
        if (eol == NULL)
            break;
        size_t len = (size_t)(eol - (p + off)), next = (size_t)(eol - p) + 1;
        if (len > 0 && p[off + len - 1] == '\r')
            len--;
        bool ok = line == 0 ? request_line_ok(p + off, len)
                            : len == 0 || header_line(&o, p + off, len, inj, k);
        if (!ok || memchr(p + off, '\r', len) != NULL) {
            rc = EGRESS_PARSE_NONE;
            break;
        }
        if (line++ == 0) {
            put_substituted(&o, p + off, len, inj, k);
            put(&o, "\r\n", 2);
        } else if (len == 0) {
            added_headers(&o, inj, k);
            rc = o.full ? EGRESS_PARSE_NONE : EGRESS_PARSE_FOUND;
            *head_len = next;
            break;
        }
        off = next;
    }
    if (rc != EGRESS_PARSE_FOUND) {
        free(o.p);
        return rc;
    }
    *out = o.p, *out_len = o.len;
    return rc;
}

size_t egress_redact(uint8_t *buf, size_t n, const struct egress_inject *inj, size_t k, bool final,
                     unsigned *masked)
{
    size_t longest = 0;
    for (size_t j = 0; j < k; j++) {
        if (inj[j].value_len > longest)
            longest = inj[j].value_len;
        for (size_t i = 0; inj[j].value_len > 0 && i + inj[j].value_len <= n;) {
            uint8_t *hit = memmem(buf + i, n - i, inj[j].value, inj[j].value_len);
            if (hit == NULL)
                break;
            memset(hit, '*', inj[j].value_len);
            ++*masked;
            i = (size_t)(hit - buf) + inj[j].value_len;
        }
    }
    if (final || longest == 0)
        return n;
    return n >= longest - 1 ? n - (longest - 1) : 0;
}
