/* The lifecycle API (/v1/sandboxes): create, get, list (state and metadata filters, pages),
 * delete, renew-expiration, pause, resume, endpoints. Sandboxes are the local backend's, made
 * and found through the backend vtable and the shared store. */
#define LOG_MODULE "osapi"
#include "osapi/osapi-internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"

#define OSAPI_MIN_TIMEOUT_S 60

static bool is_method(struct osapi_req *req, enum http_method m)
{
    return osapi_req_http(req)->method == m;
}

static void reply_bad_method(struct osapi_req *req, const char *allowed)
{
    char extra[96];
    snprintf(extra, sizeof(extra), "Allow: %s\r\n", allowed);
    osapi_reply_json(req, 405,
                     json_pack("{s:s, s:s}", "code", "SANDBOX::METHOD_NOT_ALLOWED", "message",
                               "method not allowed on this path"),
                     extra);
}

static void reply_invalid(struct osapi_req *req, const char *fmt, const char *what)
{
    osapi_reply_error(req, 400, "SANDBOX::INVALID_PARAMETER", fmt, what);
}

/* ---- create ------------------------------------------------------------------------------------ */

struct create_state {
    json_t *entrypoint;
    bool network;
};

static void create_state_free(void *p)
{
    struct create_state *cs = p;
    json_decref(cs->entrypoint);
    free(cs);
}

/* The entrypoints that only keep a container alive: a local sandbox stays up by itself. */
static bool keeps_alive_only(json_t *ep)
{
    static const char *const forms[][4] = {{"tail", "-f", "/dev/null", NULL},
                                           {"sleep", "infinity", NULL, NULL}};
    for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
        size_t n = 0;
        while (n < 4 && forms[f][n])
            n++;
        if (json_array_size(ep) != n)
            continue;
        bool same = true;
        for (size_t i = 0; i < n && same; i++) {
            const char *w = json_string_value(json_array_get(ep, i));
            same = w && !strcmp(w, forms[f][i]);
        }
        if (same)
            return true;
    }
    return false;
}

/* argv joined into one sh command line, each word single-quoted. */
static char *shell_join(json_t *argv)
{
    struct buf b;
    size_t i;
    json_t *w;
    buf_init(&b, (size_t)-1);
    json_array_foreach(argv, i, w) {
        buf_append_str(&b, i ? " '" : "exec '");
        for (const char *s = json_string_value(w); *s; s++)
            s[0] == '\'' ? buf_append_str(&b, "'\\''") : buf_append(&b, s, 1);
        buf_append_str(&b, "'");
    }
    return buf_steal(&b, NULL);
}

static void ignore_started(void *arg, const char *id) {}
static void ignore_output(void *arg, enum exec_stream s, const char *d, size_t n) {}
static void ignore_done(void *arg, json_t *r, const struct mcp_error *e) {}

/* A real entrypoint runs as a background command (its output is kept like any command's). */
static int start_entrypoint(struct osapi_req *req, const char *id, json_t *ep,
                            struct mcp_error *err)
{
    if (keeps_alive_only(ep))
        return 0;
    char *cmd = shell_join(ep);
    struct exec_request er = {.command = cmd};
    struct exec_observer obs = {ignore_started, ignore_output, ignore_done, NULL};
    struct exec_handle *h = NULL;
    int rc = req->be->ops->exec(req->be, id, &er, &obs, &h, err);
    free(cmd);
    if (rc == 0 && h)
        req->be->ops->exec_detach(h);
    return rc;
}

/* create's answers in the spec are 400, 409 and 500: a missing image or one the registry
 * refuses (image.auth) is a bad parameter, a cap is a conflict. */
static void reply_create_error(struct osapi_req *req, const struct mcp_error *err)
{
    int c = err->code;
    if (c == MCP_ERR_NOT_FOUND || c == MCP_ERR_INVALID || c == MCP_ERR_DENIED)
        osapi_reply_error(req, 400, "SANDBOX::INVALID_PARAMETER", "%s", err->msg);
    else if (c == MCP_ERR_LIMIT || c == MCP_ERR_CONFLICT)
        osapi_reply_error(req, 409, "SANDBOX::LIMIT_EXCEEDED", "%s", err->msg);
    else
        osapi_reply_mcp_error(req, err);
}

