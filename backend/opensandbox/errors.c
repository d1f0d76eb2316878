/* Server and transport failures -> errors an agent can act on. The lifecycle API answers
 * {"code","message"} (or FastAPI's 422 {"detail":[...]}, or text/plain 500s); execd answers
 * {"code","message"} except its 401 ({"error":...}). */
#include <stdio.h>
#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

#define OSB_MSG_SNIPPET 200

struct server_error {
    char code[96];
    char message[320];
};

static void copy_clean(char *dst, size_t cap, const char *src, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < cap; i++)
        dst[j++] = (src[i] == '\n' || src[i] == '\r' || src[i] == '\t') ? ' ' : src[i];
    dst[j] = '\0';
}

static void parse_server_error(const struct httpc_response *resp, struct server_error *se)
{
    se->code[0] = se->message[0] = '\0';
    const char *body = resp->body.data ? resp->body.data : "";
    json_t *j = json_loadb(body, resp->body.len, 0, NULL);
    json_t *obj = j;
    if (json_is_object(json_object_get(j, "detail")))
        obj = json_object_get(j, "detail"); /* {"detail":{"code","message"}} */
    const char *code = json_string_value(json_object_get(obj, "code"));
    const char *msg = json_string_value(json_object_get(obj, "message"));
    if (msg == NULL)
        msg = json_string_value(json_object_get(obj, "error")); /* execd's 401 */
    json_t *detail = json_object_get(j, "detail");
    if (msg == NULL && json_is_array(detail)) /* FastAPI validation */
        msg = json_string_value(json_object_get(json_array_get(detail, 0), "msg"));
    if (msg == NULL && json_is_string(detail))
        msg = json_string_value(detail);
    if (code)
        copy_clean(se->code, sizeof(se->code), code, strlen(code));
    if (msg)
        copy_clean(se->message, sizeof(se->message), msg, strlen(msg));
    else if (j == NULL && resp->body.len > 0)
        copy_clean(se->message, sizeof(se->message), body,
                   resp->body.len < OSB_MSG_SNIPPET ? resp->body.len : OSB_MSG_SNIPPET);
    json_decref(j);
}

static int transport_error(const struct osb_backend *b, const struct httpc_response *resp,
                           const char *what, const char *who, struct mcp_error *err)
{
    if (resp->body_capped)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "%s: the answer from %s exceeded mcpbox's size limit; ask for less "
                             "(a byte range, a narrower path)", what, who);
    if (resp->deadline_hit)
        return mcp_error_set(err, MCP_ERR_TIMEOUT, 0,
                             "%s: %s did not answer within %u ms (%u attempt%s); the server may "
                             "be overloaded or unreachable: try again, or check "
                             "OPEN_SANDBOX_DOMAIN", what, who, b->t.request_timeout_ms,
                             resp->attempts, resp->attempts == 1 ? "" : "s");
    switch (resp->curl_code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                             "%s: cannot reach %s (%s, %u attempt%s): check OPEN_SANDBOX_DOMAIN "
                             "(%s) and that the server is running", what, who, resp->curl_msg,
                             resp->attempts, resp->attempts == 1 ? "" : "s", b->domain);
    case CURLE_OPERATION_TIMEDOUT:
        return mcp_error_set(err, MCP_ERR_TIMEOUT, 0,
                             "%s: %s went silent (%s); the connection was dropped, try again",
                             what, who, resp->curl_msg);
    case CURLE_ABORTED_BY_CALLBACK:
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "%s: %s", what, resp->curl_msg);
    default:
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                             "%s: the connection to %s failed (%s); try again", what, who,
                             resp->curl_msg);
    }
}

