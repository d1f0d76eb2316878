/* SEP-2243 custom headers (x-mcp-header / Mcp-Param-*): the body stays the truth, and a header
 * that mirrors an argument must say the same, so that intermediaries routing on the header
 * cannot be told one thing while the server does another. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "mcp/modern.h"

#define PARAM_HEADER_PREFIX "mcp-param-"
#define B64_PREFIX "=?base64?"
#define B64_SUFFIX "?="
/* Longest header name part and value considered. */
#define PARAM_NAME_MAX 128
#define PARAM_VALUE_MAX 8192

/* Strict base64: padded to a multiple of 4, alphabet only, '=' only at the end. */
static bool b64_strict(const char *s, size_t len)
{
    size_t pad = 0;
    if (len == 0 || len % 4 != 0)
        return false;
    while (pad < 2 && s[len - 1 - pad] == '=')
        pad++;
    for (size_t i = 0; i < len - pad; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '+' && s[i] != '/')
            return false;
    return true;
}

/* The header's value as the text it stands for (new string), or NULL if it is malformed. */
static char *header_text(const char *v)
{
    size_t len = strnlen(v, PARAM_VALUE_MAX + 1), pl = strlen(B64_PREFIX), sl = strlen(B64_SUFFIX);
    if (len > PARAM_VALUE_MAX)
        return NULL;
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    while (len > 0 && (*v == ' ' || *v == '\t'))
        v++, len--;
    if (len < pl + sl || strncmp(v, B64_PREFIX, pl) != 0 || strncmp(v + len - sl, B64_SUFFIX, sl))
        return xstrndup(v, len); /* no complete wrapper: the text itself */
    const char *b64 = v + pl;
    size_t blen = len - pl - sl, n;
    if (!b64_strict(b64, blen))
        return NULL;
    char *out = xmalloc(base64_decoded_max(blen) + 1);
    if (base64_decode(b64, blen, (unsigned char *)out, &n) < 0 || memchr(out, '\0', n)) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    return out;
}

/* The argument as header text (new string), or NULL for values that cannot be mirrored. */
static char *arg_text(const json_t *v)
{
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (json_is_integer(v))
        return xasprintf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
    if (json_is_boolean(v))
        return xstrdup(json_is_true(v) ? "true" : "false");
    return NULL;
}

static int check_one(const char *header_name, const json_t *value, modern_header_fn *get,
                     void *arg, struct mcp_error *err)
{
    char lname[sizeof(PARAM_HEADER_PREFIX) + PARAM_NAME_MAX];
    size_t i = 0, pl = strlen(PARAM_HEADER_PREFIX);
    if (strlen(header_name) > PARAM_NAME_MAX)
        return 0;
    memcpy(lname, PARAM_HEADER_PREFIX, pl);
    for (; header_name[i]; i++)
        lname[pl + i] = (char)tolower((unsigned char)header_name[i]);
    lname[pl + i] = '\0';
    const char *h = get(arg, lname);
    cleanup_free char *want = value ? arg_text(value) : NULL;
    if (!want)
        return h ? mcp_error_set(err, MODERN_ERR_HEADER_MISMATCH, 0, "Header mismatch: "
                                 "Mcp-Param-%s is set but the body has no such argument",
                                 header_name) : 0;
    if (!h)
        return mcp_error_set(err, MODERN_ERR_HEADER_MISMATCH, 0, "Header mismatch: the "
                             "argument is in the body, so the Mcp-Param-%s header is required",
                             header_name);
    cleanup_free char *got = header_text(h);
    if (!got)
        return mcp_error_set(err, MODERN_ERR_HEADER_MISMATCH, 0, "Header mismatch: "
                             "Mcp-Param-%s is not valid (bad =?base64?...?= encoding)",
                             header_name);
    if (strcmp(got, want) != 0)
        return mcp_error_set(err, MODERN_ERR_HEADER_MISMATCH, 0, "Header mismatch: "
                             "Mcp-Param-%s does not match the body", header_name);
    return 0;
}

int modern_check_param_headers(const json_t *input_schema, const json_t *args,
                               modern_header_fn *get, void *arg, struct mcp_error *err)
{
    const char *prop;
    json_t *def;
    json_object_foreach(json_object_get(input_schema, "properties"), prop, def) {
        const char *name = json_string_value(json_object_get(def, "x-mcp-header"));
        if (name && check_one(name, json_object_get(args, prop), get, arg, err) < 0)
            return -1;
    }
    return 0;
}
