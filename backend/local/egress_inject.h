/* Secrets at the egress boundary, the bytes: rewriting the head of one HTTP/1.x request from a
 * sandbox to a host its bound secrets may go to, and masking their values in what comes back.
 * Every byte comes from the sandbox or a remote host (less trusted input): bounds are checked on
 * every read, and tests/fuzz/fuzz_egress_inject.c runs both functions (its corpus is replayed as
 * a test). docs/secrets.md says what is rewritten and why. */
#ifndef MCPBOX_LOCAL_EGRESS_INJECT_H
#define MCPBOX_LOCAL_EGRESS_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/local/egress_parse.h"

#define EGRESS_INJECT_HEAD_MAX 16384 /* a request head longer than this is refused */
#define EGRESS_INJECT_OUT_MAX 65536  /* ... and one that would grow past this */

/* One secret to inject: a header (name and "{}" template), a placeholder to replace, or both. */
struct egress_inject {
    const char *header_name; /* "Authorization", or NULL */
    size_t header_name_len;
    const char *header_tmpl; /* the part after "Name:", e.g. " Bearer {}" */
    const char *placeholder; /* "MCPBOX_SECRET_GITHUB", or NULL */
    const char *value;
    size_t value_len;
};

/* The head of the request in p[0..n): FOUND with *out (malloc'd, *out_len bytes) the head to
 * send instead and *head_len the bytes of p it replaces; MORE: no blank line yet; NONE: not an
 * HTTP/1.x request this can rewrite safely (too long, folded lines, bad characters). The new head
 * drops the headers the secrets set and those of the connection (Connection, Keep-Alive,
 * Proxy-Connection, Upgrade, Accept-Encoding), replaces placeholders in the request line and the
 * header values, then adds each secret's header and "Connection: close". */
enum egress_parse_rc egress_inject_head(const uint8_t *p, size_t n, const struct egress_inject *inj,
                                        size_t k, uint8_t **out, size_t *out_len, size_t *head_len);

/* Masks every whole value of inj in buf[0..n) with '*'. Returns how many bytes from the start
 * may be sent now: all of them when final, else all but the last (longest value - 1), which may
 * start a value the next read completes (the caller keeps them in front of it). *masked counts
 * the values masked. */
size_t egress_redact(uint8_t *buf, size_t n, const struct egress_inject *inj, size_t k, bool final,
                     unsigned *masked);

#endif