static void create_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct create_state *cs = req->state;
    const char *id = json_string_value(json_object_get(result, "sandbox_id"));
    if (err && cs->network) {
        struct mcp_error e = *err;
        snprintf(e.msg, sizeof(e.msg), "%.700s (networkPolicy absent or defaultAction allow asks "
                 "for egress; networkPolicy {\"defaultAction\":\"deny\"} makes a loopback-only "
                 "sandbox that needs none)", err->msg);
        reply_create_error(req, &e);
        return;
    }
    if (err) {
        reply_create_error(req, err);
        return;
    }
    if (!id) {
        osapi_reply_error(req, 500, "SANDBOX::UNKNOWN_ERROR", "the backend answered without an id");
        return;
    }
    struct mcp_error e;
    if (start_entrypoint(req, id, cs->entrypoint, &e) < 0) {
        osapi_reply_error(req, 500, "SANDBOX::SANDBOX_START_FAILED",
                          "sandbox %s was made but its entrypoint could not start: %s (it is "
                          "still there: DELETE it or run commands in it)",
                          id, e.msg);
        return;
    }
    json_object_set(req->api->entrypoints, id, cs->entrypoint);
    char extra[400];
    const char *host = req->conn ? http_request_header(osapi_req_http(req), "host", NULL) : NULL;
    snprintf(extra, sizeof(extra), "Location: http://%.200s/v1/sandboxes/%s\r\n",
             host ? host : "127.0.0.1", id);
    osapi_reply_json(req, 202, osapi_sandbox_json(result, cs->entrypoint), extra);
}

/* Only strings: OpenSandbox's env, metadata and extensions are maps of strings. */
static bool string_map(json_t *v)
{
    const char *k;
    json_t *x;
    if (!json_is_object(v))
        return false;
    json_object_foreach(v, k, x) if (!json_is_string(x)) return false;
    return true;
}

static const char *host_arch(void)
{
    static struct utsname u;
    if (uname(&u) < 0)
        return "";
    return !strcmp(u.machine, "x86_64") ? "amd64" : !strcmp(u.machine, "aarch64") ? "arm64"
                                                                                  : u.machine;
}

/* The fields mcpbox cannot honour: an error naming them (NULL when there are none). */
static const char *unsupported_field(json_t *body)
{
    json_t *v;
    if ((v = json_object_get(body, "volumes")) && osapi_volumes_unsupported(v))
        return osapi_volumes_unsupported(v);
    if (json_is_true(json_object_get(body, "secureAccess")))
        return "secureAccess (no gateway: the execd access token in the endpoint's headers "
               "guards each sandbox)";
    if ((v = json_object_get(body, "extensions")) && json_object_size(v) > 0)
        return "extensions (no extension is supported by mcpbox)";
    if ((v = json_object_get(body, "resourceRequests")) && json_object_size(v) > 0)
        return "resourceRequests (local sandboxes have limits only: use resourceLimits)";
    json_t *pf = json_object_get(body, "platform");
    const char *os = json_string_value(json_object_get(pf, "os"));
    const char *arch = json_string_value(json_object_get(pf, "arch"));
    if ((os && strcmp(os, "linux")) || (arch && strcmp(arch, host_arch())))
        return "platform (local sandboxes run on this host's linux and architecture only)";
    return NULL;
}

/* resourceLimits -> spec; the error names the key. */
static const char *apply_limits(json_t *limits, struct sandbox_spec *spec)
{
    const char *k;
    json_t *v;
    json_object_foreach(limits, k, v) {
        const char *s = json_string_value(v);
        uint64_t n;
        if (!strcmp(k, "cpu")) {
            if (osapi_parse_cpu(s, &spec->cpu) < 0)
                return "resourceLimits.cpu must be a CPU quantity like \"500m\" or \"2\"";
        } else if (!strcmp(k, "memory")) {
            if (osapi_parse_quantity(s, &spec->memory_bytes) < 0)
                return "resourceLimits.memory must be a quantity like \"512Mi\" or \"2Gi\"";
        } else if (!strcmp(k, "ephemeral-storage") || !strcmp(k, "disk")) {
            if (osapi_parse_quantity(s, &spec->disk_bytes) < 0)
                return "resourceLimits.ephemeral-storage must be a quantity like \"1Gi\"";
        } else if (!strcmp(k, "pids")) {
            if (osapi_parse_quantity(s, &n) < 0 || n > UINT32_MAX)
                return "resourceLimits.pids must be a number";
            spec->pids = (uint32_t)n;
        } else {
            return NULL; /* reported by the caller with the key's name */
        }
    }
    return NULL;
}

