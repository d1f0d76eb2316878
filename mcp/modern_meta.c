/* Per-request context of a 2026-07-28 request: _meta and the HTTP headers that mirror the body
 * (MCP-Protocol-Version, Mcp-Method, Mcp-Name), checked in the order the spec's reference
 * implementation uses, so that a request with several faults gets the same error. */
#include <string.h>

#include "lib/base/cleanup.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern.h"
#include "mcp/session-internal.h"

/* Longest header value compared (longer values cannot match a body field we accept). */
#define MODERN_HEADER_MAX 1024

static const char *const modern_versions[] = {MODERN_PROTOCOL_VERSION};

bool modern_version_is_modern(const char *version)
{
    for (size_t i = 0; version && i < ARRAY_SIZE(modern_versions); i++)
        if (strcmp(version, modern_versions[i]) == 0)
            return true;
    return false;
}

static json_t *params_meta(const json_t *params)
{
    json_t *meta = json_is_object(params) ? json_object_get(params, "_meta") : NULL;
    return json_is_object(meta) ? meta : NULL;
}

bool modern_params_have_version(const json_t *params)
{
    return json_object_get(params_meta(params), MODERN_META_VERSION) != NULL;
}

/* HTTP allows optional whitespace around a field value: compare the trimmed value. */
static bool header_equals(const char *header, const char *value)
{
    size_t len;

    if (!header || !value)
        return false;
    while (*header == ' ' || *header == '\t')
        header++;
    len = strnlen(header, MODERN_HEADER_MAX);
    while (len > 0 && (header[len - 1] == ' ' || header[len - 1] == '\t'))
        len--;
    return len == strlen(value) && strncmp(header, value, len) == 0;
}

/* The body field Mcp-Name mirrors for method, or NULL when the method has none. */
static const char *name_field(const char *method)
{
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        return "name";
    if (strcmp(method, "resources/read") == 0)
        return "uri";
    if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
        strcmp(method, "tasks/cancel") == 0)
        return "taskId";
    return NULL;
}

static int mismatch(struct mcp_error *err, const char *what)
{
    return mcp_error_set(err, MODERN_ERR_HEADER_MISMATCH, 0, "Header mismatch: %s", what);
}

/* Mcp-Method and Mcp-Name against the body. */
static int check_routing_headers(const struct jsonrpc_msg *msg, const struct modern_headers *h,
                                 struct mcp_error *err)
{
    if (!h->method)
        return mismatch(err, "the Mcp-Method header is required");
    if (!header_equals(h->method, msg->method))
        return mismatch(err, "Mcp-Method does not match the body's method");
    const char *field = name_field(msg->method);
    json_t *value = field ? json_object_get(msg->params, field) : NULL;
    if (!json_is_string(value))
        return 0; /* nothing to mirror; the method's own checks report the missing field */
    if (!h->name)
        return mismatch(err, "the Mcp-Name header is required for this method");
    if (!header_equals(h->name, json_string_value(value)))
        return mismatch(err, "Mcp-Name does not match the body");
    return 0;
}

static int check_meta(const struct jsonrpc_msg *msg, const struct modern_headers *h,
                      json_t **data, struct mcp_error *err)
{
    json_t *meta = params_meta(msg->params);
    json_t *version = json_object_get(meta, MODERN_META_VERSION);
    json_t *caps = json_object_get(meta, MODERN_META_CAPS);

    if (!json_is_string(version) || !json_is_object(caps))
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: _meta must carry \"%s\" (a string) and \"%s\" (an "
                             "object)", MODERN_META_VERSION, MODERN_META_CAPS);
    if (h && h->version && !header_equals(h->version, json_string_value(version)))
        return mismatch(err, "MCP-Protocol-Version does not match _meta's protocol version");
    if (!modern_version_is_modern(json_string_value(version))) {
        json_t *supported = json_array();
        for (size_t i = 0; i < ARRAY_SIZE(modern_versions); i++)
            json_array_append_new(supported, json_string(modern_versions[i]));
        *data = json_pack("{s:o, s:O}", "supported", supported, "requested", version);
        return mcp_error_set(err, MODERN_ERR_UNSUPPORTED_VERSION, 0,
                             "Unsupported protocol version: %.64s (this server speaks %s "
                             "without a session, older versions after initialize)",
                             json_string_value(version), MODERN_PROTOCOL_VERSION);
    }
    json_t *level = json_object_get(meta, MODERN_META_LOG_LEVEL);
    if (level && mcp_log_level_parse(json_string_value(level)) < 0)
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"%s\" must be one of debug, info, notice, "
                             "warning, error, critical, alert, emergency", MODERN_META_LOG_LEVEL);
    return 0;
}

int modern_check_request(const struct jsonrpc_msg *msg, const struct modern_headers *h,
                         json_t **data, struct mcp_error *err)
{
    *data = NULL;
    if (h && !h->version)
        return mismatch(err, "the MCP-Protocol-Version header is required");
    if (msg->params && !json_is_object(msg->params))
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"params\" must be an object");
    if (check_meta(msg, h, data, err) < 0)
        return -1;
    return h ? check_routing_headers(msg, h, err) : 0;
}

int modern_http_status(const json_t *reply)
{
    json_t *error = json_object_get(reply, "error");

    if (!error)
        return 200;
    switch (json_integer_value(json_object_get(error, "code"))) {
    case MCP_ERR_METHOD_NOT_FOUND:
        return 404;
    case MCP_ERR_PARSE:
    case MCP_ERR_INVALID_REQUEST:
    case MCP_ERR_INVALID_PARAMS:
    case MODERN_ERR_HEADER_MISMATCH:
    case MODERN_ERR_MISSING_CAPABILITY:
    case MODERN_ERR_UNSUPPORTED_VERSION:
        return 400;
    default:
        return 500;
    }
}

bool modern_meta_has_capability(const json_t *meta, const char *capability)
{
    json_t *caps = json_object_get(meta, MODERN_META_CAPS);

    if (strncmp(capability, "extensions/", 11) == 0)
        return json_object_get(json_object_get(caps, "extensions"), capability + 11) != NULL;
    return json_object_get(caps, capability) != NULL;
}

int modern_meta_log_level(const json_t *meta)
{
    json_t *level = json_object_get(meta, MODERN_META_LOG_LEVEL);

    return level ? mcp_log_level_parse(json_string_value(level)) : -1;
}
