/* Requests to the lifecycle API and to execd: URLs, auth headers, error mapping, and the cache
 * of execd endpoints (GET /sandboxes/{id}/endpoints/44772). */
#define LOG_MODULE "opensandbox"

#include <stdio.h>
#include <string.h>

#include "lib/httpc/curl_loader.h"
#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

struct osb_call {
    struct osb_backend *b;
    char *what;
    char *sandbox_id;
    bool execd;
    osb_call_fn *done;
    void *arg;
    httpc_sink_fn *sink;
    curl_mime *(*mime_build)(void *arg, CURL *easy);
    bool sensitive; /* osb_call_opts.sensitive */
};

/* The headers of its own every call keeps: Prism's report of a request that broke the API
 * contract (the contract tests' mock server) and execd's log cursor. */
static const char *const osb_kept_headers[] = {"sl-violations", OSB_TAIL_CURSOR_HEADER, NULL};

static void call_done(void *arg, struct httpc_response *resp)
{
    struct osb_call *c = arg;
    struct mcp_error e;
    const struct mcp_error *errp = NULL;
    const char *violations = httpc_response_header(resp, "sl-violations");
    if (violations[0] != '\0') {
        c->b->contract_violations++;
        snprintf(c->b->last_violation, sizeof(c->b->last_violation), "%s: %s", c->what,
                 c->sensitive ? "(not shown: the request carried secret values)" : violations);
        log_warn("the server says mcpbox's request broke the API contract (%s)",
                 c->b->last_violation);
    }
    if (resp->curl_code != CURLE_OK || resp->status < 200 || resp->status >= 300) {
        osb_error_from_response(c->b, resp, c->what, c->sandbox_id, c->execd, &e);
        errp = &e;
    }
    c->done(c->arg, resp, errp);
    free(c->what);
    free(c->sandbox_id);
    free(c);
}

static int call_sink(void *arg, const char *data, size_t len)
{
    struct osb_call *c = arg;
    return c->sink(c->arg, data, len);
}

static curl_mime *call_mime(void *arg, CURL *easy)
{
    struct osb_call *c = arg;
    return c->mime_build(c->arg, easy);
}

static struct curl_slist *add_header(struct curl_slist *l, const char *name, const char *value)
{
    cleanup_free char *line = xasprintf("%s: %s", name, value);
    return httpc_curl.slist_append(l, line);
}

/* The headers the body of o needs: its type, and the range it asks for. */
static struct curl_slist *body_headers(struct curl_slist *hdrs, const struct osb_call_opts *o)
{
    if (o->json)
        hdrs = add_header(hdrs, "Content-Type", "application/json");
    else if (o->raw == NULL && o->mime_build == NULL && strcmp(o->method, "POST") == 0)
        hdrs = httpc_curl.slist_append(hdrs, "Content-Type:"); /* empty POST: no form type */
    if (o->range)
        hdrs = add_header(hdrs, "Range", o->range);
    return hdrs;
}

static struct osb_call *call_new(struct osb_backend *b, const struct osb_call_opts *o, bool execd,
                                 osb_call_fn *done, void *arg)
{
    struct osb_call *c = xcalloc(1, sizeof(*c));
    c->b = b, c->execd = execd, c->done = done, c->arg = arg;
    c->what = xstrdup(o->what);
    c->sandbox_id = o->sandbox_id ? xstrdup(o->sandbox_id) : NULL;
    c->sink = o->sink, c->mime_build = o->mime_build, c->sensitive = o->sensitive;
    return c;
}

