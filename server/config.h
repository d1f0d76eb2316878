/* The server's configuration: command line, environment, defaults. Filled by config.c from argv
 * and the environment; read-only afterwards. */
#ifndef MCPBOX_CONFIG_H
#define MCPBOX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/approval_rules.h"
#include "lib/base/log.h"

#define CONFIG_LOCAL_POOL_DEFAULT 2
#define CONFIG_LOCAL_POOL_MAX 64

struct mcp_config {
    char *state_dir;        /* owned; default $XDG_STATE_HOME/mcpbox or ~/.local/state/mcpbox */
    enum log_level log_level;
    bool log_level_given; /* by --log-level or MCPBOX_LOG_LEVEL (else stdio serves at warn) */
    char *http_listen;      /* owned; "127.0.0.1:8765" or NULL for stdio */
    char *token;            /* owned; bearer token for HTTP (--token or MCPBOX_TOKEN), or NULL */
    /* OpenSandbox's lifecycle and execd APIs beside MCP on the --http listener (osapi/):
     * --opensandbox-api or MCPBOX_OPENSANDBOX_API=1; the API key clients send
     * (--opensandbox-api-key or MCPBOX_OPENSANDBOX_API_KEY; default: the --token). */
    bool osapi_enabled;
    char *osapi_key; /* owned; never logged */

    /* Local backend. */
    bool local_enabled;     /* default true */
    /* Pre-created sandboxes for the default spec (--local-pool N, env MCPBOX_LOCAL_POOL);
     * 0 = off. A zeroed struct (tests) has the pool off. */
    int local_pool;
    /* Host directories sandboxes may mount, colon-separated (--allow-dir, repeatable, and
     * MCPBOX_ALLOW_DIRS together); NULL: the default (stdio: the directory mcpbox started in;
     * HTTP: none). */
    char *allow_dirs;
    /* apply_changes without a review token (--apply-unreviewed or MCPBOX_APPLY_UNREVIEWED=1):
     * the person opts out of tying each apply to what a review showed. */
    bool apply_unreviewed;
    /* Data bytes one apply_changes may write to the host (--apply-max-bytes); 0: the
     * backend's default (1 GiB). */
    uint64_t apply_max_bytes;

    /* OpenSandbox backend: enabled when opensandbox_domain is set. */
    char *opensandbox_domain;   /* OPEN_SANDBOX_DOMAIN, e.g. "localhost:8080" */
    char *opensandbox_api_key;  /* OPEN_SANDBOX_API_KEY; never logged */
    char *opensandbox_protocol; /* "http" (default) or "https" */
    int opensandbox_request_timeout_s; /* default 30 */
    bool opensandbox_use_server_proxy;

    /* Approvals (issue 38): the person's --approve* settings, for mcp/approval.c and osapi/. */
    struct approval_settings approval;
};

struct mcp_error;

/* Defaults, then the environment (MCPBOX_TOKEN, MCPBOX_LOG_LEVEL, MCPBOX_LOCAL_POOL, XDG_STATE_HOME, HOME,
 * OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY, OPEN_SANDBOX_PROTOCOL,
 * OPEN_SANDBOX_REQUEST_TIMEOUT, OPEN_SANDBOX_USE_SERVER_PROXY). Release with config_release. */
void config_init(struct mcp_config *cfg);
void config_release(struct mcp_config *cfg);
/* Applies `serve` options (argv[0] is the subcommand name). Returns 0, 1 when --help was
 * printed (the caller exits 0), or -1 with err (a message naming the option and the problem). */
int config_parse_args(struct mcp_config *cfg, int argc, char **argv, struct mcp_error *err);
/* Cross-option checks: a non-loopback --http address needs a token. */
int config_check(const struct mcp_config *cfg, struct mcp_error *err);
/* True for 127.0.0.0/8, ::1 and "localhost" (host part of an --http address). */
bool config_host_is_loopback(const char *host);
/* Splits "HOST:PORT" / "[V6]:PORT"; host gets at most host_size-1 bytes. */
int config_split_listen(const char *listen, char *host, size_t host_size, int *port,
                        struct mcp_error *err);
/* A byte count as a person writes it: digits with an optional K, M, G or T (KiB, MiB, ...);
 * 0 and sizes beyond INT64_MAX are refused. Returns 0 or -1. */
int config_parse_bytes(const char *v, uint64_t *out);
/* The options table as help text. */
void config_print_usage(FILE *out);

#endif
