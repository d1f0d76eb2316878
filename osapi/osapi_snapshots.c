/* OpenSandbox's snapshots (issue 36): POST /v1/sandboxes/{id}/snapshots, GET /v1/snapshots,
 * GET and DELETE /v1/snapshots/{snapshotId}, over the backend's snapshot operation (the local
 * backend's, or OpenSandbox's). A local snapshot is complete when the create answers, so the
 * 202 already says Ready; a client that polls GET until Ready (as the SDK does) sees the same.
 * Another owner's snapshot is reported exactly like a missing one (the backend's rule). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/context.h"
#include "osapi/osapi-internal.h"

/* "ready" -> "Ready" (the spec's states: Creating, Ready, Failed, Deleting; others as they are,
 * capitalized, which clients must accept). */
static json_t *state_name(const char *s)
{
    char out[32];
    snprintf(out, sizeof out, "%s", s ? s : "unknown");
    out[0] = (char)toupper((unsigned char)out[0]);
    return json_string(out);
}

/* mcpbox's snapshot info -> OpenSandbox's Snapshot. */
static json_t *snapshot_json(json_t *info)
{
    json_t *status =
        json_pack("{s:o}", "state", state_name(json_string_value(json_object_get(info, "state"))));
    json_t *reason = json_object_get(info, "reason"), *msg = json_object_get(info, "message");
    if (json_is_string(reason))
        json_object_set(status, "reason", reason);
    if (json_is_string(msg))
        json_object_set(status, "message", msg);
    json_t *out = json_pack("{s:O?, s:O?, s:o, s:O?}", "id", json_object_get(info, "snapshot_id"),
                            "sandboxId", json_object_get(info, "sandbox_id"), "status", status,
                            "createdAt", json_object_get(info, "created_at"));
    if (json_is_string(json_object_get(info, "name")))
        json_object_set(out, "name", json_object_get(info, "name"));
    return out;
}

static void reply_created(struct osapi_req *req, json_t *snapshot)
{
    char extra[400];
    const char *host = req->conn ? http_request_header(osapi_req_http(req), "host", NULL) : NULL;
    snprintf(extra, sizeof extra, "Location: http://%.200s/v1/snapshots/%.128s\r\n",
             host ? host : "127.0.0.1", json_string_value(json_object_get(snapshot, "id")));
    osapi_reply_json(req, 202, snapshot, extra);
}

static void one_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    int status = (int)(intptr_t)req->state;
    req->state = NULL;
    if (err != NULL)
        osapi_reply_mcp_error(req, err);
    else if (status == 204)
        osapi_reply_raw(req, 204, NULL, NULL, "", 0);
    else if (status == 202) /* the spec's Location: where to poll */
        reply_created(req, snapshot_json(result));
    else
        osapi_reply_json(req, status, snapshot_json(result), NULL);
}

/* Filters (sandboxId, state: repeated, OR) and a page of the list. */
struct list_query {
    char *sandbox_id;
    json_t *states;
    long page, size;
};

static bool state_wanted(json_t *states, const char *state)
{
    size_t i;
    json_t *s;
    if (json_array_size(states) == 0)
        return true;
    json_array_foreach(states, i, s)
    {
        if (state && strcasecmp(json_string_value(s), state) == 0)
            return true;
    }
    return false;
}

static void list_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct list_query *q = req->state;
    if (err != NULL) {
        osapi_reply_mcp_error(req, err);
        return;
    }
    json_t *items = json_array(), *x;
    size_t i, n = 0, first = (size_t)((q->page - 1) * q->size);
    json_array_foreach(json_object_get(result, "snapshots"), i, x)
    {
        if (!state_wanted(q->states, json_string_value(json_object_get(x, "state"))))
            continue;
        if (n >= first && n < first + (size_t)q->size)
            json_array_append_new(items, snapshot_json(x));
        n++;
    }
    long pages = (long)((n + (size_t)q->size - 1) / (size_t)q->size);
    osapi_reply_json(req, 200,
                     json_pack("{s:o, s:{s:i, s:i, s:i, s:i, s:b}}", "items", items, "pagination",
                               "page", (int)q->page, "pageSize", (int)q->size, "totalItems", (int)n,
                               "totalPages", (int)pages, "hasNextPage", q->page < pages),
                     NULL);
}

static void list_query_free(void *p)
{
    struct list_query *q = p;
    free(q->sandbox_id);
    json_decref(q->states);
    free(q);
}

