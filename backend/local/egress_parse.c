#include "backend/local/egress_parse.h"

#include <string.h>

static unsigned get16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static int is_name_char(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
}

/* A host name as the policy may see it: letters, digits, '-', '_' and '.', 1..253 bytes.
 * Anything else (a NUL, a space, a '/') is not a name: the connection is treated as nameless. */
static int copy_host(const uint8_t *p, size_t n, char name[EGRESS_HOST_MAX + 1])
{
    if (n > 0 && p[n - 1] == '.')
        n--;
    if (n == 0 || n > EGRESS_HOST_MAX)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(p[i]))
            return -1;
    memcpy(name, p, n);
    name[n] = '\0';
    return 0;
}

/* ---- TLS ---------------------------------------------------------------------------------- */

/* The ClientHello's extensions (body = the handshake message after its 4-byte header). */
static enum egress_parse_rc hello_sni(const uint8_t *b, size_t n, char *name)
{
    size_t off = 2 + 32; /* client_version, random */
    if (off + 1 > n)
        return EGRESS_PARSE_NONE;
    off += 1 + b[off]; /* session_id */
    if (off + 2 > n)
        return EGRESS_PARSE_NONE;
    off += 2 + get16(b + off); /* cipher_suites */
    if (off + 1 > n)
        return EGRESS_PARSE_NONE;
    off += 1 + b[off]; /* compression_methods */
    if (off + 2 > n)
        return EGRESS_PARSE_NONE;
    size_t end = off + 2 + get16(b + off);
    off += 2;
    if (end > n)
        return EGRESS_PARSE_NONE;
    while (off + 4 <= end) {
        unsigned type = get16(b + off), len = get16(b + off + 2);
        off += 4;
        if (off + len > end)
            return EGRESS_PARSE_NONE;
        if (type == 0) { /* server_name: list length, then (type, length, name)* */
            const uint8_t *e = b + off;
            if (len < 2 || (size_t)get16(e) + 2 > len)
                return EGRESS_PARSE_NONE;
            size_t lend = 2 + get16(e);
            for (size_t i = 2; i + 3 <= lend;) {
                unsigned nt = e[i], nl = get16(e + i + 1);
                if (i + 3 + nl > lend)
                    return EGRESS_PARSE_NONE;
                if (nt == 0)
                    return copy_host(e + i + 3, nl, name) == 0 ? EGRESS_PARSE_FOUND
                                                              : EGRESS_PARSE_NONE;
                i += 3 + nl;
            }
            return EGRESS_PARSE_NONE;
        }
        off += len;
    }
    return EGRESS_PARSE_NONE;
}

enum egress_parse_rc egress_tls_sni(const uint8_t *p, size_t n, char name[EGRESS_HOST_MAX + 1])
{
    /* The ClientHello may span several handshake records: gather their payloads (up to the
     * caller's bytes) into one message. 16 KiB covers any ClientHello a client sends. */
    static const size_t max_hello = 16384;
    uint8_t msg[16384];
    size_t have = 0, off = 0;
    name[0] = '\0';
    if (n >= 1 && p[0] != 22)
        return EGRESS_PARSE_NONE; /* not a handshake record */
    while (off + 5 <= n) {
        if (p[off] != 22 || p[off + 1] != 3)
            return EGRESS_PARSE_NONE;
        size_t rl = get16(p + off + 3);
        if (rl == 0 || rl > 16384 + 2048)
            return EGRESS_PARSE_NONE;
        size_t take = off + 5 + rl <= n ? rl : n - off - 5;
        if (have + take > max_hello)
            take = max_hello - have;
        memcpy(msg + have, p + off + 5, take);
        have += take;
        if (have >= 4) {
            if (msg[0] != 1) /* client_hello */
                return EGRESS_PARSE_NONE;
            size_t hl = (size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3];
            if (hl + 4 > max_hello)
                return EGRESS_PARSE_NONE;
            if (have >= hl + 4)
                return hello_sni(msg + 4, hl, name);
        }
        if (off + 5 + rl > n)
            return have >= max_hello ? EGRESS_PARSE_NONE : EGRESS_PARSE_MORE;
        off += 5 + rl;
    }
    return EGRESS_PARSE_MORE;
}

/* ---- HTTP --------------------------------------------------------------------------------- */

static int is_token_char(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-';
}

static int ieq(const uint8_t *p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c >= 'A' && c <= 'Z')
            c = (uint8_t)(c + 32);
        if (c != (uint8_t)s[i])
            return 0;
    }
    return 1;
}

/* The Host value: "name", "name:port"; a bracketed IPv6 literal or anything else is no name. */
static enum egress_parse_rc host_value(const uint8_t *v, size_t n, char *name)
{
    while (n > 0 && (v[0] == ' ' || v[0] == '\t'))
        v++, n--;
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    const uint8_t *colon = memchr(v, ':', n);
    if (colon != NULL) {
        for (const uint8_t *d = colon + 1; d < v + n; d++)
            if (*d < '0' || *d > '9')
                return EGRESS_PARSE_NONE;
        n = (size_t)(colon - v);
    }
    return copy_host(v, n, name) == 0 ? EGRESS_PARSE_FOUND : EGRESS_PARSE_NONE;
}

