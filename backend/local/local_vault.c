/* OpenSandbox's Credential Vault of a local sandbox (local_vault.h). Stored as {revision,
 * credentials: {name: {value, revision}}, bindings: {name: {match, auth, revision}}}; what the
 * API shows is sanitized (names, types, revisions, never a value). */
#include "backend/local/local_vault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/local_sandbox.h"
#include "backend/secrets.h"
#include "lib/base/cleanup.h"

#define VAULT_MAX 64 /* credentials, and bindings, in one vault */

static void vault_path(const char *state_dir, const char *id, char out[4096])
{
    snprintf(out, 4096, "%s/vaults/%s.json", state_dir, id);
}

static json_t *vault_load(const char *state_dir, const char *id, struct mcp_error *err)
{
    char path[4096];
    vault_path(state_dir, id, path);
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    json_t *v = fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 077)
                    ? json_loadfd(fd, 0, NULL)
                    : NULL;
    if (v == NULL)
        mcp_error_set(err, fd < 0 && errno == ENOENT ? MCP_ERR_NOT_FOUND : MCP_ERR_IO, 0,
                      fd < 0 && errno == ENOENT
                          ? "sandbox %s has no credential vault: create one with POST "
                            "/credential-vault"
                          : "the credential vault of sandbox %s is unreadable; DELETE it and "
                            "create it again",
                      id);
    return v;
}

static int vault_save(const char *state_dir, const char *id, json_t *v, struct mcp_error *err)
{
    char dir[4096], path[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s/vaults", state_dir);
    mkdir(dir, 0700);
    vault_path(state_dir, id, path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = fd >= 0 ? json_dumpfd(v, fd, JSON_COMPACT) : -1;
    if (fd < 0 || rc < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
        unlink(tmp);
        return mcp_error_set(err, MCP_ERR_IO, errno, "writing the credential vault");
    }
    return 0;
}

void local_vault_remove(const char *state_dir, const char *id)
{
    char path[4096];
    vault_path(state_dir, id, path);
    unlink(path);
}

/* ---- checks ------------------------------------------------------------------------------- */

static bool token_ok(const char *s)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > 128)
        return false;
    for (; *s; s++)
        if (!strchr("!#$%&'*+-.^_`|~", *s) &&
            !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

static int check_credential(json_t *c, struct mcp_error *err)
{
    json_t *src = json_object_get(c, "source");
    const char *type = json_string_value(json_object_get(src, "type"));
    const char *v = json_string_value(json_object_get(src, "value"));
    if (!token_ok(json_string_value(json_object_get(c, "name"))))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "each credential needs a name (letters, "
                             "digits and !#$%%&'*+-.^_`|~, at most 128)");
    if ((type && strcmp(type, "inline") != 0) || v == NULL || !v[0] ||
        strlen(v) > SECRET_VALUE_MAX || strpbrk(v, "\r\n"))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "credential %s: source must be {\"type\": \"inline\", \"value\": "
                             "...}, one line of at most %d bytes",
                             json_string_value(json_object_get(c, "name")), SECRET_VALUE_MAX);
    return 0;
}

/* The names of the credentials auth uses, each a known one; its header names tokens. */
static int check_auth(json_t *auth, json_t *creds, struct mcp_error *err)
{
    const char *type = json_string_value(json_object_get(auth, "type"));
    json_t *hs = json_object_get(auth, "headers");
    bool custom = type && strcmp(type, "customHeaders") == 0;
    bool ok =
        type &&
        (custom || !strcmp(type, "bearer") || !strcmp(type, "basic") ||
         (!strcmp(type, "apiKey") && token_ok(json_string_value(json_object_get(auth, "name")))));
    ok = ok && (!custom || (json_array_size(hs) > 0 && json_array_size(hs) <= 16));
    for (size_t i = 0; ok && i < (custom ? json_array_size(hs) : 1); i++) {
        json_t *one = custom ? json_array_get(hs, i) : auth;
        const char *cred = json_string_value(json_object_get(one, "credential"));
        ok = json_object_get(creds, cred ? cred : "") != NULL &&
             (!custom || token_ok(json_string_value(json_object_get(one, "name"))));
    }
    if (!ok || json_object_get(auth, "substitutions") != NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "auth must be bearer, basic, apiKey (with a header name) or "
                             "customHeaders, each naming a credential of the vault; "
                             "substitutions are not supported by mcpbox");
    return 0;
}

