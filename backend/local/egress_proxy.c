/* Egress by policy, mcpbox's side: the proxy every outbound connection of a sandbox with a
 * network policy goes through, and the DNS server that answers its queries.
 *
 * The sandbox's network namespace has lo only; nftables there redirects each TCP connection to a
 * non-loopback address to the agent's listener and each DNS query to the agent's UDP socket
 * (egress_netns.c, agent/agent_egress.c). The agent hands mcpbox copies of both sockets once
 * (local_egress_start); from then on mcpbox serves them on its own loop, per connection:
 *
 *   1. accept; SO_ORIGINAL_DST says where the program was connecting to;
 *   2. the name: a synthetic address our DNS handed out maps back to its name at once; else the
 *      first bytes are read (up to EGRESS_HEAD_MAX, EGRESS_HEAD_MS) for a TLS ClientHello's SNI
 *      or an HTTP Host header (egress_parse.c);
 *   3. the policy decides on (name, port); a refusal is recorded as an event;
 *   4. mcpbox resolves the name itself (the sandbox's address is never used for a name) and
 *      drops every loopback, private, link-local, CGNAT, metadata or reserved address
 *      (local_addr_blocked, the same list as network: true's routes);
 *   5. connect, send the bytes read in step 2, then copy both ways with back-pressure.
 *
 * DNS answers come from the policy: a name no rule could allow gets NXDOMAIN; an allowed one an A
 * record with a synthetic address from EGRESS_SYNTH_NET (one per name, per sandbox), so the
 * sandbox never learns host-side addresses and even protocols without SNI or Host (ssh, a
 * database) are tied to the name they looked up. docs/security.md has the threat model. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/egress_policy.h"
#include "backend/local/egress_parse.h"
#include "backend/local/local_internal.h"
#include "backend/local/proto.h"
#include "mcp/base/log.h"
#include "mcp/base/util.h"
#include "mcp/base/xalloc.h"

#define EGRESS_HEAD_MAX 16384          /* bytes read for a name before giving up on one */
#define EGRESS_HEAD_MS 2000            /* ... and how long to wait for them */
#define EGRESS_CONNECT_MS 15000        /* an outbound connect that takes longer fails */
#define EGRESS_READ_SIZE (256u << 10)  /* one read's buffer while copying */
#define EGRESS_QUEUE_HIGH (1u << 20)   /* unsent bytes on one side that pause the other's reads */
#define EGRESS_SYNTH_NET 0xc6120000u   /* 198.18.0.0/15 (benchmarking): never a real peer */
#define EGRESS_SYNTH_MAX 4096          /* names per sandbox with a synthetic address */
#define EGRESS_DNS_TTL 60
#define EGRESS_MAX_ADDRS 8
#define EGRESS_REFUSED_MEMORY 16       /* recent DNS refusals not recorded again ... */
#define EGRESS_REFUSED_QUIET_MS 10000  /* ... within this long */
#define EGRESS_HOSTS_ENV "MCPBOX_EGRESS_HOSTS" /* test hook: a hosts file resolved first */

struct local_egress {
    uv_loop_t *loop;
    struct store *store;
    char id[LOCAL_ID_LEN];
    uv_tcp_t listener;
    uv_udp_t dns;
    struct egress_policy *policy;
    char (*synth)[EGRESS_NAME_MAX + 1]; /* synth[i] has address EGRESS_SYNTH_NET + 1 + i */
    size_t n_synth, next_synth;
    struct {
        char name[EGRESS_NAME_MAX + 1];
        uint64_t at_ms;
    } refused[EGRESS_REFUSED_MEMORY];
    size_t next_refused;
    int refs; /* the owner, the two handles, each connection */
};

struct egress_conn {
    struct local_egress *eg;
    uv_tcp_t down, up; /* the sandbox's side, the outside */
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    uv_connect_t connect;
    uv_shutdown_t down_shut, up_shut;
    struct sockaddr_in orig;
    uint16_t port;
    char name[EGRESS_NAME_MAX + 1];
    const char *name_from; /* "dns", "tls", "http" or NULL */
    uint8_t *head;
    size_t head_len;
    struct in_addr addrs[EGRESS_MAX_ADDRS];
    size_t n_addrs, next_addr;
    int pending;           /* handles open + requests in flight; freed at 0 */
    bool up_init, closing, splicing, down_eof, up_eof, down_paused, up_paused;
};