static struct httpc_req *call_start(struct osb_backend *b, char *url, struct curl_slist *hdrs,
                                  const struct osb_call_opts *o, bool execd, osb_call_fn *done,
                                  void *arg, struct mcp_error *err)
{
    struct osb_call *c = call_new(b, o, execd, done, arg);
    cleanup_free char *body = o->json ? json_dumps(o->json, JSON_COMPACT) : NULL;
    hdrs = body_headers(hdrs, o);
    struct httpc_req_opts ro = {
        .method = o->method,
        .url = url,
        .headers = hdrs,
        .body = body ? body : o->raw,
        .body_len = body ? strlen(body) : o->raw_len,
        .mime_build = o->mime_build ? call_mime : NULL,
        .deadline_ms = o->stream ? o->deadline_ms
                                 : (o->deadline_ms ? o->deadline_ms : b->t.request_timeout_ms),
        .connect_timeout_ms = b->t.connect_timeout_ms,
        .low_speed_s = o->stream ? b->t.stream_idle_s : 0,
        .body_cap = o->body_cap ? o->body_cap : OSB_JSON_BODY_MAX,
        .retry = o->retry,
        .retry_max = b->t.retry_max,
        .retry_base_ms = b->t.retry_base_ms,
        .retry_cap_ms = b->t.retry_cap_ms,
        .sink = o->sink ? call_sink : NULL,
        .done = call_done,
        .arg = c,
        .keep_headers = osb_kept_headers,
    };
    struct httpc_req *r = httpc_start(b->http, &ro);
    free(url);
    if (body != NULL) /* httpc has its copy; a vault's values leave no trace here */
        explicit_bzero(body, strlen(body));
    if (r == NULL) {
        free(c->what);
        free(c->sandbox_id);
        free(c);
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "mcpbox is shutting down");
    }
    return r;
}

int osb_lifecycle_call(struct osb_backend *b, const char *path, const struct osb_call_opts *o,
                       osb_call_fn *done, void *arg, struct mcp_error *err)
{
    struct curl_slist *hdrs = httpc_curl.slist_append(NULL, "Accept: application/json");
    if (b->api_key != NULL)
        hdrs = add_header(hdrs, "OPEN-SANDBOX-API-KEY", b->api_key);
    char *url = xasprintf("%s%s", b->base_url, path);
    return call_start(b, url, hdrs, o, false, done, arg, err) ? 0 : -1;
}

struct httpc_req *osb_execd_call(struct osb_backend *b, const struct osb_endpoint *ep,
                               const char *path, const struct osb_call_opts *o, osb_call_fn *done,
                               void *arg, struct mcp_error *err)
{
    struct curl_slist *hdrs = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(ep->headers, k, v) {
        if (json_is_string(v))
            hdrs = add_header(hdrs, k, json_string_value(v));
    }
    if (o->stream)
        hdrs = httpc_curl.slist_append(hdrs, "Accept: text/event-stream");
    char *url = xasprintf("%s%s", ep->base, path);
    return call_start(b, url, hdrs, o, true, done, arg, err);
}

/* ---- ids, paths, JSON --------------------------------------------------------------------- */

const char *osb_remote_id(const char *sandbox_id, struct mcp_error *err)
{
    size_t plen = strlen(OSB_ID_PREFIX);
    if (sandbox_id == NULL || strncmp(sandbox_id, OSB_ID_PREFIX, plen) != 0) {
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                      "\"%s\" is not an OpenSandbox sandbox id (they start with \"osb-\"); "
                      "call list_sandboxes",
                      sandbox_id ? sandbox_id : "(null)");
        return NULL;
    }
    const char *rid = sandbox_id + plen;
    size_t n = strlen(rid);
    bool ok = n > 0 && n <= OSB_REMOTE_ID_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (rid[i] >= 'a' && rid[i] <= 'z') || (rid[i] >= 'A' && rid[i] <= 'Z') ||
             (rid[i] >= '0' && rid[i] <= '9') || strchr("-_.", rid[i]) != NULL;
    if (!ok || strcmp(rid, ".") == 0 || strcmp(rid, "..") == 0) {
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no sandbox %s: malformed id; call list_sandboxes",
                      sandbox_id);
        return NULL;
    }
    return rid;
}

char *osb_escape(const char *s)
{
    char *e = httpc_curl.easy_escape(NULL, s, 0);
    if (e == NULL)
        abort();
    char *out = xstrdup(e);
    httpc_curl.free(e);
    return out;
}

json_t *osb_resp_json(struct httpc_response *resp, const char *what, struct mcp_error *err)
{
    json_error_t jerr;
    json_t *j = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, &jerr);
    if (j == NULL)
        mcp_error_set(err, MCP_ERR_BACKEND, 0,
                      "%s: the server answered with malformed JSON (%s at byte %d)%s%s", what,
                      jerr.text, jerr.position, resp->request_id[0] ? "; request id " : "",
                      resp->request_id);
    return j;
}

json_t *osb_resp_member(struct httpc_response *resp, const char *what, const char *field,
                        json_type type, json_t **doc, struct mcp_error *err)
{
    *doc = osb_resp_json(resp, what, err);
    json_t *v = json_object_get(*doc, field);
    if (*doc != NULL && (v == NULL || json_typeof(v) != type)) {
        mcp_error_set(err, MCP_ERR_BACKEND, 0, "%s: no \"%s\" in the server's answer", what,
                      field);
        return NULL;
    }
    return v;
}