static bool list_within(json_t *list, const char *const *allowed, size_t n)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        bool found = false;
        for (size_t k = 0; k < n; k++)
            found = found || (json_is_string(v) && !strcmp(json_string_value(v), allowed[k]));
        if (!found)
            return false;
    }
    return true;
}

static int check_match(json_t *m, struct mcp_error *err)
{
    static const char *const schemes[] = {"https", "http"};
    json_t *probe = json_pack("{s:O}", "hosts", json_object_get(m, "hosts"));
    json_object_set_new(probe, "header", json_string("X: {}"));
    json_object_set_new(probe, "from", json_pack("{s:s}", "value", "x"));
    struct mcp_error e;
    bool ok = secret_def_check("binding", probe, &e) == 0 &&
              list_within(json_object_get(m, "schemes"), schemes, 2) &&
              json_object_get(m, "methods") == NULL && json_object_get(m, "paths") == NULL;
    json_decref(probe);
    if (!ok)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "match needs hosts (names or *.suffix, at most %d) and schemes "
                             "https and/or http; mcpbox matches by host and scheme only: leave "
                             "methods and paths out",
                             SECRET_HOSTS_MAX);
    return 0;
}

static int check_binding(json_t *b, json_t *creds, struct mcp_error *err)
{
    if (!token_ok(json_string_value(json_object_get(b, "name"))))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "each binding needs a name");
    if (check_match(json_object_get(b, "match"), err) < 0)
        return -1;
    return check_auth(json_object_get(b, "auth"), creds, err);
}

/* ---- the state the API shows -------------------------------------------------------------- */

static json_t *sanitized(json_t *v)
{
    json_t *creds = json_array(), *binds = json_array();
    const char *name;
    json_t *x;
    json_object_foreach(json_object_get(v, "credentials"), name, x)
    {
        json_array_append_new(creds,
                              json_pack("{s:s, s:s, s:O}", "name", name, "sourceType", "inline",
                                        "revision", json_object_get(x, "revision")));
    }
    json_object_foreach(json_object_get(v, "bindings"), name, x)
    {
        json_t *auth = json_object_get(x, "auth");
        json_t *meta = json_pack("{s:O}", "type", json_object_get(auth, "type"));
        if (json_object_get(auth, "name"))
            json_object_set(meta, "name", json_object_get(auth, "name"));
        json_array_append_new(binds, json_pack("{s:s, s:O, s:O, s:o}", "name", name, "revision",
                                               json_object_get(x, "revision"), "match",
                                               json_object_get(x, "match"), "auth", meta));
    }
    return json_pack("{s:O, s:o, s:o}", "revision", json_object_get(v, "revision"), "credentials",
                     creds, "bindings", binds);
}

/* ---- changes ------------------------------------------------------------------------------ */

/* Adds (replace false: a new name) or replaces (replace: an existing one) each item of list
 * into into (credentials or bindings), at revision rev. */
static int put_items(json_t *into, json_t *list, bool replace, bool creds, json_int_t rev,
                     struct mcp_error *err)
{
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x)
    {
        if (creds && check_credential(x, err) < 0)
            return -1;
        const char *name = json_string_value(json_object_get(x, "name"));
        if (name == NULL || (json_object_get(into, name) != NULL) != replace)
            return mcp_error_set(err, replace ? MCP_ERR_INVALID : MCP_ERR_CONFLICT, 0, "%s %s %s",
                                 creds ? "credential" : "binding", name ? name : "(no name)",
                                 replace ? "is not in the vault: add it" : "exists: replace it");
        json_t *item = creds ? json_pack("{s:O}", "value",
                                         json_object_get(json_object_get(x, "source"), "value"))
                             : json_pack("{s:O, s:O}", "match", json_object_get(x, "match"), "auth",
                                         json_object_get(x, "auth"));
        json_object_set_new(item, "revision", json_integer(rev));
        json_object_set_new(into, name, item);
    }
    return json_object_size(into) > VAULT_MAX
               ? mcp_error_set(err, MCP_ERR_INVALID, 0, "a vault holds at most %d of each",
                               VAULT_MAX)
               : 0;
}

