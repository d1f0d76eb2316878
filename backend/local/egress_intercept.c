/* One intercepted egress connection, on a thread of its own (egress_intercept.h). */
#include "backend/local/egress_intercept.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "backend/local/egress_inject.h"
#include "backend/local/egress_tls.h"
#include "backend/secrets.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

#define INTERCEPT_HEAD_MS 10000  /* the request head must arrive within this */
#define INTERCEPT_IDLE_MS 600000 /* a connection quiet both ways this long is closed */
#define INTERCEPT_BUF 65536
#define INTERCEPT_MAX_SECRETS 8

static atomic_uint intercepts_running;

struct egress_intercept_share {
    atomic_uint running;
    atomic_uint refs;
};

struct egress_intercept_share *egress_intercept_share_new(void)
{
    struct egress_intercept_share *s = xcalloc(1, sizeof *s);
    atomic_init(&s->refs, 1);
    return s;
}

void egress_intercept_share_unref(struct egress_intercept_share *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

/* The secrets resolved for one connection. */
struct injections {
    struct egress_inject inj[INTERCEPT_MAX_SECRETS];
    char *values[INTERCEPT_MAX_SECRETS];
    char placeholders[INTERCEPT_MAX_SECRETS][SECRET_PLACEHOLDER_MAX];
    size_t n;
};

static void injections_release(struct injections *s)
{
    for (size_t i = 0; i < s->n; i++) {
        explicit_bzero(s->values[i], s->inj[i].value_len);
        free(s->values[i]);
    }
    s->n = 0;
}

/* Reads each value now; -1 when one cannot be read (logged by name, never by value). */
static int injections_resolve(struct egress_intercept *ic, struct injections *s)
{
    size_t i;
    json_t *def;
    memset(s, 0, sizeof *s);
    json_array_foreach(ic->defs, i, def)
    {
        if (s->n == INTERCEPT_MAX_SECRETS)
            break;
        struct mcp_error err = {0};
        size_t len = 0;
        char *v = secret_value(def, &len, &err);
        if (v == NULL) {
            log_warn("sandbox %s: a request to %s went out without its secret: %s", ic->sandbox_id,
                     ic->host, err.msg);
            return -1;
        }
        struct egress_inject *e = &s->inj[s->n];
        const char *h = json_string_value(json_object_get(def, "header"));
        const char *colon = h ? strchr(h, ':') : NULL;
        e->header_name = colon ? h : NULL;
        e->header_name_len = colon ? (size_t)(colon - h) : 0;
        e->header_tmpl = colon ? colon + 1 : NULL;
        if (json_is_true(json_object_get(def, "placeholder"))) {
            secret_placeholder(json_string_value(json_object_get(def, "name")),
                               s->placeholders[s->n]);
            e->placeholder = s->placeholders[s->n];
        }
        e->value = s->values[s->n++] = v;
        e->value_len = len;
    }
    return 0;
}

/* One side of the connection: its socket and, when TLS is terminated, its session. Reads go
 * through a memory BIO fed from the socket only when poll says so (never blocking in OpenSSL);
 * writes go straight to the (blocking) socket. */
struct end {
    int fd;
    SSL *ssl;
    BIO *rbio;
};

static int send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w, n -= (size_t)w;
    }
    return 0;
}

static int end_write(struct end *e, const void *p, size_t n)
{
    if (e->ssl == NULL)
        return send_all(e->fd, p, n);
    return n == 0 || SSL_write(e->ssl, p, (int)n) == (int)n ? 0 : -1;
}

