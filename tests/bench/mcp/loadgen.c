/* mcpbox-loadgen: a small C load client for MCP over Streamable HTTP, light enough that a fast
 * server is not hidden behind its client (the Node clients top out at a few thousand calls/s on
 * a 2-core machine).
 *
 *   mcpbox-loadgen URL [-n CALLS] [-c CONNECTIONS] [-p DEPTH] [-w WARMUP] [-t TOOL] [--json]
 *
 * It initializes one session (initialize + notifications/initialized), then runs tools/call on
 * C keep-alive connections at once from one thread (epoll, non-blocking sockets), and prints
 * calls/s and latency percentiles (--json: one JSON object, the keys load.mjs uses). DEPTH (default
 * 1) is how many requests a connection has in flight: above 1 they are HTTP/1.1-pipelined, which a
 * server must answer in order (RFC 9112, 9.3.2). A call's latency runs from the write of its
 * request to the parse of its reply. Replies must be framed by Content-Length or chunked encoding
 * (JSON replies; SSE is not parsed). Exit status 1 if any call failed. Bench tool only: loopback,
 * IPv4. (Until 2026-11-26 it ran a thread with a blocking socket per connection: two context
 * switches per call, on a 2-core machine that the server shares.) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LOADGEN_MAX_CONNS 256
#define LOADGEN_MAX_DEPTH 64
#define LOADGEN_BUF_BYTES (256 * 1024)
#define LOADGEN_HOST_BYTES 256
#define LOADGEN_PATH_BYTES 512
#define LOADGEN_SID_BYTES 256
#define LOADGEN_REQ_BYTES 4096
#define LOADGEN_EVENTS 64

struct target {
    char host[LOADGEN_HOST_BYTES];
    int port;
    char path[LOADGEN_PATH_BYTES];
    char sid[LOADGEN_SID_BYTES];
    const char *tool;
    char head[LOADGEN_REQ_BYTES]; /* tools/call request head up to "Content-Length: " */
    size_t head_len;
    char json_tail[LOADGEN_REQ_BYTES]; /* the body after the id */
    size_t json_tail_len;
};

struct response {
    int status;
    char sid[LOADGEN_SID_BYTES];
    const char *body; /* points into the connection buffer, NUL-terminated */
    size_t body_len;
};

struct conn {
    int fd;
    char *buf; /* replies as read; [start, have) not parsed yet */
    size_t have;
    size_t start;
    const struct target *t;
    double sent[LOADGEN_MAX_DEPTH]; /* send times of the calls in flight, oldest first (ring) */
    long ids[LOADGEN_MAX_DEPTH];    /* their JSON-RPC ids, same ring */
    int first;
    int inflight;
    char *out; /* request bytes the kernel did not take yet */
    size_t out_len;
    bool want_out;
    double *lat; /* measured latencies, ms */
    size_t nlat;
    size_t errors;
    size_t is_error;
    char first_error[160];
};

/* The state of one run of calls (warm-up or measured). */
struct phase {
    int ep;
    struct conn *conns;
    int nconns;
    int depth;
    long remaining; /* calls not sent yet */
    long outstanding; /* sent, reply not parsed yet */
    long next_id;
    bool record;
};

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noreturn)) static void die(const char *what)
{
    fprintf(stderr, "mcpbox-loadgen: %s\n", what);
    exit(2);
}

/* For a failed system call: adds errno's text. */
__attribute__((noreturn)) static void die_sys(const char *what)
{
    fprintf(stderr, "mcpbox-loadgen: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* http://HOST:PORT/PATH */
static void parse_url(const char *url, struct target *t)
{
    const char *p = url;
    const char *slash;
    const char *colon;

    if (strncmp(p, "http://", 7) != 0)
        die("URL must start with http://");
    p += 7;
    slash = strchr(p, '/');
    colon = strchr(p, ':');
    if (!slash || !colon || colon > slash || (size_t)(colon - p) >= sizeof(t->host))
        die("URL must be http://HOST:PORT/PATH");
    memcpy(t->host, p, (size_t)(colon - p));
    t->host[colon - p] = '\0';
    t->port = atoi(colon + 1);
    snprintf(t->path, sizeof(t->path), "%s", slash);
}

static int connect_to(const struct target *t)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->port)};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        die_sys("socket");
    if (inet_pton(AF_INET, strcmp(t->host, "localhost") == 0 ? "127.0.0.1" : t->host,
                  &sa.sin_addr) != 1)
        die("host must be an IPv4 address");
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die_sys("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Blocking write (the session's setup and teardown, before and after the non-blocking runs). */
static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die_sys("write");
        p += w;
        n -= (size_t)w;
    }
}

