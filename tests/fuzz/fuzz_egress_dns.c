/* libFuzzer target: a datagram a sandbox sends to its DNS server (backend/local/egress_parse.c,
 * answered by egress_proxy.c). A query that parses must give a host name of at most 253
 * characters, and every answer written for it must fit EGRESS_DNS_MAX bytes and echo its id. */
#include <stdint.h>
#include <string.h>

#include "backend/local/egress_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct egress_dns_query q;
    if (egress_dns_parse(data, size, &q) < 0)
        return 0;
    size_t n = strnlen(q.name, sizeof q.name);
    if (n == 0 || n > EGRESS_HOST_MAX || q.question < data ||
        q.question + q.question_len > data + size)
        __builtin_trap();
    static const int rcodes[] = {EGRESS_DNS_NOERROR, EGRESS_DNS_NXDOMAIN, EGRESS_DNS_NOTIMP};
    for (size_t i = 0; i < 3; i++) {
        uint8_t out[EGRESS_DNS_MAX];
        size_t len = egress_dns_answer(&q, rcodes[i], i == 0 ? 0xc6120001u : 0, 60, out);
        if (len < 12 || len > EGRESS_DNS_MAX || out[0] != data[0] || out[1] != data[1])
            __builtin_trap();
    }
    return 0;
}