static bool page_param(struct osapi_req *req, const char *name, long def, long max, long *out)
{
    char *v = osapi_query_get(osapi_req_query(req), name), *end = NULL;
    *out = v ? strtol(v, &end, 10) : def;
    bool ok = !v || (*v && !*end && *out >= 1 && *out <= max);
    free(v);
    if (!ok)
        osapi_reply_error(req, 400, "SANDBOX::INVALID_PARAMETER",
                          "%s must be an integer from 1 to %ld", name, max);
    return ok;
}

/* The backend that keeps snapshots, or NULL after answering. */
static struct backend *snapshot_backend(struct osapi_req *req)
{
    struct mcp_context *ctx = osapi_context(req);
    struct mcp_error err;
    struct backend *be = ctx ? backend_for_snapshots(&ctx->backends, &err) : NULL;
    if (ctx != NULL && be == NULL)
        osapi_reply_unsupported(req, "snapshots: %s", err.msg);
    return be;
}

static void handle_list(struct osapi_req *req, struct backend *be)
{
    long page, size;
    if (!page_param(req, "page", 1, 1000000, &page) ||
        !page_param(req, "pageSize", 20, OSAPI_MAX_PAGE_SIZE, &size))
        return;
    struct list_query *q = calloc(1, sizeof *q);
    q->page = page, q->size = size;
    q->sandbox_id = osapi_query_get(osapi_req_query(req), "sandboxId");
    q->states = osapi_query_all(osapi_req_query(req), "state");
    req->state = q;
    req->free_state = list_query_free;
    json_t *args = q->sandbox_id ? json_pack("{s:s}", "sandbox_id", q->sandbox_id) : json_object();
    struct mcp_error err;
    if (be->ops->snapshot(be, req->owner, "list", args, list_cb, req, &err) < 0)
        osapi_reply_mcp_error(req, &err);
    json_decref(args);
}

static void call(struct osapi_req *req, struct backend *be, const char *action, json_t *args,
                 int status)
{
    struct mcp_error err;
    req->state = (void *)(intptr_t)status;
    if (be->ops->snapshot(be, req->owner, action, args, one_cb, req, &err) < 0) {
        req->state = NULL;
        osapi_reply_mcp_error(req, &err);
    }
    json_decref(args);
}

static void reply_bad_method(struct osapi_req *req, const char *allowed)
{
    char extra[96];
    snprintf(extra, sizeof extra, "Allow: %s\r\n", allowed);
    osapi_reply_json(req, 405,
                     json_pack("{s:s, s:s}", "code", "SANDBOX::METHOD_NOT_ALLOWED", "message",
                               "method not allowed on this path"),
                     extra);
}

void osapi_snapshots(struct osapi_req *req, const char *rest)
{
    enum http_method m = osapi_req_http(req)->method;
    struct backend *be;
    if (!*rest || strcmp(rest, "/") == 0) {
        if (m != HTTP_GET)
            reply_bad_method(req, "GET");
        else if ((be = snapshot_backend(req)) != NULL)
            handle_list(req, be);
        return;
    }
    const char *id = rest + 1;
    if (strchr(id, '/') != NULL || strlen(id) > 128) {
        osapi_reply_error(req, 404, "SANDBOX::NOT_FOUND", "no such path: /v1/snapshots%.200s",
                          rest);
    } else if (m != HTTP_GET && m != HTTP_DELETE) {
        reply_bad_method(req, "GET, DELETE");
    } else if ((be = snapshot_backend(req)) != NULL) {
        call(req, be, m == HTTP_GET ? "get" : "delete", json_pack("{s:s}", "snapshot_id", id),
             m == HTTP_GET ? 200 : 204);
    }
}

void osapi_snapshot_create(struct osapi_req *req)
{
    json_t *body = osapi_req_http(req)->body.len ? osapi_req_json(req) : json_object();
    if (body == NULL)
        return;
    json_t *name = json_object_get(body, "name");
    const char *key;
    json_t *v;
    bool ok = json_is_object(body);
    json_object_foreach(body, key, v)
    {
        ok = ok && strcmp(key, "name") == 0 && json_is_string(v) && json_string_length(v) > 0;
    }
    if (!ok) {
        osapi_reply_error(req, 400, "SANDBOX::INVALID_PARAMETER",
                          "CreateSnapshotRequest takes one field, name (a non-empty string)");
        json_decref(body);
        return;
    }
    json_t *args = json_pack("{s:s, s:O?}", "sandbox_id", req->sandbox_id, "name", name);
    json_decref(body);
    call(req, req->be, "create", args, 202);
}