static void delete_items(json_t *from, json_t *names)
{
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        json_object_del(from, json_string_value(n) ? json_string_value(n) : "");
    }
}

/* Every binding still well formed against the credentials (after a change of either). */
static int check_bindings(json_t *v, struct mcp_error *err)
{
    const char *name;
    json_t *b;
    json_object_foreach(json_object_get(v, "bindings"), name, b)
    {
        json_t *probe = json_pack("{s:s, s:O, s:O}", "name", name, "match",
                                  json_object_get(b, "match"), "auth", json_object_get(b, "auth"));
        int rc = check_binding(probe, json_object_get(v, "credentials"), err);
        json_decref(probe);
        if (rc < 0)
            return mcp_error_prefix(err, "binding %s", name);
    }
    return 0;
}

static int apply_sets(json_t *v, json_t *cs, json_t *bs, json_int_t rev, struct mcp_error *err)
{
    json_t *creds = json_object_get(v, "credentials"), *binds = json_object_get(v, "bindings");
    delete_items(creds, json_object_get(cs, "delete"));
    delete_items(binds, json_object_get(bs, "delete"));
    if (put_items(creds, json_object_get(cs, "add"), false, true, rev, err) < 0 ||
        put_items(creds, json_object_get(cs, "replace"), true, true, rev, err) < 0 ||
        put_items(binds, json_object_get(bs, "add"), false, false, rev, err) < 0 ||
        put_items(binds, json_object_get(bs, "replace"), true, false, rev, err) < 0)
        return -1;
    return check_bindings(v, err);
}

static json_t *vault_create(const char *dir, const char *id, json_t *body, struct mcp_error *err)
{
    char path[4096];
    vault_path(dir, id, path);
    if (access(path, F_OK) == 0) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "sandbox %s has a credential vault already: "
                      "PATCH it, or DELETE it first",
                      id);
        return NULL;
    }
    if (!json_is_array(json_object_get(body, "credentials")) ||
        !json_is_array(json_object_get(body, "bindings"))) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "the body needs credentials and bindings arrays");
        return NULL;
    }
    cleanup_json json_t *v =
        json_pack("{s:i, s:{}, s:{}}", "revision", 1, "credentials", "bindings");
    json_t *cs = json_pack("{s:O}", "add", json_object_get(body, "credentials"));
    json_t *bs = json_pack("{s:O}", "add", json_object_get(body, "bindings"));
    int rc = apply_sets(v, cs, bs, 1, err);
    json_decref(cs);
    json_decref(bs);
    return rc == 0 && vault_save(dir, id, v, err) == 0 ? sanitized(v) : NULL;
}

static json_t *vault_patch(const char *dir, const char *id, json_t *body, struct mcp_error *err)
{
    cleanup_json json_t *v = vault_load(dir, id, err);
    if (v == NULL)
        return NULL;
    json_int_t rev = json_integer_value(json_object_get(v, "revision"));
    json_t *expected = json_object_get(body, "expectedRevision");
    if (expected && json_integer_value(expected) != rev) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "the vault is at revision %lld, not %lld: GET "
                      "it and patch again",
                      (long long)rev, (long long)json_integer_value(expected));
        return NULL;
    }
    json_object_set_new(v, "revision", json_integer(rev + 1));
    if (apply_sets(v, json_object_get(body, "credentials"), json_object_get(body, "bindings"),
                   rev + 1, err) < 0)
        return NULL;
    return vault_save(dir, id, v, err) == 0 ? sanitized(v) : NULL;
}

