/* libcurl multi on the libuv loop. The pattern is curl's docs/examples/multi-uv.c: curl tells us
 * which sockets to watch (CURLMOPT_SOCKETFUNCTION -> one uv_poll each) and when to wake it up
 * (CURLMOPT_TIMERFUNCTION -> one uv_timer); we call curl_multi_socket_action from those
 * callbacks and collect finished transfers with curl_multi_info_read. */
#define LOG_MODULE "osb-http"

#include "lib/httpc/httpc.h"

#include "lib/httpc/curl_loader.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define OSB_HTTP_USER_AGENT "mcpbox/" MCPBOX_VERSION
#define OSB_JITTER_PERCENT 25

struct httpc {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    struct httpc_req *reqs; /* doubly linked list of live requests */
    size_t active;
    int open_handles;     /* uv handles not yet closed (timer, polls, request timers) */
    bool closing;
    int in_curl;          /* > 0 while inside httpc_curl.multi_socket_action(callbacks run there) */
};

struct osb_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    struct httpc *h;
};

struct httpc_req {
    struct httpc *h;
    struct httpc_req *prev, *next;
    CURL *easy;
    struct curl_slist *headers;
    curl_mime *mime;
    char *url;
    char *body;
    struct httpc_req_opts opts; /* url/body/headers point at the copies above */
    uint64_t started_ms;
    uv_timer_t timer;         /* retry backoff and deferred cancellation */
    struct httpc_response resp;
    char errbuf[CURL_ERROR_SIZE];
    bool in_multi, cancelled, delivered;
    bool peer_refused;       /* peer_ok said no: not retried, the answer would be the same */
    bool starting, deferred; /* see req_attempt */
    CURLcode deferred_rc;
    uint64_t upload_off; /* the next byte of an upload from a descriptor */
};

static void http_handle_closed(uv_handle_t *handle);
static void http_check_done(struct httpc *h);
struct httpc_req;
static void req_attempt_done(struct httpc_req *r, CURLcode rc);

/* ---- engine lifetime ------------------------------------------------------------------------ */

static void http_maybe_release(struct httpc *h)
{
    if (h->closing && h->open_handles == 0)
        free(h);
}

static void http_handle_closed(uv_handle_t *handle)
{
    struct httpc *h = handle->data;
    h->open_handles--;
    http_maybe_release(h);
}

static void sock_closed(uv_handle_t *handle)
{
    struct osb_sock *s = container_of(handle, struct osb_sock, poll);
    struct httpc *h = s->h;
    free(s);
    h->open_handles--;
    http_maybe_release(h);
}

/* ---- curl -> uv ------------------------------------------------------------------------------ */

static void http_socket_action(struct httpc *h, curl_socket_t fd, int flags)
{
    int running = 0;
    h->in_curl++;
    httpc_curl.multi_socket_action(h->multi, fd, flags, &running);
    h->in_curl--;
    http_check_done(h);
}

static void on_poll(uv_poll_t *poll, int status, int events)
{
    struct osb_sock *s = container_of(poll, struct osb_sock, poll);
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    http_socket_action(s->h, s->fd, flags);
}

static void on_timer(uv_timer_t *timer)
{
    http_socket_action(timer->data, CURL_SOCKET_TIMEOUT, 0);
}