static const char *unknown_limit(json_t *limits)
{
    static const char *const known[] = {"cpu", "memory", "ephemeral-storage", "disk", "pids"};
    const char *k;
    json_t *v;
    json_object_foreach(limits, k, v) {
        bool ok = false;
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            ok |= !strcmp(k, known[i]);
        if (!ok)
            return k;
    }
    return NULL;
}

/* A string map or absent/null. */
static bool optional_string_map(json_t *v)
{
    return !v || json_is_null(v) || string_map(v);
}

/* image.auth {username, password} -> "username:password" for the registry (malloc'd, *out
 * stays NULL when absent). The error says what is wrong, never the password. */
static const char *image_auth(json_t *image, char **out)
{
    json_t *auth = json_object_get(image, "auth");
    *out = NULL;
    if (!auth || json_is_null(auth))
        return NULL;
    const char *k;
    json_t *v;
    if (!json_is_object(auth))
        return "image.auth must be an object {\"username\": ..., \"password\": ...}";
    json_object_foreach(auth, k, v) {
        if (strcmp(k, "username") != 0 && strcmp(k, "password") != 0)
            return "image.auth takes username and password only";
    }
    const char *user = json_string_value(json_object_get(auth, "username"));
    const char *pass = json_string_value(json_object_get(auth, "password"));
    if (!user || !*user || !pass || !*pass)
        return "image.auth needs both username and password as non-empty strings (for a "
               "registry token, the username your registry documents, e.g. \"oauth2accesstoken\" "
               "or \"<token>\")";
    /* Basic authentication splits at the first ':'; controls have no place in either. */
    if (strchr(user, ':') || !utf8_is_text(user, strlen(user)) || strpbrk(user, "\r\n"))
        return "image.auth.username must not contain ':' or control characters";
    if (!utf8_is_text(pass, strlen(pass)) || strpbrk(pass, "\r\n"))
        return "image.auth.password must not contain control characters";
    size_t n = strlen(user) + 1 + strlen(pass) + 1;
    *out = xmalloc(n);
    snprintf(*out, n, "%s:%s", user, pass);
    return NULL;
}

static void free_secret(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    free(s);
}

/* volumes -> spec->mounts. The list is kept in the body (under a key no request has), which
 * the handler owns on every path, so spec never outlives it. */
static const char *create_volumes(json_t *body, struct sandbox_spec *spec)
{
    json_t *mounts = NULL;
    const char *bad = osapi_volumes_mounts(json_object_get(body, "volumes"), &mounts);
    if (mounts) {
        json_object_set_new(body, " mcpbox mounts", mounts);
        spec->mounts = mounts;
    }
    return bad;
}

/* What is wrong with a CreateSandboxRequest (NULL: nothing); fills spec's limits and mounts. */
static const char *create_body_error(json_t *body, struct sandbox_spec *spec)
{
    json_t *image = json_object_get(body, "image"), *ep = json_object_get(body, "entrypoint");
    json_t *limits = json_object_get(body, "resourceLimits"), *t = json_object_get(body, "timeout");
    json_t *w;
    size_t i;
    if (!json_is_object(body))
        return "the body must be a JSON object (CreateSandboxRequest)";
    /* snapshotId (issue 36): the snapshot brings its image; entrypoint may then be left out */
    json_t *snap = json_object_get(body, "snapshotId");
    if (snap != NULL && (!json_is_string(snap) || image != NULL))
        return "snapshotId must be a string, and comes without image (the snapshot has its own)";
    if (snap == NULL && !json_is_string(json_object_get(image, "uri")))
        return "image.uri is required (\"host\" runs the host's own filesystem read-only, or a "
               "rootfs registered under the state directory's images/)";
    if ((snap == NULL || ep != NULL) && (!json_is_array(ep) || json_array_size(ep) == 0))
        return "entrypoint is required: a non-empty array of strings (e.g. [\"tail\",\"-f\","
               "\"/dev/null\"] keeps the sandbox up)";
    json_array_foreach(ep, i, w) {
        if (!json_is_string(w))
            return "entrypoint must be an array of strings";
    }
    if (limits && !string_map(limits))
        return "resourceLimits must map names to strings ({\"cpu\":\"1\",\"memory\":\"2Gi\"})";
    if (!optional_string_map(json_object_get(body, "env")) ||
        !optional_string_map(json_object_get(body, "metadata")))
        return "env and metadata must map names to strings";
    if (t && !json_is_null(t) &&
        (!json_is_integer(t) || json_integer_value(t) < OSAPI_MIN_TIMEOUT_S))
        return "timeout must be an integer number of seconds >= 60, or null for no expiry";
    /* the vault's injection (osapi_vault.c): the sandbox trusts the egress CA */
    spec->credential_proxy =
        json_is_true(json_object_get(json_object_get(body, "credentialProxy"), "enabled"));
    const char *bad = create_volumes(body, spec);
    return bad || !limits ? bad : apply_limits(limits, spec);
}

