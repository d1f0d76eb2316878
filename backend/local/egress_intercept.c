/* One intercepted egress connection, on a thread of its own (egress_intercept.h). */
#include "backend/local/egress_intercept.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/local/egress_inject.h"
#include "backend/secrets.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

#define INTERCEPT_HEAD_MS 10000  /* the request head must arrive within this */
#define INTERCEPT_IDLE_MS 600000 /* a connection quiet both ways this long is closed */
#define INTERCEPT_BUF 65536
#define INTERCEPT_MAX_SECRETS 8

static atomic_uint intercepts_running;

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

static ssize_t recv_some(int fd, void *p, size_t n, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r;
    while ((r = poll(&pfd, 1, ms)) < 0 && errno == EINTR)
        ;
    if (r <= 0)
        return -1;
    ssize_t got;
    while ((got = recv(fd, p, n, 0)) < 0 && errno == EINTR)
        ;
    return got;
}

/* The request head, rewritten, goes up; what followed it in buf too. -1: the connection ends.
 * 1: not a request this can rewrite: buf[0..*len) goes up as it is (nothing injected). */
static int forward_head(struct egress_intercept *ic, struct injections *s, uint8_t *buf,
                        size_t *len)
{
    for (;;) {
        uint8_t *out = NULL;
        size_t out_len = 0, head_len = 0;
        enum egress_parse_rc rc =
            egress_inject_head(buf, *len, s->inj, s->n, &out, &out_len, &head_len);
        if (rc == EGRESS_PARSE_FOUND) {
            int sent = send_all(ic->up, out, out_len);
            explicit_bzero(out, out_len);
            free(out);
            if (sent < 0 || send_all(ic->up, buf + head_len, *len - head_len) < 0)
                return -1;
            return 0;
        }
        if (rc == EGRESS_PARSE_NONE)
            return send_all(ic->up, buf, *len) < 0 ? -1 : 1;
        ssize_t got =
            recv_some(ic->down, buf + *len, EGRESS_INJECT_HEAD_MAX - *len, INTERCEPT_HEAD_MS);
        if (got <= 0)
            return -1;
        *len += (size_t)got;
    }
}

/* Copies both ways until both ends are done; the reply with the values masked. */
static void pump(struct egress_intercept *ic, struct injections *s)
{
    uint8_t *buf = xmalloc(INTERCEPT_BUF), *reply = xmalloc(INTERCEPT_BUF);
    size_t kept = 0; /* reply bytes held back: they may start a value */
    bool down_eof = false, up_eof = false;
    while (!up_eof) {
        struct pollfd pfd[2] = {{.fd = down_eof ? -1 : ic->down, .events = POLLIN},
                                {.fd = ic->up, .events = POLLIN}};
        int r = poll(pfd, 2, INTERCEPT_IDLE_MS);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (pfd[0].revents) {
            ssize_t got = recv(ic->down, buf, INTERCEPT_BUF, 0);
            if (got <= 0)
                down_eof = true, shutdown(ic->up, SHUT_WR);
            else if (send_all(ic->up, buf, (size_t)got) < 0)
                break;
        }
        if (pfd[1].revents) {
            ssize_t got = recv(ic->up, reply + kept, INTERCEPT_BUF - kept, 0);
            unsigned masked = 0;
            up_eof = got <= 0;
            size_t have = kept + (got > 0 ? (size_t)got : 0);
            size_t ready = egress_redact(reply, have, s->inj, s->n, up_eof, &masked);
            if (masked)
                log_warn("sandbox %s: a reply from %s held a secret's value %u time(s); masked",
                         ic->sandbox_id, ic->host, masked);
            if (send_all(ic->down, reply, ready) < 0)
                break;
            kept = have - ready;
            memmove(reply, reply + ready, kept);
        }
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

static void *intercept_thread(void *arg)
{
    struct egress_intercept *ic = arg;
    struct injections s;
    uint8_t *buf = xmalloc(EGRESS_INJECT_HEAD_MAX);
    size_t len = ic->head_len < EGRESS_INJECT_HEAD_MAX ? ic->head_len : EGRESS_INJECT_HEAD_MAX;
    if (len > 0)
        memcpy(buf, ic->head, len);
    /* the sockets were libuv's (non-blocking); only this thread holds them now */
    fcntl(ic->down, F_SETFL, fcntl(ic->down, F_GETFL) & ~O_NONBLOCK);
    fcntl(ic->up, F_SETFL, fcntl(ic->up, F_GETFL) & ~O_NONBLOCK);
    if (injections_resolve(ic, &s) == 0 && forward_head(ic, &s, buf, &len) >= 0)
        pump(ic, &s);
    injections_release(&s);
    explicit_bzero(buf, EGRESS_INJECT_HEAD_MAX);
    free(buf);
    intercept_free(ic);
    atomic_fetch_sub(&intercepts_running, 1);
    return NULL;
}

/* A secret's value passes through this process's memory from now on: no core dump may carry it
 * (the limit stays lowered for the rest of the process). */
static void no_core_dumps(void)
{
    static atomic_bool done;
    if (atomic_exchange(&done, true))
        return;
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) < 0)
        log_warn("could not turn core dumps off (%s): a crash could write secrets to disk",
                 strerror(errno));
}

int egress_intercept_start(struct egress_intercept *ic)
{
    no_core_dumps();
    if (ic->down < 0 || ic->up < 0) {
        intercept_free(ic);
        return -1;
    }
    if (atomic_fetch_add(&intercepts_running, 1) >= EGRESS_INTERCEPT_MAX) {
        atomic_fetch_sub(&intercepts_running, 1);
        intercept_free(ic);
        return -1;
    }
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, intercept_thread, ic);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_fetch_sub(&intercepts_running, 1);
        intercept_free(ic);
        return -1;
    }
    return 0;
}