struct egress_write {
    uv_write_t req;
    struct egress_conn *c;
    bool to_up;
    char *data;
};

static void egress_unref(struct local_egress *eg)
{
    if (--eg->refs > 0)
        return;
    egress_policy_unref(eg->policy);
    free(eg->synth);
    free(eg);
}

/* ---- events ------------------------------------------------------------------------------- */

/* A refused connection or lookup, for diagnose_sandbox: what the destination was called, the
 * port, and what refused it (a rule, the default, or an address check). */
static void egress_refused(struct local_egress *eg, const char *name, uint16_t port,
                           const char *via, const char *why)
{
    struct mcp_error err;
    /* egresspolicy's local_egress_refused (backend/local/local.h) records this event once it
     * lands; until then the event is written here with the same fields. */
    local_event(eg->store, eg->id, "egress_refused",
                json_pack("{s:s?, s:i, s:s, s:s}", "name", name && name[0] ? name : NULL, "port",
                          (int)port, "via", via, "reason", why),
                &err);
}

/* ---- the synthetic addresses -------------------------------------------------------------- */

static uint32_t synth_address(struct local_egress *eg, const char *name)
{
    for (size_t i = 0; i < eg->n_synth; i++)
        if (strcmp(eg->synth[i], name) == 0)
            return EGRESS_SYNTH_NET + 1 + (uint32_t)i;
    size_t i = eg->next_synth; /* full: the oldest name's address is reused */
    snprintf(eg->synth[i], sizeof eg->synth[i], "%s", name);
    eg->next_synth = (i + 1) % EGRESS_SYNTH_MAX;
    if (eg->n_synth < EGRESS_SYNTH_MAX)
        eg->n_synth++;
    return EGRESS_SYNTH_NET + 1 + (uint32_t)i;
}

static bool is_synthetic(uint32_t addr)
{
    return (addr & 0xfffe0000u) == EGRESS_SYNTH_NET;
}

/* The name a synthetic address was handed out for, or NULL. */
static const char *synth_name(struct local_egress *eg, uint32_t addr)
{
    uint32_t i = addr - EGRESS_SYNTH_NET - 1;
    return is_synthetic(addr) && addr > EGRESS_SYNTH_NET && i < eg->n_synth ? eg->synth[i]
                                                                            : NULL;
}

/* ---- DNS ---------------------------------------------------------------------------------- */

static bool refused_recently(struct local_egress *eg, const char *name)
{
    uint64_t now = now_mono_ms();
    for (size_t i = 0; i < EGRESS_REFUSED_MEMORY; i++)
        if (eg->refused[i].at_ms && now - eg->refused[i].at_ms < EGRESS_REFUSED_QUIET_MS &&
            strcmp(eg->refused[i].name, name) == 0)
            return true;
    size_t i = eg->next_refused;
    snprintf(eg->refused[i].name, sizeof eg->refused[i].name, "%s", name);
    eg->refused[i].at_ms = now;
    eg->next_refused = (i + 1) % EGRESS_REFUSED_MEMORY;
    return false;
}

static void dns_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char space[EGRESS_DNS_MAX * 2]; /* one datagram at a time, on the loop's thread */
    (void)h, (void)suggested;
    *b = uv_buf_init(space, sizeof space);
}