/* Approvals (issue 38): egress beyond the person's list is what their settings say; -1:
 * answered 403. */
static int create_network_approved(struct osapi_req *req, const struct sandbox_spec *spec)
{
    struct mcp_error err;
    if (osapi_approval_egress(spec->network_policy, spec->network, &err) == 0)
        return 0;
    osapi_reply_error(req, 403, "SANDBOX::EGRESS_NOT_APPROVED", "%s", err.msg);
    return -1;
}

/* networkPolicy -> spec's network and network_policy (*policy: the reference the caller drops,
 * or NULL). OpenSandbox: no networkPolicy means allow-all; deny by default means loopback only;
 * egress rules make a network policy (issue 14), whose default is deny as the sidecar's.
 * -1: answered. */
static int create_network(struct osapi_req *req, json_t *np, struct sandbox_spec *spec,
                          struct egress_policy **policy)
{
    const char *action = json_string_value(json_object_get(np, "defaultAction"));
    spec->network = !action || strcmp(action, "deny") != 0;
    if (json_array_size(json_object_get(np, "egress")) == 0)
        return create_network_approved(req, spec);
    json_t *j = json_pack("{s:s, s:O}", "default_action", action ? action : "deny", "egress",
                          json_object_get(np, "egress"));
    struct mcp_error perr;
    *policy = egress_policy_parse(j, "networkPolicy", &perr);
    json_decref(j);
    if (*policy == NULL) {
        reply_invalid(req, "%s", perr.msg);
        return -1;
    }
    spec->network = false; /* by the policy only */
    spec->network_policy = *policy;
    if (create_network_approved(req, spec) == 0)
        return 0;
    egress_policy_unref(*policy);
    *policy = NULL;
    return -1;
}

static void handle_create(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req);
    if (!body)
        return;
    struct sandbox_spec spec = {0};
    json_t *image = json_object_get(body, "image"), *ep = json_object_get(body, "entrypoint");
    json_t *limits = json_object_get(body, "resourceLimits"), *t = json_object_get(body, "timeout");
    const char *unsup = json_is_object(body) ? unsupported_field(body) : NULL, *unknown;
    const char *bad = unsup ? NULL : create_body_error(body, &spec);
    if (unsup) {
        osapi_reply_unsupported(req, "not supported by mcpbox's local sandboxes: %s", unsup);
        json_decref(body);
        return;
    }
    if (!bad && limits && (unknown = unknown_limit(limits)) != NULL) {
        char msg[200];
        snprintf(msg, sizeof(msg), "resourceLimits.%.64s (local sandboxes limit cpu, memory, "
                 "ephemeral-storage and pids only)", unknown);
        osapi_reply_unsupported(req, "not supported by mcpbox's local sandboxes: %s", msg);
        json_decref(body);
        return;
    }
    char *registry_auth = NULL;
    if (!bad)
        bad = image_auth(image, &registry_auth);
    if (bad) {
        reply_invalid(req, "%s", bad);
        json_decref(body);
        return;
    }
    struct mcp_context *ctx = osapi_context(req);
    if (!ctx) {
        free_secret(registry_auth);
        json_decref(body);
        return;
    }
    struct mcp_error berr;
    /* the default backend; a restore: the first that keeps snapshots (issue 36) */
    spec.snapshot_id = json_string_value(json_object_get(body, "snapshotId"));
    struct backend *be = spec.snapshot_id ? backend_for_snapshots(&ctx->backends, &berr)
                                          : backend_by_name(&ctx->backends, NULL, &berr);
    if (!be) {
        osapi_reply_error(req, 500, "SANDBOX::UNKNOWN_ERROR", "%s", berr.msg);
        free_secret(registry_auth);
        json_decref(body);
        return;
    }
    spec.owner = req->owner;
    spec.image = json_string_value(json_object_get(image, "uri"));
    spec.registry_auth = registry_auth; /* the backend copies what it keeps */
    spec.env = json_is_object(json_object_get(body, "env")) ? json_object_get(body, "env") : NULL;
    spec.metadata = json_is_object(json_object_get(body, "metadata"))
                        ? json_object_get(body, "metadata") : NULL;
    struct egress_policy *policy = NULL;
    if (create_network(req, json_object_get(body, "networkPolicy"), &spec, &policy) < 0) {
        free_secret(registry_auth);
        json_decref(body);
        return;
    }
    spec.timeout_seconds = json_is_integer(t) ? json_integer_value(t) : -1;
    spec.idle_timeout_seconds = -1; /* OpenSandbox has no idle timeout */
    struct create_state *cs = xcalloc(1, sizeof(*cs));
    cs->entrypoint = ep ? json_incref(ep) : json_pack("[s,s,s]", "tail", "-f", "/dev/null");
    cs->network = spec.network;
    req->state = cs;
    req->free_state = create_state_free;
    req->be = be;
    struct mcp_error err;
    if (be->ops->create(be, &spec, create_cb, req, &err) < 0)
        reply_create_error(req, &err);
    egress_policy_unref(policy);
    free_secret(registry_auth);
    json_decref(body);
}