/* Value of header `name` (case-insensitive) within the header block, copied into out. */
static bool header_value(const char *head, const char *name, char *out, size_t outlen)
{
    size_t nlen = strlen(name);

    for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
        const char *v = l + 2;

        if (strncasecmp(v, name, nlen) == 0 && v[nlen] == ':') {
            size_t len;

            v += nlen + 1;
            while (*v == ' ')
                v++;
            len = strcspn(v, "\r");
            if (len >= outlen)
                len = outlen - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return true;
        }
    }
    return false;
}

/* Bytes of a complete chunked body at body (with its chunk framing), or 0 while incomplete.
 * JSON has no raw CR LF, so the last-chunk marker cannot occur inside the data. */
static size_t chunked_len(const char *body)
{
    const char *z;

    if (strncmp(body, "0\r\n\r\n", 5) == 0)
        return 5;
    z = strstr(body, "\r\n0\r\n\r\n");
    return z ? (size_t)(z - body) + 7 : 0;
}

/* Once the header block of the response at resp is in (it ends at end): the response's total
 * size, or 0 if more must be read. want_sid: copy Mcp-Session-Id into r->sid. */
static size_t response_len(char *resp, char *end, struct response *r, bool want_sid)
{
    char val[32];
    size_t head = (size_t)(end + 4 - resp);
    size_t body;
    bool framed; /* the body's length is known */

    *end = '\0'; /* headers end here; the body starts at end + 4 */
    r->status = atoi(resp + 9);
    r->sid[0] = '\0';
    if (want_sid)
        header_value(resp, "mcp-session-id", r->sid, sizeof(r->sid));
    if (header_value(resp, "content-length", val, sizeof(val))) {
        body = strtoul(val, NULL, 10);
        framed = true;
    } else if (header_value(resp, "transfer-encoding", val, sizeof(val)) &&
               strcmp(val, "chunked") == 0) {
        body = chunked_len(end + 4);
        framed = body > 0;
    } else {
        die("reply with neither Content-Length nor chunked encoding");
    }
    *end = '\r';
    if (head + body >= LOADGEN_BUF_BYTES)
        die("reply too large");
    return framed ? head + body : 0;
}

/* The next whole response in c->buf from c->start, consumed; false if it is not all in yet. */
static bool next_response(struct conn *c, struct response *r, bool want_sid)
{
    char *resp = c->buf + c->start;
    char *end = strstr(resp, "\r\n\r\n");
    size_t total;

    if (!end)
        return false;
    total = response_len(resp, end, r, want_sid);
    if (total == 0 || c->start + total > c->have)
        return false;
    r->body = end + 4;
    r->body_len = total - (size_t)(end + 4 - resp);
    c->start += total;
    /* The body is NUL-terminated for strstr; the byte is put back as the next reply's first. */
    return true;
}

/* Reads once into c->buf (keeping what is unparsed); false on EAGAIN. */
static bool read_some(struct conn *c)
{
    ssize_t n;

    if (c->start > 0) {
        memmove(c->buf, c->buf + c->start, c->have - c->start);
        c->have -= c->start;
        c->start = 0;
    }
    if (c->have + 1 >= LOADGEN_BUF_BYTES)
        die("reply too large");
    n = read(c->fd, c->buf + c->have, LOADGEN_BUF_BYTES - 1 - c->have);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    if (n <= 0)
        die_sys("read (or the server closed the connection)");
    c->have += (size_t)n;
    c->buf[c->have] = '\0';
    return true;
}

/* Blocking: one request and its whole reply (the session's setup and teardown). */
static void exchange(struct conn *c, const char *req, size_t len, struct response *r, bool sid)
{
    write_all(c->fd, req, len);
    c->have = c->start = 0;
    do {
        while (!read_some(c))
            ;
    } while (!next_response(c, r, sid));
    c->buf[c->start] = '\0'; /* nothing follows: the body is a C string */
}

static void post(struct conn *c, const char *json, struct response *r)
{
    char req[LOADGEN_REQ_BYTES];
    int n;
    char sidh[LOADGEN_SID_BYTES + 64] = "";

    if (c->t->sid[0])
        snprintf(sidh, sizeof(sidh), "Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n",
                 c->t->sid);
    n = snprintf(req, sizeof(req),
                 "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                 "Accept: application/json, text/event-stream\r\n%sContent-Length: %zu\r\n\r\n%s",
                 c->t->path, c->t->host, c->t->port, sidh, strlen(json), json);
    if (n < 0 || n >= (int)sizeof(req))
        die("request too large");
    exchange(c, req, (size_t)n, r, true);
}

