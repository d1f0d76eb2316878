/* The egress sidecar's /credential-vault (specs/egress-api.yaml) over a local sandbox's
 * Credential Vault (backend.h credential_vault, backend/local/local_vault.c; issue 37):
 *   POST   /credential-vault                     create (201), PATCH mutate, GET, DELETE (204);
 *   GET    /credential-vault/credentials[/NAME]  sanitized credential metadata;
 *   GET    /credential-vault/bindings[/NAME]     sanitized binding metadata.
 * Values are write-only: nothing here ever answers one. Errors are text/plain, as the
 * sidecar's. The sandbox must have been created with credentialProxy enabled. */
#include <string.h>

#include "lib/base/xalloc.h"
#include "osapi/osapi-internal.h"

static void reply_text(struct osapi_req *req, int status, const char *msg)
{
    osapi_reply_raw(req, status, "text/plain; charset=utf-8", NULL, msg, strlen(msg));
}

static int status_of(const struct mcp_error *err)
{
    switch (err->code) {
    case MCP_ERR_INVALID:
        return 400;
    case MCP_ERR_NOT_FOUND:
        return 404;
    case MCP_ERR_CONFLICT:
        return 409;
    case MCP_ERR_UNAVAILABLE:
        return 412;
    default:
        return 500;
    }
}

struct vault_state {
    char *sub; /* "", "/credentials[/NAME]", "/bindings[/NAME]" */
    bool created, deleted;
};

static void vault_state_free(void *p)
{
    struct vault_state *s = p;
    free(s->sub);
    free(s);
}

/* GET of a listing or of one item, from the whole state. */
static void reply_part(struct osapi_req *req, json_t *state, const char *sub)
{
    bool creds = strncmp(sub, "/credentials", 12) == 0;
    const char *key = creds ? "credentials" : "bindings";
    const char *name = sub + strlen(creds ? "/credentials" : "/bindings");
    json_t *list = json_object_get(state, key);
    if (name[0] == '\0') {
        osapi_reply_json(
            req, 200,
            json_pack("{s:O, s:O}", "revision", json_object_get(state, "revision"), key, list),
            NULL);
        return;
    }
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x)
    {
        if (strcmp(json_string_value(json_object_get(x, "name")), name + 1) == 0) {
            osapi_reply_json(req, 200, json_incref(x), NULL);
            return;
        }
    }
    reply_text(req, 404,
               creds ? "no credential of that name in the vault"
                     : "no binding of that name in the vault");
}

static void vault_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct vault_state *s = req->state;
    if (err != NULL)
        reply_text(req, status_of(err), err->msg);
    else if (s->deleted)
        osapi_reply_raw(req, 204, "text/plain; charset=utf-8", NULL, "", 0);
    else if (s->sub[0] != '\0')
        reply_part(req, result, s->sub);
    else
        osapi_reply_json(req, s->created ? 201 : 200, json_incref(result), NULL);
}

/* The action of (method, sub); NULL after answering 404/405. */
static const char *vault_action(struct osapi_req *req, enum http_method m, const char *sub)
{
    bool listing = strncmp(sub, "/credentials", 12) == 0 || strncmp(sub, "/bindings", 9) == 0;
    if (sub[0] != '\0' && !listing) {
        reply_text(req, 404, "the credential vault has /credentials and /bindings only");
        return NULL;
    }
    if (m == HTTP_GET)
        return "get";
    if (sub[0] == '\0' && (m == HTTP_POST || m == HTTP_PATCH || m == HTTP_DELETE))
        return m == HTTP_POST ? "create" : m == HTTP_PATCH ? "patch" : "delete";
    reply_text(req, 405, "/credential-vault takes POST, GET, PATCH and DELETE; its listings GET");
    return NULL;
}

void osapi_vault(struct osapi_req *req, const char *sandbox_id, const char *sub)
{
    enum http_method m = osapi_req_http(req)->method;
    const char *action = vault_action(req, m, sub);
    if (action == NULL)
        return;
    json_t *body = NULL;
    if ((m == HTTP_POST || m == HTTP_PATCH) && (body = osapi_req_json(req)) == NULL)
        return; /* answered */
    if (osapi_bind(req, sandbox_id, false, NULL) < 0) {
        json_decref(body);
        return;
    }
    struct vault_state *s = xcalloc(1, sizeof *s);
    s->sub = xstrdup(sub);
    s->created = m == HTTP_POST;
    s->deleted = m == HTTP_DELETE;
    req->state = s;
    req->free_state = vault_state_free;
    struct mcp_error err;
    int rc =
        req->be->ops->credential_vault(req->be, req->sandbox_id, action, body, vault_cb, req, &err);
    json_decref(body);
    if (rc < 0)
        vault_cb(req, NULL, &err);
}
