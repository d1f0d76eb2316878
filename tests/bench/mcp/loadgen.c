/* mcpbox-loadgen: a small C load client for MCP over Streamable HTTP, light enough that a fast
 * server is not hidden behind its client (the Node clients top out at a few thousand calls/s on
 * a 2-core machine).
 *
 *   mcpbox-loadgen URL [-n CALLS] [-c CONNECTIONS] [-w WARMUP] [-t TOOL] [--json]
 *
 * It initializes one session (initialize + notifications/initialized), then runs tools/call on
 * C keep-alive connections at once, one request in flight per connection (one thread each), and
 * prints calls/s and latency percentiles (--json: one JSON object, the keys load.mjs uses).
 * Replies must be framed by Content-Length or chunked encoding (JSON replies; SSE is not parsed).
 * Exit status 1 if any call failed. Bench tool only: blocking sockets, loopback, IPv4. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LOADGEN_MAX_CONNS 256
#define LOADGEN_BUF_BYTES (256 * 1024)
#define LOADGEN_HOST_BYTES 256
#define LOADGEN_PATH_BYTES 512
#define LOADGEN_SID_BYTES 256
#define LOADGEN_REQ_BYTES 4096

struct target {
    char host[LOADGEN_HOST_BYTES];
    int port;
    char path[LOADGEN_PATH_BYTES];
    char sid[LOADGEN_SID_BYTES];
    const char *tool;
};

struct response {
    int status;
    char sid[LOADGEN_SID_BYTES];
    const char *body; /* points into the connection buffer, NUL-terminated */
    size_t body_len;
};

struct conn {
    int fd;
    char *buf;
    const struct target *t;
    double *lat; /* measured latencies, ms */
    size_t nlat;
    size_t errors;
    size_t is_error;
    char first_error[160];
};

