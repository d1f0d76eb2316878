/* The distribution API client (registry.h). */
#include "backend/local/image/registry.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/local/image/addr_blocked.h"
#include "backend/local/image/credentials.h"
#include "lib/httpc/curl_loader.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define REGISTRY_URL_MAX 2048
#define REGISTRY_AUTH_MAX 8192
#define REGISTRY_CONNECT_MS 10000
#define REGISTRY_LOW_SPEED_S 60 /* a transfer stalled this long fails */
#define REGISTRY_TOKEN_CAP (64u << 10)

struct registry_client {
    uv_loop_t *loop;
    struct httpc *http;
    struct image_ref ref;
    char base[IMAGE_REF_NAME_MAX + 16]; /* "https://host:port" */
    bool plain_http;
    bool inside_ok;                 /* named by the person: may be on a non-public address */
    bool peer_refused;              /* the last connection was refused for its address */
    char *creds;                    /* "user:password" or NULL */
    bool creds_looked;              /* looked up at the first challenge (credentials.h) */
    bool creds_given;               /* by the caller (registry_client_set_credentials) */
    struct cred_helper_run *helper; /* a credential helper asked, not yet answered */
    char challenge[HTTPC_HDR_VALUE_MAX]; /* the WWW-Authenticate being answered */
    char auth[REGISTRY_AUTH_MAX];   /* "Authorization: ..." once known, else "" */
    /* the request under way */
    char path[600];
    char accept[512];
    size_t body_cap;
    httpc_sink_fn *sink;
    registry_done_fn *done;
    void *arg;
    bool auth_tried;
    struct httpc_req *req;
    /* a blob request */
    registry_blob_sink_fn *blob_sink;
    uint64_t from, pos; /* asked from; where the next byte goes (UINT64_MAX: no byte yet) */
    bool range_refused; /* 206 with another range than asked */
    bool retryable;     /* of the last failure */
    /* a push's request (registry_send) */
    char method[8];                       /* "GET" for pulls */
    char target[1024]; /* an upload's Location with its ?digest=, when it is one */
    const struct registry_upload *upload; /* borrowed until done */
};

static void send_request(struct registry_client *c);
static void registry_send_request(struct registry_client *c);

static bool person_named(const struct image_ref *ref)
{
    return image_ref_listed(ref, getenv(REGISTRY_LOCAL_ENV)) ||
           image_ref_listed(ref, getenv(REGISTRY_INSECURE_ENV));
}

static void inside_error(const struct image_ref *ref, const char *what, struct mcp_error *err)
{
    mcp_error_set(err, MCP_ERR_DENIED, 0,
                  "registry %s %s an address on this machine or a private network (loopback, "
                  "private, link-local or reserved): pulls reach such a registry only if the "
                  "person names it (%s=%s, or %s for a plain-HTTP one). Use an image from a "
                  "public registry, or ask the person",
                  ref->registry, what, REGISTRY_LOCAL_ENV, ref->registry, REGISTRY_INSECURE_ENV);
}

int registry_check_reference(const struct image_ref *ref, struct mcp_error *err)
{
    char host[IMAGE_REF_NAME_MAX];
    image_ref_host(ref, host, sizeof host);
    struct in_addr a4;
    struct in6_addr a6;
    bool inside = strcasecmp(host, "localhost") == 0 ||
                  (inet_pton(AF_INET, host, &a4) == 1 && local_addr_blocked(a4)) ||
                  (inet_pton(AF_INET6, host, &a6) == 1 && local_addr6_blocked(&a6));
    if (inside && !person_named(ref)) {
        inside_error(ref, "is", err);
        return -1;
    }
    return 0;
}

/* httpc_req_opts.peer_ok: every connection a pull opens. */
static bool peer_ok(void *arg, const struct sockaddr *peer)
{
    struct registry_client *c = arg;
    if (c->inside_ok || !local_sockaddr_blocked(peer))
        return true;
    c->peer_refused = true;
    return false;
}