/* ---- list ---------------------------------------------------------------------------------------- */

struct list_state {
    json_t *states;   /* OpenSandbox state names to keep (empty: all) */
    long page, page_size;
};

static void list_state_free(void *p)
{
    struct list_state *ls = p;
    json_decref(ls->states);
    free(ls);
}

static bool state_wanted(json_t *states, const char *name)
{
    size_t i;
    json_t *s;
    if (json_array_size(states) == 0)
        return true;
    json_array_foreach(states, i, s) if (!strcasecmp(json_string_value(s), name)) return true;
    return false;
}

static int by_created_desc(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "createdAt"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "createdAt"));
    return strcmp(y ? y : "", x ? x : "");
}

static void list_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct list_state *ls = req->state;
    if (err) {
        osapi_reply_mcp_error(req, err);
        return;
    }
    json_t *all = json_object_get(result, "sandboxes"), *info;
    size_t i, n = 0;
    json_t **items = xcalloc(json_array_size(all) + 1, sizeof(*items));
    json_array_foreach(all, i, info) {
        const char *id = json_string_value(json_object_get(info, "sandbox_id"));
        json_t *sb = osapi_sandbox_json(info, id ? json_object_get(req->api->entrypoints, id)
                                                 : NULL);
        const char *st = json_string_value(json_object_get(json_object_get(sb, "status"), "state"));
        if (state_wanted(ls->states, st ? st : ""))
            items[n++] = sb;
        else
            json_decref(sb);
    }
    qsort(items, n, sizeof(*items), by_created_desc);
    size_t first = (size_t)(ls->page - 1) * (size_t)ls->page_size;
    json_t *page = json_array();
    for (i = 0; i < n; i++) {
        if (i >= first && i < first + (size_t)ls->page_size)
            json_array_append(page, items[i]);
        json_decref(items[i]);
    }
    free(items);
    long pages = (long)((n + (size_t)ls->page_size - 1) / (size_t)ls->page_size);
    osapi_reply_json(req, 200,
                     json_pack("{s:o, s:{s:i, s:i, s:i, s:i, s:b}}", "items", page, "pagination",
                               "page", (int)ls->page, "pageSize", (int)ls->page_size,
                               "totalItems", (int)n, "totalPages", (int)pages, "hasNextPage",
                               ls->page < pages),
                     NULL);
}