static int curl_socket_cb(CURL *easy, curl_socket_t fd, int action, void *userp, void *socketp)
{
    struct httpc *h = userp;
    struct osb_sock *s = socketp;
    if (action == CURL_POLL_REMOVE) {
        if (s != NULL) {
            uv_poll_stop(&s->poll);
            uv_close((uv_handle_t *)&s->poll, sock_closed);
            httpc_curl.multi_assign(h->multi, fd, NULL);
        }
        return 0;
    }
    if (s == NULL) {
        s = xcalloc(1, sizeof(*s));
        s->fd = fd;
        s->h = h;
        if (uv_poll_init_socket(h->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        h->open_handles++;
        httpc_curl.multi_assign(h->multi, fd, s);
    }
    int events = 0;
    if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    uv_poll_start(&s->poll, events, on_poll);
    return 0;
}

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct httpc *h = userp;
    if (h->closing)
        return 0;
    if (timeout_ms < 0) {
        uv_timer_stop(&h->timer);
        return 0;
    }
    /* 0 means "now": a 0 ms uv timer fires on the next loop iteration, so curl is never
     * re-entered from inside its own call (multi-uv.c rounds up to 1 ms, which costs a
     * millisecond per request). */
    uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

struct httpc *httpc_new(uv_loop_t *loop, struct mcp_error *err)
{
    if (httpc_curl_load(err) != 0) /* the first OpenSandbox backend loads libcurl */
        return NULL;
    struct httpc *h = xcalloc(1, sizeof(*h));
    h->loop = loop;
    h->multi = httpc_curl.multi_init();
    if (h->multi == NULL) {
        free(h);
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "libcurl could not start "
                      "(curl_multi_init failed)");
        return NULL;
    }
    httpc_curl.multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
    httpc_curl.multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    httpc_curl.multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
    httpc_curl.multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    h->open_handles = 1;
    return h;
}

size_t httpc_active(const struct httpc *h)
{
    return h->active;
}

const struct httpc_response *httpc_req_response(const struct httpc_req *r)
{
    return &r->resp;
}

/* ---- headers and body ------------------------------------------------------------------------ */

static void copy_value(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static void response_reset_headers(struct httpc_response *resp)
{
    resp->retry_after_s = -1;
    resp->content_length = -1;
    resp->request_id[0] = resp->content_type[0] = resp->content_range[0] = '\0';
    for (size_t i = 0; i < HTTPC_KEEP_MAX; i++)
        resp->kept[i][0] = '\0';
}

/* The slot of a header the caller keeps, or -1. */
static int kept_slot(const struct httpc_response *resp, const char *name, size_t nlen)
{
    for (int i = 0; resp->keep != NULL && i < HTTPC_KEEP_MAX && resp->keep[i] != NULL; i++) {
        if (strlen(resp->keep[i]) == nlen && strncasecmp(resp->keep[i], name, nlen) == 0)
            return i;
    }
    return -1;
}

const char *httpc_response_header(const struct httpc_response *resp, const char *name)
{
    int i = kept_slot(resp, name, strlen(name));
    return i < 0 ? "" : resp->kept[i];
}

static void response_header(struct httpc_response *resp, const char *name, size_t nlen,
                            const char *v, size_t vlen)
{
    char tmp[64];
#define IS(s) (nlen == sizeof(s) - 1 && strncasecmp(name, s, nlen) == 0)
    if (IS("retry-after")) {
        copy_value(tmp, sizeof(tmp), v, vlen);
        resp->retry_after_s = httpc_parse_retry_after(tmp);
    } else if (IS("x-request-id")) {
        copy_value(resp->request_id, sizeof(resp->request_id), v, vlen);
    } else if (IS("content-type")) {
        copy_value(resp->content_type, sizeof(resp->content_type), v, vlen);
    } else if (IS("content-range")) {
        copy_value(resp->content_range, sizeof(resp->content_range), v, vlen);
    } else if (IS("content-length")) {
        copy_value(tmp, sizeof(tmp), v, vlen);
        resp->content_length = strtoll(tmp, NULL, 10);
    } else if (kept_slot(resp, name, nlen) >= 0) {
        copy_value(resp->kept[kept_slot(resp, name, nlen)], HTTPC_HDR_VALUE_MAX, v, vlen);
    }
#undef IS
}

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
    struct httpc_req *r = userdata;
    size_t len = size * n;
    if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        response_reset_headers(&r->resp); /* a new response (after 100 Continue, ...) */
        return len;
    }
    const char *colon = memchr(data, ':', len);
    if (colon == NULL)
        return len;
    const char *v = colon + 1, *end = data + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    response_header(&r->resp, data, (size_t)(colon - data), v, (size_t)(end - v));
    return len;
}

static size_t on_write(char *data, size_t size, size_t n, void *userdata)
{
    struct httpc_req *r = userdata;
    size_t len = size * n;
    if (r->cancelled)
        return 0;
    long code = 0;
    httpc_curl.easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    if (r->opts.sink != NULL && code >= 200 && code < 300) {
        r->delivered = true;
        r->resp.status = code; /* for a sink that asks (httpc_req_response) */
        if (r->opts.sink(r->opts.arg, data, len) != 0) {
            r->resp.sink_aborted = true;
            return 0;
        }
        return len;
    }
    if (buf_append(&r->resp.body, data, len) != 0) {
        r->resp.body_capped = true;
        return 0;
    }
    return len;
}

static int on_progress(void *userdata, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct httpc_req *r = userdata;
    return r->cancelled ? 1 : 0;
}

/* ---- retry policy ---------------------------------------------------------------------------- */

