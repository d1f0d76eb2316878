/* UTF-8 for everything that hands bytes to an agent as JSON text: one validator, one rule for
 * NUL (never text: a NUL cannot travel in the C strings below the JSON layer, so it is replaced
 * like any invalid byte), and one rule for cutting pages (never inside a character). */
#ifndef MCP_BASE_UTF8_H
#define MCP_BASE_UTF8_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct buf;

#define UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* Length (1..4) of the valid UTF-8 character at data, or 0 if the bytes there are not one
 * (invalid, overlong, a surrogate, beyond U+10FFFF, cut short by len, or NUL). */
size_t utf8_char_len(const char *data, size_t len);
/* True if the bytes are valid UTF-8 without NUL bytes (safe to return as JSON text). */
bool utf8_is_text(const char *data, size_t len);
/* Length of data without an incomplete UTF-8 sequence at its end (at most 3 bytes dropped). */
size_t utf8_complete_prefix(const char *data, size_t len);
/* Where a page of len bytes that is followed by more should end: before a character its end
 * would split; len when that would leave nothing (the next page must make progress). */
size_t utf8_page_end(const char *data, size_t len);
/* Number of UTF-8 continuation bytes at the start of data (at most 3). */
size_t utf8_skip_continuation(const char *data, size_t len);
/* Appends data to b as valid UTF-8 (each byte that starts no character becomes U+FFFD),
 * writing at most max bytes; returns how many input bytes were consumed (stops before a
 * character that would not fit). */
size_t utf8_sanitize_append(struct buf *b, const char *data, size_t len, size_t max);
/* The bytes as a JSON string, sanitized as above. */
json_t *utf8_json_text(const char *data, size_t len);
/* A name as a person may read it on a terminal (a new string): as is, or in git's C-style
 * quotes ("a\nb", "\033", "\303") when it has a control character, a quote, a backslash or a
 * byte that is not UTF-8. Names chosen by a sandbox must never move the cursor or start a line. */
char *utf8_c_quote(const char *s);

#endif