/* "k=v&k2=v2" (the metadata parameter's value) -> {k: v}; NULL if a pair has no '='. */
static json_t *parse_metadata_filter(const char *s)
{
    json_t *out = json_object();
    while (*s) {
        const char *amp = strchr(s, '&');
        size_t len = amp ? (size_t)(amp - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (!eq || eq == s) {
            json_decref(out);
            return NULL;
        }
        char *k = osapi_url_decode(s, (size_t)(eq - s), true);
        char *v = osapi_url_decode(eq + 1, len - (size_t)(eq - s) - 1, true);
        json_object_set_new(out, k, json_string(v));
        free(k);
        free(v);
        s = amp ? amp + 1 : s + len;
    }
    return out;
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

static void handle_list(struct osapi_req *req)
{
    long page, size;
    if (!page_param(req, "page", 1, 1000000, &page) ||
        !page_param(req, "pageSize", 20, OSAPI_MAX_PAGE_SIZE, &size))
        return;
    char *meta = osapi_query_get(osapi_req_query(req), "metadata");
    json_t *filter = json_object();
    if (meta) {
        json_t *m = parse_metadata_filter(meta);
        free(meta);
        if (!m) {
            json_decref(filter);
            osapi_reply_error(req, 400, "INVALID_METADATA_FORMAT",
                              "metadata must be k=v pairs joined by & (URL-encode the whole "
                              "value once more: metadata=project%%3DApollo%%26team%%3Dml)");
            return;
        }
        json_object_set_new(filter, "metadata", m);
    }
    struct mcp_context *ctx = osapi_context(req);
    if (!ctx) {
        json_decref(filter);
        return;
    }
    struct mcp_error err;
    struct backend *be = backend_by_name(&ctx->backends, NULL, &err); /* the default backend */
    struct list_state *ls = xcalloc(1, sizeof(*ls));
    ls->states = osapi_query_all(osapi_req_query(req), "state");
    ls->page = page;
    ls->page_size = size;
    req->state = ls;
    req->free_state = list_state_free;
    if (!be) {
        json_t *none = json_pack("{s:[]}", "sandboxes");
        list_cb(req, none, NULL);
        json_decref(none);
    } else if (be->ops->list(be, req->owner, filter, list_cb, req, &err) < 0) {
        osapi_reply_mcp_error(req, &err);
    }
    json_decref(filter);
}

/* ---- one sandbox ----------------------------------------------------------------------------------- */

static void get_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (err)
        osapi_reply_mcp_error(req, err);
    else
        osapi_reply_json(req, 200,
                         osapi_sandbox_json(result, json_object_get(req->api->entrypoints,
                                                                    req->sandbox_id)),
                         NULL);
}

static void empty_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    int status = (int)(intptr_t)req->state;
    req->state = NULL;
    if (err)
        osapi_reply_mcp_error(req, err);
    else
        osapi_reply_raw(req, status, NULL, NULL, "", 0);
}

static void delete_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (!err)
        json_object_del(req->api->entrypoints, req->sandbox_id);
    empty_cb(arg, result, err);
}

static void renew_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    json_t *exp = json_object_get(result, "expires_at");
    if (err)
        osapi_reply_mcp_error(req, err);
    else if (!json_is_string(exp))
        osapi_reply_error(req, 500, "SANDBOX::UNKNOWN_ERROR", "the backend set no expiry");
    else
        osapi_reply_json(req, 200, json_pack("{s:O}", "expiresAt", exp), NULL);
}

static void handle_renew(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req);
    if (!body)
        return;
    const char *at = json_string_value(json_object_get(body, "expiresAt"));
    int64_t when;
    if (!at || parse_rfc3339_ms(at, &when) < 0) {
        json_decref(body);
        osapi_reply_error(req, 400, "SANDBOX::INVALID_PARAMETER",
                          "expiresAt is required: an RFC 3339 time such as "
                          "2030-01-02T03:04:05Z");
        return;
    }
    json_decref(body);
    int64_t ms = when - now_wall_ms();
    if (ms <= 0) {
        osapi_reply_error(req, 400, "SANDBOX::INVALID_EXPIRATION",
                          "New expiration time must be in the future.");
        return;
    }
    int64_t secs = (ms + 999) / 1000;
    struct mcp_error err;
    if (req->be->ops->renew(req->be, req->sandbox_id, secs > MAX_DURATION_S ? MAX_DURATION_S : secs,
                            renew_cb, req, &err) < 0)
        osapi_reply_mcp_error(req, &err);
}

/* ---- endpoints ----------------------------------------------------------------------------------- */