bool httpc_retryable(enum httpc_retry retry, long status, CURLcode code)
{
    if (retry == HTTPC_RETRY_NONE)
        return false;
    if (status == 429)
        return true;
    if (status == 0 && code == CURLE_COULDNT_CONNECT)
        return true; /* nothing reached the server */
    if (retry != HTTPC_RETRY_IDEMPOTENT)
        return false;
    if (status == 502 || status == 503 || status == 504)
        return true;
    switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_COULDNT_RESOLVE_HOST:
        return true;
    default:
        return false;
    }
}

uint32_t httpc_backoff_ms(unsigned n, uint32_t base_ms, uint32_t cap_ms, double retry_after_s)
{
    double wait = base_ms;
    for (unsigned i = 1; i < n && wait < cap_ms; i++)
        wait *= 2;
    if (wait > cap_ms)
        wait = cap_ms;
    uint32_t rnd;
    random_bytes(&rnd, sizeof(rnd));
    double jitter = ((double)rnd / UINT32_MAX * 2.0 - 1.0) * OSB_JITTER_PERCENT / 100.0;
    wait *= 1.0 + jitter;
    if (retry_after_s >= 0 && retry_after_s * 1000.0 > wait)
        wait = retry_after_s * 1000.0;
    return wait < 1 ? 1 : (uint32_t)wait;
}

double httpc_parse_retry_after(const char *value)
{
    char *end = NULL;
    double s = strtod(value, &end);
    if (end != value && *end == '\0' && s >= 0)
        return s;
    time_t when = httpc_curl.getdate(value, NULL);
    if (when < 0)
        return -1;
    double d = difftime(when, time(NULL));
    return d < 0 ? 0 : d;
}

/* ---- request lifetime ------------------------------------------------------------------------ */

static void req_free(uv_handle_t *handle)
{
    struct httpc_req *r = handle->data;
    struct httpc *h = r->h;
    free(r);
    h->open_handles--;
    http_maybe_release(h);
}

static void req_finish(struct httpc_req *r)
{
    struct httpc *h = r->h;
    if (r->prev)
        r->prev->next = r->next;
    else
        h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    h->active--;
    r->opts.done(r->opts.arg, &r->resp);
    httpc_curl.easy_cleanup(r->easy);
    httpc_curl.slist_free_all(r->headers);
    httpc_curl.mime_free(r->mime);
    free(r->url);
    free(r->body);
    buf_release(&r->resp.body);
    uv_close((uv_handle_t *)&r->timer, req_free);
}

static uint64_t req_remaining_ms(const struct httpc_req *r)
{
    if (r->opts.deadline_ms == 0)
        return UINT64_MAX;
    uint64_t spent = now_mono_ms() - r->started_ms;
    return spent >= r->opts.deadline_ms ? 0 : r->opts.deadline_ms - spent;
}

static void req_attempt(struct httpc_req *r)
{
    uint64_t left = req_remaining_ms(r);
    if (left == 0) {
        r->resp.deadline_hit = true;
        req_finish(r);
        return;
    }
    buf_reset(&r->resp.body);
    response_reset_headers(&r->resp);
    r->resp.body_capped = r->resp.sink_aborted = false;
    r->errbuf[0] = '\0';
    httpc_curl.easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, left == UINT64_MAX ? 0L : (long)left);
    r->resp.attempts++;
    r->in_multi = true;
    struct httpc *h = r->h;
    httpc_curl.multi_add_handle(h->multi, r->easy);
    /* Start the transfer now rather than on the next loop iteration (curl asked for a 0 ms
     * timeout), unless we are inside curl already, where it must not be re-entered. */
    if (h->in_curl == 0 && h->active == 1 && r->opts.sink == NULL) {
        /* Only when no other transfer could finish in there (its callback would run inside
         * this call) and no streaming sink could be fed from inside it; this one finishing at
         * once (an unusable URL) is deferred to the loop, see http_check_done. */
        r->starting = true;
        uv_timer_stop(&h->timer);
        http_socket_action(h, CURL_SOCKET_TIMEOUT, 0);
        r->starting = false;
    }
}

static void on_req_timer(uv_timer_t *t)
{
    struct httpc_req *r = t->data;
    if (r->deferred) {
        r->deferred = false;
        req_attempt_done(r, r->deferred_rc);
        return;
    }
    if (r->cancelled) {
        if (r->in_multi) {
            httpc_curl.multi_remove_handle(r->h->multi, r->easy);
            r->in_multi = false;
        }
        r->resp.status = 0;
        r->resp.curl_code = CURLE_ABORTED_BY_CALLBACK;
        snprintf(r->resp.curl_msg, sizeof(r->resp.curl_msg), "request cancelled");
        req_finish(r);
        return;
    }
    req_attempt(r);
}