static void dns_answer(struct local_egress *eg, const uint8_t *p, size_t n,
                       const struct sockaddr *from)
{
    struct egress_dns_query q;
    uint8_t out[EGRESS_DNS_MAX];
    if (egress_dns_parse(p, n, &q) < 0)
        return; /* not a query we can answer: dropped, the resolver retries and gives up */
    char name[EGRESS_NAME_MAX + 1];
    uint32_t addr = 0;
    int rcode = EGRESS_DNS_NOERROR;
    if (q.qclass != EGRESS_DNS_IN || (q.flags & 0x7800) != 0) {
        rcode = EGRESS_DNS_NOTIMP;
    } else if (!egress_name_normalize(q.name, name) ||
               !egress_policy_may_resolve(eg->policy, name)) {
        rcode = EGRESS_DNS_NXDOMAIN;
        if (!refused_recently(eg, q.name))
            egress_refused(eg, q.name, 0, "dns", "no rule of the network policy allows this name");
    } else if (q.qtype == EGRESS_DNS_A) {
        addr = synth_address(eg, name);
    } /* other types (AAAA, HTTPS, ...): no data; IPv4 only */
    size_t len = egress_dns_answer(&q, rcode, addr, EGRESS_DNS_TTL, out);
    uv_buf_t b = uv_buf_init((char *)out, (unsigned)len);
    uv_udp_try_send(&eg->dns, &b, 1, from); /* a full socket buffer: the resolver retries */
}

static void on_dns(uv_udp_t *h, ssize_t nread, const uv_buf_t *b, const struct sockaddr *from,
                   unsigned flags)
{
    if (nread > 0 && from != NULL && !(flags & UV_UDP_PARTIAL))
        dns_answer(h->data, (const uint8_t *)b->base, (size_t)nread, from);
}

/* ---- connections: closing ----------------------------------------------------------------- */

static void conn_release(struct egress_conn *c)
{
    if (--c->pending > 0)
        return;
    struct local_egress *eg = c->eg;
    free(c->head);
    free(c);
    egress_unref(eg);
}

static void on_handle_closed(uv_handle_t *h)
{
    conn_release(h->data);
}

static void conn_close(struct egress_conn *c, bool reset)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    if (reset && !uv_is_closing((uv_handle_t *)&c->down))
        uv_tcp_close_reset(&c->down, on_handle_closed); /* the program sees the refusal at once */
    else
        uv_close((uv_handle_t *)&c->down, on_handle_closed);
    if (c->up_init && !uv_is_closing((uv_handle_t *)&c->up))
        uv_close((uv_handle_t *)&c->up, on_handle_closed);
}

static void conn_refuse(struct egress_conn *c, const char *why)
{
    egress_refused(c->eg, c->name, c->port, c->name_from ? c->name_from : "address", why);
    conn_close(c, true);
}

/* ---- connections: copying both ways ------------------------------------------------------- */

static void splice_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h, (void)suggested;
    *b = uv_buf_init(xmalloc(EGRESS_READ_SIZE), EGRESS_READ_SIZE);
}

static void on_down_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
static void on_up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void on_written(uv_write_t *req, int status)
{
    struct egress_write *w = (struct egress_write *)req;
    struct egress_conn *c = w->c;
    free(w->data);
    bool to_up = w->to_up;
    free(w);
    if (status < 0 || c->closing) {
        conn_close(c, false);
        conn_release(c);
        return;
    }
    /* The side we wrote to drained: resume reading the side that fills it. */
    uv_stream_t *dst = to_up ? (uv_stream_t *)&c->up : (uv_stream_t *)&c->down;
    if (dst->write_queue_size < EGRESS_QUEUE_HIGH / 2) {
        if (to_up && c->down_paused && !c->down_eof) {
            c->down_paused = false;
            uv_read_start((uv_stream_t *)&c->down, splice_alloc, on_down_read);
        } else if (!to_up && c->up_paused && !c->up_eof) {
            c->up_paused = false;
            uv_read_start((uv_stream_t *)&c->up, splice_alloc, on_up_read);
        }
    }
    conn_release(c);
}

static int forward(struct egress_conn *c, bool to_up, char *data, size_t len)
{
    struct egress_write *w = xcalloc(1, sizeof *w);
    w->c = c, w->to_up = to_up, w->data = data;
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    uv_stream_t *dst = to_up ? (uv_stream_t *)&c->up : (uv_stream_t *)&c->down;
    if (uv_write(&w->req, dst, &b, 1, on_written) < 0) {
        free(data);
        free(w);
        return -1;
    }
    c->pending++;
    return 0;
}