static void forward_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    const char *url = json_string_value(json_object_get(result, "url"));
    if (err) {
        osapi_reply_mcp_error(req, err);
        return;
    }
    if (!url) {
        osapi_reply_error(req, 500, "SANDBOX::UNKNOWN_ERROR", "the backend gave no address");
        return;
    }
    const char *scheme = strstr(url, "://");
    json_t *headers = json_object_get(result, "headers");
    osapi_reply_json(req, 200,
                     json_pack("{s:s, s:o}", "endpoint", scheme ? scheme + 3 : url, "headers",
                               json_is_object(headers) ? json_incref(headers) : json_object()),
                     NULL);
}

static void handle_endpoint(struct osapi_req *req, const char *port_s)
{
    char *end;
    long port = strtol(port_s, &end, 10);
    if (end == port_s || *end || port < 1 || port > 65535) {
        osapi_reply_error(req, 400, "SANDBOX::INVALID_PORT", "port must be 1..65535 (got %.32s)",
                          port_s);
        return;
    }
    const char *q = osapi_req_query(req);
    char *expires = osapi_query_get(q, "expires"), *proxy = osapi_query_get(q, "use_server_proxy");
    bool use_proxy = proxy && (!strcmp(proxy, "true") || !strcmp(proxy, "1"));
    free(proxy);
    if (expires) {
        free(expires);
        osapi_reply_unsupported(req, "expires (signed routes need OpenSandbox's gateway; mcpbox "
                                "guards execd with the access token in the endpoint's headers)");
        return;
    }
    if (port == OSAPI_EXECD_PORT || port == OSAPI_EGRESS_PORT || use_proxy) {
        /* execd is this server: the server-proxy path, whatever use_server_proxy says; any
         * other port is relayed by this server too when asked (osapi_proxy.c). */
        const char *host = http_request_header(osapi_req_http(req), "host", NULL);
        char ep[512], token[33];
        snprintf(ep, sizeof(ep), "%s/sandboxes/%s/proxy/%ld", host ? host : "127.0.0.1",
                 req->sandbox_id, port);
        json_t *headers = json_object();
        /* the egress sidecar's /policy and the other ports' proxy are guarded by the same
         * token (osapi_route.c) */
        osapi_execd_token(req->api, req->sandbox_id, token);
        json_object_set_new(headers, "X-EXECD-ACCESS-TOKEN", json_string(token));
        osapi_reply_json(req, 200, json_pack("{s:s, s:o}", "endpoint", ep, "headers", headers),
                         NULL);
        return;
    }
    struct mcp_error err;
    if (req->be->ops->endpoint(req->be, req->sandbox_id, (int)port, forward_cb, req, &err) < 0)
        osapi_reply_mcp_error(req, &err);
}

/* ---- diagnostics ----------------------------------------------------------------------------------- */

struct diag_state {
    char kind[16];
    char *scope; /* NULL: the legacy text view */
};

static void diag_state_free(void *p)
{
    struct diag_state *d = p;
    free(d->scope);
    free(d);
}

/* The backend's diagnosis (JSON) as text: the descriptor's inline content (scope given, the
 * spec's JSON API) or the legacy text/plain view. */
static void diag_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct diag_state *d = req->state;
    if (err) {
        osapi_reply_mcp_error(req, err);
        return;
    }
    char *text = json_dumps(result, JSON_INDENT(2));
    if (!d->scope) {
        osapi_reply_raw(req, 200, "text/plain; charset=utf-8", "Deprecation: true\r\n", text,
                        strlen(text));
    } else {
        osapi_reply_json(req, 200,
                         json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b}", "sandboxId",
                                   req->sandbox_id, "kind", d->kind, "scope", d->scope,
                                   "delivery", "inline", "contentType", "application/json",
                                   "content", text, "truncated", 0),
                         NULL);
    }
    free(text);
}

/* diagnostics/logs|events (?scope=: the spec's descriptor), and the legacy inspect and summary
 * views, from the backend's diagnose op. */
