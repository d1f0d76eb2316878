/* Compact JSON text for the hot reply path.
 *
 * json_out_dump(v) gives byte for byte what json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) gives
 * (keys in insertion order, UTF-8 passed through, the same escapes), without jansson's per-call
 * costs: a hashtable entry (and a "%p" key printed with snprintf) per object and array for loop
 * detection, and a callback per run of characters. Values it does not handle itself (reals,
 * nesting deeper than JSON_OUT_MAX_DEPTH) are rendered by json_dumps, so the text is always
 * jansson's; like json_dumps it returns NULL for strings that are not valid UTF-8. */
#ifndef MCP_BASE_JSON_OUT_H
#define MCP_BASE_JSON_OUT_H
#include <jansson.h>
#include <stddef.h>

/* Deeper than this, the whole value goes to json_dumps (which also detects cycles). */
#define JSON_OUT_MAX_DEPTH 64

/* The text (malloc'd, NUL-terminated; its length in *len when len is not NULL), or NULL. */
char *json_out_dump(const json_t *v, size_t *len);

#endif
