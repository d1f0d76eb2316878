/* The OpenSandbox backend's vtable and constructor. */
#define LOG_MODULE "opensandbox"

#include "backend/opensandbox/opensandbox.h"

#include <string.h>

#include "backend/opensandbox/osb.h"
#include "mcp/base/cleanup.h"
#include "mcp/base/log.h"
#include "mcp/base/xalloc.h"

#define OSB_DEFAULT_REQUEST_TIMEOUT_S 30
#define OSB_CONNECT_TIMEOUT_MS 5000
#define OSB_STREAM_IDLE_S 30        /* 10 missed pings */
#define OSB_READY_TIMEOUT_MS 120000 /* image pulls take a while */
#define OSB_STATE_POLL_MS 1000
#define OSB_PING_POLL_MS 200
#define OSB_RETRY_MAX 3
#define OSB_RETRY_BASE_MS 500
#define OSB_RETRY_CAP_MS 30000

void opensandbox_tuning_default(struct opensandbox_tuning *t, const struct mcp_config *cfg)
{
    int s = cfg && cfg->opensandbox_request_timeout_s > 0 ? cfg->opensandbox_request_timeout_s
                                                          : OSB_DEFAULT_REQUEST_TIMEOUT_S;
    *t = (struct opensandbox_tuning){
        .request_timeout_ms = (uint32_t)s * 1000, .connect_timeout_ms = OSB_CONNECT_TIMEOUT_MS,
        .stream_idle_s = OSB_STREAM_IDLE_S, .ready_timeout_ms = OSB_READY_TIMEOUT_MS,
        .state_poll_ms = OSB_STATE_POLL_MS, .ping_poll_ms = OSB_PING_POLL_MS,
        .retry_max = OSB_RETRY_MAX, .retry_base_ms = OSB_RETRY_BASE_MS,
        .retry_cap_ms = OSB_RETRY_CAP_MS,
    };
}

static bool osb_usable(struct backend *be, struct mcp_error *err)
{
    if (osb_of(be)->closing) {
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the OpenSandbox backend is shutting "
                      "down");
        return false;
    }
    return true;
}

#define GUARD(be, err)                                                                             \
    do {                                                                                           \
        if (!osb_usable((be), (err)))                                                              \
            return -1;                                                                             \
    } while (0)

static int v_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb,
                    void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    /* Host directories: the remote server cannot see this host's files. */
    if (json_array_size(spec->mounts) > 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the opensandbox backend cannot mount host directories (its "
                             "sandboxes run on another server): copy files in with write_file, "
                             "or create the sandbox on the local backend (backend: \"local\")");
    return osb_create(be, spec, cb, arg, err);
}

static int v_destroy(struct backend *be, const char *id, backend_cb *cb, void *arg,
                     struct mcp_error *err)
{
    GUARD(be, err);
    return osb_destroy(be, id, cb, arg, err);
}

static int v_list(struct backend *be, const char *owner, json_t *filter, backend_cb *cb,
                  void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_list(be, owner, filter, cb, arg, err);
}

static int v_get(struct backend *be, const char *id, backend_cb *cb, void *arg,
                 struct mcp_error *err)
{
    GUARD(be, err);
    return osb_get(be, id, cb, arg, err);
}

static int v_renew(struct backend *be, const char *id, int64_t t, backend_cb *cb, void *arg,
                   struct mcp_error *err)
{
    GUARD(be, err);
    return osb_renew(be, id, t, cb, arg, err);
}

static int v_pause(struct backend *be, const char *id, backend_cb *cb, void *arg,
                   struct mcp_error *err)
{
    GUARD(be, err);
    return osb_pause(be, id, cb, arg, err);
}

static int v_resume(struct backend *be, const char *id, backend_cb *cb, void *arg,
                    struct mcp_error *err)
{
    GUARD(be, err);
    return osb_resume(be, id, cb, arg, err);
}

static int v_exec(struct backend *be, const char *id, const struct exec_request *req,
                  const struct exec_observer *obs, struct exec_handle **out, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_exec(be, id, req, obs, out, err);
}

static int v_command_get(struct backend *be, const char *id, const char *cid, uint64_t off,
                         uint64_t limit, backend_cb *cb, void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_command_get(be, id, cid, off, limit, cb, arg, err);
}

static int v_command_kill(struct backend *be, const char *id, const char *cid, int sig,
                          backend_cb *cb, void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_command_kill(be, id, cid, sig, cb, arg, err);
}

static int v_file_read(struct backend *be, const char *id, const char *path, uint64_t off,
                       uint64_t len, backend_read_cb *cb, void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_file_read(be, id, path, off, len, cb, arg, err);
}

static int v_file_write(struct backend *be, const char *id, const char *path, const void *data,
                        size_t len, uint32_t mode, bool append, backend_cb *cb, void *arg,
                        struct mcp_error *err)
{
    GUARD(be, err);
    return osb_file_write(be, id, path, data, len, mode, append, cb, arg, err);
}

static int v_file_op(struct backend *be, const char *id, const char *op, json_t *args,
                     backend_cb *cb, void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_file_op(be, id, op, args, cb, arg, err);
}

static int v_endpoint(struct backend *be, const char *id, int port, backend_cb *cb, void *arg,
                      struct mcp_error *err)
{
    GUARD(be, err);
    return osb_endpoint_op(be, id, port, cb, arg, err);
}

