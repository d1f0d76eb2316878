/* libFuzzer target: a sandbox's request to a host one of its secrets may go to, rewritten by
 * egress_inject_head (backend/local/egress_inject.c, used by egress_intercept.c), and a reply
 * masked by egress_redact in pieces. Every prefix is tried, as bytes arrive in any number of
 * pieces. A rewritten head must end in one blank line, carry "Connection: close" once, and hold
 * no CR or LF but at line ends; the masked reply must not hold the value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/local/egress_inject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct egress_inject inj[2] = {
    {.header_name = "Authorization",
     .header_name_len = 13,
     .header_tmpl = " Bearer {}",
     .value = "s3cr3t-value",
     .value_len = 12},
    {.placeholder = "MCPBOX_SECRET_PH", .value = "ph-value", .value_len = 8},
};

static void check_head(const uint8_t *out, size_t len)
{
    if (len < 4 || memcmp(out + len - 4, "\r\n\r\n", 4) != 0)
        __builtin_trap();
    for (size_t i = 0; i < len; i++) {
        if (out[i] == '\n' && (i == 0 || out[i - 1] != '\r'))
            __builtin_trap();
        if (out[i] == '\r' && (i + 1 == len || out[i + 1] != '\n'))
            __builtin_trap();
        if (i + 4 <= len - 4 && memcmp(out + i, "\r\n\r\n", 4) == 0)
            __builtin_trap(); /* a second blank line: one request became two */
    }
    if (memmem(out, len, "Connection: close\r\n\r\n", 21) != out + len - 21)
        __builtin_trap();
}

static void check_redact(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size + 1), *sent = malloc(size + 1);
    size_t kept = 0, out = 0, step = size / 3 + 1;
    unsigned masked = 0;
    for (size_t off = 0; off <= size; off += step) {
        size_t take = size - off < step ? size - off : step;
        memcpy(buf + kept, data + off, take);
        size_t have = kept + take,
               ready = egress_redact(buf, have, inj, 2, off + take >= size, &masked);
        memcpy(sent + out, buf, ready);
        out += ready;
        kept = have - ready;
        memmove(buf, buf + ready, kept);
    }
    if (out != size || memmem(sent, out, "s3cr3t-value", 12) || memmem(sent, out, "ph-value", 8))
        __builtin_trap();
    free(buf);
    free(sent);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t step = size > 64 ? size / 64 : 1;
    for (size_t n = 0; n <= size; n += step) {
        uint8_t *out = NULL;
        size_t out_len = 0, head_len = 0;
        if (egress_inject_head(data, n, inj, 2, &out, &out_len, &head_len) == EGRESS_PARSE_FOUND) {
            if (head_len > n)
                __builtin_trap();
            check_head(out, out_len);
            free(out);
        }
    }
    check_redact(data, size);
    return 0;
}