/* With a proxy from the environment curl connects to the proxy, whose address says nothing about
 * the registry's (and may well be loopback): the check is left to the proxy. */
static bool proxy_in_environment(void)
{
    static const char *const vars[] = {"https_proxy", "HTTPS_PROXY", "http_proxy", "all_proxy",
                                       "ALL_PROXY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && v[0] != '\0')
            return true;
    }
    return false;
}

static bool (*peer_check(void))(void *, const struct sockaddr *)
{
    return proxy_in_environment() ? NULL : peer_ok;
}

struct registry_client *registry_client_new(uv_loop_t *loop, struct httpc *http,
                                            const struct image_ref *ref)
{
    struct registry_client *c = xcalloc(1, sizeof *c);
    c->loop = loop;
    c->http = http;
    c->ref = *ref;
    c->plain_http = image_ref_plain_http_ok(ref, getenv(REGISTRY_INSECURE_ENV));
    c->inside_ok = person_named(ref);
    snprintf(c->base, sizeof c->base, "%s://%s", c->plain_http ? "http" : "https",
             image_ref_api_host(ref));
    return c;
}

void registry_client_free(struct registry_client *c)
{
    if (c == NULL)
        return;
    if (c->creds)
        explicit_bzero(c->creds, strlen(c->creds));
    free(c->creds);
    free(c);
}

void registry_client_set_credentials(struct registry_client *c, const char *creds)
{
    free(c->creds);
    c->creds = xstrdup(creds);
    c->creds_looked = true; /* the files are not read */
    c->creds_given = true;
}

void registry_cancel(struct registry_client *c)
{
    if (c->req)
        httpc_cancel(c->req);
    if (c->helper)
        cred_helper_cancel(c->helper); /* its answer, an error, ends the request */
}

/* ---- errors ---------------------------------------------------------------------------------- */

/* The registry's own words: errors[0].message of its JSON error body, if any. */
static void registry_words(const struct httpc_response *resp, char *out, size_t size)
{
    out[0] = '\0';
    json_t *j = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
    const char *m = json_string_value(json_object_get(json_array_get(json_object_get(j, "errors"),
                                                                     0), "message"));
    if (m)
        snprintf(out, size, " (the registry says: %.150s)", m);
    json_decref(j);
}

static void transport_error(const struct registry_client *c, const struct httpc_response *resp,
                            struct mcp_error *err)
{
    const char *host = image_ref_api_host(&c->ref);
    if (c->peer_refused) {
        inside_error(&c->ref, "(or a server it sent the pull to) is at", err);
        return;
    }
    if (strcmp(c->method, "GET") != 0) { /* a push's: no pull's advice */
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "registry %s did not answer the push's %s %.200s (%.150s): check that it "
                      "is up and reachable from here, then push again",
                      host, c->method, c->path, resp->curl_msg[0] ? resp->curl_msg : "no answer");
        return;
    }
    switch (resp->curl_code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "registry %s is unreachable (%.150s): this machine may have no route to "
                      "it (no internet access, or no DNS). Use a registry reachable from here "
                      "(e.g. one on 127.0.0.1), an image already pulled (`mcpbox image ls`), or "
                      "a root filesystem directory registered as <state dir>/images/<name>",
                      host, resp->curl_msg[0] ? resp->curl_msg : "no answer");
        break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "TLS with registry %s failed (%.150s): if it serves plain HTTP, name it in "
                      "%s (e.g. %s=%s)",
                      host, resp->curl_msg, REGISTRY_INSECURE_ENV, REGISTRY_INSECURE_ENV,
                      c->ref.registry);
        break;
    default:
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the connection to registry %s failed during %.200s: %.150s; retry",
                      host, c->path, resp->curl_msg[0] ? resp->curl_msg : "transfer error");
    }
}

