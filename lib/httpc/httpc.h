/* A small asynchronous HTTP client: libcurl multi driven by uv_poll (one per socket) and one
 * uv_timer, as in curl's docs/examples/multi-uv.c. No call blocks the loop, no threads.
 *
 * Each request has a deadline covering all its attempts, a connect timeout, an optional
 * low-speed limit (streams), a response body cap, an optional streaming sink for 2xx bodies,
 * and a retry policy (backoff with jitter, Retry-After honoured). Completion is called exactly
 * once, never from inside httpc_start(). */
#ifndef MCPBOX_HTTPC_H
#define MCPBOX_HTTPC_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "lib/base/buf.h"
#include "lib/base/error.h"

struct httpc;
struct httpc_req;

#define HTTPC_HDR_VALUE_MAX 512
/* Headers of its own a caller may keep from a response (struct httpc_req_opts.keep_headers). */
#define HTTPC_KEEP_MAX 4

struct httpc_response {
    long status;        /* 0: no HTTP response (transport failure, see curl_code) */
    CURLcode curl_code; /* CURLE_OK or the transport error */
    char curl_msg[CURL_ERROR_SIZE];
    bool deadline_hit;  /* the call's own deadline ended it */
    bool body_capped;   /* the body exceeded the cap and the transfer was stopped */
    bool sink_aborted;  /* the streaming sink asked to stop */
    unsigned attempts;
    struct buf body;    /* non-2xx bodies, or 2xx bodies without a sink */
    double retry_after_s; /* -1 if absent */
    char request_id[64];
    char content_type[128];
    char content_range[128];
    /* The headers the request's keep_headers names, in its order (httpc_response_header). */
    const char *const *keep;
    char kept[HTTPC_KEEP_MAX][HTTPC_HDR_VALUE_MAX];
    int64_t content_length; /* -1 if absent */
};

/* Streaming sink for 2xx bodies: return 0 to continue, -1 to stop the transfer. */
typedef int httpc_sink_fn(void *arg, const char *data, size_t len);
/* Completion: resp is borrowed (valid during the call). */
typedef void httpc_done_fn(void *arg, struct httpc_response *resp);

enum httpc_retry { HTTPC_RETRY_NONE, HTTPC_RETRY_SAFE, HTTPC_RETRY_IDEMPOTENT };

struct sockaddr;

struct httpc_req_opts {
    const char *method;   /* "GET", "POST", ... */
    const char *url;      /* copied */
    struct curl_slist *headers; /* taken over (freed with the request) */
    const char *body;     /* copied; NULL for none */
    size_t body_len;
    /* Multipart body: called once with the request's easy handle; the mime is taken over. */
    curl_mime *(*mime_build)(void *arg, CURL *easy);
    /* Body read from a file instead (a registry push's layer, too large to copy): upload_size
     * bytes of upload_fd from offset 0, read with pread (the descriptor stays the caller's and
     * must outlive the request). Used when upload_fd_set. */
    bool upload_fd_set;
    int upload_fd;
    uint64_t upload_size;
    uint32_t deadline_ms; /* whole call, all attempts; 0 = none (streams) */
    uint32_t connect_timeout_ms;
    uint32_t low_speed_s; /* 0 = off; else fail when < 1 byte/s for this long */
    size_t body_cap;      /* cap on buffered body bytes */
    /* NONE: never retried. SAFE: retried only when the server cannot have acted (connect
     * failed, 429). IDEMPOTENT: also on 502/503/504 and any transport error. */
    enum httpc_retry retry;
    uint32_t retry_max, retry_base_ms, retry_cap_ms;
    bool follow_redirects; /* registries send blobs from elsewhere (Authorization is not sent on) */
    /* Optional: asked before each new connection (redirects included) with the address curl is
     * about to connect to; false refuses it (the transfer fails, CURLE_COULDNT_CONNECT). */
    bool (*peer_ok)(void *arg, const struct sockaddr *peer);
    /* Response headers beyond the ones above that the caller reads (httpc_response_header):
     * NULL-terminated, at most HTTPC_KEEP_MAX names, matched without case; NULL for none. The
     * array must outlive the request (callers pass a static one). */
    const char *const *keep_headers;
    httpc_sink_fn *sink;
    httpc_done_fn *done;
    void *arg;
};

/* Loads libcurl on first use (curl_loader.h); NULL with err set if it cannot. */
struct httpc *httpc_new(uv_loop_t *loop, struct mcp_error *err);
/* Cancels every request (their done gets CURLE_ABORTED_BY_CALLBACK), closes the handles and
 * frees the engine after the loop has run the close callbacks. */
void httpc_free(struct httpc *h);

/* Starts a request. Returns NULL only if h is NULL or shutting down (then nothing is called). */
struct httpc_req *httpc_start(struct httpc *h, const struct httpc_req_opts *opts);
/* Stops a request early: its done is called (later, from the loop) with CURLE_ABORTED. */
void httpc_cancel(struct httpc_req *r);
/* The response under way, as far as it has come: a sink may read its status and headers
 * (a resumed download checks it got 206 and the Content-Range it asked for). */
const struct httpc_response *httpc_req_response(const struct httpc_req *r);
/* The value of a header the request named in keep_headers, as the last attempt's response gave it
 * (cut to HTTPC_HDR_VALUE_MAX - 1 bytes); "" when absent or not kept. */
const char *httpc_response_header(const struct httpc_response *resp, const char *name);
/* Number of requests in flight (for tests). */
size_t httpc_active(const struct httpc *h);

/* True for statuses and transport errors worth retrying. */
bool httpc_retryable(enum httpc_retry retry, long status, CURLcode code);
/* Backoff before attempt n+1 (n >= 1): base * 2^(n-1) capped, +-25% jitter, at least
 * retry_after_s when that is given. */
uint32_t httpc_backoff_ms(unsigned n, uint32_t base_ms, uint32_t cap_ms, double retry_after_s);
/* Retry-After: delta seconds or an HTTP date; -1 if unparseable. */
double httpc_parse_retry_after(const char *value);

#endif
