/* Compact JSON writer (see json_out.h). */
#include "lib/base/json_out.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define JSON_OUT_INITIAL_CAP 256
#define JSON_OUT_INT_CHARS 24 /* "-9223372036854775808" and a NUL */

enum out_status { OUT_OK, OUT_INVALID, OUT_DELEGATE };

struct out {
    char *p;
    size_t len, cap;
    enum out_status status;
};

static void out_reserve(struct out *o, size_t more)
{
    if (o->len + more + 1 <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : JSON_OUT_INITIAL_CAP;
    while (cap < o->len + more + 1)
        cap *= 2;
    o->p = xrealloc(o->p, cap);
    o->cap = cap;
}

static void out_put(struct out *o, const char *s, size_t n)
{
    out_reserve(o, n);
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void out_char(struct out *o, char ch)
{
    out_reserve(o, 1);
    o->p[o->len++] = ch;
}

/* The escape jansson writes for an ASCII byte, or NULL when the byte goes out as it is. */
static const char *escape_of(unsigned char ch, char tmp[8])
{
    static const char hex[] = "0123456789ABCDEF";
    switch (ch) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        break;
    }
    if (ch >= 0x20)
        return NULL;
    memcpy(tmp, "\\u00", 4);
    tmp[4] = hex[ch >> 4];
    tmp[5] = hex[ch & 0xF];
    tmp[6] = '\0';
    return tmp;
}

/* Printable ASCII (and DEL) other than '"' and '\\': written as it is. */
static inline bool plain_ascii(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* Runs of plain bytes are copied at once; each run of non-ASCII bytes must be whole, valid
 * UTF-8 code points (a valid string's runs always are), as jansson requires. jansson fails on
 * an invalid value but writes an invalid key cut short: a key like that is left to it. */
static void put_string(struct out *o, const char *s, size_t n, bool is_key)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0;
    char tmp[8];

    out_char(o, '"');
    while (i < n) {
        /* The common case first: printable ASCII that needs no escape (tight loop). */
        while (i < n && plain_ascii(u[i]))
            i++;
        if (i == n)
            break;
        if (u[i] >= 0x80) {
            size_t j = i;
            while (j < n && u[j] >= 0x80)
                j++;
            if (!utf8_is_text(s + i, j - i)) {
                o->status = is_key ? OUT_DELEGATE : OUT_INVALID;
                return;
            }
            i = j;
            continue;
        }
        const char *esc = escape_of(u[i], tmp);
        if (esc) {
            out_put(o, s + start, i - start);
            out_put(o, esc, strlen(esc));
            start = i + 1;
        }
        i++;
    }
    out_put(o, s + start, n - start);
    out_char(o, '"');
}

/* Decimal by hand: ids are integers in every reply, and snprintf costs more than the rest. */
static void put_integer(struct out *o, json_int_t v)
{
    char digits[JSON_OUT_INT_CHARS];
    size_t i = sizeof(digits);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        digits[--i] = '-';
    out_put(o, digits + i, sizeof(digits) - i);
}

static void put_value(struct out *o, const json_t *v, int depth);

static void put_object(struct out *o, const json_t *v, int depth)
{
    const char *key;
    size_t key_len;
    json_t *item;
    bool first = true;

    out_char(o, '{');
    json_object_keylen_foreach ((json_t *)v, key, key_len, item) {
        if (!first)
            out_char(o, ',');
        first = false;
        put_string(o, key, key_len, true);
        if (o->status != OUT_OK)
            return;
        out_char(o, ':');
        put_value(o, item, depth + 1);
        if (o->status != OUT_OK)
            return;
    }
    out_char(o, '}');
}

static void put_array(struct out *o, const json_t *v, int depth)
{
    size_t n = json_array_size(v);

    out_char(o, '[');
    for (size_t i = 0; i < n && o->status == OUT_OK; i++) {
        if (i)
            out_char(o, ',');
        put_value(o, json_array_get(v, i), depth + 1);
    }
    out_char(o, ']');
}

static void put_value(struct out *o, const json_t *v, int depth)
{
    if (o->status != OUT_OK)
        return;
    if (depth > JSON_OUT_MAX_DEPTH) {
        o->status = OUT_DELEGATE;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        put_object(o, v, depth);
        return;
    case JSON_ARRAY:
        put_array(o, v, depth);
        return;
    case JSON_STRING:
        put_string(o, json_string_value(v), json_string_length(v), false);
        return;
    case JSON_INTEGER:
        put_integer(o, json_integer_value(v));
        return;
    case JSON_TRUE:
        out_put(o, "true", 4);
        return;
    case JSON_FALSE:
        out_put(o, "false", 5);
        return;
    case JSON_NULL:
        out_put(o, "null", 4);
        return;
    case JSON_REAL: /* jansson's own number format ("%.17g", trimmed exponent, ".0") */
        break;
    }
    o->status = OUT_DELEGATE;
}

char *json_out_dump(const json_t *v, size_t *len)
{
    struct out o = {0};

    if (v)
        put_value(&o, v, 0);
    if (!v || o.status != OUT_OK) {
        free(o.p);
        if (!v || o.status == OUT_INVALID)
            return NULL;
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (text && len)
            *len = strlen(text);
        return text;
    }
    out_reserve(&o, 0);
    o.p[o.len] = '\0';
    if (len)
        *len = o.len;
    return o.p;
}
