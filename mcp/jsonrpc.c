/* JSON-RPC 2.0 framing (see jsonrpc.h). Pure: no I/O, no globals. */
#include "mcp/jsonrpc.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/json_in.h"
#include "lib/base/json_kind.h"

static bool id_is_valid(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

static void set_invalid(struct jsonrpc_msg *out, int code, const char *fmt, const char *arg)
{
    out->kind = JSONRPC_INVALID;
    mcp_error_set(&out->err, code, 0, fmt, arg);
}

/* A message with "method": a request (with id) or a notification. */
static void classify_call(json_t *root, struct jsonrpc_msg *out)
{
    json_t *method = json_object_get(root, "method");
    json_t *params = json_object_get(root, "params");
    json_t *id = json_object_get(root, "id");

    if (!json_is_string(method)) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST,
                    "Invalid Request: \"method\" must be a string, got %s", json_kind_name(method));
        return;
    }
    if (params && !json_is_object(params) && !json_is_array(params)) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST,
                    "Invalid Request: \"params\" must be an object, got %s",
                    json_kind_name(params));
        return;
    }
    if (json_object_get(root, "result") || json_object_get(root, "error")) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST, "%s",
                    "Invalid Request: a request cannot carry \"result\" or \"error\"");
        return;
    }
    out->method = json_string_value(method);
    out->params = params;
    out->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
}

/* A message without "method": a response to one of our server-to-client requests. */
static void classify_response(json_t *root, struct jsonrpc_msg *out)
{
    json_t *result = json_object_get(root, "result");
    json_t *error = json_object_get(root, "error");
    json_t *id = json_object_get(root, "id");

    if (!result && !error) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST, "%s",
                    "Invalid Request: missing \"method\" (and no \"result\" or \"error\")");
        return;
    }
    if (result && error) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST, "%s",
                    "Invalid Request: a response has \"result\" or \"error\", not both");
        return;
    }
    if (error && !json_is_object(error)) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST,
                    "Invalid Request: \"error\" must be an object, got %s", json_kind_name(error));
        return;
    }
    if (!id || (!id_is_valid(id) && !(error && json_is_null(id)))) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST, "%s",
                    "Invalid Request: a response needs a string or integer \"id\"");
        return;
    }
    out->result = result;
    out->error = error;
    out->kind = JSONRPC_RESPONSE;
}

static void classify(json_t *root, struct jsonrpc_msg *out)
{
    json_t *version = json_object_get(root, "jsonrpc");
    json_t *id = json_object_get(root, "id");

    if (id && id_is_valid(id))
        out->id = id;
    if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST, "%s",
                    "Invalid Request: \"jsonrpc\" must be exactly \"2.0\"");
        return;
    }
    if (id && !id_is_valid(id) && json_object_get(root, "method")) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST,
                    "Invalid Request: \"id\" must be a string or an integer, got %s",
                    json_kind_name(id));
        return;
    }
    if (json_object_get(root, "method"))
        classify_call(root, out);
    else
        classify_response(root, out);
}

/* The first string value holding a NUL, as a path ("params.arguments.content", "params.x[2]")
 * into path; false if there is none. */
static bool find_nul(const json_t *v, char *path, size_t size)
{
    size_t n = strlen(path);
    if (json_is_string(v))
        return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m) {
            snprintf(path + n, size - n, "%s%s", n ? "." : "", k);
            if (find_nul(m, path, size))
                return true;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            snprintf(path + n, size - n, "[%zu]", i);
            if (find_nul(json_array_get(v, i), path, size))
                return true;
        }
    }
    path[n] = '\0';
    return false;
}

/* A request or notification may carry \u0000 (valid JSON); the C strings everything below here
 * works on cannot, and cutting them short would change what the caller asked for. So it is
 * refused as invalid params, naming the argument. Responses (a client's own text) pass: a
 * NUL there only shortens what the server reads. */
static void refuse_nul(struct jsonrpc_msg *out)
{
    char path[256] = "";
    if ((out->kind == JSONRPC_REQUEST || out->kind == JSONRPC_NOTIFICATION) &&
        find_nul(out->root, path, sizeof path))
        set_invalid(out, MCP_ERR_INVALID_PARAMS,
                    "Invalid params: %s contains NUL (\\u0000), which no argument may: send "
                    "bytes with NUL as base64 (write_file encoding \"base64\") or from a file",
                    path);
}

void jsonrpc_parse(const char *data, size_t len, struct jsonrpc_msg *out)
{
    json_error_t jerr;

    memset(out, 0, sizeof(*out));
    /* The fast path takes the common case; jansson decides (and words errors) for the rest. */
    out->root = json_in_parse(data, len);
    if (!out->root)
        out->root = json_loadb(data, len,
                               JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!out->root && strstr(jerr.text, "NUL byte in object key") != NULL) { /* valid JSON */
        out->kind = JSONRPC_INVALID;
        mcp_error_set(&out->err, MCP_ERR_INVALID_PARAMS, 0,
                      "Invalid params: an object key contains NUL (\\u0000), which no key may "
                      "(line %d, column %d)", jerr.line, jerr.column);
        return;
    }
    if (!out->root) {
        out->kind = JSONRPC_INVALID;
        mcp_error_set(&out->err, MCP_ERR_PARSE, 0, "Parse error: %s (line %d, column %d)",
                      jerr.text, jerr.line, jerr.column);
        return;
    }
    if (json_is_array(out->root)) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST, "%s",
                    "Invalid Request: batches (JSON arrays) are not supported; MCP 2025-06-18 "
                    "and later send one message at a time");
        return;
    }
    if (!json_is_object(out->root)) {
        set_invalid(out, MCP_ERR_INVALID_REQUEST, "Invalid Request: expected a JSON object, got %s",
                    json_kind_name(out->root));
        return;
    }
    classify(out->root, out);
    refuse_nul(out);
}

void jsonrpc_msg_release(struct jsonrpc_msg *msg)
{
    if (!msg)
        return;
    json_decref(msg->root);
    memset(msg, 0, sizeof(*msg));
}

static json_t *id_or_null(const json_t *id)
{
    return id ? json_deep_copy(id) : json_null();
}

/* Built member by member: every reply goes through here, and json_pack's format parsing and
 * key checks cost more than the object itself. Keys stay in the order jsonrpc, id, result. */
json_t *jsonrpc_result(const json_t *id, json_t *result)
{
    json_t *msg = json_object();

    json_object_set_new_nocheck(msg, "jsonrpc", json_string_nocheck("2.0"));
    json_object_set_new_nocheck(msg, "id", id_or_null(id));
    json_object_set_new_nocheck(msg, "result", result ? result : json_object());
    return msg;
}

json_t *jsonrpc_error(const json_t *id, int code, const char *message, json_t *data)
{
    json_t *error = json_pack("{s:i, s:s}", "code", code, "message", message ? message : "");

    if (!error)
        error = json_pack("{s:i, s:s}", "code", code, "message", "(message not valid UTF-8)");
    if (data)
        json_object_set_new(error, "data", data);
    return json_pack("{s:s, s:o, s:o}", "jsonrpc", "2.0", "id", id_or_null(id), "error", error);
}

json_t *jsonrpc_notification(const char *method, json_t *params)
{
    json_t *msg = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);

    if (params)
        json_object_set_new(msg, "params", params);
    return msg;
}

json_t *jsonrpc_request(const json_t *id, const char *method, json_t *params)
{
    json_t *msg = json_pack("{s:s, s:o, s:s}", "jsonrpc", "2.0", "id", id_or_null(id), "method",
                            method);

    if (params)
        json_object_set_new(msg, "params", params);
    return msg;
}
