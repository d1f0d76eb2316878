/* Small helpers used everywhere: clocks, random ids, encodings, digests. */
#ifndef MCP_BASE_UTIL_H
#define MCP_BASE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/utf8.h" /* utf8_is_text lived here */

/* Milliseconds on CLOCK_MONOTONIC (for deadlines) and CLOCK_REALTIME (for records). */
uint64_t now_mono_ms(void);
uint64_t now_mono_us(void);
int64_t now_wall_ms(void);

/* The longest duration anything accepts (sandbox lifetime and idle time, command timeouts): ten
 * years. The tool schemas say it as their "maximum"; code saturates to it, so that a huge value
 * can never wrap into a deadline in the past (issue #18.2). */
#define MAX_DURATION_S (10LL * 365 * 86400)
/* seconds clamped into [0, MAX_DURATION_S], in milliseconds (never overflows). */
int64_t duration_ms(int64_t seconds);

/* RFC 3339 UTC with milliseconds: "2026-11-25T22:12:12.123Z". out must hold 32 bytes. */
void format_rfc3339_ms(int64_t wall_ms, char out[32]);
/* Parses RFC 3339 (any fraction, Z or +hh:mm offset) into wall ms; -1 if malformed. */
int parse_rfc3339_ms(const char *s, int64_t *out);

/* Fill buf with cryptographically random bytes (getrandom); aborts if the kernel refuses. */
void random_bytes(void *buf, size_t len);
/* prefix + 2*nbytes lowercase hex digits, NUL-terminated, into out (size >= strlen(prefix)+2n+1). */
void random_id(char *out, size_t out_size, const char *prefix, size_t nbytes);

void hex_encode(const void *data, size_t len, char *out /* 2*len+1 */);

/* Writes all len bytes to a blocking fd, again after EINTR and short writes; 0, or -1 with
 * errno (a write that wrote nothing counts as a failure). */
int write_full(int fd, const void *data, size_t len);

/* Standard base64 with padding. encode: out needs base64_encoded_len(len)+1 bytes. */
size_t base64_encoded_len(size_t len);
void base64_encode(const void *data, size_t len, char *out);
/* Decodes standard base64 (padding optional, whitespace not allowed). Returns -1 on bad input.
 * out needs base64_decoded_max(len) bytes. */
size_t base64_decoded_max(size_t len);
int base64_decode(const char *in, size_t len, unsigned char *out, size_t *out_len);

/* SHA-256 */
struct sha256_ctx {
    uint32_t state[8];
    uint64_t bits;
    unsigned char block[64];
    size_t used;
};
void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *data, size_t len);
void sha256_final(struct sha256_ctx *c, unsigned char digest[32]);
/* Hex digest of a whole buffer; out holds 65 bytes. */
void sha256_hex(const void *data, size_t len, char out[65]);


#endif