/* The fixed parts of every tools/call request (the same bytes post() would send). */
static void prepare_call(struct target *t)
{
    int n = snprintf(t->head, sizeof(t->head),
                     "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\n"
                     "MCP-Protocol-Version: 2025-11-25\r\nContent-Length: ",
                     t->path, t->host, t->port, t->sid);
    int m = snprintf(t->json_tail, sizeof(t->json_tail),
                     ",\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"}}", t->tool);

    if (n < 0 || n >= (int)sizeof(t->head) || m < 0 || m >= (int)sizeof(t->json_tail))
        die("request too large");
    t->head_len = (size_t)n;
    t->json_tail_len = (size_t)m;
}

/* Decimal digits of v at p; returns how many. */
static size_t put_uint(char *p, unsigned long v)
{
    char d[24];
    size_t i = sizeof(d);
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(p, d + i, sizeof(d) - i);
    return sizeof(d) - i;
}

#define JSON_HEAD "{\"jsonrpc\":\"2.0\",\"id\":"

/* Appends one tools/call request with this id at p; returns its length. */
static size_t put_call(const struct target *t, char *p, long id)
{
    char digits[24];
    size_t nd = put_uint(digits, (unsigned long)id);
    size_t body = sizeof(JSON_HEAD) - 1 + nd + t->json_tail_len;
    char *q = p;

    memcpy(q, t->head, t->head_len);
    q += t->head_len;
    q += put_uint(q, body);
    memcpy(q, "\r\n\r\n" JSON_HEAD, 4 + sizeof(JSON_HEAD) - 1);
    q += 4 + sizeof(JSON_HEAD) - 1;
    memcpy(q, digits, nd);
    q += nd;
    memcpy(q, t->json_tail, t->json_tail_len);
    return (size_t)(q - p) + t->json_tail_len;
}