static void on_shut(uv_shutdown_t *req, int status)
{
    (void)status;
    conn_release(req->data);
}

/* One direction ended (EOF): pass the half-close on; both ended: done. */
static void half_close(struct egress_conn *c, bool from_up)
{
    uv_stream_t *dst = from_up ? (uv_stream_t *)&c->down : (uv_stream_t *)&c->up;
    uv_shutdown_t *req = from_up ? &c->down_shut : &c->up_shut;
    req->data = c;
    if (uv_shutdown(req, dst, on_shut) == 0)
        c->pending++;
    if (c->down_eof && c->up_eof)
        conn_close(c, false);
}

static void on_side_read(struct egress_conn *c, bool from_up, ssize_t nread, const uv_buf_t *b)
{
    if (nread <= 0) {
        free(b->base);
        if (nread == 0)
            return;
        if (nread != UV_EOF || c->closing) {
            conn_close(c, false);
            return;
        }
        uv_read_stop(from_up ? (uv_stream_t *)&c->up : (uv_stream_t *)&c->down);
        *(from_up ? &c->up_eof : &c->down_eof) = true;
        half_close(c, from_up);
        return;
    }
    if (c->closing) {
        free(b->base);
        return;
    }
    if (forward(c, !from_up, b->base, (size_t)nread) < 0) { /* it freed the buffer */
        conn_close(c, false);
        return;
    }
    uv_stream_t *dst = from_up ? (uv_stream_t *)&c->down : (uv_stream_t *)&c->up;
    if (dst->write_queue_size >= EGRESS_QUEUE_HIGH) { /* the other side is slower: wait */
        uv_read_stop(from_up ? (uv_stream_t *)&c->up : (uv_stream_t *)&c->down);
        *(from_up ? &c->up_paused : &c->down_paused) = true;
    }
}

static void on_down_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    on_side_read(s->data, false, nread, b);
}

static void on_up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    on_side_read(s->data, true, nread, b);
}

/* ---- connections: connecting out --------------------------------------------------------- */

static void try_connect(struct egress_conn *c);

static void on_up_closed_retry(uv_handle_t *h)
{
    struct egress_conn *c = h->data;
    c->up_init = false;
    if (!c->closing)
        try_connect(c);
    conn_release(c);
}

static void on_connected(uv_connect_t *req, int status)
{
    struct egress_conn *c = req->data;
    if (c->closing) {
        conn_release(c);
        return;
    }
    if (status < 0) { /* the next address, once this handle is closed */
        uv_close((uv_handle_t *)&c->up, on_up_closed_retry);
        conn_release(c);
        return;
    }
    uv_timer_stop(&c->timer);
    c->splicing = true;
    uv_tcp_nodelay(&c->up, 1);
    if (c->head_len > 0) { /* what was read for the name goes first */
        char *head = (char *)c->head;
        c->head = NULL;
        if (forward(c, true, head, c->head_len) < 0) {
            conn_close(c, false);
            conn_release(c);
            return;
        }
    }
    uv_read_start((uv_stream_t *)&c->down, splice_alloc, on_down_read);
    uv_read_start((uv_stream_t *)&c->up, splice_alloc, on_up_read);
    conn_release(c);
}

static void on_connect_timeout(uv_timer_t *t)
{
    struct egress_conn *c = t->data;
    if (!c->splicing)
        conn_close(c, true);
}

static void try_connect(struct egress_conn *c)
{
    if (c->next_addr >= c->n_addrs) {
        conn_close(c, true); /* every address refused the connection: as the program would see */
        return;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c->port),
                             .sin_addr = c->addrs[c->next_addr++]};
    uv_tcp_init(c->eg->loop, &c->up);
    c->up.data = c;
    c->up_init = true;
    c->pending++; /* the handle */
    c->connect.data = c;
    if (uv_tcp_connect(&c->connect, &c->up, (struct sockaddr *)&sa, on_connected) < 0) {
        conn_close(c, true);
        return;
    }
    c->pending++; /* the request */
    uv_timer_start(&c->timer, on_connect_timeout, EGRESS_CONNECT_MS, 0);
}