/* Failures recognised by their error code, whatever the status: nonzero if err was filled. */
static int code_error(const struct server_error *se, const char *what, struct mcp_error *err)
{
    const char *c = se->code, *m = se->message[0] ? se->message : "no details";
    if (strstr(c, "IMAGE_PULL") != NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s: the OpenSandbox server could not pull the image (%s: %s); check "
                             "the image name and that the server's registry can serve it",
                             what, c, m);
    if (strstr(c, "QUOTA") != NULL || strstr(m, "quota") != NULL || strstr(m, "Quota") != NULL)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "%s: quota exceeded on the OpenSandbox server (%s%s%s); destroy "
                             "sandboxes you no longer need or ask the operator for more",
                             what, c, c[0] ? ": " : "", m);
    return 0;
}

/* SNAPSHOT::INVALID_STATE: the snapshot is not Ready, either still Creating (wait) or Failed or
 * Deleting (it never will be: use another). The server's message names the state. */
static int snapshot_state_error(const char *c, const char *m, const char *what,
                                struct mcp_error *err)
{
    if (strcasestr(m, "fail") != NULL || strcasestr(m, "delet") != NULL)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "%s: the snapshot failed or is being deleted and cannot be used "
                             "(%s: %s); call snapshot_sandbox with action \"list\" and pick a "
                             "ready snapshot, or create a new one", what, c, m);
    if (strcasestr(m, "creat") != NULL || strcasestr(m, "pending") != NULL)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "%s: the snapshot is still being created (%s: %s); wait until "
                             "snapshot_sandbox action \"list\" shows it ready or failed, then "
                             "try again", what, c, m);
    return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                         "%s: the snapshot is not ready (%s: %s); call snapshot_sandbox with "
                         "action \"list\": wait while it is creating, and if it failed pick a "
                         "ready snapshot or create a new one", what, c, m);
}

/* SNAPSHOT::* codes (docs/internals/opensandbox-wire.md §6): nonzero if err was filled. */
static int snapshot_error(const struct server_error *se, const char *what, const char *sid,
                          struct mcp_error *err)
{
    const char *c = se->code, *m = se->message[0] ? se->message : "no details";
    if (strncmp(c, "SNAPSHOT::", 10) != 0)
        return 0;
    if (strstr(c, "NOT_IMPLEMENTED") != NULL)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "%s: this OpenSandbox runtime cannot snapshot sandboxes (%s: %s); "
                             "snapshots need the Docker runtime. To keep the work, copy files "
                             "out with read_file or archive them with run_command (tar)", what,
                             c, m);
    if (strstr(c, "INVALID_SOURCE_STATE") != NULL)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "%s: sandbox %s must be running to be snapshotted (%s: %s); if it "
                             "is paused, call update_sandbox with paused: false first",
                             what, sid ? sid : "", c, m);
    if (strstr(c, "INVALID_STATE") != NULL)
        return snapshot_state_error(c, m, what, err);
    if (strstr(c, "NOT_FOUND") != NULL)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "%s: no such snapshot on the OpenSandbox server (%s: %s); call "
                             "snapshot_sandbox with action \"list\"", what, c, m);
    return mcp_error_set(err, MCP_ERR_BACKEND, 0, "%s: the snapshot request failed (%s: %s); "
                         "call snapshot_sandbox with action \"list\" to see the snapshot's "
                         "state, then try again or call diagnose_sandbox", what, c, m);
}

static int auth_error(const struct httpc_response *resp, const struct server_error *se,
                      const char *what, const char *sid, bool execd, struct mcp_error *err)
{
    const char *c = se->code, *m = se->message[0] ? se->message : "no details";
    if (execd)
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "%s: execd in sandbox %s refused the request (%ld: %s); it was "
                             "started with an access token mcpbox does not know", what,
                             sid ? sid : "", resp->status, m);
    return mcp_error_set(err, MCP_ERR_DENIED, 0,
                         "%s: the OpenSandbox server rejected mcpbox's credentials (%ld %s): "
                         "check OPEN_SANDBOX_API_KEY", what, resp->status, c[0] ? c : m);
}