static void watch(struct phase *ph, struct conn *c, bool want_out)
{
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0u), .data.ptr = c};

    if (c->want_out == want_out)
        return;
    c->want_out = want_out;
    if (epoll_ctl(ph->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die_sys("epoll_ctl");
}

/* Writes what is queued in c->out; what the kernel does not take waits for EPOLLOUT. */
static void flush_out(struct phase *ph, struct conn *c)
{
    while (c->out_len > 0) {
        ssize_t w = write(c->fd, c->out, c->out_len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w <= 0)
            die_sys("write");
        memmove(c->out, c->out + w, c->out_len - (size_t)w);
        c->out_len -= (size_t)w;
    }
    watch(ph, c, c->out_len > 0);
}

/* Sends calls on c until it has ph->depth in flight or none are left: one write for all. */
static void fill(struct phase *ph, struct conn *c)
{
    double t0 = now_ms();
    int n = 0;

    while (c->inflight < ph->depth && ph->remaining > 0) {
        if (c->out_len + LOADGEN_REQ_BYTES > (size_t)LOADGEN_MAX_DEPTH * LOADGEN_REQ_BYTES)
            die("output queue full");
        c->out_len += put_call(c->t, c->out + c->out_len, ++ph->next_id);
        c->sent[(c->first + c->inflight) % LOADGEN_MAX_DEPTH] = t0;
        c->ids[(c->first + c->inflight) % LOADGEN_MAX_DEPTH] = ph->next_id;
        c->inflight++;
        ph->remaining--;
        ph->outstanding++;
        n++;
    }
    if (n > 0 && !c->want_out)
        flush_out(ph, c);
}

/* Whether the reply carries this id ("id":N followed by ',' or '}'): with pipelining, replies
 * must come in the order of the requests (a server that mixed them up would fail here). */
static bool has_id(const char *body, long id)
{
    char needle[40];
    size_t n = (size_t)snprintf(needle, sizeof(needle), "\"id\":%ld", id);

    for (const char *p = strstr(body, needle); p; p = strstr(p + 1, needle))
        if (p[n] == ',' || p[n] == '}')
            return true;
    return false;
}

/* One reply parsed: latency, checks. */
static void account(struct phase *ph, struct conn *c, const struct response *r, double now)
{
    double t0 = c->sent[c->first];
    long id = c->ids[c->first];

    c->first = (c->first + 1) % LOADGEN_MAX_DEPTH;
    c->inflight--;
    ph->outstanding--;
    if (!ph->record)
        return;
    c->lat[c->nlat++] = now - t0;
    if (r->status != 200 || !strstr(r->body, "\"result\"") || !has_id(r->body, id)) {
        if (c->errors++ == 0)
            snprintf(c->first_error, sizeof(c->first_error), "HTTP %d: %.120s", r->status,
                     r->body);
    } else if (strstr(r->body, "\"isError\":true")) {
        c->is_error++;
    }
}

/* The connection is readable: read once, account for every whole reply, send more calls. */
static void on_readable(struct phase *ph, struct conn *c)
{
    struct response r;
    double now;

    if (!read_some(c))
        return;
    now = now_ms();
    while (c->inflight > 0) {
        char saved;

        if (!next_response(c, &r, false))
            break;
        saved = c->buf[c->start];
        c->buf[c->start] = '\0'; /* the body as a C string for the checks */
        account(ph, c, &r, now);
        c->buf[c->start] = saved;
    }
    if (c->start < c->have && c->inflight == 0)
        die("bytes after the last reply");
    fill(ph, c);
}

/* Runs `calls` calls spread over the connections; returns the wall time in ms. */
static double run_phase(struct phase *ph, long calls, bool record)
{
    struct epoll_event evs[LOADGEN_EVENTS];
    double t0 = now_ms();

    ph->remaining = calls;
    ph->record = record;
    for (int i = 0; i < ph->nconns; i++)
        fill(ph, &ph->conns[i]);
    while (ph->outstanding > 0) {
        int n = epoll_wait(ph->ep, evs, LOADGEN_EVENTS, -1);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die_sys("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;

            if (evs[i].events & EPOLLOUT)
                flush_out(ph, c);
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(ph, c);
        }
    }
    return now_ms() - t0;
}

static void open_session(struct conn *c, struct target *t)
{
    struct response r;

    post(c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
            "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"mcpbox-loadgen\","
            "\"version\":\"1\"}}}",
         &r);
    if (r.status != 200 || !r.sid[0])
        die("initialize: no 200 with an Mcp-Session-Id");
    snprintf(t->sid, sizeof(t->sid), "%s", r.sid);
    post(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
    if (r.status != 202)
        die("notifications/initialized: expected 202");
}

static void close_session(struct conn *c)
{
    char req[LOADGEN_REQ_BYTES];
    struct response r;
    int n = snprintf(req, sizeof(req),
                     "DELETE %s HTTP/1.1\r\nHost: %s:%d\r\nMcp-Session-Id: %s\r\n"
                     "MCP-Protocol-Version: 2025-11-25\r\nContent-Length: 0\r\n\r\n",
                     c->t->path, c->t->host, c->t->port, c->t->sid);

    exchange(c, req, (size_t)n, &r, false);
}

static void set_blocking(int fd, bool blocking)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl < 0 || fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK) < 0)
        die_sys("fcntl");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

struct totals {
    double *lat;
    size_t n;
    size_t errors;
    size_t is_error;
    const char *first_error;
};

static struct totals gather(struct conn *conns, int nconns, long calls)
{
    struct totals t = {.lat = malloc(sizeof(double) * (size_t)calls), .first_error = ""};

    if (!t.lat)
        die_sys("malloc");
    for (int i = 0; i < nconns; i++) {
        memcpy(t.lat + t.n, conns[i].lat, sizeof(double) * conns[i].nlat);
        t.n += conns[i].nlat;
        t.errors += conns[i].errors;
        t.is_error += conns[i].is_error;
        if (conns[i].errors && !t.first_error[0])
            t.first_error = conns[i].first_error;
    }
    qsort(t.lat, t.n, sizeof(double), cmp_double);
    return t;
}

static double pct(const struct totals *t, double p)
{
    size_t i = (size_t)(p / 100.0 * (double)t->n);

    return t->lat[i < t->n ? i : t->n - 1];
}

