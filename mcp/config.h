/* The server's configuration: command line, environment, defaults. Filled by config.c from argv
 * and the environment; read-only afterwards. */
#ifndef MCPBOX_CONFIG_H
#define MCPBOX_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "mcp/base/log.h"

struct mcp_config {
    char *state_dir;        /* owned; default $XDG_STATE_HOME/mcpbox or ~/.local/state/mcpbox */
    enum log_level log_level;
    char *http_listen;      /* owned; "127.0.0.1:8765" or NULL for stdio */
    char *token;            /* owned; bearer token for HTTP (--token or MCPBOX_TOKEN), or NULL */
    bool conformance_fixtures;

    /* Local backend. */
    bool local_enabled;     /* default true */

    /* OpenSandbox backend: enabled when opensandbox_domain is set. */
    char *opensandbox_domain;   /* OPEN_SANDBOX_DOMAIN, e.g. "localhost:8080" */
    char *opensandbox_api_key;  /* OPEN_SANDBOX_API_KEY; never logged */
    char *opensandbox_protocol; /* "http" (default) or "https" */
    int opensandbox_request_timeout_s; /* default 30 */
    bool opensandbox_use_server_proxy;
};

#endif
