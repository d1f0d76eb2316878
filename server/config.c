/* Configuration from defaults, environment and the command line (see config.h). Options are a
 * table: name, argument, setter, help. */
#include "server/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/base/cleanup.h"
#include "lib/base/error.h"
#include "lib/base/xalloc.h"

#define CONFIG_OPENSANDBOX_TIMEOUT_DEFAULT_S 30
#define CONFIG_HOST_MAX 256

static void set_str(char **field, const char *value)
{
    free(*field);
    *field = value ? xstrdup(value) : NULL;
}

static char *default_state_dir(void)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");

    if (xdg && xdg[0] == '/')
        return xasprintf("%s/mcpbox", xdg);
    return xasprintf("%s/.local/state/mcpbox", home && *home ? home : "/tmp");
}

static bool env_true(const char *name)
{
    const char *v = getenv(name);

    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

void config_init(struct mcp_config *cfg)
{
    const char *v;

    memset(cfg, 0, sizeof(*cfg));
    cfg->state_dir = default_state_dir();
    cfg->log_level = LOG_LEVEL_INFO;
    if ((v = getenv("MCPBOX_LOG_LEVEL")))
        cfg->log_level_given = log_level_parse(v, &cfg->log_level) == 0;
    set_str(&cfg->token, getenv("MCPBOX_TOKEN") && *getenv("MCPBOX_TOKEN")
                             ? getenv("MCPBOX_TOKEN") : NULL);
    cfg->local_enabled = true;
    cfg->osapi_enabled = env_true("MCPBOX_OPENSANDBOX_API");
    set_str(&cfg->osapi_key, getenv("MCPBOX_OPENSANDBOX_API_KEY") &&
                                     *getenv("MCPBOX_OPENSANDBOX_API_KEY")
                                 ? getenv("MCPBOX_OPENSANDBOX_API_KEY") : NULL);
    cfg->local_pool = CONFIG_LOCAL_POOL_DEFAULT;
    cfg->apply_unreviewed = env_true("MCPBOX_APPLY_UNREVIEWED");
    approval_settings_defaults(&cfg->approval);
    if ((v = getenv("MCPBOX_ALLOW_DIRS")) && *v)
        set_str(&cfg->allow_dirs, v);
    char *end;
    long pool = (v = getenv("MCPBOX_LOCAL_POOL")) && *v ? strtol(v, &end, 10) : -1;
    if (pool >= 0 && pool <= CONFIG_LOCAL_POOL_MAX && *end == '\0') /* else the default */
        cfg->local_pool = (int)pool;
    set_str(&cfg->opensandbox_domain, getenv("OPEN_SANDBOX_DOMAIN"));
    set_str(&cfg->opensandbox_api_key, getenv("OPEN_SANDBOX_API_KEY"));
    set_str(&cfg->opensandbox_protocol, getenv("OPEN_SANDBOX_PROTOCOL"));
    if (!cfg->opensandbox_protocol)
        cfg->opensandbox_protocol = xstrdup("http");
    cfg->opensandbox_request_timeout_s = CONFIG_OPENSANDBOX_TIMEOUT_DEFAULT_S;
    if ((v = getenv("OPEN_SANDBOX_REQUEST_TIMEOUT")) && atoi(v) > 0)
        cfg->opensandbox_request_timeout_s = atoi(v);
    cfg->opensandbox_use_server_proxy = env_true("OPEN_SANDBOX_USE_SERVER_PROXY");
}

void config_release(struct mcp_config *cfg)
{
    free(cfg->state_dir);
    free(cfg->allow_dirs);
    free(cfg->http_listen);
    free(cfg->token);
    free(cfg->osapi_key);
    free(cfg->opensandbox_domain);
    free(cfg->opensandbox_api_key);
    free(cfg->opensandbox_protocol);
    approval_settings_release(&cfg->approval);
    memset(cfg, 0, sizeof(*cfg));
}

/* ---- the options table ---------------------------------------------------------------------- */

typedef int option_set_fn(struct mcp_config *cfg, const char *value, struct mcp_error *err);

struct option {
    const char *name;    /* without the leading "--" */
    const char *arg;     /* argument name for help, NULL for a flag */
    option_set_fn *set;
    const char *help;
};

static int set_http(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    char host[CONFIG_HOST_MAX];
    int port;

    if (config_split_listen(v, host, sizeof(host), &port, err) < 0)
        return -1;
    set_str(&cfg->http_listen, v);
    return 0;
}

static int add_allow_dir(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    if (!*v || strchr(v, ':'))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--allow-dir needs one directory (no ':'; "
                             "repeat the option for several)");
    char *joined = cfg->allow_dirs ? xasprintf("%s:%s", cfg->allow_dirs, v) : xstrdup(v);
    free(cfg->allow_dirs);
    cfg->allow_dirs = joined;
    return 0;
}

static int set_state_dir(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    if (!*v)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--state-dir needs a directory");
    set_str(&cfg->state_dir, v);
    return 0;
}

static int set_log_level(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    cfg->log_level_given = true;
    if (log_level_parse(v, &cfg->log_level) < 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--log-level must be error, warn, info or debug (got \"%s\")", v);
    return 0;
}

static int set_token(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    if (!*v)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--token must not be empty");
    set_str(&cfg->token, v);
    return 0;
}

static int set_osapi(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    cfg->osapi_enabled = true;
    return 0;
}

static int set_osapi_key(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    if (!*v)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--opensandbox-api-key must not be empty");
    set_str(&cfg->osapi_key, v);
    return 0;
}

static int set_no_local(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    cfg->local_enabled = false;
    return 0;
}

static int set_apply_unreviewed(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    cfg->apply_unreviewed = true;
    return 0;
}

static int set_os_domain(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    set_str(&cfg->opensandbox_domain, *v ? v : NULL);
    return 0;
}

static int set_local_pool(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > CONFIG_LOCAL_POOL_MAX)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--local-pool must be a number from 0 (off) to %d (got \"%s\")",
                             CONFIG_LOCAL_POOL_MAX, v);
    cfg->local_pool = (int)n;
    return 0;
}

int config_parse_bytes(const char *v, uint64_t *out)
{
    static const char units[] = "KMGT";
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (!isdigit((unsigned char)*v) || errno || n == 0)
        return -1;
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (*end && (u == NULL || (end[1] && strcmp(end + 1, "iB") != 0 && strcmp(end + 1, "B") != 0)))
        return -1;
    for (int shift = u ? (int)(u - units) + 1 : 0; shift > 0; shift--) {
        if (n > INT64_MAX / 1024)
            return -1;
        n *= 1024;
    }
    if (n > INT64_MAX) /* it travels as a JSON integer */
        return -1;
    *out = (uint64_t)n;
    return 0;
}

static int set_apply_max_bytes(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    if (config_parse_bytes(v, &cfg->apply_max_bytes) < 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--apply-max-bytes must be a size such as 1073741824, 512M or 4G "
                             "(got \"%s\")",
                             v);
    return 0;
}

static int set_os_protocol(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    if (strcmp(v, "http") != 0 && strcmp(v, "https") != 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--opensandbox-protocol must be http or https (got \"%s\")", v);
    set_str(&cfg->opensandbox_protocol, v);
    return 0;
}

/* ---- approvals (backend/approval_rules.h) ---- */
static int set_approve(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    return approval_settings_option(&cfg->approval, "approve", v, err);
}

static int set_approve_unasked(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    return approval_settings_option(&cfg->approval, "approve-unasked", v, err);
}

static int set_approve_egress(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    return approval_settings_option(&cfg->approval, "approve-egress-allow", v, err);
}

static int set_approve_apply_dir(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    return approval_settings_option(&cfg->approval, "approve-apply-dir", v, err);
}

static int set_approve_timeout(struct mcp_config *cfg, const char *v, struct mcp_error *err)
{
    return approval_settings_option(&cfg->approval, "approve-timeout", v, err);
}

static const struct option options[] = {
    {"http", "ADDR:PORT", set_http,
     "serve Streamable HTTP at http://ADDR:PORT/mcp instead of stdio (port 0: pick a free one)"},
    {"state-dir", "DIR", set_state_dir,
     "state directory (default $XDG_STATE_HOME/mcpbox or ~/.local/state/mcpbox)"},
    {"log-level", "LEVEL", set_log_level,
     "stderr log level: error, warn, info, debug (default: warn on stdio, info on HTTP)"},
    {"token", "TOKEN", set_token,
     "bearer token HTTP clients must send (or env MCPBOX_TOKEN); required off loopback"},
    {"opensandbox-api", NULL, set_osapi,
     "with --http, also serve OpenSandbox's lifecycle and execd APIs at /v1/sandboxes over local "
     "sandboxes (or env MCPBOX_OPENSANDBOX_API=1)"},
    {"opensandbox-api-key", "KEY", set_osapi_key,
     "the OPEN-SANDBOX-API-KEY clients must send (or env MCPBOX_OPENSANDBOX_API_KEY; default "
     "the --token; none on loopback without either)"},
    {"no-local", NULL, set_no_local, "disable the local (namespace + seccomp) backend"},
    {"allow-dir", "[USER=]DIR", add_allow_dir,
     "a host directory sandboxes may mount, for the server's user or (as root) USER only "
     "(repeatable; or env MCPBOX_ALLOW_DIRS=D1:D2; default: on stdio the directory mcpbox starts "
     "in, on HTTP none)"},
    {"apply-unreviewed", NULL, set_apply_unreviewed,
     "let apply_changes write a sandbox's changes without a review token (or env "
     "MCPBOX_APPLY_UNREVIEWED=1); default: it must name the review_changes it applies"},
    {"local-pool", "N", set_local_pool,
     "pre-created local sandboxes kept ready for fast creates (default 2, 0 = off)"},
    {"apply-max-bytes", "SIZE", set_apply_max_bytes,
     "file data one apply_changes may write to the host (default 1G; holes are free)"},
    {"opensandbox-domain", "HOST:PORT", set_os_domain,
     "enable the OpenSandbox backend at this server (or env OPEN_SANDBOX_DOMAIN)"},
    {"opensandbox-protocol", "PROTO", set_os_protocol, "http (default) or https"},
    {"approve", "KIND=MODE", set_approve,
     "KIND apply, egress, rw-mount or secret: ask the person (default), allow or refuse "
     "(repeatable)"},
    {"approve-unasked", "KIND=ACTION", set_approve_unasked,
     "what ask means when the client cannot ask: allow or refuse (default: apply and rw-mount "
     "allow, egress and secret refuse)"},
    {"approve-egress-allow", "NAME", set_approve_egress,
     "a name (or *.domain) sandboxes may reach without asking (repeatable)"},
    {"approve-apply-dir", "DIR", set_approve_apply_dir,
     "apply_changes into DIR is allowed without asking"},
    {"approve-timeout", "SECONDS", set_approve_timeout,
     "how long a question waits for the person before it counts as refused (default 120)"},
};

static const struct option *find_option(const char *name, size_t len)
{
    for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
        if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0)
            return &options[i];
    }
    return NULL;
}