/* Keeps the addresses a connection may go to; refuses it when there is none. */
static void use_addresses(struct egress_conn *c, const struct in_addr *a, size_t n)
{
    c->n_addrs = c->next_addr = 0;
    for (size_t i = 0; i < n && c->n_addrs < EGRESS_MAX_ADDRS; i++)
        if (!local_addr_blocked(a[i]))
            c->addrs[c->n_addrs++] = a[i];
    if (c->n_addrs == 0 && n > 0) {
        char why[128], ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a[0], ip, sizeof ip);
        snprintf(why, sizeof why,
                 "%s resolves to %s, a loopback, private, link-local or reserved address",
                 c->name[0] ? c->name : "the destination", ip);
        conn_refuse(c, why);
        return;
    }
    if (c->n_addrs == 0) {
        conn_refuse(c, "the name does not resolve");
        return;
    }
    try_connect(c);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct egress_conn *c = req->data;
    struct in_addr found[EGRESS_MAX_ADDRS];
    size_t n = 0;
    for (struct addrinfo *ai = res; status == 0 && ai && n < EGRESS_MAX_ADDRS; ai = ai->ai_next)
        if (ai->ai_family == AF_INET)
            found[n++] = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
    uv_freeaddrinfo(res);
    if (!c->closing)
        use_addresses(c, found, n);
    conn_release(c);
}

/* Test hook (EGRESS_HOSTS_ENV, docs/local-backend.md): the tests' names resolve from a hosts
 * file, so they never need a real DNS server. Returns the number of addresses found. */
static size_t hosts_file_lookup(const char *name, struct in_addr *out)
{
    const char *path = getenv(EGRESS_HOSTS_ENV);
    FILE *f = path && path[0] ? fopen(path, "re") : NULL;
    size_t n = 0;
    char line[512];
    while (f && n < EGRESS_MAX_ADDRS && fgets(line, sizeof line, f)) {
        char *save = NULL, *ip = strtok_r(line, " \t\r\n", &save), *h;
        struct in_addr a;
        if (ip == NULL || ip[0] == '#' || inet_pton(AF_INET, ip, &a) != 1)
            continue;
        while ((h = strtok_r(NULL, " \t\r\n", &save)) != NULL)
            if (strcasecmp(h, name) == 0) {
                out[n++] = a;
                break;
            }
    }
    if (f)
        fclose(f);
    return n;
}

static void resolve(struct egress_conn *c)
{
    struct in_addr found[EGRESS_MAX_ADDRS];
    size_t n = hosts_file_lookup(c->name, found);
    if (n > 0) {
        use_addresses(c, found, n);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    c->gai.data = c;
    if (uv_getaddrinfo(c->eg->loop, &c->gai, on_resolved, c->name, NULL, &hints) < 0) {
        conn_refuse(c, "the name does not resolve");
        return;
    }
    c->pending++;
}

/* ---- connections: the name and the decision ----------------------------------------------- */

static void decide(struct egress_conn *c)
{
    uv_timer_stop(&c->timer);
    uv_read_stop((uv_stream_t *)&c->down);
    char norm[EGRESS_NAME_MAX + 1];
    if (c->name[0] && egress_name_normalize(c->name, norm))
        snprintf(c->name, sizeof c->name, "%s", norm);
    else
        c->name[0] = '\0', c->name_from = NULL; /* an IP literal or no name at all */
    struct egress_decision d = egress_policy_decide(c->eg->policy, c->name, c->port);
    if (!d.allow) {
        char why[300];
        egress_decision_describe(c->eg->policy, d, why, sizeof why);
        conn_refuse(c, why);
        return;
    }
    if (c->name[0]) {
        resolve(c);
        return;
    }
    /* No name, allowed by the policy's default: the address the program used, unless it is
     * one of ours (synthetic, but not handed out by this process) or a blocked one. */
    if (is_synthetic(ntohl(c->orig.sin_addr.s_addr))) {
        conn_refuse(c, "an address from the sandbox's DNS that this server did not hand out "
                       "(the server restarted?): look the name up again");
        return;
    }
    use_addresses(c, &c->orig.sin_addr, 1);
}

static void on_head_timeout(uv_timer_t *t)
{
    decide(t->data); /* a program that waits for the server to speak first: no name */
}

static void head_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct egress_conn *c = h->data;
    (void)suggested;
    *b = uv_buf_init((char *)c->head + c->head_len, (unsigned)(EGRESS_HEAD_MAX - c->head_len));
}