/* Every request keeps a 401's challenge: it says where to get a token (answer_challenge) and
 * marks the answer as a registry's (registry_error_answer). */
static const char *const registry_kept_headers[] = {"www-authenticate", "location",
                                                    "docker-content-digest", NULL};

/* Whether a non-2xx answer comes from a distribution API: its error document ({"errors": [...]})
 * or an auth challenge. */
static bool registry_error_answer(const struct httpc_response *resp)
{
    const char *challenge = httpc_response_header(resp, "www-authenticate");
    if (resp->status == 401 &&
        (strncasecmp(challenge, "Bearer ", 7) == 0 || strncasecmp(challenge, "Basic", 5) == 0))
        return true;
    json_t *j = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
    bool ok = json_is_array(json_object_get(j, "errors"));
    json_decref(j);
    return ok;
}

/* Whether a 2xx answer to a manifest request is one: a manifest media type, or JSON with a
 * schemaVersion (what registries that send application/json answer). */
static bool manifest_answer(const struct httpc_response *resp)
{
    if (strncasecmp(resp->content_type, "application/vnd.oci.", 20) == 0 ||
        strncasecmp(resp->content_type, "application/vnd.docker.", 23) == 0)
        return true;
    json_t *j = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
    bool ok = json_is_integer(json_object_get(j, "schemaVersion"));
    json_decref(j);
    return ok;
}

/* An answer that is not a registry's: nothing of it reaches the caller (an agent could
 * otherwise read other servers' pages through pull errors); the person finds the status in the
 * server's log. */
static void not_a_registry(const struct registry_client *c, const struct httpc_response *resp,
                           struct mcp_error *err)
{
    log_warn("image pull: %s answered HTTP %ld to GET %.200s, not as an OCI registry",
             image_ref_api_host(&c->ref), resp->status, c->path);
    mcp_error_set(err, MCP_ERR_BACKEND, 0,
                  "%s did not answer as an OCI registry (its answer is withheld): check the "
                  "image reference's registry, or retry if it is a registry having trouble",
                  c->ref.registry);
}

static void pull_status_error(const struct registry_client *c, const struct httpc_response *resp,
                              struct mcp_error *err)
{
    if (!registry_error_answer(resp)) {
        not_a_registry(c, resp, err);
        return;
    }
    char words[200], ref[IMAGE_REF_TEXT_MAX];
    registry_words(resp, words, sizeof words);
    image_ref_format(&c->ref, ref, sizeof ref);
    bool manifest = strncmp(c->path, "manifests/", 10) == 0;
    if ((resp->status == 401 || resp->status == 403) && c->creds_given)
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "registry %s refused access to %s%s: the image may not exist, or the "
                      "credentials given with the request (image.auth) were refused; check the "
                      "username, the password or token, and the image's name",
                      c->ref.registry, c->ref.repository, words);
    else if (resp->status == 401 || resp->status == 403)
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "registry %s refused access to %s%s: the image may not exist, or it needs "
                      "a login. %s: log in with `docker login %s` or `podman login %s` (mcpbox "
                      "reads $REGISTRY_AUTH_FILE, containers' auth.json and ~/.docker/config.json, "
                      "and runs the credential helpers they name)",
                      c->ref.registry, c->ref.repository, words,
                      c->creds ? "The stored credentials were refused" : "No credentials found",
                      c->ref.registry, c->ref.registry);
    else if (resp->status == 404 && manifest)
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                      "image %s not found: the registry has no such repository or %s%s; check "
                      "the name and tag",
                      ref, c->ref.digest[0] ? "digest" : "tag", words);
    else if (resp->status == 429)
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "registry %s is rate limiting pulls%s; retry %s%.0f s%s", c->ref.registry,
                      words, resp->retry_after_s >= 0 ? "in " : "later",
                      resp->retry_after_s >= 0 ? resp->retry_after_s : 0.0,
                      c->creds ? "" : " (logging in usually raises the limit)");
    else
        mcp_error_set(err, resp->status >= 500 ? MCP_ERR_UNAVAILABLE : MCP_ERR_BACKEND, 0,
                      "registry %s answered HTTP %ld to %s %.200s%s", c->ref.registry, resp->status,
                      c->method, c->path, words);
}