static void report(const struct totals *t, int nconns, int depth, double wall, bool json)
{
    double sum = 0;

    for (size_t i = 0; i < t->n; i++)
        sum += t->lat[i];
    if (json) {
        printf("{\"transport\":\"http\",\"client\":\"c\",\"n\":%zu,\"c\":%d,\"depth\":%d,"
               "\"calls\":%zu,\"callsPerSec\":%.1f,\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,"
               "\"max\":%.3f,\"mean\":%.3f,\"wallMs\":%.0f,\"errors\":%zu,\"isError\":%zu,"
               "\"firstError\":%s}\n",
               t->n, nconns, depth, t->n, t->n / wall * 1000.0, pct(t, 50), pct(t, 90),
               pct(t, 99), t->lat[t->n - 1], sum / t->n, wall, t->errors, t->is_error,
               t->errors ? "\"see stderr\"" : "null");
    } else {
        printf("  %.1f calls/s  p50=%.3fms p90=%.3fms p99=%.3fms max=%.3fms mean=%.3fms "
               "errors=%zu isError=%zu\n",
               t->n / wall * 1000.0, pct(t, 50), pct(t, 90), pct(t, 99), t->lat[t->n - 1],
               sum / t->n, t->errors, t->is_error);
    }
    if (t->errors)
        fprintf(stderr, "mcpbox-loadgen: first error: %s\n", t->first_error);
}

struct options {
    const char *url;
    long calls;
    int conns;
    int depth;
    long warmup;
    const char *tool;
    bool json;
};

#define LOADGEN_USAGE                                                                        \
    "usage: mcpbox-loadgen URL [-n CALLS>0] [-c 1..256] [-p 1..64] [-w WARMUP>=0] [-t TOOL] " \
    "[--json]"

static struct options parse_options(int argc, char **argv)
{
    struct options o = {.calls = 10000, .conns = 8, .depth = 1, .warmup = 1000,
                        .tool = "test_simple_text"};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--json") == 0)
            o.json = true;
        else if (strcmp(a, "-n") == 0 && v && ++i)
            o.calls = atol(v);
        else if (strcmp(a, "-c") == 0 && v && ++i)
            o.conns = atoi(v);
        else if (strcmp(a, "-p") == 0 && v && ++i)
            o.depth = atoi(v);
        else if (strcmp(a, "-w") == 0 && v && ++i)
            o.warmup = atol(v);
        else if (strcmp(a, "-t") == 0 && v && ++i)
            o.tool = v;
        else if (a[0] != '-' && !o.url)
            o.url = a;
        else
            die(LOADGEN_USAGE);
    }
    if (!o.url || o.calls < 1 || o.conns < 1 || o.conns > LOADGEN_MAX_CONNS || o.depth < 1 ||
        o.depth > LOADGEN_MAX_DEPTH || o.warmup < 0)
        die(LOADGEN_USAGE);
    return o;
}

static void open_conns(struct phase *ph, struct target *t, long calls)
{
    ph->ep = epoll_create1(EPOLL_CLOEXEC);
    if (ph->ep < 0)
        die_sys("epoll_create1");
    for (int i = 0; i < ph->nconns; i++) {
        struct conn *c = &ph->conns[i];

        *c = (struct conn){.fd = connect_to(t), .buf = malloc(LOADGEN_BUF_BYTES), .t = t,
                           .out = malloc((size_t)LOADGEN_MAX_DEPTH * LOADGEN_REQ_BYTES),
                           .lat = malloc(sizeof(double) * (size_t)calls)};
        if (!c->buf || !c->lat || !c->out)
            die_sys("malloc");
    }
    open_session(&ph->conns[0], t);
    prepare_call(t);
    for (int i = 0; i < ph->nconns; i++) {
        struct conn *c = &ph->conns[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

        c->have = c->start = 0;
        set_blocking(c->fd, false);
        if (epoll_ctl(ph->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
            die_sys("epoll_ctl");
    }
}

int main(int argc, char **argv)
{
    struct options o = parse_options(argc, argv);
    static struct target t;
    static struct conn conns[LOADGEN_MAX_CONNS];
    struct phase ph = {.conns = conns, .nconns = o.conns, .depth = o.depth};
    struct totals tot;
    double wall;

    parse_url(o.url, &t);
    t.tool = o.tool;
    open_conns(&ph, &t, o.calls);
    run_phase(&ph, o.warmup, false);
    wall = run_phase(&ph, o.calls, true);
    set_blocking(conns[0].fd, true);
    close_session(&conns[0]);
    tot = gather(conns, o.conns, o.calls);
    report(&tot, o.conns, o.depth, wall, o.json);
    for (int i = 0; i < o.conns; i++) {
        close(conns[i].fd);
        free(conns[i].buf);
        free(conns[i].out);
        free(conns[i].lat);
    }
    close(ph.ep);
    free(tot.lat);
    return tot.errors ? 1 : 0;
}