/* After one attempt ended: retry it, or report. */
static void req_attempt_done(struct httpc_req *r, CURLcode rc)
{
    long status = 0;
    httpc_curl.easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    r->resp.status = status;
    r->resp.curl_code = rc;
    snprintf(r->resp.curl_msg, sizeof(r->resp.curl_msg), "%s",
             r->errbuf[0] ? r->errbuf : httpc_curl.easy_strerror(rc));
    if (rc == CURLE_OPERATION_TIMEDOUT && r->opts.deadline_ms != 0 && req_remaining_ms(r) == 0)
        r->resp.deadline_hit = true;
    bool again = !r->cancelled && !r->delivered && !r->resp.deadline_hit && !r->peer_refused &&
                 r->resp.attempts <= r->opts.retry_max &&
                 httpc_retryable(r->opts.retry, status, rc);
    if (again) {
        uint32_t wait = httpc_backoff_ms(r->resp.attempts, r->opts.retry_base_ms,
                                            r->opts.retry_cap_ms, r->resp.retry_after_s);
        if (wait < req_remaining_ms(r)) {
            log_debug("attempt %u: status %ld, %s; retrying in %u ms", r->resp.attempts, status,
                      r->resp.curl_msg, wait);
            uv_timer_start(&r->timer, on_req_timer, wait, 0);
            return;
        }
    }
    req_finish(r);
}

static void http_check_done(struct httpc *h)
{
    CURLMsg *msg;
    int left;
    while ((msg = httpc_curl.multi_info_read(h->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct httpc_req *r = NULL;
        CURLcode rc = msg->data.result;
        CURL *easy = msg->easy_handle;
        httpc_curl.easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
        httpc_curl.multi_remove_handle(h->multi, easy);
        r->in_multi = false;
        if (r->starting) { /* never complete inside the call that started it */
            r->deferred = true;
            r->deferred_rc = rc;
            uv_timer_start(&r->timer, on_req_timer, 0, 0);
            continue;
        }
        req_attempt_done(r, rc);
    }
}

/* CURLOPT_READFUNCTION of an upload from a descriptor (httpc_req_opts.upload_fd). */
static size_t upload_read(char *buf, size_t size, size_t n, void *arg)
{
    struct httpc_req *r = arg;
    uint64_t left = r->opts.upload_size - r->upload_off;
    size_t want = size * n < left ? size * n : (size_t)left;
    ssize_t got;
    do
        got = pread(r->opts.upload_fd, buf, want, (off_t)r->upload_off);
    while (got < 0 && errno == EINTR);
    if (got < 0 || (got == 0 && want > 0))
        return CURL_READFUNC_ABORT; /* the file shrank or failed: never send a short body */
    r->upload_off += (uint64_t)got;
    return (size_t)got;
}

/* CURLOPT_SEEKFUNCTION: curl rewinds an upload to send it again (an auth round, a redirect). */
static int upload_seek(void *arg, curl_off_t offset, int origin)
{
    struct httpc_req *r = arg;
    if (origin != SEEK_SET || offset < 0)
        return CURL_SEEKFUNC_CANTSEEK;
    r->upload_off = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

static void req_set_upload(struct httpc_req *r)
{
    r->upload_off = 0;
    httpc_curl.easy_setopt(r->easy, CURLOPT_UPLOAD, 1L);
    httpc_curl.easy_setopt(r->easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->opts.upload_size);
    httpc_curl.easy_setopt(r->easy, CURLOPT_READFUNCTION, upload_read);
    httpc_curl.easy_setopt(r->easy, CURLOPT_READDATA, r);
    httpc_curl.easy_setopt(r->easy, CURLOPT_SEEKFUNCTION, upload_seek);
    httpc_curl.easy_setopt(r->easy, CURLOPT_SEEKDATA, r);
}

static void req_set_body(struct httpc_req *r)
{
    const char *m = r->opts.method;
    if (r->opts.upload_fd_set) {
        req_set_upload(r);
    } else if (r->mime != NULL) {
        httpc_curl.easy_setopt(r->easy, CURLOPT_MIMEPOST, r->mime);
    } else if (r->body != NULL || strcmp(m, "POST") == 0) {
        httpc_curl.easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->opts.body_len);
        httpc_curl.easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body ? r->body : "");
    }
    if (strcmp(m, "GET") == 0)
        httpc_curl.easy_setopt(r->easy, CURLOPT_HTTPGET, 1L);
    else if (strcmp(m, "HEAD") == 0)
        httpc_curl.easy_setopt(r->easy, CURLOPT_NOBODY, 1L);
    else if (strcmp(m, "POST") != 0)
        httpc_curl.easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, m);
}

