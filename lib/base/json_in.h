/* A fast path for parsing the small JSON messages every request carries.
 *
 * json_in_parse accepts only a strict, common subset of JSON: objects, arrays, strings (valid
 * UTF-8; the short escapes \" \\ \/ \b \f \n \r \t), integers of up to JSON_IN_MAX_DIGITS
 * digits, true, false, null, nested at most JSON_IN_MAX_DEPTH deep, no duplicate keys. For
 * such text it builds the same tree as json_loadb(data, len, JSON_REJECT_DUPLICATES |
 * JSON_DECODE_ANY) at a fraction of the cost (jansson copies each character through its
 * lexer's buffer). For anything else (\u escapes, reals, errors of any kind) it returns NULL:
 * the caller then asks json_loadb, which decides and words any error exactly as before. */
#ifndef MCP_BASE_JSON_IN_H
#define MCP_BASE_JSON_IN_H
#include <jansson.h>
#include <stddef.h>

#define JSON_IN_MAX_DEPTH 64
#define JSON_IN_MAX_DIGITS 18 /* always within json_int_t */

/* The parsed value (a new reference), or NULL: not in the subset above; ask json_loadb. */
json_t *json_in_parse(const char *data, size_t len);

#endif