/* A push's refusal has its own words (push.c); the rest is worded as for a pull. */
static void status_error(const struct registry_client *c, const struct httpc_response *resp,
                         struct mcp_error *err)
{
    char words[200];
    registry_words(resp, words, sizeof words);
    if (!registry_error_answer(resp) ||
        !registry_push_status_error(c->ref.registry, c->ref.repository, c->method, c->path,
                                    resp->status, words, c->creds != NULL, err))
        pull_status_error(c, resp, err);
}

/* ---- the auth handshake ---------------------------------------------------------------------- */

/* key="value" pairs of a challenge; copies the value of name. */
static void challenge_param(const char *ch, const char *name, char *out, size_t size)
{
    out[0] = '\0';
    size_t n = strlen(name);
    for (const char *p = ch; (p = strcasestr(p, name)) != NULL; p += n) {
        if ((p != ch && p[-1] != ' ' && p[-1] != ',') || p[n] != '=')
            continue;
        const char *v = p + n + 1;
        bool quoted = *v == '"';
        v += quoted;
        size_t len = quoted ? strcspn(v, "\"") : strcspn(v, ", ");
        snprintf(out, size, "%.*s", (int)len, v);
        return;
    }
}

int registry_parse_bearer(const char *challenge, char *realm, size_t realm_size, char *service,
                          size_t service_size, char *scope, size_t scope_size)
{
    if (strncasecmp(challenge, "Bearer ", 7) != 0)
        return -1;
    challenge_param(challenge + 6, "realm", realm, realm_size);
    challenge_param(challenge + 6, "service", service, service_size);
    challenge_param(challenge + 6, "scope", scope, scope_size);
    return realm[0] ? 0 : -1;
}

static void finish(struct registry_client *c, struct httpc_response *resp,
                   const struct mcp_error *err)
{
    c->req = NULL;
    c->done(c->arg, resp, err);
}

static void on_token(void *arg, struct httpc_response *resp)
{
    struct registry_client *c = arg;
    struct mcp_error err;
    c->req = NULL;
    if (resp->status != 200) {
        if (resp->status == 0)
            transport_error(c, resp, &err);
        else
            status_error(c, resp, &err);
        finish(c, NULL, &err);
        return;
    }
    json_t *j = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
    const char *tok = json_string_value(json_object_get(j, "token"));
    if (tok == NULL)
        tok = json_string_value(json_object_get(j, "access_token"));
    if (tok && strlen(tok) < sizeof c->auth - 32)
        snprintf(c->auth, sizeof c->auth, "Authorization: Bearer %s", tok);
    json_decref(j);
    if (tok == NULL) {
        mcp_error_set(&err, MCP_ERR_BACKEND, 0,
                      "the token service of registry %s answered without a token",
                      c->ref.registry);
        finish(c, NULL, &err);
        return;
    }
    send_request(c);
}

static struct curl_slist *basic_header(const struct registry_client *c)
{
    char *b64 = xmalloc(base64_encoded_len(strlen(c->creds)) + 1);
    base64_encode(c->creds, strlen(c->creds), b64);
    char *h = xasprintf("Authorization: Basic %s", b64);
    struct curl_slist *l = httpc_curl.slist_append(NULL, h);
    free(h), free(b64);
    return l;
}

/* Credentials "<token>:<refresh token>": an identity token (Docker's convention for OAuth2
 * refresh tokens, from a helper's Username "<token>" or a file's identitytoken), exchanged at
 * the token realm instead of sent as Basic. */
