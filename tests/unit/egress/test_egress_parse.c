/* The names the egress proxy reads from what a sandbox sends (backend/local/egress_parse.c): the
 * exact results, where the fuzz targets (tests/fuzz/fuzz_egress_*.c) check only that nothing
 * breaks. */
#include <stdint.h>
#include <string.h>

#include "backend/local/egress_parse.h"
#include "test.h"

static void put16(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

/* A minimal ClientHello naming sni (NULL: no server_name extension), as one record or split in
 * two after split bytes of the handshake message (0: one record). Returns its length. */
static size_t client_hello(uint8_t *out, const char *sni, size_t split)
{
    uint8_t body[512];
    size_t n = 0;
    body[n++] = 3, body[n++] = 3;           /* client_version */
    memset(body + n, 0x5a, 32), n += 32;    /* random */
    body[n++] = 0;                          /* session_id */
    put16(body + n, 2), n += 2;             /* cipher_suites */
    body[n++] = 0x13, body[n++] = 0x01;
    body[n++] = 1, body[n++] = 0;           /* compression_methods */
    size_t ext_len_at = n;
    n += 2;
    put16(body + n, 0x000b), put16(body + n + 2, 2), body[n + 4] = 1, body[n + 5] = 0, n += 6;
    if (sni) {
        size_t l = strlen(sni);
        put16(body + n, 0), put16(body + n + 2, l + 5), put16(body + n + 4, l + 3);
        body[n + 6] = 0, put16(body + n + 7, l), memcpy(body + n + 9, sni, l);
        n += 9 + l;
    }
    put16(body + ext_len_at, n - ext_len_at - 2);
    uint8_t msg[600];
    msg[0] = 1, msg[1] = 0, put16(msg + 2, n), memcpy(msg + 4, body, n);
    size_t mlen = n + 4, len = 0;
    size_t first = split && split < mlen ? split : mlen;
    out[len++] = 22, out[len++] = 3, out[len++] = 1, put16(out + len, first), len += 2;
    memcpy(out + len, msg, first), len += first;
    if (first < mlen) {
        out[len++] = 22, out[len++] = 3, out[len++] = 1, put16(out + len, mlen - first), len += 2;
        memcpy(out + len, msg + first, mlen - first), len += mlen - first;
    }
    return len;
}

TEST(tls_server_name)
{
    uint8_t b[1200];
    char name[EGRESS_HOST_MAX + 1];
    size_t n = client_hello(b, "Files.PythonHosted.org.", 0);
    ASSERT_EQ(egress_tls_sni(b, n, name), EGRESS_PARSE_FOUND);
    ASSERT_STR_EQ(name, "Files.PythonHosted.org"); /* the policy lower-cases; the dot goes */
    ASSERT_EQ(egress_tls_sni(b, n - 1, name), EGRESS_PARSE_MORE); /* still arriving */
    ASSERT_EQ(egress_tls_sni(b, 3, name), EGRESS_PARSE_MORE);
    n = client_hello(b, "pypi.org", 20); /* the handshake split over two records */
    ASSERT_EQ(egress_tls_sni(b, n, name), EGRESS_PARSE_FOUND);
    ASSERT_STR_EQ(name, "pypi.org");
    n = client_hello(b, NULL, 0);
    ASSERT_EQ(egress_tls_sni(b, n, name), EGRESS_PARSE_NONE);
    n = client_hello(b, "a/b.example", 0); /* not a host name: no name at all */
    ASSERT_EQ(egress_tls_sni(b, n, name), EGRESS_PARSE_NONE);
    ASSERT_EQ(egress_tls_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name), EGRESS_PARSE_NONE);
    n = client_hello(b, "pypi.org", 0);
    b[5] = 2; /* a server_hello */
    ASSERT_EQ(egress_tls_sni(b, n, name), EGRESS_PARSE_NONE);
}