static void handle_diagnostics(struct osapi_req *req, const char *what)
{
    static const char *const kinds[] = {"logs", "events", "inspect", "summary"};
    const char *kind = NULL;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (!strcmp(what, kinds[i]))
            kind = kinds[i];
    if (!kind) {
        osapi_reply_error(req, 404, "SANDBOX::NOT_FOUND",
                          "diagnostics are logs, events, inspect and summary");
        return;
    }
    struct diag_state *d = xcalloc(1, sizeof(*d));
    snprintf(d->kind, sizeof(d->kind), "%s", kind);
    d->scope = osapi_query_get(osapi_req_query(req), "scope");
    req->state = d;
    req->free_state = diag_state_free;
    struct mcp_error err;
    if (req->be->ops->diagnose(req->be, req->sandbox_id, kind, diag_cb, req, &err) < 0)
        osapi_reply_mcp_error(req, &err);
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

/* Answers 405 and returns false unless the request's method is m. */
static bool method_ok(struct osapi_req *req, enum http_method m, const char *allowed)
{
    if (is_method(req, m))
        return true;
    reply_bad_method(req, allowed);
    return false;
}

static void call_done(struct osapi_req *req, int rc, const struct mcp_error *err)
{
    if (rc < 0) {
        req->state = NULL;
        osapi_reply_mcp_error(req, err);
    }
}

/* GET and DELETE on /v1/sandboxes/{id}. */
static void sandbox_self(struct osapi_req *req, const char *id)
{
    struct backend *be = req->be;
    struct mcp_error err;
    if (is_method(req, HTTP_GET)) {
        call_done(req, be->ops->get(be, id, get_cb, req, &err), &err);
    } else if (is_method(req, HTTP_DELETE)) {
        req->state = (void *)(intptr_t)204;
        call_done(req, be->ops->destroy(be, id, delete_cb, req, &err), &err);
    } else {
        reply_bad_method(req, "GET, DELETE");
    }
}

static void pause_resume(struct osapi_req *req, const char *id, bool pause, const char *state)
{
    struct backend *be = req->be;
    struct mcp_error err;
    if (!pause && strcmp(state, "paused") != 0) {
        osapi_reply_error(req, 409, "SANDBOX::SANDBOX_NOT_PAUSED", "sandbox %s is %s, not Paused",
                          id, osapi_state_name(state));
        return;
    }
    req->state = (void *)(intptr_t)202;
    call_done(req, pause ? be->ops->pause(be, id, empty_cb, req, &err)
                         : be->ops->resume(be, id, empty_cb, req, &err), &err);
}

static void sandbox_op(struct osapi_req *req, const char *id, const char *op)
{
    const char *state = NULL;
    bool running =
        !strcmp(op, "pause") || !strncmp(op, "endpoints/", 10) || !strcmp(op, "snapshots");
    if (osapi_bind(req, id, running, &state) < 0)
        return;
    if (!*op)
        sandbox_self(req, id);
    else if (!strncmp(op, "endpoints/", 10)) {
        if (method_ok(req, HTTP_GET, "GET"))
            handle_endpoint(req, op + 10);
    } else if (!strcmp(op, "pause") || !strcmp(op, "resume")) {
        if (method_ok(req, HTTP_POST, "POST"))
            pause_resume(req, id, op[0] == 'p', state);
    } else if (!strcmp(op, "renew-expiration")) {
        if (method_ok(req, HTTP_POST, "POST"))
            handle_renew(req);
    } else if (!strcmp(op, "metadata")) {
        osapi_reply_unsupported(req, "changing metadata after create (the local backend keeps "
                                "the metadata given at create)");
    } else if (!strcmp(op, "snapshots")) {
        if (method_ok(req, HTTP_POST, "POST"))
            osapi_snapshot_create(req);
    } else if (!strncmp(op, "diagnostics/", 12)) {
        if (method_ok(req, HTTP_GET, "GET"))
            handle_diagnostics(req, op + 12);
    } else {
        osapi_reply_error(req, 404, "SANDBOX::NOT_FOUND", "no such path: /v1/sandboxes/%s/%s",
                          id, op);
    }
}

void osapi_lifecycle(struct osapi_req *req, const char *rest)
{
    if (!*rest || !strcmp(rest, "/")) {
        if (is_method(req, HTTP_POST))
            handle_create(req);
        else if (is_method(req, HTTP_GET))
            handle_list(req);
        else
            reply_bad_method(req, "GET, POST");
        return;
    }
    rest++; /* past '/' */
    char id[128];
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n == 0 || n >= sizeof(id)) {
        osapi_reply_error(req, 404, "SANDBOX::NOT_FOUND", "no such sandbox path");
        return;
    }
    memcpy(id, rest, n);
    id[n] = '\0';
    sandbox_op(req, id, slash ? slash + 1 : "");
}
