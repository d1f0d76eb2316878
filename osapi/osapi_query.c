/* Query strings: name=value pairs separated by '&', percent-encoded, names may repeat. */
#include "osapi/osapi-internal.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *osapi_url_decode(const char *s, size_t len, bool plus_is_space)
{
    char *out = xmalloc(len + 1), *o = out;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < len &&
            (hi = hex_value(s[i + 1])) >= 0 && (lo = hex_value(s[i + 2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = plus_is_space && s[i] == '+' ? ' ' : s[i];
        }
    }
    *o = '\0';
    return out;
}

/* Calls fn for every pair whose decoded name is name; stops when fn returns false. */
static void each_value(const char *query, const char *name, bool (*fn)(void *, char *), void *arg)
{
    const char *p = query;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t nlen = eq ? (size_t)(eq - p) : len;
        char *n = osapi_url_decode(p, nlen, true);
        bool match = strcmp(n, name) == 0;
        free(n);
        if (match) {
            char *v = eq ? osapi_url_decode(eq + 1, len - nlen - 1, true) : xstrdup("");
            if (!fn(arg, v))
                return;
        }
        p = amp ? amp + 1 : NULL;
    }
}

static bool take_first(void *arg, char *v)
{
    *(char **)arg = v;
    return false;
}

static bool take_all(void *arg, char *v)
{
    json_array_append_new(arg, json_string(v));
    free(v);
    return true;
}

char *osapi_query_get(const char *query, const char *name)
{
    char *v = NULL;
    each_value(query, name, take_first, &v);
    return v;
}

json_t *osapi_query_all(const char *query, const char *name)
{
    json_t *all = json_array();
    each_value(query, name, take_all, all);
    return all;
}
