/* Image reference parsing (reference.h). The grammar is the one of the distribution project's
 * reference package, written out by hand: no regex engine, every length checked. */
#include "backend/local/image/reference.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define DOCKER_HUB "docker.io"

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_word(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

bool image_digest_valid(const char *digest)
{
    if (strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != IMAGE_DIGEST_LEN)
        return false;
    for (const char *p = digest + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := [_.] | "__" | "-"+ */
static bool path_component_ok(const char *s, size_t n)
{
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n;) {
        if (is_lower_alnum(s[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && !is_lower_alnum(s[j]))
            j++;
        size_t len = j - i;
        const char *sep = s + i;
        bool dashes = strspn(sep, "-") >= len;
        if (!(dashes || (len == 1 && (*sep == '_' || *sep == '.')) ||
              (len == 2 && sep[0] == '_' && sep[1] == '_')))
            return false;
        i = j;
    }
    return true;
}

/* host[:port]: DNS labels of [A-Za-z0-9-] (not starting or ending with '-') separated by '.',
 * or an IPv6 address in brackets; the port is 1 to 5 digits. */
static bool host_label_ok(const char *s, size_t n)
{
    if (n == 0 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-')
            return false;
    return true;
}

static bool domain_ok(const char *s, size_t n)
{
    size_t host_end = n;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL || close == s + 1)
            return false;
        for (const char *p = s + 1; p < close; p++)
            if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                return false;
        host_end = (size_t)(close - s) + 1;
        if (host_end < n && s[host_end] != ':')
            return false;
    } else {
        const char *colon = memchr(s, ':', n);
        if (colon)
            host_end = (size_t)(colon - s);
        for (size_t i = 0; i < host_end;) {
            const char *dot = memchr(s + i, '.', host_end - i);
            size_t end = dot ? (size_t)(dot - s) : host_end;
            if (!host_label_ok(s + i, end - i))
                return false;
            i = end + 1;
            if (dot && i == host_end)
                return false; /* trailing dot */
        }
    }
    if (host_end == n)
        return host_end > 0;
    size_t port = n - host_end - 1;
    if (port == 0 || port > 5)
        return false;
    for (size_t i = host_end + 1; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

static bool tag_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > IMAGE_REF_TAG_MAX || !is_word(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_word(s[i]) && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

/* Docker's rule for "is the first component a registry?" */
static bool looks_like_domain(const char *s, size_t n)
{
    if (memchr(s, '.', n) || memchr(s, ':', n) || (n == 9 && memcmp(s, "localhost", 9) == 0))
        return true;
    for (size_t i = 0; i < n; i++)
        if (isupper((unsigned char)s[i]))
            return true;
    return false;
}

static int invalid(struct mcp_error *err, const char *text, const char *why)
{
    return mcp_error_set(err, MCP_ERR_INVALID, 0,
                         "'%.300s' is not a valid image reference: %s (expected "
                         "[registry[:port]/]name[:tag][@sha256:<64 hex digits>], e.g. "
                         "python:3.12-slim or 127.0.0.1:5000/test/bb:2)",
                         text, why);
}

/* Splits off "@digest" and ":tag" (a ':' after the last '/'); what is left is the name. */
static int split_suffixes(char *work, const char *text, struct image_ref *ref,
                          struct mcp_error *err)
{
    char *at = strchr(work, '@');
    if (at) {
        *at = '\0';
        if (!image_digest_valid(at + 1))
            return invalid(err, text,
                           strncmp(at + 1, "sha256:", 7) == 0
                               ? "the digest must be sha256: and 64 lower-case hex digits"
                               : "only sha256 digests are supported");
        snprintf(ref->digest, sizeof ref->digest, "%s", at + 1);
    }
    char *slash = strrchr(work, '/');
    char *colon = strrchr(slash ? slash : work, ':');
    if (colon) {
        *colon = '\0';
        if (!tag_ok(colon + 1))
            return invalid(err, text,
                           "the tag must be 1 to 128 of [A-Za-z0-9_.-], not starting with "
                           "'.' or '-'");
        snprintf(ref->tag, sizeof ref->tag, "%s", colon + 1);
    }
    return 0;
}

static int parse_path(const char *path, const char *text, struct image_ref *ref,
                      struct mcp_error *err)
{
    for (const char *p = path;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (!path_component_ok(p, n))
            return invalid(err, text,
                           "each name component must be lower-case letters and digits, "
                           "separated by '.', '_', '__' or dashes");
        if (!slash)
            break;
        p = slash + 1;
    }
    bool hub = strcmp(ref->registry, DOCKER_HUB) == 0;
    int n = snprintf(ref->repository, sizeof ref->repository, "%s%s",
                     hub && !strchr(path, '/') ? "library/" : "", path);
    if (n < 0 || (size_t)n >= sizeof ref->repository)
        return invalid(err, text, "the name is longer than 255 characters");
    return 0;
}

int image_ref_parse(const char *text, struct image_ref *ref, struct mcp_error *err)
{
    memset(ref, 0, sizeof *ref);
    size_t len = strlen(text);
    if (len == 0)
        return invalid(err, text, "it is empty");
    if (len >= IMAGE_REF_TEXT_MAX)
        return invalid(err, text, "it is too long");
    char work[IMAGE_REF_TEXT_MAX];
    memcpy(work, text, len + 1);
    if (split_suffixes(work, text, ref, err) < 0)
        return -1;
    if (ref->tag[0] == '\0')
        snprintf(ref->tag, sizeof ref->tag, "latest");
    char *path = work;
    char *slash = strchr(work, '/');
    if (slash && looks_like_domain(work, (size_t)(slash - work))) {
        if (!domain_ok(work, (size_t)(slash - work)))
            return invalid(err, text, "the registry must be host[:port]");
        if ((size_t)(slash - work) > IMAGE_REF_NAME_MAX)
            return invalid(err, text, "the registry name is too long");
        snprintf(ref->registry, sizeof ref->registry, "%.*s", (int)(slash - work), work);
        if (strcmp(ref->registry, "index.docker.io") == 0)
            snprintf(ref->registry, sizeof ref->registry, DOCKER_HUB);
        path = slash + 1;
    } else {
        snprintf(ref->registry, sizeof ref->registry, DOCKER_HUB);
    }
    if (strlen(path) > IMAGE_REF_NAME_MAX)
        return invalid(err, text, "the name is longer than 255 characters");
    return parse_path(path, text, ref, err);
}

void image_ref_format(const struct image_ref *ref, char *out, size_t size)
{
    if (ref->digest[0])
        snprintf(out, size, "%s/%s@%s", ref->registry, ref->repository, ref->digest);
    else
        snprintf(out, size, "%s/%s:%s", ref->registry, ref->repository, ref->tag);
}

const char *image_ref_api_host(const struct image_ref *ref)
{
    return strcmp(ref->registry, DOCKER_HUB) == 0 ? "registry-1.docker.io" : ref->registry;
}

const char *image_ref_manifest_ref(const struct image_ref *ref)
{
    return ref->digest[0] ? ref->digest : ref->tag;
}

/* The registry without its port ("[::1]" keeps its brackets). */
static size_t host_part_len(const char *registry)
{
    if (registry[0] == '[') {
        const char *close = strchr(registry, ']');
        return close ? (size_t)(close - registry) + 1 : strlen(registry);
    }
    const char *colon = strchr(registry, ':');
    return colon ? (size_t)(colon - registry) : strlen(registry);
}

static bool is_loopback_host(const char *h, size_t n)
{
    if ((n == 9 && memcmp(h, "localhost", 9) == 0) || (n == 5 && memcmp(h, "[::1]", 5) == 0))
        return true;
    if (n < 4 || n > 15 || memcmp(h, "127.", 4) != 0)
        return false;
    for (size_t i = 4; i < n; i++)
        if (!isdigit((unsigned char)h[i]) && h[i] != '.')
            return false;
    return true;
}

bool image_ref_listed(const struct image_ref *ref, const char *list)
{
    const char *reg = ref->registry;
    size_t host_len = host_part_len(reg);
    for (const char *p = list ? list : ""; *p;) {
        p += strspn(p, ", \t");
        size_t n = strcspn(p, ", \t");
        if (n > 0 && ((n == strlen(reg) && memcmp(p, reg, n) == 0) ||
                      (n == host_len && memcmp(p, reg, n) == 0)))
            return true;
        p += n;
    }
    return false;
}

bool image_ref_plain_http_ok(const struct image_ref *ref, const char *insecure_list)
{
    return is_loopback_host(ref->registry, host_part_len(ref->registry)) ||
           image_ref_listed(ref, insecure_list);
}

size_t image_ref_host(const struct image_ref *ref, char *out, size_t size)
{
    const char *reg = ref->registry;
    size_t n = host_part_len(reg);
    if (reg[0] == '[' && n >= 2) /* "[::1]" -> "::1" */
        reg++, n -= 2;
    return (size_t)snprintf(out, size, "%.*s", (int)n, reg);
}