/* What the socket has now, into the session's memory BIO: 1 some, 0 none, -1 EOF or error. */
static int feed(struct end *e)
{
    uint8_t raw[16384];
    ssize_t k = recv(e->fd, raw, sizeof raw, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (k <= 0)
        return -1;
    BIO_write(e->rbio, raw, (int)k);
    return 1;
}

/* Plain bytes from e now: >0 read, 0 none now, -1 EOF or error. */
static ssize_t end_read(struct end *e, void *buf, size_t n)
{
    if (e->ssl == NULL) {
        ssize_t r = recv(e->fd, buf, n, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        return r > 0 ? r : -1;
    }
    for (;;) {
        int r = SSL_read(e->ssl, buf, (int)n);
        if (r > 0)
            return r;
        if (SSL_get_error(e->ssl, r) != SSL_ERROR_WANT_READ)
            return -1;
        int fed = feed(e);
        if (fed <= 0)
            return fed;
    }
}

static bool wait_readable(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r;
    while ((r = poll(&pfd, 1, ms)) < 0 && errno == EINTR)
        ;
    return r > 0;
}

/* The TLS handshake of e (accept or connect, as set), within INTERCEPT_HEAD_MS per read. */
static int end_handshake(struct end *e)
{
    for (;;) {
        int r = SSL_do_handshake(e->ssl);
        if (r == 1)
            return 0;
        if (SSL_get_error(e->ssl, r) != SSL_ERROR_WANT_READ)
            return -1;
        int fed = feed(e);
        if (fed < 0 || (fed == 0 && !wait_readable(e->fd, INTERCEPT_HEAD_MS)))
            return -1;
    }
}

/* e as a TLS end with ctx; head: bytes already read from its socket. */
static int end_tls(struct end *e, SSL_CTX *ctx, const uint8_t *head, size_t head_len, bool server,
                   const char *host)
{
    e->ssl = SSL_new(ctx);
    e->rbio = BIO_new(BIO_s_mem());
    if (e->ssl == NULL || e->rbio == NULL)
        return -1;
    BIO_set_mem_eof_return(e->rbio, -1); /* empty: "retry", never EOF */
    if (head_len > 0)
        BIO_write(e->rbio, head, (int)head_len);
    BIO_up_ref(e->rbio);
    SSL_set0_rbio(e->ssl, e->rbio);
    SSL_set0_wbio(e->ssl, BIO_new_socket(e->fd, BIO_NOCLOSE));
    if (server) {
        SSL_set_accept_state(e->ssl);
    } else {
        SSL_set_connect_state(e->ssl);
        if (!SSL_set_tlsext_host_name(e->ssl, host) || !SSL_set1_host(e->ssl, host))
            return -1;
    }
    return end_handshake(e);
}

static void end_release(struct end *e)
{
    if (e->ssl)
        SSL_shutdown(e->ssl); /* close_notify, best effort */
    SSL_free(e->ssl);
    BIO_free(e->rbio);
}

/* The request head, rewritten, goes up; what followed it in buf too. -1: the connection ends.
 * 1: not a request this can rewrite: buf[0..*len) goes up as it is (nothing injected). */
static int forward_head(struct end *down, struct end *up, struct injections *s, uint8_t *buf,
                        size_t *len)
{
    for (;;) {
        uint8_t *out = NULL;
        size_t out_len = 0, head_len = 0;
        enum egress_parse_rc rc =
            egress_inject_head(buf, *len, s->inj, s->n, &out, &out_len, &head_len);
        if (rc == EGRESS_PARSE_FOUND) {
            int sent = end_write(up, out, out_len);
            explicit_bzero(out, out_len);
            free(out);
            if (sent < 0 || end_write(up, buf + head_len, *len - head_len) < 0)
                return -1;
            return 0;
        }
        if (rc == EGRESS_PARSE_NONE)
            return end_write(up, buf, *len) < 0 ? -1 : 1;
        ssize_t got = end_read(down, buf + *len, EGRESS_INJECT_HEAD_MAX - *len);
        if (got < 0 || (got == 0 && !wait_readable(down->fd, INTERCEPT_HEAD_MS)))
            return -1;
        *len += (size_t)got;
    }
}

/* Moves what the sandbox sent now up; false when it is done (EOF) or a write failed. */
static bool pump_up(struct end *down, struct end *up, uint8_t *buf, bool *down_eof)
{
    ssize_t got;
    while (!*down_eof && (got = end_read(down, buf, INTERCEPT_BUF)) != 0) {
        if (got < 0) {
            *down_eof = true;
            shutdown(up->fd, up->ssl ? SHUT_RDWR : SHUT_WR);
        } else if (end_write(up, buf, (size_t)got) < 0) {
            return false;
        }
    }
    return true;
}

/* Moves what the host sent now down, masked; false when the host is done or a write failed. */
static bool pump_down(struct egress_intercept *ic, struct end *down, struct end *up,
                      struct injections *s, uint8_t *reply, size_t *kept)
{
    for (;;) {
        ssize_t got = end_read(up, reply + *kept, INTERCEPT_BUF - *kept);
        if (got == 0)
            return true;
        unsigned masked = 0;
        size_t have = *kept + (got > 0 ? (size_t)got : 0);
        size_t ready = egress_redact(reply, have, s->inj, s->n, got < 0, &masked);
        if (masked)
            log_warn("sandbox %s: a reply from %s held a secret's value %u time(s); masked",
                     ic->sandbox_id, ic->host, masked);
        if (end_write(down, reply, ready) < 0 || got < 0)
            return false;
        *kept = have - ready;
        memmove(reply, reply + ready, *kept);
    }
}

/* Copies both ways until the host is done; the reply with the values masked. */
static void pump(struct egress_intercept *ic, struct end *down, struct end *up,
                 struct injections *s)
{
    uint8_t *buf = xmalloc(INTERCEPT_BUF), *reply = xmalloc(INTERCEPT_BUF);
    size_t kept = 0; /* reply bytes held back: they may start a value */
    bool down_eof = false;
    while (pump_up(down, up, buf, &down_eof) && pump_down(ic, down, up, s, reply, &kept)) {
        struct pollfd pfd[2] = {{.fd = down_eof ? -1 : down->fd, .events = POLLIN},
                                {.fd = up->fd, .events = POLLIN}};
        int r = poll(pfd, 2, INTERCEPT_IDLE_MS);
        if (r == 0 || (r < 0 && errno != EINTR))
            break;
    }
    explicit_bzero(buf, INTERCEPT_BUF);
    free(buf);
    free(reply);
}

static void intercept_free(struct egress_intercept *ic)
{
    if (ic->down >= 0)
        close(ic->down);
    if (ic->up >= 0)
        close(ic->up);
    free(ic->head);
    json_decref(ic->defs);
    free(ic);
}

/* TLS from the sandbox (a handshake record first) is terminated with a certificate for the
 * host, and the host's own is verified; -1: the connection ends (logged why, never a value). */
static int terminate_tls(struct egress_intercept *ic, struct end *down, struct end *up,
                         const uint8_t *head, size_t len)
{
    struct mcp_error err = {0};
    SSL_CTX *server = egress_tls_server_ctx(ic->state_dir, ic->host, &err);
    SSL_CTX *client = server ? egress_tls_client_ctx(&err) : NULL;
    int rc = client ? end_tls(down, server, head, len, true, ic->host) : -1;
    SSL_CTX_free(server);
    if (client == NULL)
        log_warn("sandbox %s: a TLS connection to %s closed: %s", ic->sandbox_id, ic->host,
                 err.msg);
    else if (rc == 0 && end_tls(up, client, NULL, 0, false, ic->host) < 0) {
        rc = -1;
        log_warn("sandbox %s: %s failed verification or its TLS handshake (%s); no secret was "
                 "sent",
                 ic->sandbox_id, ic->host,
                 X509_verify_cert_error_string(up->ssl ? SSL_get_verify_result(up->ssl) : 0));
    }
    ERR_clear_error();
    return rc;
}

/* Whether the sandbox speaks TLS: its first byte is a handshake record (peeked when nothing
 * was read yet). */
static bool starts_tls(struct egress_intercept *ic)
{
    uint8_t first = 0;
    if (ic->head_len > 0)
        return ic->head[0] == 22;
    return wait_readable(ic->down, INTERCEPT_HEAD_MS) && recv(ic->down, &first, 1, MSG_PEEK) == 1 &&
           first == 22;
}

/* A running connection's end: its counts given back, everything freed. */
static void intercept_done(struct egress_intercept *ic)
{
    atomic_fetch_sub(&ic->share->running, 1);
    egress_intercept_share_unref(ic->share);
    atomic_fetch_sub(&intercepts_running, 1);
    intercept_free(ic);
}

static void *intercept_thread(void *arg)
{
    struct egress_intercept *ic = arg;
    struct injections s = {.n = 0};
    struct end down = {.fd = ic->down}, up = {.fd = ic->up};
    uint8_t *buf = xmalloc(EGRESS_INJECT_HEAD_MAX);
    size_t len = 0;
    /* the sockets were libuv's (non-blocking); only this thread holds them now */
    fcntl(ic->down, F_SETFL, fcntl(ic->down, F_GETFL) & ~O_NONBLOCK);
    fcntl(ic->up, F_SETFL, fcntl(ic->up, F_GETFL) & ~O_NONBLOCK);
    bool tls = starts_tls(ic);
    if (!tls && ic->head_len > 0) {
        len = ic->head_len < EGRESS_INJECT_HEAD_MAX ? ic->head_len : EGRESS_INJECT_HEAD_MAX;
        memcpy(buf, ic->head, len);
    }
    if ((!tls || terminate_tls(ic, &down, &up, ic->head, ic->head_len) == 0) &&
        injections_resolve(ic, &s) == 0 && forward_head(&down, &up, &s, buf, &len) >= 0)
        pump(ic, &down, &up, &s);
    injections_release(&s);
    end_release(&down);
    end_release(&up);
    explicit_bzero(buf, EGRESS_INJECT_HEAD_MAX);
    free(buf);
    intercept_done(ic);
    return NULL;
}

int egress_intercept_start(struct egress_intercept *ic)
{
    secrets_no_core_dumps(); /* values pass through this process's memory from now on */
    if (ic->down < 0 || ic->up < 0) {
        intercept_free(ic);
        return -1;
    }
    atomic_fetch_add(&intercepts_running, 1);
    atomic_fetch_add(&ic->share->running, 1);
    atomic_fetch_add(&ic->share->refs, 1);
    if (atomic_load(&intercepts_running) > EGRESS_INTERCEPT_MAX ||
        atomic_load(&ic->share->running) > EGRESS_INTERCEPT_PER_SANDBOX) {
        intercept_done(ic);
        return -1;
    }
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, intercept_thread, ic);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        intercept_done(ic);
        return -1;
    }
    return 0;
}