static int status_error(const struct httpc_response *resp, const struct server_error *se,
                        const char *what, const char *sid, bool execd, struct mcp_error *err)
{
    long st = resp->status;
    const char *c = se->code, *m = se->message[0] ? se->message : "no details";
    const char *s = sid ? sid : "";
    if (code_error(se, what, err) || snapshot_error(se, what, sid, err))
        return -1;
    if (st == 401 || st == 403)
        return auth_error(resp, se, what, sid, execd, err);
    if (st == 404 && (strcmp(m, "Not Found") == 0 || strstr(c, "NO_PATH_MATCHED") != NULL))
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "%s: the %s does not offer this API "
                             "(404 Not Found); it may be older than mcpbox expects", what,
                             execd ? "sandbox's execd" : "OpenSandbox server");
    if (st == 404 && (strstr(c, "SANDBOX_NOT_FOUND") || (!execd && sid != NULL &&
                                                         strstr(c, "FILE") == NULL)))
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "%s: sandbox %s does not exist on the OpenSandbox server (it may "
                             "have expired or been destroyed); call list_sandboxes", what, s);
    if (st == 404)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "%s: not found (%s%s%s)", what, c,
                             c[0] ? ": " : "", m);
    if (st == 409) {
        const char *hint = strstr(c, "NOT_RUNNING")
                               ? "; if it is paused, call update_sandbox with paused: false"
                           : strstr(c, "NOT_PAUSED") ? "; it is not paused"
                                                     : "";
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "%s: sandbox %s is in the wrong state "
                             "(%s: %s)%s", what, s, c, m, hint);
    }
    if (st == 400 || st == 422 || st == 416)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "%s: the server rejected the request "
                             "(%ld %s%s%s)", what, st, c, c[0] ? ": " : "", m);
    if (st == 429)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0, "%s: the OpenSandbox server is rate limiting "
                             "mcpbox (429 after %u attempts); wait %s%.0f s and try again", what,
                             resp->attempts, resp->retry_after_s >= 0 ? "" : "a few",
                             resp->retry_after_s >= 0 ? resp->retry_after_s : 0.0);
    if (st == 501)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "%s: this OpenSandbox server does not "
                             "support it (%s: %s)", what, c, m);
    if (st == 502 || st == 503 || st == 504)
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "%s: the OpenSandbox server is "
                             "unavailable (%ld after %u attempts: %s); try again later", what, st,
                             resp->attempts, m);
    return mcp_error_set(err, MCP_ERR_BACKEND, 0, "%s: the %s failed (%ld %s%s%s)", what,
                         execd ? "sandbox's execd" : "OpenSandbox server", st, c,
                         c[0] ? ": " : "", m);
}

void osb_error_from_response(const struct osb_backend *b, const struct httpc_response *resp,
                             const char *what, const char *sandbox_id, bool execd,
                             struct mcp_error *err)
{
    if (resp->status == 0 || (resp->curl_code != CURLE_OK && !resp->sink_aborted &&
                              resp->status >= 200 && resp->status < 300)) {
        cleanup_free char *who =
            execd && sandbox_id ? xasprintf("execd in sandbox %s", sandbox_id) : NULL;
        transport_error(b, resp, what, who ? who : "the OpenSandbox server", err);
    } else {
        struct server_error se;
        parse_server_error(resp, &se);
        status_error(resp, &se, what, sandbox_id, execd, err);
    }
    size_t n = strlen(err->msg);
    if (resp->request_id[0] && n + 40 < sizeof(err->msg))
        snprintf(err->msg + n, sizeof(err->msg) - n, " [request id %s]", resp->request_id);
    osb_error_scrub(b, err);
}

void osb_error_scrub(const struct osb_backend *b, struct mcp_error *err)
{
    if (b->api_key == NULL || strlen(b->api_key) < 3)
        return;
    size_t klen = strlen(b->api_key);
    char *p;
    while ((p = strstr(err->msg, b->api_key)) != NULL) {
        memset(p, '*', 3);
        memmove(p + 3, p + klen, strlen(p + klen) + 1);
    }
}
