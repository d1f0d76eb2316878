/* The OpenSandbox backend's vtable and constructor. */
#define LOG_MODULE "opensandbox"

#include "backend/opensandbox/opensandbox.h"

#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

#define OSB_DEFAULT_REQUEST_TIMEOUT_S 30
#define OSB_CONNECT_TIMEOUT_MS 5000
#define OSB_STREAM_IDLE_S 30        /* 10 missed pings */
#define OSB_READY_TIMEOUT_MS 120000 /* image pulls take a while */
#define OSB_STATE_POLL_MS 1000
#define OSB_PING_POLL_MS 200
#define OSB_RETRY_MAX 3
#define OSB_RETRY_BASE_MS 500
#define OSB_RETRY_CAP_MS 30000

void opensandbox_tuning_default(struct opensandbox_tuning *t,
                                const struct opensandbox_options *opts)
{
    int s = opts && opts->request_timeout_s > 0 ? opts->request_timeout_s
                                                : OSB_DEFAULT_REQUEST_TIMEOUT_S;
    *t = (struct opensandbox_tuning){
        .request_timeout_ms = (uint32_t)s * 1000, .connect_timeout_ms = OSB_CONNECT_TIMEOUT_MS,
        .stream_idle_s = OSB_STREAM_IDLE_S, .ready_timeout_ms = OSB_READY_TIMEOUT_MS,
        .state_poll_ms = OSB_STATE_POLL_MS, .ping_poll_ms = OSB_PING_POLL_MS,
        .retry_max = OSB_RETRY_MAX, .retry_base_ms = OSB_RETRY_BASE_MS,
        .retry_cap_ms = OSB_RETRY_CAP_MS,
    };
}

/* Stops everything in flight: each pending operation completes with an error. */
static void osb_shutdown(struct backend *be)
{
    struct osb_backend *b = osb_of(be);
    if (b->closing)
        return;
    b->closing = true;
    httpc_free(b->http);
    b->http = NULL;
}

/* No guard per operation: after shutdown every request fails to start ("shutting down"), and
 * the few answers kept in memory (a finished command's output) are still true. */
const struct backend_ops opensandbox_ops = {
    .name = "opensandbox",
    .id_prefix = OSB_ID_PREFIX,
    .enable_hint = "set OPEN_SANDBOX_DOMAIN (and OPEN_SANDBOX_API_KEY) and restart mcpbox",
    .shutdown = osb_shutdown,
    .free = opensandbox_backend_free,
    .create = osb_create,
    .destroy = osb_destroy,
    .list = osb_list,
    .get = osb_get,
    .renew = osb_renew,
    .pause = osb_pause,
    .resume = osb_resume,
    .exec = osb_exec,
    .exec_detach = osb_exec_detach,
    .command_get = osb_command_get,
    .command_kill = osb_command_kill,
    .file_read = osb_file_read,
    .file_write = osb_file_write,
    .file_op = osb_file_op,
    .endpoint = osb_endpoint_op,
    .diagnose = osb_diagnose,
    .snapshot = osb_snapshot,
    .metrics = osb_metrics,
    .code_context = osb_code_context,
    .code_run = osb_code_run,
    .host_check = backend_def_host_check,
    .workspace = backend_def_workspace,
    .set_network_policy = osb_set_network_policy,
    .command_input = backend_def_command_input,
    .command_resize = backend_def_command_resize,
    .command_attach = backend_def_command_attach,
    .command_find = backend_def_command_find,
    .session_run = osb_session_run,
    .volume = backend_def_volume,
    .bind_secrets = osb_bind_secrets,
    .credential_vault = backend_def_credential_vault,
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
                                              const struct opensandbox_options *opts,
                                              const struct opensandbox_tuning *tuning,
                                              struct mcp_error *err)
{
    if (opts == NULL || opts->domain == NULL || opts->domain[0] == '\0') {
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the OpenSandbox backend needs "
                      "OPEN_SANDBOX_DOMAIN (host:port of the server)");
        return NULL;
    }
    const char *proto = opts->protocol;
    if (proto != NULL && proto[0] && strcmp(proto, "http") != 0 && strcmp(proto, "https") != 0) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "the OpenSandbox protocol must be http or "
                      "https, not \"%s\"",
                      proto);
        return NULL;
    }
    struct osb_backend *b = xcalloc(1, sizeof(*b));
    b->base = (struct backend){&opensandbox_ops, loop, store};
    b->http = httpc_new(loop, err);
    if (b->http == NULL) {
        free(b);
        return NULL;
    }
    osb_split_domain(b, opts->domain, proto);
    if (opts->api_key != NULL && opts->api_key[0] != '\0')
        b->api_key = xstrdup(opts->api_key);
    b->use_server_proxy = opts->use_server_proxy;
    b->t = *tuning;
    log_info("OpenSandbox backend: %s (%s, execd %s)", b->base_url,
             b->api_key ? "with an API key" : "without an API key",
             b->use_server_proxy ? "through the server proxy" : "direct");
    return &b->base;
}

struct backend *opensandbox_backend_new(uv_loop_t *loop, struct store *store,
                                        const struct opensandbox_options *opts,
                                        struct mcp_error *err)
{
    struct opensandbox_tuning t;
    opensandbox_tuning_default(&t, opts);
    return opensandbox_backend_new_tuned(loop, store, opts, &t, err);
}

void opensandbox_backend_free(struct backend *be)
{
    if (be == NULL)
        return;
    struct osb_backend *b = osb_of(be);
    osb_shutdown(be);
    osb_cmds_free(b);
    osb_endpoints_free(b);
    json_decref(b->sessions);
    json_decref(b->no_sessions);
    if (b->api_key != NULL)
        explicit_bzero(b->api_key, strlen(b->api_key));
    free(b->api_key);
    free(b->protocol);
    free(b->domain);
    free(b->base_url);
    free(b);
}