static int v_diagnose(struct backend *be, const char *id, const char *what, backend_cb *cb,
                      void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_diagnose(be, id, what, cb, arg, err);
}

/* Stops everything in flight: each pending operation completes with an error. */
static void v_shutdown(struct backend *be)
{
    struct osb_backend *b = osb_of(be);
    if (b->closing)
        return;
    b->closing = true;
    osb_http_free(b->http);
    b->http = NULL;
}

static int v_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                      backend_cb *cb, void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_snapshot(be, owner, action, args, cb, arg, err);
}
static int v_metrics(struct backend *be, const char *id, backend_cb *cb, void *arg,
                     struct mcp_error *err)
{
    GUARD(be, err);
    return osb_metrics(be, id, cb, arg, err);
}
static int v_code_context(struct backend *be, const char *id, const char *action, json_t *args,
                          backend_cb *cb, void *arg, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_code_context(be, id, action, args, cb, arg, err);
}
static int v_code_run(struct backend *be, const char *id, const struct code_request *req,
                      const struct exec_observer *obs, struct mcp_error *err)
{
    GUARD(be, err);
    return osb_code_run(be, id, req, obs, err);
}

static const struct backend_ops osb_ops = {
    .name = "opensandbox", .id_prefix = OSB_ID_PREFIX, .shutdown = v_shutdown,
    .create = v_create, .destroy = v_destroy, .list = v_list, .get = v_get, .renew = v_renew,
    .pause = v_pause, .resume = v_resume, .exec = v_exec, .exec_detach = osb_exec_detach,
    .command_get = v_command_get, .command_kill = v_command_kill, .file_read = v_file_read,
    .file_write = v_file_write, .file_op = v_file_op, .endpoint = v_endpoint,
    .diagnose = v_diagnose, .snapshot = v_snapshot, .metrics = v_metrics,
    .code_context = v_code_context, .code_run = v_code_run,
};

/* OPEN_SANDBOX_DOMAIN may carry a scheme ("https://host"), which then wins over the protocol. */
static void osb_split_domain(struct osb_backend *b, const char *domain, const char *protocol)
{
    const char *p = strstr(domain, "://");
    if (p != NULL) {
        b->protocol = xstrndup(domain, (size_t)(p - domain));
        domain = p + 3;
    } else {
        b->protocol = xstrdup(protocol && protocol[0] ? protocol : "http");
    }
    b->domain = xstrdup(domain);
    size_t n = strlen(b->domain);
    while (n > 0 && b->domain[n - 1] == '/')
        b->domain[--n] = '\0';
    size_t v1 = strlen("/v1");
    bool has_v1 = n >= v1 && strcmp(b->domain + n - v1, "/v1") == 0;
    b->base_url = xasprintf("%s://%s%s", b->protocol, b->domain, has_v1 ? "" : "/v1");
}

struct backend *opensandbox_backend_new_tuned(uv_loop_t *loop, struct store *store,
                                              const struct mcp_config *cfg,
                                              const struct opensandbox_tuning *tuning,
                                              struct mcp_error *err)
{
    if (cfg == NULL || cfg->opensandbox_domain == NULL || cfg->opensandbox_domain[0] == '\0') {
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the OpenSandbox backend needs "
                      "OPEN_SANDBOX_DOMAIN (host:port of the server)");
        return NULL;
    }
    const char *proto = cfg->opensandbox_protocol;
    if (proto != NULL && proto[0] && strcmp(proto, "http") != 0 && strcmp(proto, "https") != 0) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "the OpenSandbox protocol must be http or "
                      "https, not \"%s\"",
                      proto);
        return NULL;
    }
    struct osb_backend *b = xcalloc(1, sizeof(*b));
    b->base = (struct backend){&osb_ops, loop, store};
    b->http = osb_http_new(loop, err);
    if (b->http == NULL) {
        free(b);
        return NULL;
    }
    osb_split_domain(b, cfg->opensandbox_domain, proto);
    if (cfg->opensandbox_api_key != NULL && cfg->opensandbox_api_key[0] != '\0')
        b->api_key = xstrdup(cfg->opensandbox_api_key);
    b->use_server_proxy = cfg->opensandbox_use_server_proxy;
    b->t = *tuning;
    log_info("OpenSandbox backend: %s (%s, execd %s)", b->base_url,
             b->api_key ? "with an API key" : "without an API key",
             b->use_server_proxy ? "through the server proxy" : "direct");
    return &b->base;
}

struct backend *opensandbox_backend_new(uv_loop_t *loop, struct store *store,
                                        const struct mcp_config *cfg, struct mcp_error *err)
{
    struct opensandbox_tuning t;
    opensandbox_tuning_default(&t, cfg);
    return opensandbox_backend_new_tuned(loop, store, cfg, &t, err);
}

void opensandbox_backend_free(struct backend *be)
{
    if (be == NULL)
        return;
    struct osb_backend *b = osb_of(be);
    v_shutdown(be);
    osb_cmds_free(b);
    osb_endpoints_free(b);
    if (b->api_key != NULL)
        explicit_bzero(b->api_key, strlen(b->api_key));
    free(b->api_key);
    free(b->protocol);
    free(b->domain);
    free(b->base_url);
    free(b);
}