static const char *identity_token(const struct registry_client *c)
{
    return c->creds && strncmp(c->creds, CRED_IDENTITY_PREFIX, strlen(CRED_IDENTITY_PREFIX)) == 0
               ? c->creds + strlen(CRED_IDENTITY_PREFIX)
               : NULL;
}

/* What every request of a client shares: connect timeout, retries of what the registry cannot
 * have acted on, redirects (blobs are served from elsewhere), the peer check and the kept
 * challenge. headers are taken over. */
static struct httpc_req_opts request_opts(struct registry_client *c, const char *method,
                                          const char *url, struct curl_slist *headers,
                                          httpc_done_fn *done)
{
    return (struct httpc_req_opts){.method = method,
                                   .url = url,
                                   .headers = headers,
                                   .connect_timeout_ms = REGISTRY_CONNECT_MS,
                                   .retry = HTTPC_RETRY_SAFE,
                                   .retry_max = 3,
                                   .retry_base_ms = 200,
                                   .retry_cap_ms = 2000,
                                   .follow_redirects = true,
                                   .peer_ok = peer_check(),
                                   .done = done,
                                   .arg = c,
                                   .keep_headers = registry_kept_headers};
}

/* A pull's token is for pull; a push's (registry_send) for pull,push. */
static const char *token_actions(const struct registry_client *c)
{
    return strcmp(c->method, "GET") == 0 ? "pull" : "pull,push";
}

static void request_token(struct registry_client *c, const char *challenge)
{
    char realm[1024], service[256], scope[512], url[REGISTRY_URL_MAX], dflt[400];
    struct mcp_error err;
    registry_parse_bearer(challenge, realm, sizeof realm, service, sizeof service, scope,
                          sizeof scope);
    bool https = strncmp(realm, "https://", 8) == 0;
    if (!https && !(c->plain_http && strncmp(realm, "http://", 7) == 0)) {
        mcp_error_set(&err, MCP_ERR_BACKEND, 0,
                      "registry %s sent a token realm that is not https (%.200s): refused",
                      c->ref.registry, realm);
        finish(c, NULL, &err);
        return;
    }
    snprintf(dflt, sizeof dflt, "repository:%s:%s", c->ref.repository, token_actions(c));
    char *es = httpc_curl.easy_escape(NULL, service, 0);
    char *esc = httpc_curl.easy_escape(NULL, scope[0] ? scope : dflt, 0);
    const char *refresh = identity_token(c);
    char *body = NULL;
    if (refresh) { /* OAuth2: the refresh token for an access token, POSTed as a form */
        char *er = httpc_curl.easy_escape(NULL, refresh, 0);
        body = xasprintf("grant_type=refresh_token&client_id=mcpbox&service=%s&scope=%s&"
                         "refresh_token=%s",
                         es ? es : "", esc ? esc : "", er ? er : "");
        httpc_curl.free(er);
        snprintf(url, sizeof url, "%s", realm);
    } else {
        snprintf(url, sizeof url, "%s%sservice=%s&scope=%s", realm,
                 strchr(realm, '?') ? "&" : "?", es ? es : "", esc ? esc : "");
    }
    httpc_curl.free(es), httpc_curl.free(esc);
    struct curl_slist *h =
        refresh ? httpc_curl.slist_append(NULL, "Content-Type: application/x-www-form-urlencoded")
        : c->creds ? basic_header(c)
                   : NULL;
    struct httpc_req_opts o = request_opts(c, refresh ? "POST" : "GET", url, h, on_token);
    o.body = body;
    o.body_len = body ? strlen(body) : 0;
    o.deadline_ms = 60000;
    o.body_cap = REGISTRY_TOKEN_CAP;
    c->peer_refused = false;
    c->req = httpc_start(c->http, &o);
    free(body); /* copied by the engine */
}

