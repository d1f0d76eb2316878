/* subscriptions/listen (2026-07-28): the stateless replacement of the session's unrelated
 * notifications and of resources/subscribe. The request stays open; its stream first carries
 * notifications/subscriptions/acknowledged with the filter the server agreed to, then the
 * list-changed and resource-updated notifications the filter asks for, each tagged with
 * _meta["io.modelcontextprotocol/subscriptionId"] (the request's id). It ends when the client
 * closes the stream (HTTP) or cancels it (stdio); the server never answers it otherwise. */
#include <stdio.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "mcp/modern-internal.h"
#include "mcp/modern.h"
#include "mcp/request.h"

#define META_SUBSCRIPTION_ID "io.modelcontextprotocol/subscriptionId"
/* Open listen streams in the whole server, and URIs one stream may watch. */
#define MODERN_MAX_LISTENERS 256
#define MODERN_MAX_LISTEN_URIS 256

struct listener {
    struct request *req;
    json_t *filter; /* the agreed SubscriptionFilter */
    struct listener *prev, *next;
};

static struct listener *listeners;
static size_t n_listeners;

static const char *const list_flags[] = {"toolsListChanged", "promptsListChanged",
                                         "resourcesListChanged"};

/* The part of the requested filter the server honours (known keys, well-formed values). */
static int agreed_filter(json_t *asked, json_t **out, struct mcp_error *err)
{
    if (!json_is_object(asked))
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"notifications\" must be a SubscriptionFilter "
                             "object");
    json_t *agreed = json_object();
    for (size_t i = 0; i < ARRAY_SIZE(list_flags); i++)
        if (json_is_true(json_object_get(asked, list_flags[i])))
            json_object_set_new(agreed, list_flags[i], json_true());
    json_t *uris = json_object_get(asked, "resourceSubscriptions");
    if (uris && (!json_is_array(uris) || json_array_size(uris) > MODERN_MAX_LISTEN_URIS)) {
        json_decref(agreed);
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0, "Invalid params: "
                             "\"resourceSubscriptions\" must be an array of at most %d URIs",
                             MODERN_MAX_LISTEN_URIS);
    }
    size_t i;
    json_t *uri;
    json_t *kept = json_array();
    json_array_foreach(uris, i, uri)
        if (json_is_string(uri))
            json_array_append(kept, uri);
    if (uris)
        json_object_set(agreed, "resourceSubscriptions", kept);
    json_decref(kept);
    *out = agreed;
    return 0;
}

static json_t *tagged(const struct listener *l, json_t *params /* stolen */)
{
    json_object_set_new(params, "_meta", json_pack("{s:O}", META_SUBSCRIPTION_ID,
                                                   request_id(l->req)));
    return params;
}

static void listener_end(void *arg)
{
    struct listener *l = arg;
    if (l->prev)
        l->prev->next = l->next;
    else
        listeners = l->next;
    if (l->next)
        l->next->prev = l->prev;
    n_listeners--;
    json_decref(l->filter);
    /* Cancelled, so this reply is dropped; it frees the request. */
    request_reply(l->req, json_pack("{s:{s:O}}", "_meta", META_SUBSCRIPTION_ID,
                                    request_id(l->req)));
    free(l);
}

void modern_method_subscriptions_listen(struct request *req, json_t *params)
{
    json_t *filter = NULL;
    struct mcp_error err;

    if (agreed_filter(json_object_get(params, "notifications"), &filter, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    if (n_listeners >= MODERN_MAX_LISTENERS) {
        json_decref(filter);
        request_error(req, MCP_ERR_SERVER, NULL,
                      "Too many open subscriptions (limit "
                      "%d); close one first",
                      MODERN_MAX_LISTENERS);
        return;
    }
    struct listener *l = xcalloc(1, sizeof(*l));
    l->req = req;
    l->filter = filter;
    l->next = listeners;
    if (listeners)
        listeners->prev = l;
    listeners = l;
    n_listeners++;
    request_on_cancel(req, listener_end, l);
    request_notify(req, "notifications/subscriptions/acknowledged",
                   tagged(l, json_pack("{s:O}", "notifications", filter)));
}

void modern_listeners_list_changed(const char *what)
{
    char flag[64], method[96];
    snprintf(flag, sizeof(flag), "%sListChanged", what);
    snprintf(method, sizeof(method), "notifications/%s/list_changed", what);
    for (struct listener *l = listeners; l; l = l->next)
        if (json_is_true(json_object_get(l->filter, flag)))
            request_notify(l->req, method, tagged(l, json_object()));
}

static bool watches(const struct listener *l, const char *uri)
{
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(l->filter, "resourceSubscriptions"), i, u)
        if (strcmp(json_string_value(u), uri) == 0)
            return true;
    return false;
}

void modern_listeners_resource_updated_under(const char *owner, const char *prefix)
{
    size_t i, n = strlen(prefix);
    json_t *u;
    for (struct listener *l = listeners; l; l = l->next) {
        if (strcmp(request_owner(l->req), owner) != 0)
            continue;
        json_array_foreach(json_object_get(l->filter, "resourceSubscriptions"), i,
                           u) if (strncmp(json_string_value(u), prefix, n) == 0)
            request_notify(l->req, "notifications/resources/updated",
                           tagged(l, json_pack("{s:s}", "uri", json_string_value(u))));
    }
}

void modern_listeners_resource_updated(const char *uri)
{
    for (struct listener *l = listeners; l; l = l->next)
        if (watches(l, uri))
            request_notify(l->req, "notifications/resources/updated",
                           tagged(l, json_pack("{s:s}", "uri", uri)));
}
