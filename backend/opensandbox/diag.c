/* get_endpoint and diagnose_sandbox on the OpenSandbox server. Diagnostics first try the spec's
 * JSON descriptors (scope=all); this server answers 501 to those, so the legacy text views
 * (logs?tail=&since=, events?limit=, inspect, summary) are used then. */
#define LOG_MODULE "opensandbox"

#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/utf8.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

#define OSB_DIAG_LOG_TAIL 500
#define OSB_DIAG_EVENTS 100

struct diag_op {
    struct osb_backend *b;
    char *sid, *rid;
    const char *what;
    int port;
    bool legacy;
    backend_cb *cb;
    void *arg;
};

static void diag_free(struct diag_op *d)
{
    free(d->sid);
    free(d->rid);
    free(d);
}

static struct diag_op *diag_new(struct osb_backend *b, const char *sid, backend_cb *cb, void *arg)
{
    struct diag_op *d = xcalloc(1, sizeof(*d));
    d->b = b;
    d->sid = xstrdup(sid);
    d->rid = xstrdup(sid + strlen(OSB_ID_PREFIX));
    d->cb = cb;
    d->arg = arg;
    return d;
}

/* ---- endpoint ------------------------------------------------------------------------------- */

static void endpoint_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct diag_op *d = arg;
    struct mcp_error e;
    cleanup_json json_t *j = NULL;
    json_t *v = err ? NULL : osb_resp_member(resp, "getting the endpoint", "endpoint",
                                             JSON_STRING, &j, &e);
    const char *ep = json_string_value(v);
    if (ep == NULL) {
        d->cb(d->arg, NULL, err ? err : &e);
        diag_free(d);
        return;
    }
    cleanup_free char *url = osb_endpoint_url(d->b->protocol, ep);
    json_t *headers = json_object_get(j, "headers");
    cleanup_json json_t *res = json_pack("{s:s,s:i,s:s,s:o,s:s}", "sandbox_id", d->sid, "port",
                                         d->port, "url", url, "headers",
                                         json_is_object(headers) ? json_incref(headers) : json_object(),
                                         "reachable_from",
                                         d->b->use_server_proxy ? "host" : "network");
    d->cb(d->arg, res, NULL);
    diag_free(d);
}

int osb_endpoint_op(struct backend *be, const char *sandbox_id, int port, backend_cb *cb,
                    void *arg, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    if (port < 1 || port > 65535)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "port must be 1..65535");
    struct diag_op *d = diag_new(b, sandbox_id, cb, arg);
    d->port = port;
    cleanup_free char *path = xasprintf("/sandboxes/%s/endpoints/%d%s", d->rid, port,
                                        b->use_server_proxy ? "?use_server_proxy=true" : "");
    struct osb_call_opts o = {.method = "GET", .what = "getting the endpoint",
                              .sandbox_id = sandbox_id, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_lifecycle_call(b, path, &o, endpoint_done, d, err) != 0) {
        diag_free(d);
        return -1;
    }
    return 0;
}

/* ---- diagnose ------------------------------------------------------------------------------- */

static int diag_request(struct diag_op *d, struct mcp_error *err);

static void diag_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct diag_op *d = arg;
    struct mcp_error e;
    if (err != NULL && !d->legacy && err->code == MCP_ERR_UNSUPPORTED) {
        d->legacy = true; /* 501 DIAGNOSTICS_NOT_IMPLEMENTED: use the text views */
        if (diag_request(d, &e) == 0)
            return;
        err = &e;
    }
    if (err != NULL) {
        d->cb(d->arg, NULL, err);
        diag_free(d);
        return;
    }
    const char *body = resp->body.data ? resp->body.data : "";
    cleanup_json json_t *desc = d->legacy ? NULL : json_loadb(body, resp->body.len, 0, NULL);
    json_t *content = json_object_get(desc, "content");
    cleanup_json json_t *res = json_pack("{s:s,s:s,s:s}", "sandbox_id", d->sid, "what", d->what,
                                         "source", "opensandbox");
    struct store_sandbox sb = {0};
    if (d->b->base.store != NULL && store_sandbox_get(d->b->base.store, d->sid, &sb, &e) == 0) {
        json_object_set_new(res, "state", json_string(sb.state)); /* as mcpbox last saw it */
        osb_vault_diagnose(d->b, sb.record, res);
        store_sandbox_release(&sb);
    }
    if (json_is_string(content)) {
        json_object_set(res, "content", content);
        json_object_set(res, "truncated", json_object_get(desc, "truncated"));
    } else if (json_is_string(json_object_get(desc, "contentUrl"))) {
        json_object_set_new(res, "content", json_string(""));
        json_object_set(res, "content_url", json_object_get(desc, "contentUrl"));
    } else {
        json_object_set_new(res, "content", utf8_json_text(body, resp->body.len));
        json_object_set_new(res, "truncated", json_boolean(resp->body_capped));
    }
    d->cb(d->arg, res, NULL);
    diag_free(d);
}

static int diag_request(struct diag_op *d, struct mcp_error *err)
{
    const char *w = d->what;
    bool kinded = strcmp(w, "logs") == 0 || strcmp(w, "events") == 0;
    cleanup_free char *path = NULL;
    if (kinded && !d->legacy)
        path = xasprintf("/sandboxes/%s/diagnostics/%s?scope=all", d->rid, w);
    else if (strcmp(w, "logs") == 0)
        path = xasprintf("/sandboxes/%s/diagnostics/logs?tail=%d&since=30m", d->rid,
                         OSB_DIAG_LOG_TAIL);
    else if (strcmp(w, "events") == 0)
        path = xasprintf("/sandboxes/%s/diagnostics/events?limit=%d", d->rid, OSB_DIAG_EVENTS);
    else
        path = xasprintf("/sandboxes/%s/diagnostics/%s", d->rid, w);
    struct osb_call_opts o = {.method = "GET", .what = "diagnosing the sandbox",
                              .sandbox_id = d->sid, .retry = HTTPC_RETRY_IDEMPOTENT,
                              .body_cap = OSB_DIAG_MAX};
    return osb_lifecycle_call(d->b, path, &o, diag_done, d, err);
}

int osb_diagnose(struct backend *be, const char *sandbox_id, const char *what, backend_cb *cb,
                 void *arg, struct mcp_error *err)
{
    static const char *const kinds[] = {"summary", "logs", "events", "inspect"};
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    const char *kind = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if (strcmp(what ? what : "summary", kinds[i]) == 0)
            kind = kinds[i];
    if (kind == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "what must be summary, logs, events or inspect");
    struct diag_op *d = diag_new(osb_of(be), sandbox_id, cb, arg);
    d->what = kind;
    if (diag_request(d, err) != 0) {
        diag_free(d);
        return -1;
    }
    return 0;
}
