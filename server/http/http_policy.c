/* Admission rules. DNS rebinding: a web page on evil.example can make the browser resolve that
 * name to 127.0.0.1 and talk to us; the Host header still says evil.example, and a cross-site
 * page also sends its Origin, so both are checked against loopback names. */
#include "server/http/http_policy.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/base/util.h"

static const char *const loopback_names[] = {"localhost", "127.0.0.1", "[::1]"};

/* Splits "name[:port]" (name may be a bracketed IPv6 literal). *port = -1 when absent,
 * -2 when malformed. Returns the length of the name part. */
static size_t split_host_port(const char *s, int *port)
{
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close) {
            *port = -2;
            return strlen(s);
        }
        colon = close[1] == ':' ? close + 1 : NULL;
        if (!colon && close[1] != '\0')
            *port = -2;
    } else {
        colon = strchr(s, ':');
    }
    if (*port == -2)
        return strlen(s);
    *port = -1;
    if (!colon)
        return strlen(s);
    char *end = NULL;
    long v = strtol(colon + 1, &end, 10);
    *port = (colon[1] >= '0' && colon[1] <= '9' && *end == '\0' && v > 0 && v < 65536) ? (int)v
                                                                                      : -2;
    return (size_t)(colon - s);
}

static bool is_loopback_name(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(loopback_names) / sizeof(loopback_names[0]); i++)
        if (strlen(loopback_names[i]) == len && strncasecmp(name, loopback_names[i], len) == 0)
            return true;
    return false;
}

static bool has_bad_chars(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || *s == '/' || *s == '@')
            return true;
    return false;
}

bool http_policy_host_ok(const struct http_policy *pol, const char *host)
{
    if (!host || !*host || has_bad_chars(host))
        return false;
    int port = 0;
    size_t n = split_host_port(host, &port);
    if (port == -2 || n == 0)
        return false;
    if (!pol->loopback)
        return true;
    /* The name is what DNS rebinding forges; the port may differ from ours when the client
     * reaches us through a tunnel (ssh -L 9000:127.0.0.1:8765). */
    return is_loopback_name(host, n);
}

/* "http://name[:port]" or "https://...": returns the authority part or NULL. */
static const char *origin_authority(const char *origin)
{
    if (strncasecmp(origin, "http://", 7) == 0)
        return origin + 7;
    if (strncasecmp(origin, "https://", 8) == 0)
        return origin + 8;
    return NULL;
}

bool http_policy_origin_ok(const struct http_policy *pol, const char *origin, const char *host)
{
    if (!origin)
        return true;
    const char *auth = origin_authority(origin);
    if (!auth || !*auth || has_bad_chars(auth))
        return false;
    int port = 0;
    size_t n = split_host_port(auth, &port);
    if (port == -2 || n == 0)
        return false;
    if (pol->loopback)
        return is_loopback_name(auth, n);
    return host && strcasecmp(auth, host) == 0;
}

bool http_policy_auth_ok(const struct http_policy *pol, const char *authorization)
{
    if (!pol->token)
        return true;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *given = authorization + 7;
    while (*given == ' ')
        given++;
    /* Compare digests so that the time taken depends on neither the length nor the contents
     * of the secret. */
    unsigned char a[32], b[32];
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, given, strlen(given));
    sha256_final(&c, a);
    sha256_init(&c);
    sha256_update(&c, pol->token, strlen(pol->token));
    sha256_final(&c, b);
    unsigned char diff = 0;
    for (size_t i = 0; i < sizeof(a); i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* Compares one comma-separated element (up to ';' or ',') to type, ignoring spaces. */
static bool element_is(const char *el, size_t len, const char *type)
{
    while (len > 0 && (*el == ' ' || *el == '\t')) {
        el++;
        len--;
    }
    size_t n = strcspn(el, ";");
    if (n > len)
        n = len;
    while (n > 0 && (el[n - 1] == ' ' || el[n - 1] == '\t'))
        n--;
    return n == strlen(type) && strncasecmp(el, type, n) == 0;
}

bool http_accepts(const char *accept, const char *type)
{
    if (!accept)
        return false;
    const char *p = accept;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (element_is(p, len, type))
            return true;
        if (p[len] == '\0')
            return false;
        p += len + 1;
    }
}

/* The q value (in thousandths) of the element; 1000 when absent. */
static int element_q(const char *el, size_t len)
{
    const char *semi = memchr(el, ';', len);
    while (semi) {
        const char *p = semi + 1;
        while (p < el + len && (*p == ' ' || *p == '\t'))
            p++;
        if (p + 2 <= el + len && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            double q = strtod(p + 2, NULL);
            return q < 0 ? 0 : q > 1 ? 1000 : (int)(q * 1000 + 0.5);
        }
        semi = memchr(p, ';', (size_t)(el + len - p));
    }
    return 1000;
}

/* Position (0-based) and q of type in the Accept list; position -1 when absent. */
static int accept_find(const char *accept, const char *type, int *q)
{
    const char *p = accept;
    for (int pos = 0;; pos++) {
        size_t len = strcspn(p, ",");
        if (element_is(p, len, type)) {
            *q = element_q(p, len);
            return pos;
        }
        if (p[len] == '\0')
            return -1;
        p += len + 1;
    }
}

/* a (listed at pa with q qa) over b: a higher q value, or the same q and listed first. */
static bool prefers(int pa, int qa, int pb, int qb)
{
    if (pa < 0 || qa == 0)
        return false;
    if (pb < 0 || qa != qb)
        return pb < 0 || qa > qb;
    return pa < pb;
}

bool http_accept_prefers(const char *accept, const char *a, const char *b)
{
    int qa = 0, qb = 0;
    if (!accept)
        return false;
    int pa = accept_find(accept, a, &qa);
    int pb = accept_find(accept, b, &qb);
    return prefers(pa, qa, pb, qb);
}

/* One pass over the list for what every POST asks (http_accepts for both types, then
 * http_accept_prefers): each element is compared with the two types as it goes by. */
bool http_accept_post(const char *accept, bool *prefer_sse)
{
    static const char json[] = "application/json", sse[] = "text/event-stream";
    int pj = -1, ps = -1, qj = 0, qs = 0;
    *prefer_sse = false;
    if (!accept)
        return false;
    const char *p = accept;
    for (int pos = 0;; pos++) {
        size_t len = strcspn(p, ",");
        if (pj < 0 && element_is(p, len, json)) {
            pj = pos;
            qj = element_q(p, len);
        } else if (ps < 0 && element_is(p, len, sse)) {
            ps = pos;
            qs = element_q(p, len);
        }
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *prefer_sse = prefers(ps, qs, pj, qj);
    return pj >= 0 && ps >= 0;
}

bool http_content_type_is_json(const char *content_type)
{
    return content_type && element_is(content_type, strlen(content_type), "application/json");
}
