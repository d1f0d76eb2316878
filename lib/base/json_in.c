/* Fast-path JSON parser for a strict subset (see json_in.h). Any doubt means NULL. */
#include "lib/base/json_in.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define JSON_IN_STACK_STRING 256 /* strings with escapes up to this size decode on the stack */

struct in {
    const unsigned char *p, *end;
};

static void skip_ws(struct in *in)
{
    while (in->p < in->end && (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r'))
        in->p++;
}

static json_t *parse_value(struct in *in, int depth);

/* The decoded byte of a short escape, or -1 (\u and anything unknown: left to jansson). */
static int short_escape(unsigned char ch)
{
    switch (ch) {
    case '"':
    case '\\':
    case '/':
        return ch;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return -1;
    }
}

/* Scans a string body (in->p just past the quote): its raw length and whether it has escapes.
 * Returns false for what jansson would refuse or what this parser leaves to it. */
static bool scan_string(struct in *in, size_t *raw, bool *escaped)
{
    const unsigned char *s = in->p, *q = s;
    *escaped = false;
    while (q < in->end && *q != '"') {
        if (*q < 0x20)
            return false;
        if (*q == '\\') {
            if (q + 1 >= in->end || short_escape(q[1]) < 0)
                return false;
            *escaped = true;
            q += 2;
            continue;
        }
        if (*q >= 0x80) {
            const unsigned char *r = q;
            while (r < in->end && *r >= 0x80)
                r++;
            if (!utf8_is_text((const char *)q, (size_t)(r - q)))
                return false;
            q = r;
            continue;
        }
        q++;
    }
    if (q >= in->end)
        return false;
    *raw = (size_t)(q - s);
    return true;
}

static size_t unescape(const unsigned char *s, size_t raw, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < raw; i++) {
        if (s[i] == '\\')
            out[n++] = (char)short_escape(s[++i]);
        else
            out[n++] = (char)s[i];
    }
    return n;
}

/* A string value (in->p at its opening quote), or NULL if it is refused. */
static json_t *parse_string_value(struct in *in)
{
    size_t raw;
    bool escaped;

    in->p++; /* the opening quote */
    if (!scan_string(in, &raw, &escaped))
        return NULL;
    const unsigned char *s = in->p;
    in->p += raw + 1;
    if (!escaped)
        return json_stringn_nocheck((const char *)s, raw);
    char stack[JSON_IN_STACK_STRING];
    char *buf = raw <= sizeof(stack) ? stack : xmalloc(raw);
    json_t *v = json_stringn_nocheck(buf, unescape(s, raw, buf));
    if (buf != stack)
        free(buf);
    return v;
}

static json_t *parse_integer(struct in *in)
{
    bool neg = in->p < in->end && *in->p == '-';
    if (neg)
        in->p++;
    const unsigned char *digits = in->p;
    unsigned long long u = 0;
    while (in->p < in->end && *in->p >= '0' && *in->p <= '9')
        u = u * 10 + (unsigned)(*in->p++ - '0');
    size_t n = (size_t)(in->p - digits);
    if (n == 0 || n > JSON_IN_MAX_DIGITS || (n > 1 && *digits == '0'))
        return NULL;
    /* a fraction or an exponent makes a real: left to jansson, as is "1x" */
    if (in->p < in->end && (*in->p == '.' || *in->p == 'e' || *in->p == 'E'))
        return NULL;
    return json_integer(neg ? -(json_int_t)u : (json_int_t)u);
}

static json_t *parse_literal(struct in *in, const char *word, json_t *value)
{
    size_t n = strlen(word);
    if ((size_t)(in->end - in->p) < n || memcmp(in->p, word, n) != 0)
        return NULL;
    in->p += n;
    /* jansson reads a whole run of letters as one word: "truex" is an error */
    if (in->p < in->end && ((*in->p | 0x20) >= 'a' && (*in->p | 0x20) <= 'z'))
        return NULL;
    return value;
}

static bool parse_member(struct in *in, json_t *obj, int depth)
{
    size_t raw;
    bool escaped;

    if (in->p >= in->end || *in->p != '"')
        return false;
    in->p++;
    if (!scan_string(in, &raw, &escaped) || escaped) /* escaped keys: left to jansson */
        return false;
    const char *key = (const char *)in->p;
    in->p += raw + 1;
    skip_ws(in);
    if (in->p >= in->end || *in->p != ':')
        return false;
    in->p++;
    json_t *v = parse_value(in, depth + 1);
    if (!v)
        return false;
    if (json_object_getn(obj, key, raw)) { /* a duplicate: jansson words the error */
        json_decref(v);
        return false;
    }
    json_object_setn_new_nocheck(obj, key, raw, v);
    return true;
}

static json_t *parse_object(struct in *in, int depth)
{
    json_t *obj = json_object();

    in->p++;
    skip_ws(in);
    if (in->p < in->end && *in->p == '}') {
        in->p++;
        return obj;
    }
    for (;;) {
        if (!parse_member(in, obj, depth))
            break;
        skip_ws(in);
        if (in->p < in->end && *in->p == ',') {
            in->p++;
            skip_ws(in);
            continue;
        }
        if (in->p < in->end && *in->p == '}') {
            in->p++;
            return obj;
        }
        break;
    }
    json_decref(obj);
    return NULL;
}

static json_t *parse_array(struct in *in, int depth)
{
    json_t *arr = json_array();

    in->p++;
    skip_ws(in);
    if (in->p < in->end && *in->p == ']') {
        in->p++;
        return arr;
    }
    for (;;) {
        json_t *v = parse_value(in, depth + 1);
        if (!v)
            break;
        json_array_append_new(arr, v);
        skip_ws(in);
        if (in->p < in->end && *in->p == ',') {
            in->p++;
            continue;
        }
        if (in->p < in->end && *in->p == ']') {
            in->p++;
            return arr;
        }
        break;
    }
    json_decref(arr);
    return NULL;
}

static json_t *parse_value(struct in *in, int depth)
{
    if (depth > JSON_IN_MAX_DEPTH)
        return NULL;
    skip_ws(in);
    if (in->p >= in->end)
        return NULL;
    switch (*in->p) {
    case '{':
        return parse_object(in, depth);
    case '[':
        return parse_array(in, depth);
    case '"':
        return parse_string_value(in);
    case 't':
        return parse_literal(in, "true", json_true());
    case 'f':
        return parse_literal(in, "false", json_false());
    case 'n':
        return parse_literal(in, "null", json_null());
    default:
        return parse_integer(in);
    }
}

json_t *json_in_parse(const char *data, size_t len)
{
    struct in in = {(const unsigned char *)data, (const unsigned char *)data + len};
    json_t *v = parse_value(&in, 0);

    if (!v)
        return NULL;
    skip_ws(&in);
    if (in.p != in.end) {
        json_decref(v);
        return NULL;
    }
    return v;
}
