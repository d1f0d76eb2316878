/* What the listener decides about a complete request before anyone else: Host and Origin (the
 * DNS-rebinding defence), then the extension (its paths, its own authentication), then the
 * front-end; and, for a request whose body is still coming, whether the extension streams it. */
#define LOG_MODULE "http"
#include "server/http/http_conn.h"

#define HTTP_PATH_MAX 1024

static const struct http_request *req_of(struct http_conn *c)
{
    return &c->reader.req;
}

const char *http_conn_single_header(struct http_conn *c, const char *name, bool *bad)
{
    bool dup = false;
    const char *v = http_request_header(req_of(c), name, &dup);
    if (dup && !*bad) {
        *bad = true;
        http_conn_fail(c, 400, NULL, "Bad Request: repeated %s header", name);
    }
    return v;
}

/* Host and Origin; answers and returns false when the request is refused. */
static bool admit_origin(struct http_conn *c)
{
    const struct http_policy *pol = &c->hs->policy;
    bool bad = false;
    const char *host = http_conn_single_header(c, "host", &bad);
    const char *origin = http_conn_single_header(c, "origin", &bad);
    if (bad)
        return false;
    if (!http_policy_host_ok(pol, host)) {
        http_conn_fail(c, 403, NULL, "Forbidden: invalid Host header: %.100s",
                       host ? host : "(none)");
        return false;
    }
    if (!http_policy_origin_ok(pol, origin, host)) {
        http_conn_fail(c, 403, NULL, "Forbidden: invalid Origin header: %.100s", origin);
        return false;
    }
    return true;
}

bool http_route_head(struct http_conn *c)
{
    const struct http_extension *ext = c->hs->ext;
    const struct http_policy *pol = &c->hs->policy;
    char path[HTTP_PATH_MAX];
    bool dup_host = false, dup_origin = false;
    const char *host = http_request_header(req_of(c), "host", &dup_host);
    const char *origin = http_request_header(req_of(c), "origin", &dup_origin);
    /* What fails the checks is answered the usual way, once the whole request is in. */
    if (!ext || !ext->route_head || dup_host || dup_origin || !http_policy_host_ok(pol, host) ||
        !http_policy_origin_ok(pol, origin, host) ||
        http_request_path(req_of(c), path, sizeof(path)) != 0)
        return false;
    c->phase = CONN_RESPONDING;
    c->body_streaming = true;
    c->deadline = 0; /* the body comes as fast as the extension takes it */
    if (ext->route_head(ext->arg, c, path))
        return true;
    c->phase = CONN_READING;
    c->body_streaming = false;
    return false;
}

void http_route_request(struct http_conn *c)
{
    char path[HTTP_PATH_MAX];
    if (!admit_origin(c))
        return;
    bool have_path = http_request_path(req_of(c), path, sizeof(path)) == 0;
    const struct http_extension *ext = c->hs->ext;
    if (have_path && ext && ext->route(ext->arg, c, path))
        return; /* another API on this listener, with its own authentication */
    c->hs->fe.route(c->hs->fe.arg, c, have_path ? path : NULL);
}