static void on_head_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct egress_conn *c = s->data;
    (void)b;
    if (nread < 0) {
        conn_close(c, false);
        return;
    }
    c->head_len += (size_t)nread;
    enum egress_parse_rc tls = egress_tls_sni(c->head, c->head_len, c->name);
    if (tls == EGRESS_PARSE_FOUND) {
        c->name_from = "tls";
        decide(c);
        return;
    }
    enum egress_parse_rc http = egress_http_host(c->head, c->head_len, c->name);
    if (http == EGRESS_PARSE_FOUND) {
        c->name_from = "http";
        decide(c);
        return;
    }
    if ((tls == EGRESS_PARSE_NONE && http == EGRESS_PARSE_NONE) ||
        c->head_len >= EGRESS_HEAD_MAX) {
        c->name[0] = '\0';
        decide(c);
    }
}

static void on_accept(uv_stream_t *server, int status)
{
    struct local_egress *eg = server->data;
    if (status < 0)
        return;
    struct egress_conn *c = xcalloc(1, sizeof *c);
    c->eg = eg;
    eg->refs++;
    uv_tcp_init(eg->loop, &c->down);
    uv_timer_init(eg->loop, &c->timer);
    c->down.data = c->timer.data = c;
    c->pending = 2;
    if (uv_accept(server, (uv_stream_t *)&c->down) < 0) {
        conn_close(c, false);
        return;
    }
    uv_os_fd_t fd;
    socklen_t len = sizeof c->orig;
    if (uv_fileno((uv_handle_t *)&c->down, &fd) < 0 ||
        getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->orig, &len) < 0) {
        conn_refuse(c, "no original destination (not a redirected connection)");
        return;
    }
    c->port = ntohs(c->orig.sin_port);
    uint32_t addr = ntohl(c->orig.sin_addr.s_addr);
    if ((addr >> 24) == 127) { /* nftables never redirects loopback: someone dialled us */
        conn_refuse(c, "a connection straight to the egress listener");
        return;
    }
    uv_tcp_nodelay(&c->down, 1);
    const char *known = synth_name(eg, addr);
    if (known != NULL) { /* looked up through our DNS: the name it was looked up by */
        snprintf(c->name, sizeof c->name, "%s", known);
        c->name_from = "dns";
        decide(c);
        return;
    }
    c->head = xmalloc(EGRESS_HEAD_MAX);
    uv_timer_start(&c->timer, on_head_timeout, EGRESS_HEAD_MS, 0);
    uv_read_start((uv_stream_t *)&c->down, head_alloc, on_head_read);
}

/* ---- the sandbox's egress ----------------------------------------------------------------- */

static void on_egress_handle_closed(uv_handle_t *h)
{
    egress_unref(h->data);
}

struct local_egress *local_egress_serve(uv_loop_t *loop, struct store *store, const char *id,
                                        int tcp_fd, int udp_fd, struct egress_policy *policy,
                                        struct mcp_error *err)
{
    struct local_egress *eg = xcalloc(1, sizeof *eg);
    eg->loop = loop, eg->store = store, eg->refs = 3;
    snprintf(eg->id, sizeof eg->id, "%s", id);
    eg->policy = egress_policy_ref(policy);
    eg->synth = xcalloc(EGRESS_SYNTH_MAX, sizeof *eg->synth);
    uv_tcp_init(loop, &eg->listener);
    uv_udp_init(loop, &eg->dns);
    eg->listener.data = eg->dns.data = eg;
    int rc = uv_tcp_open(&eg->listener, tcp_fd);
    if (rc < 0)
        close(tcp_fd);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&eg->listener, 1024, on_accept);
    if (rc == 0 && (rc = uv_udp_open(&eg->dns, udp_fd)) == 0)
        udp_fd = -1;
    if (rc == 0)
        rc = uv_udp_recv_start(&eg->dns, dns_alloc, on_dns);
    if (rc < 0) {
        if (udp_fd >= 0)
            close(udp_fd);
        mcp_error_set(err, MCP_ERR_BACKEND, 0, "serving the sandbox's egress sockets: %s",
                      uv_strerror(rc));
        local_egress_stop(eg);
        return NULL;
    }
    return eg;
}