char *osb_endpoint_url(const char *protocol, const char *endpoint)
{
    char *url;
    if (strncmp(endpoint, "http://", 7) == 0 || strncmp(endpoint, "https://", 8) == 0)
        url = xstrdup(endpoint);
    else
        url = xasprintf("%s://%s", protocol, endpoint);
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        url[--n] = '\0';
    return url;
}

/* ---- execd endpoints ------------------------------------------------------------------------ */

struct osb_resolve {
    struct osb_backend *b;
    char *rid;
    osb_endpoint_fn *cb;
    void *arg;
};

static struct osb_endpoint *endpoint_find(struct osb_backend *b, const char *rid)
{
    for (struct osb_endpoint *ep = b->endpoints; ep != NULL; ep = ep->next)
        if (strcmp(ep->rid, rid) == 0)
            return ep;
    return NULL;
}

static void endpoint_free(struct osb_endpoint *ep)
{
    free(ep->rid);
    free(ep->base);
    json_decref(ep->headers);
    free(ep);
}

void osb_endpoint_forget(struct osb_backend *b, const char *rid)
{
    for (struct osb_endpoint **pp = &b->endpoints; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->rid, rid) == 0) {
            struct osb_endpoint *ep = *pp;
            *pp = ep->next;
            endpoint_free(ep);
            return;
        }
    }
}

void osb_endpoints_free(struct osb_backend *b)
{
    while (b->endpoints != NULL) {
        struct osb_endpoint *ep = b->endpoints;
        b->endpoints = ep->next;
        endpoint_free(ep);
    }
}

static struct osb_endpoint *endpoint_parse(struct osb_backend *b, const char *rid, json_t *j,
                                           struct mcp_error *err)
{
    const char *endpoint = json_string_value(json_object_get(j, "endpoint"));
    json_t *headers = json_object_get(j, "headers");
    if (endpoint == NULL || endpoint[0] == '\0' || (headers && !json_is_object(headers))) {
        mcp_error_set(err, MCP_ERR_BACKEND, 0,
                      "the OpenSandbox server returned an endpoint without \"endpoint\"");
        return NULL;
    }
    struct osb_endpoint *ep = xcalloc(1, sizeof(*ep));
    ep->rid = xstrdup(rid);
    ep->base = osb_endpoint_url(b->protocol, endpoint);
    ep->headers = headers ? json_deep_copy(headers) : json_object();
    return ep;
}

static void resolve_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct osb_resolve *r = arg;
    struct mcp_error e;
    json_t *j = err ? NULL : osb_resp_json(resp, "resolving execd's endpoint", &e);
    struct osb_endpoint *ep = j ? endpoint_parse(r->b, r->rid, j, &e) : NULL;
    json_decref(j);
    if (ep != NULL) {
        osb_endpoint_forget(r->b, r->rid);
        ep->next = r->b->endpoints;
        r->b->endpoints = ep;
    }
    r->cb(r->arg, ep, ep ? NULL : err ? err : &e);
    free(r->rid);
    free(r);
}

int osb_endpoint_resolve(struct osb_backend *b, const char *sandbox_id, osb_endpoint_fn *cb,
                         void *arg, struct mcp_error *err)
{
    const char *rid = osb_remote_id(sandbox_id, err);
    if (rid == NULL)
        return -1;
    struct osb_endpoint *ep = endpoint_find(b, rid);
    if (ep != NULL) {
        cb(arg, ep, NULL);
        return 0;
    }
    struct osb_resolve *r = xcalloc(1, sizeof(*r));
    *r = (struct osb_resolve){b, xstrdup(rid), cb, arg};
    cleanup_free char *path = xasprintf("/sandboxes/%s/endpoints/%d%s", rid, OSB_EXECD_PORT,
                                        b->use_server_proxy ? "?use_server_proxy=true" : "");
    struct osb_call_opts o = {.method = "GET", .what = "resolving execd's endpoint",
                              .sandbox_id = sandbox_id, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_lifecycle_call(b, path, &o, resolve_done, r, err) != 0) {
        free(r->rid);
        free(r);
        return -1;
    }
    return 0;
}