void config_print_usage(FILE *out)
{
    fprintf(out, "Usage: mcpbox serve [OPTIONS]\n\nServes MCP over stdio (default) or "
                 "Streamable HTTP.\n\nOptions:\n");
    for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", options[i].name, options[i].arg ? " " : "",
                 options[i].arg ? options[i].arg : "");
        fprintf(out, "  %-28s %s\n", left, options[i].help);
    }
    fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
}

/* Applies argv[*i] (and its argument). Advances *i past what it used. */
static int apply_one(struct mcp_config *cfg, int argc, char **argv, int *i,
                     struct mcp_error *err)
{
    const char *a = argv[*i];
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a - 2) : strlen(a) - 2;
    const struct option *opt = strncmp(a, "--", 2) == 0 ? find_option(a + 2, len) : NULL;

    if (!opt)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "unknown option \"%s\" (see mcpbox serve --help)", a);
    const char *value = eq ? eq + 1 : NULL;
    if (opt->arg && !value) {
        if (*i + 1 >= argc)
            return mcp_error_set(err, MCP_ERR_INVALID, 0, "--%s needs an argument (%s)",
                                 opt->name, opt->arg);
        value = argv[++*i];
    } else if (!opt->arg && value) {
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--%s takes no argument", opt->name);
    }
    (*i)++;
    return opt->set(cfg, value ? value : "", err);
}

