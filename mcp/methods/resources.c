/* resources/list, resources/templates/list, resources/read, resources/(un)subscribe. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"
#include "mcp/dispatch.h"
#include "mcp/limits.h"
#include "mcp/methods/params.h"
#include "mcp/registry.h"
#include "mcp/request.h"
#include "mcp/server.h"
#include "mcp/session-internal.h"

struct resource_read {
    struct request *req;
};

void method_resources_list(struct request *req, json_t *params)
{
    struct registry *reg = server_registry(request_server(req));

    request_reply(req, json_pack("{s:o}", "resources", registry_resources_json(reg)));
}

void method_resources_templates_list(struct request *req, json_t *params)
{
    struct registry *reg = server_registry(request_server(req));

    request_reply(req, json_pack("{s:o}", "resourceTemplates", registry_templates_json(reg)));
}

static int read_uri(json_t *params, const char **uri, struct mcp_error *err)
{
    if (params_string(params, "uri", true, uri, err) < 0)
        return -1;
    if (!**uri || strlen(*uri) > MCP_MAX_URI_BYTES)
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"uri\" must be 1 to %d bytes", MCP_MAX_URI_BYTES);
    return 0;
}

/* Reads params.uri and matches it against the registry; on failure the request is answered
 * (invalid params, or resource not found) and false is returned. */
static bool match_requested_resource(struct request *req, json_t *params, const char **uri,
                                     struct registry_resource_match *m)
{
    struct mcp_error err;

    if (read_uri(params, uri, &err) < 0) {
        request_fail(req, &err);
        return false;
    }
    if (!registry_match_resource(server_registry(request_server(req)), *uri, m)) {
        request_error(req, MCP_ERR_RESOURCE_NOT_FOUND, json_pack("{s:s}", "uri", *uri),
                      "Resource not found: %s", *uri);
        return false;
    }
    return true;
}

void method_resources_read(struct request *req, json_t *params)
{
    struct registry_resource_match m;
    const char *uri;
    struct mcp_error err;

    if (!match_requested_resource(req, params, &uri, &m))
        return;
    /* sandbox files need the store: a read of any resource starts it (once) */
    if (!server_sandbox_context(request_server(req), &err)) {
        json_decref(m.vars);
        request_fail(req, &err);
        return;
    }
    struct resource_read *rr = xcalloc(1, sizeof(*rr));
    rr->req = req;
    m.fn(rr, uri, m.vars, m.arg);
    json_decref(m.vars);
}

struct mcp_context *resource_read_context(struct resource_read *rr)
{
    return server_context(request_server(rr->req));
}

const char *resource_read_owner(const struct resource_read *rr)
{
    return request_owner(rr->req);
}

void resource_read_on_cancel(struct resource_read *rr, tool_cancel_fn *fn, void *arg)
{
    request_on_cancel(rr->req, fn, arg);
}

void resource_read_finish(struct resource_read *rr, json_t *contents)
{
    struct request *req = rr->req;

    free(rr);
    if (!json_is_array(contents)) {
        json_decref(contents);
        request_error(req, MCP_ERR_INTERNAL, NULL, "resource reader returned no contents");
        return;
    }
    request_reply(req, json_pack("{s:o}", "contents", contents));
}

void resource_read_fail(struct resource_read *rr, const struct mcp_error *err)
{
    struct request *req = rr->req;

    free(rr);
    if (err->code == MCP_ERR_NOT_FOUND || err->code == MCP_ERR_RESOURCE_NOT_FOUND) {
        request_error(req, MCP_ERR_RESOURCE_NOT_FOUND, NULL, "Resource not found: %s", err->msg);
        return;
    }
    request_fail(req, err);
}

void method_resources_subscribe(struct request *req, json_t *params)
{
    struct registry_resource_match m;
    const char *uri;
    struct mcp_error err;

    if (!match_requested_resource(req, params, &uri, &m))
        return;
    json_decref(m.vars);
    if (session_subscribe(request_session(req), uri, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    request_reply(req, json_object());
}

void method_resources_unsubscribe(struct request *req, json_t *params)
{
    const char *uri;
    struct mcp_error err;

    if (read_uri(params, &uri, &err) < 0) {
        request_fail(req, &err);
        return;
    }
    session_unsubscribe(request_session(req), uri);
    request_reply(req, json_object());
}