struct phase {
    struct conn *conns;
    int nconns;
    atomic_long remaining;
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

/* Once the header block is in: the response's total size, or 0 if more must be read. */
static size_t response_len(struct conn *c, char *end, struct response *r)
{
    char val[32];
    size_t head = (size_t)(end + 4 - c->buf);
    size_t body;
    bool framed; /* the body's length is known */

    *end = '\0';   /* headers end here; the body starts at end + 4 */
    r->status = atoi(c->buf + 9);
    if (!header_value(c->buf, "mcp-session-id", r->sid, sizeof(r->sid)))
        r->sid[0] = '\0';
    if (header_value(c->buf, "content-length", val, sizeof(val))) {
        body = strtoul(val, NULL, 10);
        framed = true;
    } else if (header_value(c->buf, "transfer-encoding", val, sizeof(val)) &&
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

/* Reads one whole response into c->buf (no pipelining: nothing follows it). */
static void read_response(struct conn *c, struct response *r)
{
    size_t have = 0;
    size_t total = 0;
    char *end = NULL;

    while (total == 0 || have < total) {
        ssize_t n = read(c->fd, c->buf + have, LOADGEN_BUF_BYTES - 1 - have);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die_sys("read (or the server closed the connection)");
        have += (size_t)n;
        c->buf[have] = '\0';
        if (!end)
            end = strstr(c->buf, "\r\n\r\n");
        if (end)
            total = response_len(c, end, r);
    }
    r->body = end + 4;
    r->body_len = total - (size_t)(end + 4 - c->buf);
    c->buf[total] = '\0';
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
    write_all(c->fd, req, (size_t)n);
    read_response(c, r);
}

static void one_call(struct conn *c, long id, bool record)
{
    char json[512];
    struct response r;
    double t0 = now_ms();

    snprintf(json, sizeof(json),
             "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"}}",
             id, c->t->tool);
    post(c, json, &r);
    if (!record)
        return;
    c->lat[c->nlat++] = now_ms() - t0;
    if (r.status != 200 || !strstr(r.body, "\"result\"")) {
        if (c->errors++ == 0)
            snprintf(c->first_error, sizeof(c->first_error), "HTTP %d: %.120s", r.status, r.body);
    } else if (strstr(r.body, "\"isError\":true")) {
        c->is_error++;
    }
}

static void *worker(void *arg)
{
    void **a = arg;
    struct phase *ph = a[0];
    struct conn *c = a[1];
    long id;

    while ((id = atomic_fetch_sub(&ph->remaining, 1)) > 0)
        one_call(c, id, ph->record);
    return NULL;
}

/* Runs `calls` calls spread over the connections; returns the wall time in ms. */
static double run_phase(struct conn *conns, int nconns, long calls, bool record)
{
    struct phase ph = {.conns = conns, .nconns = nconns, .record = record};
    pthread_t th[LOADGEN_MAX_CONNS];
    void *args[LOADGEN_MAX_CONNS][2];
    double t0 = now_ms();

    atomic_init(&ph.remaining, calls);
    for (int i = 0; i < nconns; i++) {
        args[i][0] = &ph;
        args[i][1] = &conns[i];
        if (pthread_create(&th[i], NULL, worker, args[i]) != 0)
            die("pthread_create");
    }
    for (int i = 0; i < nconns; i++)
        pthread_join(th[i], NULL);
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

    write_all(c->fd, req, (size_t)n);
    read_response(c, &r);
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

static void report(const struct totals *t, int nconns, double wall, bool json)
{
    double sum = 0;

    for (size_t i = 0; i < t->n; i++)
        sum += t->lat[i];
    if (json) {
        printf("{\"transport\":\"http\",\"client\":\"c\",\"n\":%zu,\"c\":%d,\"calls\":%zu,"
               "\"callsPerSec\":%.1f,\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f,"
               "\"mean\":%.3f,\"wallMs\":%.0f,\"errors\":%zu,\"isError\":%zu,\"firstError\":%s}\n",
               t->n, nconns, t->n, t->n / wall * 1000.0, pct(t, 50), pct(t, 90), pct(t, 99),
               t->lat[t->n - 1], sum / t->n, wall, t->errors, t->is_error,
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
    long warmup;
    const char *tool;
    bool json;
};

static struct options parse_options(int argc, char **argv)
{
    struct options o = {.calls = 10000, .conns = 8, .warmup = 1000, .tool = "test_simple_text"};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--json") == 0)
            o.json = true;
        else if (strcmp(a, "-n") == 0 && v && ++i)
            o.calls = atol(v);
        else if (strcmp(a, "-c") == 0 && v && ++i)
            o.conns = atoi(v);
        else if (strcmp(a, "-w") == 0 && v && ++i)
            o.warmup = atol(v);
        else if (strcmp(a, "-t") == 0 && v && ++i)
            o.tool = v;
        else if (a[0] != '-' && !o.url)
            o.url = a;
        else
            die("usage: mcpbox-loadgen URL [-n CALLS] [-c CONNECTIONS] [-w WARMUP] [-t TOOL] [--json]");
    }
    if (!o.url || o.calls < 1 || o.conns < 1 || o.conns > LOADGEN_MAX_CONNS || o.warmup < 0)
        die("usage: mcpbox-loadgen URL [-n CALLS>0] [-c 1..256] [-w WARMUP>=0] [-t TOOL] [--json]");
    return o;
}

int main(int argc, char **argv)
{
    struct options o = parse_options(argc, argv);
    static struct target t;
    static struct conn conns[LOADGEN_MAX_CONNS];
    struct totals tot;
    double wall;

    parse_url(o.url, &t);
    t.tool = o.tool;
    for (int i = 0; i < o.conns; i++) {
        conns[i] = (struct conn){.fd = connect_to(&t), .buf = malloc(LOADGEN_BUF_BYTES), .t = &t,
                                 .lat = malloc(sizeof(double) * (size_t)o.calls)};
        if (!conns[i].buf || !conns[i].lat)
            die_sys("malloc");
    }
    open_session(&conns[0], &t);
    run_phase(conns, o.conns, o.warmup, false);
    wall = run_phase(conns, o.conns, o.calls, true);
    close_session(&conns[0]);
    tot = gather(conns, o.conns, o.calls);
    report(&tot, o.conns, wall, o.json);
    for (int i = 0; i < o.conns; i++) {
        close(conns[i].fd);
        free(conns[i].buf);
        free(conns[i].lat);
    }
    free(tot.lat);
    return tot.errors ? 1 : 0;
}