enum egress_parse_rc egress_http_host(const uint8_t *p, size_t n, char name[EGRESS_HOST_MAX + 1])
{
    name[0] = '\0';
    /* The request line: a method (letters), a space. */
    size_t i = 0;
    while (i < n && i < 16 && p[i] >= 'A' && p[i] <= 'Z')
        i++;
    if (i < n && (i == 0 || i == 16 || p[i] != ' '))
        return EGRESS_PARSE_NONE;
    const uint8_t *eol = memchr(p, '\n', n);
    if (eol == NULL)
        return n > 8192 ? EGRESS_PARSE_NONE : EGRESS_PARSE_MORE;
    /* Header lines up to the blank line. */
    for (size_t off = (size_t)(eol - p) + 1; off < n;) {
        const uint8_t *end = memchr(p + off, '\n', n - off);
        if (end == NULL)
            return n > 8192 ? EGRESS_PARSE_NONE : EGRESS_PARSE_MORE;
        size_t len = (size_t)(end - (p + off));
        if (len > 0 && p[off + len - 1] == '\r')
            len--;
        if (len == 0)
            return EGRESS_PARSE_NONE; /* end of the headers: no Host */
        const uint8_t *l = p + off;
        size_t k = 0;
        while (k < len && is_token_char(l[k]))
            k++;
        if (k == 4 && k < len && l[k] == ':' && ieq(l, "host", 4))
            return host_value(l + 5, len - 5, name);
        off = (size_t)(end - p) + 1;
    }
    return n > 8192 ? EGRESS_PARSE_NONE : EGRESS_PARSE_MORE;
}

/* ---- DNS ---------------------------------------------------------------------------------- */

int egress_dns_parse(const uint8_t *p, size_t n, struct egress_dns_query *q)
{
    memset(q, 0, sizeof *q);
    if (n < 12)
        return -1;
    q->id = (uint16_t)get16(p);
    q->flags = (uint16_t)get16(p + 2);
    if ((q->flags & 0x8000) || get16(p + 4) != 1 || get16(p + 6) != 0 || get16(p + 8) != 0)
        return -1; /* a reply, not one question, or answers in a query */
    size_t off = 12, out = 0;
    for (;;) {
        if (off >= n)
            return -1;
        unsigned len = p[off++];
        if (len == 0)
            break;
        if (len > 63 || off + len > n || out + len + 1 > EGRESS_HOST_MAX + 1)
            return -1; /* a compression pointer (0xc0) is over 63 too */
        for (unsigned i = 0; i < len; i++) /* a label holds name characters, never a '.' */
            if (p[off + i] == '.' || !is_name_char(p[off + i]))
                return -1;
        if (out > 0)
            q->name[out++] = '.';
        memcpy(q->name + out, p + off, len);
        out += len;
        off += len;
    }
    if (out > EGRESS_HOST_MAX || off + 4 > n)
        return -1;
    q->name[out] = '\0';
    if (out == 0)
        return -1; /* the root: no host */
    q->qtype = (uint16_t)get16(p + off);
    q->qclass = (uint16_t)get16(p + off + 2);
    q->question = p + 12;
    q->question_len = off + 4 - 12;
    return 0;
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

size_t egress_dns_answer(const struct egress_dns_query *q, int rcode, uint32_t addr, uint32_t ttl,
                         uint8_t *out)
{
    size_t qlen = q->question_len <= EGRESS_DNS_MAX - 12 - 16 ? q->question_len : 0;
    put16(out, q->id);
    /* QR, opcode copied, AA, RD copied, RA */
    put16(out + 2, 0x8000u | (q->flags & 0x7800u) | 0x0400u | (q->flags & 0x0100u) | 0x0080u |
                       ((unsigned)rcode & 0xf));
    put16(out + 4, qlen ? 1 : 0);
    put16(out + 6, addr && qlen ? 1 : 0);
    put16(out + 8, 0);
    put16(out + 10, 0);
    memcpy(out + 12, q->question, qlen);
    size_t len = 12 + qlen;
    if (addr && qlen) {
        put16(out + len, 0xc00c); /* the name: a pointer to the question's */
        put16(out + len + 2, EGRESS_DNS_A);
        put16(out + len + 4, EGRESS_DNS_IN);
        put16(out + len + 6, ttl >> 16);
        put16(out + len + 8, ttl & 0xffff);
        put16(out + len + 10, 4);
        put16(out + len + 12, addr >> 16);
        put16(out + len + 14, addr & 0xffff);
        len += 16;
    }
    return len;
}
