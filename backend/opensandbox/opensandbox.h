/* The OpenSandbox backend: sandboxes on a remote OpenSandbox server (lifecycle API + execd),
 * driven with libcurl's multi interface on the server's libuv loop. See docs/opensandbox.md. */
#ifndef MCPBOX_OPENSANDBOX_H
#define MCPBOX_OPENSANDBOX_H

#include <stdint.h>
#include <uv.h>

#include <stdbool.h>

#include "backend/backend.h"

/* Where the OpenSandbox server is (the composition root fills it from OPEN_SANDBOX_*). Strings
 * are borrowed for the call; the backend copies them. */
struct opensandbox_options {
    const char *domain;    /* "host:port" or "https://host/prefix"; required */
    const char *api_key;   /* sent as OPEN-SANDBOX-API-KEY; NULL or "": none; never logged */
    const char *protocol;  /* "http" (NULL/"": http) or "https" */
    int request_timeout_s; /* 0: 30 s */
    bool use_server_proxy; /* reach execd through the server's proxy path */
};

/* Its ops, also for the slot of a server that has not configured it (backend_set). */
extern const struct backend_ops opensandbox_ops;

/* Timing knobs. opensandbox_backend_new() derives them from the options; tests shrink them. */
struct opensandbox_tuning {
    uint32_t request_timeout_ms; /* deadline of one API call, retries included */
    uint32_t connect_timeout_ms;
    uint32_t stream_idle_s;      /* a stream that sends nothing this long is dead (execd pings
                                    every 3 s); libcurl's low-speed limit has 1 s resolution */
    uint32_t ready_timeout_ms;   /* create/resume: until Running and execd answers /ping */
    uint32_t state_poll_ms;      /* lifecycle state polling interval while waiting */
    uint32_t ping_poll_ms;       /* execd /ping polling interval while waiting */
    uint32_t retry_max;          /* retries after the first attempt */
    uint32_t retry_base_ms;      /* backoff base: base * 2^n, +-25% jitter */
    uint32_t retry_cap_ms;
};

/* Fills t with the defaults for opts (request timeout from request_timeout_s; opts may be NULL). */
void opensandbox_tuning_default(struct opensandbox_tuning *t,
                                const struct opensandbox_options *opts);

/* NULL with err filled when opts has no domain or libcurl cannot start. store may be NULL (then
 * nothing is recorded and ownership is kept only in the remote metadata). */
struct backend *opensandbox_backend_new(uv_loop_t *loop, struct store *store,
                                        const struct opensandbox_options *opts,
                                        struct mcp_error *err);
struct backend *opensandbox_backend_new_tuned(uv_loop_t *loop, struct store *store,
                                              const struct opensandbox_options *opts,
                                              const struct opensandbox_tuning *tuning,
                                              struct mcp_error *err);
/* Aborts what is in flight (each pending callback gets an error) and releases the backend once
 * the loop has run its handles' close callbacks: run the loop once more after this. */
void opensandbox_backend_free(struct backend *be);

#endif