static bool failure_retryable(const struct httpc_response *resp)
{
    if (resp->sink_aborted || resp->body_capped || resp->curl_code == CURLE_ABORTED_BY_CALLBACK)
        return false;
    if (resp->curl_code != CURLE_OK || resp->status == 0)
        return true;
    return resp->status == 408 || resp->status == 429 || resp->status >= 500;
}

bool registry_retryable(const struct registry_client *c)
{
    return c->retryable;
}

static bool challenge_answerable(const struct registry_client *c)
{
    return strncasecmp(c->challenge, "Bearer ", 7) == 0 ||
           (strncasecmp(c->challenge, "Basic", 5) == 0 && c->creds && !identity_token(c));
}

/* With the credentials known: a token for a Bearer challenge, Basic for a Basic one; else ask
 * again, and the second 401 is reported as it is. */
static void answer_challenge(struct registry_client *c)
{
    if (strncasecmp(c->challenge, "Bearer ", 7) == 0) {
        request_token(c, c->challenge);
        return;
    }
    if (strncasecmp(c->challenge, "Basic", 5) == 0 && c->creds && !identity_token(c)) {
        char *b64 = xmalloc(base64_encoded_len(strlen(c->creds)) + 1);
        base64_encode(c->creds, strlen(c->creds), b64);
        snprintf(c->auth, sizeof c->auth, "Authorization: Basic %s", b64);
        free(b64);
    }
    send_request(c);
}

static void on_helper_answer(void *arg, char *creds, const struct mcp_error *err)
{
    struct registry_client *c = arg;
    c->helper = NULL;
    if (err) {
        free(creds);
        finish(c, NULL, err);
        return;
    }
    if (creds) { /* else the file's own entry, if any, stays */
        free(c->creds);
        c->creds = creds;
    }
    answer_challenge(c);
}

/* At the first challenge (credentials are sent only to a registry that asks): the files; true
 * if a credential helper runs, which answers the challenge when it is done. */
static bool look_up_credentials(struct registry_client *c)
{
    struct cred_source src;
    c->creds_looked = true;
    cred_find(c->ref.registry, &src);
    c->creds = src.creds;
    if (src.helper[0] == '\0')
        return false;
    c->helper = cred_helper_start(c->loop, &src, c->ref.registry, on_helper_answer, c);
    return true;
}

/* A complete 2xx answer; or a 404 to a push's HEAD, which asks whether the registry has a
 * blob (it has not: an answer, not a failure). */
static bool answered(const struct registry_client *c, const struct httpc_response *resp)
{
    if (resp->curl_code != CURLE_OK || resp->body_capped || resp->sink_aborted)
        return false;
    return (resp->status >= 200 && resp->status < 300) ||
           (strcmp(c->method, "HEAD") == 0 && resp->status == 404);
}

/* A pull's manifest GET answered with something that is not one. */
static bool not_a_manifest(const struct registry_client *c, const struct httpc_response *resp)
{
    return strcmp(c->method, "GET") == 0 && strncmp(c->path, "manifests/", 10) == 0 &&
           !manifest_answer(resp);
}

static void on_response(void *arg, struct httpc_response *resp)
{
    struct registry_client *c = arg;
    struct mcp_error err;
    c->req = NULL;
    c->retryable = false;
    if (resp->status == 401 && !c->auth_tried) {
        c->auth_tried = true;
        snprintf(c->challenge, sizeof c->challenge, "%s",
                 httpc_response_header(resp, "www-authenticate"));
        if (!c->creds_looked && look_up_credentials(c))
            return;
        if (challenge_answerable(c)) {
            answer_challenge(c);
            return;
        }
    }
    if (answered(c, resp)) {
        if (not_a_manifest(c, resp)) {
            not_a_registry(c, resp, &err);
            finish(c, NULL, &err);
            return;
        }
        finish(c, resp, NULL);
        return;
    }
    c->retryable = failure_retryable(resp) && !c->peer_refused; /* refused again if tried */
    if (c->range_refused)
        mcp_error_set(&err, MCP_ERR_BACKEND, 0,
                      "registry %s answered a request for %.200s from byte %llu with another "
                      "range (%.100s): refused",
                      c->ref.registry, c->path, (unsigned long long)c->from, resp->content_range);
    else if (resp->sink_aborted)
        mcp_error_set(&err, MCP_ERR_BACKEND, 0, "the download of %.200s was stopped", c->path);
    else if (resp->body_capped)
        mcp_error_set(&err, MCP_ERR_BACKEND, 0,
                      "registry %s sent more than %zu bytes for %.200s: refused", c->ref.registry,
                      c->body_cap, c->path);
    else if (resp->status == 0 || resp->curl_code != CURLE_OK)
        transport_error(c, resp, &err);
    else
        status_error(c, resp, &err);
    finish(c, NULL, &err);
}