static json_t *vault_do(const char *dir, const char *id, const char *action, json_t *body,
                        struct mcp_error *err)
{
    if (strcmp(action, "create") == 0)
        return vault_create(dir, id, body, err);
    if (strcmp(action, "patch") == 0)
        return vault_patch(dir, id, body, err);
    cleanup_json json_t *v = vault_load(dir, id, err);
    if (v == NULL || strcmp(action, "get") == 0)
        return v ? sanitized(v) : NULL;
    local_vault_remove(dir, id);
    return json_object();
}

int local_credential_vault(struct backend *be, const char *id, const char *action, json_t *body,
                           backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct store_sandbox rec = {0};
    if (local_record_get(be->store, id, &rec, err) < 0)
        return -1;
    bool proxy = json_is_true(json_object_get(rec.record, "credential_proxy"));
    store_sandbox_release(&rec);
    if (!proxy)
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                             "sandbox %s was created without credentialProxy enabled: create "
                             "one with credentialProxy {\"enabled\": true}",
                             id);
    json_t *res = vault_do(lb->state_dir, id, action, body, err);
    if (res == NULL)
        return -1;
    backend_defer(be, cb, arg, res, NULL);
    json_decref(res);
    return 0;
}

/* ---- for the proxy ------------------------------------------------------------------------ */

static bool port_matches(json_t *match, uint16_t port)
{
    json_t *schemes = json_object_get(match, "schemes");
    if (json_array_size(schemes) == 0)
        return port == 443;
    size_t i;
    json_t *s;
    json_array_foreach(schemes, i, s)
    {
        if (port == (strcmp(json_string_value(s), "http") == 0 ? 80 : 443))
            return true;
    }
    return false;
}

static void add_def(json_t *out, const char *binding, json_t *match, const char *header,
                    json_t *cred)
{
    json_array_append_new(out, json_pack("{s:s, s:O, s:s, s:{s:O}}", "name", binding, "hosts",
                                         json_object_get(match, "hosts"), "header", header, "from",
                                         "value", json_object_get(cred, "value")));
}

/* The headers one binding adds, as definitions. */
static void binding_defs(json_t *out, const char *name, json_t *b, json_t *creds)
{
    json_t *auth = json_object_get(b, "auth"), *match = json_object_get(b, "match");
    const char *type = json_string_value(json_object_get(auth, "type"));
    const char *cname = json_string_value(json_object_get(auth, "credential"));
    json_t *cred = json_object_get(creds, cname ? cname : "");
    char header[200];
    if (type && strcmp(type, "customHeaders") != 0) {
        snprintf(header, sizeof header, "%s: %s{}",
                 !strcmp(type, "apiKey") ? json_string_value(json_object_get(auth, "name"))
                                         : "Authorization",
                 !strcmp(type, "bearer")  ? "Bearer "
                 : !strcmp(type, "basic") ? "Basic "
                                          : "");
        add_def(out, name, match, header, cred);
        return;
    }
    size_t i;
    json_t *h;
    json_array_foreach(json_object_get(auth, "headers"), i, h)
    {
        snprintf(header, sizeof header, "%s: {}", json_string_value(json_object_get(h, "name")));
        add_def(out, name, match, header,
                json_object_get(creds, json_string_value(json_object_get(h, "credential"))));
    }
}

json_t *local_vault_for_host(const char *state_dir, const char *id, const char *host, uint16_t port)
{
    json_t *out = json_array();
    struct mcp_error err;
    char path[4096];
    vault_path(state_dir, id, path);
    cleanup_json json_t *v = access(path, F_OK) == 0 ? vault_load(state_dir, id, &err) : NULL;
    const char *name;
    json_t *b;
    json_object_foreach(json_object_get(v, "bindings"), name, b)
    {
        json_t *match = json_object_get(b, "match");
        if (secret_host_matches(match, host) && port_matches(match, port))
            binding_defs(out, name, b, json_object_get(v, "credentials"));
    }
    return out;
}