/* CURLOPT_OPENSOCKETFUNCTION: the socket curl asked for, unless the request's peer_ok refuses
 * the address (curl then fails the connect as it would a refused one). */
static curl_socket_t open_checked_socket(void *arg, curlsocktype purpose,
                                         struct curl_sockaddr *address)
{
    struct httpc_req *r = arg;
    (void)purpose;
    if (!r->opts.peer_ok(r->opts.arg, &address->addr)) {
        r->peer_refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static void req_setup_easy(struct httpc_req *r)
{
    CURL *e = r->easy;
    httpc_curl.easy_setopt(e, CURLOPT_URL, r->url);
    httpc_curl.easy_setopt(e, CURLOPT_PRIVATE, (char *)r);
    httpc_curl.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    httpc_curl.easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    httpc_curl.easy_setopt(e, CURLOPT_USERAGENT, OSB_HTTP_USER_AGENT);
    httpc_curl.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    httpc_curl.easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    httpc_curl.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    httpc_curl.easy_setopt(e, CURLOPT_WRITEDATA, r);
    httpc_curl.easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    httpc_curl.easy_setopt(e, CURLOPT_HEADERDATA, r);
    httpc_curl.easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    httpc_curl.easy_setopt(e, CURLOPT_XFERINFODATA, r);
    httpc_curl.easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    httpc_curl.easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    if (r->opts.peer_ok != NULL) {
        httpc_curl.easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_checked_socket);
        httpc_curl.easy_setopt(e, CURLOPT_OPENSOCKETDATA, r);
    }
    if (r->opts.connect_timeout_ms)
        httpc_curl.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)r->opts.connect_timeout_ms);
    if (r->opts.low_speed_s) {
        httpc_curl.easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        httpc_curl.easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)r->opts.low_speed_s);
    }
    if (r->opts.follow_redirects) {
        httpc_curl.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        httpc_curl.easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
        httpc_curl.easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    }
    req_set_body(r);
}

struct httpc_req *httpc_start(struct httpc *h, const struct httpc_req_opts *opts)
{
    /* NULL: the backend was shut down (osb_shutdown) and a wait's timer asks for one more poll. */
    if (h == NULL || h->closing) {
        httpc_curl.slist_free_all(opts->headers);
        return NULL;
    }
    struct httpc_req *r = xcalloc(1, sizeof(*r));
    r->h = h;
    r->opts = *opts;
    r->url = xstrdup(opts->url);
    r->headers = httpc_curl.slist_append(opts->headers, "Expect:"); /* no 100-continue round trip */
    if (opts->body != NULL) {
        r->body = xmalloc(opts->body_len + 1);
        memcpy(r->body, opts->body, opts->body_len);
        r->body[opts->body_len] = '\0';
    }
    r->easy = httpc_curl.easy_init();
    if (r->easy == NULL)
        abort(); /* only fails on OOM, which we treat as fatal everywhere */
    if (opts->mime_build != NULL)
        r->mime = opts->mime_build(opts->arg, r->easy);
    buf_init(&r->resp.body, opts->body_cap);
    r->resp.keep = opts->keep_headers;
    req_setup_easy(r);
    uv_timer_init(h->loop, &r->timer);
    r->timer.data = r;
    h->open_handles++;
    r->next = h->reqs;
    if (h->reqs)
        h->reqs->prev = r;
    h->reqs = r;
    h->active++;
    r->started_ms = now_mono_ms();
    req_attempt(r);
    return r;
}

void httpc_cancel(struct httpc_req *r)
{
    if (r->cancelled)
        return;
    r->cancelled = true;
    uv_timer_start(&r->timer, on_req_timer, 0, 0);
}

void httpc_free(struct httpc *h)
{
    if (h == NULL)
        return;
    h->closing = true;
    while (h->reqs != NULL) {
        struct httpc_req *r = h->reqs;
        if (r->in_multi) {
            httpc_curl.multi_remove_handle(h->multi, r->easy);
            r->in_multi = false;
        }
        uv_timer_stop(&r->timer);
        r->cancelled = true;
        r->resp.status = 0;
        r->resp.curl_code = CURLE_ABORTED_BY_CALLBACK;
        snprintf(r->resp.curl_msg, sizeof(r->resp.curl_msg), "mcpbox is shutting down");
        req_finish(r);
    }
    httpc_curl.multi_cleanup(h->multi); /* closes cached connections: their polls get REMOVE */
    h->multi = NULL;
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, http_handle_closed);
}