TEST(http_host)
{
    char name[EGRESS_HOST_MAX + 1];
    const char *get = "GET /simple/ HTTP/1.1\r\nUser-Agent: pip\r\nhOsT:  PyPI.org:8080 \r\n\r\n";
    ASSERT_EQ(egress_http_host((const uint8_t *)get, strlen(get), name), EGRESS_PARSE_FOUND);
    ASSERT_STR_EQ(name, "PyPI.org");
    const char *lf = "POST /x HTTP/1.0\nHost: a.example\n\n";
    ASSERT_EQ(egress_http_host((const uint8_t *)lf, strlen(lf), name), EGRESS_PARSE_FOUND);
    ASSERT_STR_EQ(name, "a.example");
    const char *none = "GET / HTTP/1.0\r\nAccept: */*\r\n\r\nHost: late.example\r\n";
    ASSERT_EQ(egress_http_host((const uint8_t *)none, strlen(none), name), EGRESS_PARSE_NONE);
    const char *partial = "GET / HTTP/1.1\r\nHo";
    ASSERT_EQ(egress_http_host((const uint8_t *)partial, strlen(partial), name),
              EGRESS_PARSE_MORE);
    const char *v6 = "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n";
    ASSERT_EQ(egress_http_host((const uint8_t *)v6, strlen(v6), name), EGRESS_PARSE_NONE);
    const char *xhost = "GET / HTTP/1.1\r\nX-Host: evil.example\r\nHost: good.example\r\n\r\n";
    ASSERT_EQ(egress_http_host((const uint8_t *)xhost, strlen(xhost), name), EGRESS_PARSE_FOUND);
    ASSERT_STR_EQ(name, "good.example");
    ASSERT_EQ(egress_http_host((const uint8_t *)"\x16\x03\x01", 3, name), EGRESS_PARSE_NONE);
}

static size_t query(uint8_t *b, const char *const *labels, unsigned qtype, unsigned flags)
{
    size_t n = 12;
    memset(b, 0, 12);
    put16(b, 0xbeef), put16(b + 2, flags), put16(b + 4, 1);
    for (; *labels; labels++) {
        b[n++] = (uint8_t)strlen(*labels);
        memcpy(b + n, *labels, strlen(*labels)), n += strlen(*labels);
    }
    b[n++] = 0;
    put16(b + n, qtype), put16(b + n + 2, 1);
    return n + 4;
}

TEST(dns_query_and_answers)
{
    static const char *const pypi[] = {"files", "pythonhosted", "org", NULL};
    uint8_t b[512], out[EGRESS_DNS_MAX];
    struct egress_dns_query q;
    size_t n = query(b, pypi, EGRESS_DNS_A, 0x0100);
    ASSERT_EQ(egress_dns_parse(b, n, &q), 0);
    ASSERT_STR_EQ(q.name, "files.pythonhosted.org");
    ASSERT_EQ(q.qtype, EGRESS_DNS_A);
    size_t len = egress_dns_answer(&q, EGRESS_DNS_NOERROR, 0xc6120a0bu, 60, out);
    ASSERT_EQ(len, n + 16);
    ASSERT(out[0] == 0xbe && out[1] == 0xef);
    ASSERT(out[2] == 0x85 && out[3] == 0x80); /* QR, AA, RD echoed, RA, NOERROR */
    ASSERT(out[7] == 1);                        /* one answer */
    ASSERT(memcmp(out + len - 4, "\xc6\x12\x0a\x0b", 4) == 0); /* 198.18.10.11 */
    len = egress_dns_answer(&q, EGRESS_DNS_NXDOMAIN, 0, 60, out);
    ASSERT_EQ(len, n);
    ASSERT(out[3] == 0x83 && out[7] == 0); /* NXDOMAIN, no answer */
    static const char *const dotted[] = {"evil.com", NULL};
    n = query(b, dotted, EGRESS_DNS_A, 0x0100); /* a label holding a dot is no name */
    ASSERT_EQ(egress_dns_parse(b, n, &q), -1);
    n = query(b, pypi, EGRESS_DNS_A, 0x8180); /* a reply */
    ASSERT_EQ(egress_dns_parse(b, n, &q), -1);
    n = query(b, pypi, EGRESS_DNS_A, 0x0100);
    ASSERT_EQ(egress_dns_parse(b, n - 1, &q), -1); /* truncated */
    b[12] = 0xc0;                                   /* a compression pointer */
    ASSERT_EQ(egress_dns_parse(b, n, &q), -1);
}

int main(void)
{
    RUN(tls_server_name);
    RUN(http_host);
    RUN(dns_query_and_answers);
    return test_done();
}