void local_egress_set_policy(struct local_egress *eg, const struct egress_policy *policy)
{
    struct egress_policy *old = eg->policy;
    eg->policy = egress_policy_ref((struct egress_policy *)policy); /* new connections and lookups decide by it */
    egress_policy_unref(old);
}

void local_egress_stop(struct local_egress *eg)
{
    if (eg == NULL)
        return;
    uv_close((uv_handle_t *)&eg->listener, on_egress_handle_closed);
    uv_close((uv_handle_t *)&eg->dns, on_egress_handle_closed);
    egress_unref(eg); /* connections in flight end on their own (the sandbox is gone) */
}

/* ---- the agent's sockets ------------------------------------------------------------------ */

#define EGRESS_FETCH_MS 2000

static bool socket_is(int fd, int type, bool listening)
{
    int t = 0, acc = 0;
    socklen_t l = sizeof t, la = sizeof acc;
    struct sockaddr_in sa;
    socklen_t ls = sizeof sa;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &l) == 0 && t == type &&
           getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &la) == 0 && (acc != 0) == listening &&
           getsockname(fd, (struct sockaddr *)&sa, &ls) == 0 && sa.sin_family == AF_INET;
}

/* Asks the agent for its two egress sockets, on a connection of our own. Blocking, but bounded:
 * it runs when the agent is fresh (create) or known to run (adopt), and answers at once. */
static int fetch_sockets(const char *dir, int *tcp, int *udp, struct mcp_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/agent.sock", dir);
    static const char req[] = "{\"v\":1,\"id\":1,\"op\":\"egress_sockets\"}";
    unsigned char frame[4 + sizeof req];
    size_t len = sizeof req - 1;
    frame[0] = frame[1] = frame[2] = 0, frame[3] = (unsigned char)len;
    memcpy(frame + 4, req, len);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *tcp = *udp = -1;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        send(fd, frame, 4 + len, MSG_NOSIGNAL) != (ssize_t)(4 + len)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return mcp_error_set(err, MCP_ERR_BACKEND, e, "asking the sandbox's agent for its egress "
                                                      "sockets");
    }
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    char data[512];
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    struct iovec iov = {data, sizeof data};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space,
                       .msg_controllen = sizeof ctl.space};
    ssize_t n = poll(&pfd, 1, EGRESS_FETCH_MS) == 1 ? recvmsg(fd, &m, MSG_CMSG_CLOEXEC) : -1;
    close(fd);
    struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
        int fds[2];
        memcpy(fds, CMSG_DATA(cm), sizeof fds);
        *tcp = fds[0], *udp = fds[1];
    }
    if (*tcp >= 0 && socket_is(*tcp, SOCK_STREAM, true) && socket_is(*udp, SOCK_DGRAM, false))
        return 0;
    if (*tcp >= 0)
        close(*tcp), close(*udp);
    *tcp = *udp = -1;
    return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                         "the sandbox's agent did not hand over its egress sockets");
}

int local_egress_start(struct lsbx *sb, const struct egress_policy *policy, struct mcp_error *err)
{
    int tcp, udp;
    if (fetch_sockets(sb->dir, &tcp, &udp, err) < 0)
        return -1;
    sb->egress = local_egress_serve(sb->be->base.loop, sb->be->base.store, sb->id, tcp, udp,
                                    (struct egress_policy *)policy, err);
    return sb->egress ? 0 : -1;
}