/* "bytes 100-199/200" -> 100; -1 if it is not such a range. */
static long long range_start(const char *content_range)
{
    char *end;
    if (strncasecmp(content_range, "bytes ", 6) != 0)
        return -1;
    long long v = strtoll(content_range + 6, &end, 10);
    return end > content_range + 6 && *end == '-' ? v : -1;
}

/* The engine calls sinks with the request's arg (the client): hand the bytes to the caller's. */
static int client_sink(void *arg, const char *data, size_t len)
{
    struct registry_client *c = arg;
    if (c->blob_sink == NULL)
        return c->sink(c->arg, data, len);
    if (c->pos == UINT64_MAX) { /* the first bytes: did the registry honour the range? */
        const struct httpc_response *r = httpc_req_response(c->req);
        c->pos = 0;
        if (r->status == 206) {
            if (range_start(r->content_range) != (long long)c->from) {
                c->range_refused = true;
                return -1;
            }
            c->pos = c->from;
        }
    }
    uint64_t at = c->pos;
    c->pos += len;
    return c->blob_sink(c->arg, at, data, len);
}

static void send_request(struct registry_client *c)
{
    if (strcmp(c->method, "GET") != 0) {
        registry_send_request(c);
        return;
    }
    char url[REGISTRY_URL_MAX];
    snprintf(url, sizeof url, "%s/v2/%s/%s", c->base, c->ref.repository, c->path);
    bool streamed = c->sink != NULL || c->blob_sink != NULL;
    struct curl_slist *h = NULL;
    if (c->accept[0]) {
        char *a = xasprintf("Accept: %s", c->accept);
        h = httpc_curl.slist_append(h, a);
        free(a);
    }
    if (c->auth[0])
        h = httpc_curl.slist_append(h, c->auth);
    if (c->blob_sink && c->from > 0) {
        char range[64];
        snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)c->from);
        h = httpc_curl.slist_append(h, range);
    }
    c->pos = UINT64_MAX;
    c->range_refused = false;
    c->peer_refused = false;
    /* Blobs stream: a deadline would cut large layers on slow links; a stall fails instead. */
    struct httpc_req_opts o = request_opts(c, "GET", url, h, on_response);
    o.low_speed_s = REGISTRY_LOW_SPEED_S;
    o.body_cap = c->body_cap;
    if (streamed) {
        o.retry = HTTPC_RETRY_NONE;
        o.sink = client_sink;
    } else {
        o.deadline_ms = 120000;
    }
    c->req = httpc_start(c->http, &o);
}

void registry_get(struct registry_client *c, const char *path, const char *accept, size_t body_cap,
                  httpc_sink_fn *sink, registry_done_fn *done, void *arg)
{
    snprintf(c->path, sizeof c->path, "%s", path);
    snprintf(c->accept, sizeof c->accept, "%s", accept ? accept : "");
    c->body_cap = body_cap;
    c->sink = sink;
    c->blob_sink = NULL;
    c->from = 0;
    c->done = done;
    c->arg = arg;
    c->auth_tried = false;
    snprintf(c->method, sizeof c->method, "GET");
    send_request(c);
}