int config_parse_args(struct mcp_config *cfg, int argc, char **argv, struct mcp_error *err)
{
    for (int i = 1; i < argc;) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            config_print_usage(stdout);
            return 1;
        }
        if (apply_one(cfg, argc, argv, &i, err) < 0)
            return -1;
    }
    return 0;
}

/* ---- listen address --------------------------------------------------------------------------- */

int config_split_listen(const char *listen, char *host, size_t host_size, int *port,
                        struct mcp_error *err)
{
    const char *colon = strrchr(listen, ':');
    const char *h = listen;
    size_t hlen;
    char *end;

    if (!colon || colon == listen)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--http needs ADDR:PORT, e.g. 127.0.0.1:8765 (got \"%s\")", listen);
    hlen = (size_t)(colon - listen);
    if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || p < 0 || p > 65535)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--http port must be a number from 0 to 65535 (got \"%s\")",
                             colon + 1);
    if (hlen == 0 || hlen >= host_size)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--http address is empty or too long");
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
}

bool config_host_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (strcmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return memcmp(&a6, &in6addr_loopback, sizeof(a6)) == 0;
    return false;
}

int config_check(const struct mcp_config *cfg, struct mcp_error *err)
{
    char host[CONFIG_HOST_MAX];
    int port;

    if (!cfg->http_listen && cfg->osapi_enabled)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--opensandbox-api serves on the HTTP listener: add --http ADDR:PORT "
                             "(e.g. --http 127.0.0.1:8080)");
    if (!cfg->http_listen)
        return 0;
    if (config_split_listen(cfg->http_listen, host, sizeof(host), &port, err) < 0)
        return -1;
    if (!config_host_is_loopback(host) && !cfg->token)
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "refusing to serve HTTP on %s without a token: anyone who can reach "
                             "that address could run commands in your sandboxes. Pass --token "
                             "TOKEN (or set MCPBOX_TOKEN), or bind 127.0.0.1",
                             cfg->http_listen);
    return 0;
}
