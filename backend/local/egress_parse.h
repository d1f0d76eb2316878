/* Egress by policy: reading a destination's name from what a sandbox sends. Every byte here
 * comes from the sandbox (less trusted input): bounds are checked on every read, nothing is
 * allocated, and each parser has a fuzz target whose corpus is replayed as a test
 * (tests/fuzz/fuzz_egress_{tls,http,dns}.c). */
#ifndef MCPBOX_LOCAL_EGRESS_PARSE_H
#define MCPBOX_LOCAL_EGRESS_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define EGRESS_HOST_MAX 253 /* a DNS name's longest text form, without the trailing dot */

enum egress_parse_rc {
    EGRESS_PARSE_MORE = 0,  /* not enough bytes yet to tell */
    EGRESS_PARSE_FOUND = 1, /* name written */
    EGRESS_PARSE_NONE = -1  /* not this protocol, or no name in it */
};

/* The server_name of a TLS ClientHello (the first record(s) of a connection). */
enum egress_parse_rc egress_tls_sni(const uint8_t *p, size_t n, char name[EGRESS_HOST_MAX + 1]);
/* The Host header of an HTTP/1.x request (its port, if any, dropped). */
enum egress_parse_rc egress_http_host(const uint8_t *p, size_t n,
                                      char name[EGRESS_HOST_MAX + 1]);

/* One DNS query (RFC 1035 4.1): the header's id and flags, and its single question. */
struct egress_dns_query {
    uint16_t id;
    uint16_t flags;
    uint16_t qtype, qclass;
    char name[EGRESS_HOST_MAX + 1]; /* dotted, as sent (case kept), no trailing dot */
    size_t question_len;            /* bytes of the question section, echoed in the answer */
    const uint8_t *question;        /* into the query */
};
#define EGRESS_DNS_A 1
#define EGRESS_DNS_IN 1
#define EGRESS_DNS_NOERROR 0
#define EGRESS_DNS_FORMERR 1
#define EGRESS_DNS_NXDOMAIN 3
#define EGRESS_DNS_NOTIMP 4
#define EGRESS_DNS_REFUSED 5
#define EGRESS_DNS_MAX 512 /* a UDP answer we write is never larger */

/* 0: a query with exactly one question whose name is written in plain labels (no compression:
 * a query has nothing to point back to); -1 otherwise (a reply, a truncated packet, ...). */
int egress_dns_parse(const uint8_t *p, size_t n, struct egress_dns_query *q);
/* Writes the answer to q into out (at least EGRESS_DNS_MAX bytes): rcode, and with addr (host
 * order, 0: none) one A record of ttl seconds. Returns its length. */
size_t egress_dns_answer(const struct egress_dns_query *q, int rcode, uint32_t addr, uint32_t ttl,
                         uint8_t *out);

#endif