void registry_get_blob(struct registry_client *c, const char *digest, uint64_t from,
                       registry_blob_sink_fn *sink, registry_done_fn *done, void *arg)
{
    snprintf(c->path, sizeof c->path, "blobs/%s", digest);
    c->accept[0] = '\0';
    c->body_cap = 1 << 16; /* error bodies */
    c->sink = NULL;
    c->blob_sink = sink;
    c->from = from;
    c->done = done;
    c->arg = arg;
    c->auth_tried = false;
    snprintf(c->method, sizeof c->method, "GET");
    send_request(c);
}

/* ---- pushes (registry_send) ------------------------------------------------------------------ */

/* The URL of a push's request: target relative to /v2/<repository>/, or a Location the registry
 * sent (a path on it, or a URL on the same host). Another host's is refused: the credentials
 * would go with it. */
static int push_url(const struct registry_client *c, char *url, size_t size)
{
    const char *t = c->target[0] ? c->target : c->path;
    size_t base_len = strlen(c->base);
    if (c->target[0] == '\0')
        snprintf(url, size, "%s/v2/%s/%s", c->base, c->ref.repository, t);
    else if (t[0] == '/')
        snprintf(url, size, "%s%s", c->base, t);
    else if (strncasecmp(t, c->base, base_len) == 0 && (t[base_len] == '/' || t[base_len] == '?'))
        snprintf(url, size, "%s", t);
    else
        return -1;
    return 0;
}

static void registry_send_request(struct registry_client *c)
{
    char url[REGISTRY_URL_MAX];
    struct mcp_error err;
    if (push_url(c, url, sizeof url) < 0) {
        mcp_error_set(&err, MCP_ERR_BACKEND, 0,
                      "registry %s sent an upload location on another host (%.200s): refused, "
                      "as the credentials would go there too",
                      c->ref.registry, c->target);
        finish(c, NULL, &err);
        return;
    }
    const struct registry_upload *up = c->upload;
    struct curl_slist *h = NULL;
    if (c->auth[0])
        h = httpc_curl.slist_append(h, c->auth);
    if (strcmp(c->method, "HEAD") == 0 && strncmp(c->path, "manifests/", 10) == 0)
        h = httpc_curl.slist_append(h, "Accept: application/vnd.oci.image.manifest.v1+json");
    if (up && up->content_type) {
        char *ct = xasprintf("Content-Type: %s", up->content_type);
        h = httpc_curl.slist_append(h, ct);
        free(ct);
    }
    c->peer_refused = false;
    struct httpc_req_opts o = request_opts(c, c->method, url, h, on_response);
    o.retry = HTTPC_RETRY_NONE; /* a push's steps are retried by the push, from its start */
    o.follow_redirects = false; /* a push's Location is read, never followed */
    o.low_speed_s = REGISTRY_LOW_SPEED_S;
    o.body_cap = 1 << 16;
    if (up && up->from_fd)
        o.upload_fd_set = true, o.upload_fd = up->fd, o.upload_size = up->size;
    else if (up)
        o.body = up->data ? up->data : "", o.body_len = up->len;
    c->req = httpc_start(c->http, &o);
}

void registry_send(struct registry_client *c, const char *method, const char *target,
                   const struct registry_upload *up, registry_done_fn *done, void *arg)
{
    bool location = target[0] == '/' || strncasecmp(target, "http", 4) == 0;
    snprintf(c->method, sizeof c->method, "%s", method);
    snprintf(c->path, sizeof c->path, "%s", location ? "blobs/uploads/" : target);
    snprintf(c->target, sizeof c->target, "%s", location ? target : "");
    c->accept[0] = '\0';
    c->body_cap = 1 << 16;
    c->sink = NULL;
    c->blob_sink = NULL;
    c->upload = up;
    c->done = done;
    c->arg = arg;
    c->auth_tried = false;
    send_request(c);
}
