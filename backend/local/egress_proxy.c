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
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/egress_policy.h"
#include "backend/local/egress_intercept.h"
#include "backend/local/egress_parse.h"
#include "backend/local/image/addr_blocked.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_secrets.h"
#include "backend/local/local_vault.h"
#include "backend/local/proto.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define EGRESS_HEAD_MAX 16384          /* bytes read for a name before giving up on one */
#define EGRESS_HEAD_MS 2000            /* ... and how long to wait for them */
#define EGRESS_CONNECT_MS 15000        /* an outbound connect that takes longer fails */
#define EGRESS_PIPE_SIZE (1 << 20)     /* bytes in flight per direction (the unprivileged max) */
#define EGRESS_SYNTH_NET 0xc6120000u   /* 198.18.0.0/15 (benchmarking): never a real peer */
#define EGRESS_SYNTH_SPAN 131070u      /* addresses in it we hand out (.0.1 to .255.254 of /15) */
#define EGRESS_SYNTH_MAX 4096          /* names one process remembers per sandbox (a power of 2) */
#define EGRESS_DNS_TTL 60
#define EGRESS_MAX_ADDRS 8
#define EGRESS_MAX_CONNS 1024         /* open connections per sandbox; more are refused */
#define EGRESS_FDS_PER_CONN 6         /* the sandbox's socket, the outside one, two pipes */
#define EGRESS_FD_RESERVE_MIN 256     /* descriptors never given to egress (see egress_budget) */
#define EGRESS_BIG_PIPES 64           /* connections (all sandboxes) with EGRESS_PIPE_SIZE pipes */
#define EGRESS_EVENTS_MAX 50           /* refusal events per sandbox per window ... */
#define EGRESS_EVENTS_WINDOW_MS 10000  /* ... beyond that they are not recorded (a flood) */
#define EGRESS_HOSTS_ENV "MCPBOX_EGRESS_HOSTS" /* test hook: a hosts file resolved first */

/* Every sandbox's connections in this process (the backend's loop thread only). */
static unsigned egress_conns_total, egress_big_pipes;
static unsigned egress_instances; /* sandboxes served (struct local_egress alive) */

struct local_egress {
    uv_loop_t *loop;
    struct lsbx *sb; /* one reference: its policy (local_egress_policy), its id, the store */
    uv_tcp_t listener;
    uv_udp_t dns;
    struct synth_entry *synth; /* EGRESS_SYNTH_MAX slots, open addressing by address */
    size_t n_synth;
    unsigned n_conns;
    struct egress_conn *conns; /* open ones: closed with the sandbox's egress (destroy, exit) */
    uint64_t events_window_ms; /* start of the current window of refusal events */
    unsigned events_in_window;
    json_t *secrets_used; /* {name: {host: {count, last_time}}}: no values */
    struct egress_intercept_share *intercepts; /* its intercepted connections (their threads) */
    int refs; /* the owner, the two handles, each connection */
};

/* A synthetic address and the name it stands for. */
struct synth_entry {
    uint32_t addr; /* 0: free */
    char name[EGRESS_NAME_MAX + 1];
};

/* One direction of a connection once it is copied (socket -> pipe -> socket). */
struct flow {
    int from, to;
    int pipe[2];
    size_t in_pipe;
    const char *pending; /* bytes to send before the first splice (the head, to the outside) */
    size_t pending_len, pending_off;
    bool eof, shut;
};

static void flow_close(struct flow *f);

struct egress_conn {
    struct local_egress *eg;
    uv_tcp_t down, up; /* the sandbox's side, the outside */
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    uv_connect_t connect;
    /* once connected: the sockets (dup'd out of the stream handles), polled, one flow each way */
    int down_fd, up_fd;
    uv_poll_t down_poll, up_poll;
    struct flow to_up, to_down;
    struct sockaddr_in orig;
    uint16_t port;
    char name[EGRESS_NAME_MAX + 1];
    const char *name_from; /* "dns", "tls", "http" or NULL */
    uint8_t *head;
    size_t head_len;
    json_t *secrets; /* definitions of the bound secrets this host may get, or NULL */
    struct in_addr addrs[EGRESS_MAX_ADDRS];
    size_t n_addrs, next_addr;
    int pending;           /* handles open + requests in flight; freed at 0 */
    bool up_init, closing, splicing, resolving, big_pipes;
    bool down_polled, up_polled; /* poll handles made (only those are closed) */
    struct egress_conn *prev, *next; /* in eg->conns */
};


static void egress_unref(struct local_egress *eg)
{
    if (--eg->refs > 0)
        return;
    lsbx_unref(eg->sb);
    json_decref(eg->secrets_used);
    egress_intercept_share_unref(eg->intercepts);
    free(eg->synth);
    free(eg);
    egress_instances--;
}

/* ---- events ------------------------------------------------------------------------------- */

/* A refused connection or lookup, for diagnose_sandbox (local_egress.c records it). */
static void egress_refused(struct local_egress *eg, struct egress_refusal *r)
{
    /* A program looping over random names would otherwise write an event per attempt. */
    uint64_t now = now_mono_ms();
    if (now - eg->events_window_ms >= EGRESS_EVENTS_WINDOW_MS)
        eg->events_window_ms = now, eg->events_in_window = 0;
    r->flood = ++eg->events_in_window > EGRESS_EVENTS_MAX; /* repeats still counted */
    local_egress_refused(eg->sb->be->base.store, eg->sb->id, r);
}

/* ---- the synthetic addresses -------------------------------------------------------------- */

/* A name's address is a hash of the name, so every mcpbox process serving the same sandbox (the
 * one that made it, another that adopted it, the next after a restart) hands out the same one
 * and knows the name when a connection to it comes in, if it answered that name itself. A second
 * name on the same address (rare: 131070 of them) takes the next free one. */
static uint32_t name_hash(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

static struct synth_entry *synth_slot(struct local_egress *eg, uint32_t addr)
{
    size_t i = addr & (EGRESS_SYNTH_MAX - 1);
    while (eg->synth[i].addr != 0 && eg->synth[i].addr != addr)
        i = (i + 1) & (EGRESS_SYNTH_MAX - 1);
    return &eg->synth[i];
}

static uint32_t synth_address(struct local_egress *eg, const char *name)
{
    if (eg->n_synth >= EGRESS_SYNTH_MAX * 3 / 4) { /* full: start over (old answers fall back) */
        memset(eg->synth, 0, EGRESS_SYNTH_MAX * sizeof *eg->synth);
        eg->n_synth = 0;
    }
    uint32_t off = name_hash(name) % EGRESS_SYNTH_SPAN;
    for (;;) {
        uint32_t addr = EGRESS_SYNTH_NET + 1 + off;
        struct synth_entry *e = synth_slot(eg, addr);
        if (e->addr == 0) {
            e->addr = addr;
            snprintf(e->name, sizeof e->name, "%s", name);
            eg->n_synth++;
            return addr;
        }
        if (strcmp(e->name, name) == 0)
            return addr;
        off = (off + 1) % EGRESS_SYNTH_SPAN;
    }
}

static bool is_synthetic(uint32_t addr)
{
    return (addr & 0xfffe0000u) == EGRESS_SYNTH_NET;
}

/* The name a synthetic address was handed out for by this process, or NULL. */
static const char *synth_name(struct local_egress *eg, uint32_t addr)
{
    if (!is_synthetic(addr))
        return NULL;
    struct synth_entry *e = synth_slot(eg, addr);
    return e->addr == addr ? e->name : NULL;
}

/* ---- DNS ---------------------------------------------------------------------------------- */

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
    const struct egress_policy *policy;
    uint32_t addr = 0;
    int rcode = EGRESS_DNS_NOERROR;
    if (q.qclass != EGRESS_DNS_IN || (q.flags & 0x7800) != 0) {
        rcode = EGRESS_DNS_NOTIMP;
    } else if (!egress_name_normalize(q.name, name)) {
        rcode = EGRESS_DNS_NXDOMAIN; /* not a host name at all */
    } else if (!egress_policy_may_resolve(policy = local_egress_policy(eg->sb), name)) {
        rcode = EGRESS_DNS_NXDOMAIN; /* no port of it could be allowed: it does not exist */
        struct egress_refusal r = {.name = name, .protocol = "dns", .reason = "policy",
                                   .policy = policy,
                                   .decision = egress_policy_decide_lookup(policy, name)};
        egress_refused(eg, &r);
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
    flow_close(&c->to_up);
    flow_close(&c->to_down);
    if (c->down_fd >= 0)
        close(c->down_fd);
    if (c->up_fd >= 0)
        close(c->up_fd);
    free(c->head);
    json_decref(c->secrets);
    if (c->prev)
        c->prev->next = c->next;
    else
        eg->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->big_pipes)
        egress_big_pipes--;
    free(c);
    eg->n_conns--;
    egress_conns_total--;
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
    if (c->resolving) /* a lookup still queued ends at once (UV_ECANCELED) */
        uv_cancel((uv_req_t *)&c->gai);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    if (c->splicing) { /* the stream handles are gone already; the fds close with the conn */
        if (c->down_polled)
            uv_close((uv_handle_t *)&c->down_poll, on_handle_closed);
        if (c->up_polled)
            uv_close((uv_handle_t *)&c->up_poll, on_handle_closed);
        return;
    }
    if (reset && !uv_is_closing((uv_handle_t *)&c->down))
        uv_tcp_close_reset(&c->down, on_handle_closed); /* the program sees the refusal at once */
    else
        uv_close((uv_handle_t *)&c->down, on_handle_closed);
    if (c->up_init && !uv_is_closing((uv_handle_t *)&c->up))
        uv_close((uv_handle_t *)&c->up, on_handle_closed);
}

/* A libuv call that does not fail in practice did (out of memory, a descriptor it cannot watch):
 * the connection goes, as the program would see a broken one; the server and others go on. */
static void conn_drop(struct egress_conn *c, const char *doing, int rc)
{
    log_warn("sandbox %s: egress connection (port %u) dropped: %s: %s", c->eg->sb->id,
             (unsigned)c->port, doing, uv_strerror(rc));
    conn_close(c, false);
}

/* r: what refused it (the caller fills reason, and policy/decision for a policy refusal). */
static void conn_refuse(struct egress_conn *c, struct egress_refusal *r, const struct in_addr *a)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, a ? a : &c->orig.sin_addr, ip, sizeof ip);
    r->name = c->name, r->port = c->port, r->address = ip;
    egress_refused(c->eg, r);
    conn_close(c, true);
}

static void conn_refuse_for(struct egress_conn *c, const char *reason)
{
    struct egress_refusal r = {.reason = reason};
    conn_refuse(c, &r, NULL);
}

/* ---- connections: copying both ways ------------------------------------------------------- */

/* Each direction moves bytes socket -> pipe -> socket with splice(2): the payload never enters
 * mcpbox's memory, one pipe per direction is the only buffer (EGRESS_PIPE_SIZE), and a side
 * that does not read stops the other being read (its pipe stays full). Reading into a pipe is
 * tried only when it is empty, so readiness is unambiguous: EAGAIN from the source means
 * "nothing to read", never "pipe full". */
static bool flow_init(struct flow *f, int from, int to, bool big)
{
    f->from = from, f->to = to, f->in_pipe = 0, f->eof = f->shut = false;
    if (pipe2(f->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        f->pipe[0] = f->pipe[1] = -1;
        return false;
    }
    if (big) /* else the default 64 KiB */
        fcntl(f->pipe[1], F_SETPIPE_SZ, EGRESS_PIPE_SIZE);
    return true;
}

static void flow_close(struct flow *f)
{
    for (int i = 0; i < 2; i++)
        if (f->pipe[i] >= 0)
            close(f->pipe[i]), f->pipe[i] = -1;
}

/* Moves what can move now; -1 on an error of either socket. */
static int flow_pump(struct flow *f)
{
    for (;;) {
        if (f->pending_off < f->pending_len) { /* the bytes read for the name, first */
            ssize_t n = send(f->to, f->pending + f->pending_off, f->pending_len - f->pending_off,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
            f->pending_off += (size_t)n;
            continue;
        }
        if (f->in_pipe > 0) {
            ssize_t n = splice(f->pipe[0], NULL, f->to, NULL, f->in_pipe,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
            f->in_pipe -= (size_t)n;
            continue;
        }
        if (!f->eof) {
            ssize_t n = splice(f->from, NULL, f->pipe[1], NULL, EGRESS_PIPE_SIZE,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
            if (n == 0)
                f->eof = true;
            f->in_pipe += (size_t)n;
            continue;
        }
        if (!f->shut) { /* the source ended and everything went out: pass the half-close on */
            shutdown(f->to, SHUT_WR);
            f->shut = true;
        }
        return 0;
    }
}

static int flow_events(const struct flow *f, int fd)
{
    int ev = 0;
    if (f->from == fd && !f->eof && f->in_pipe == 0 && f->pending_off >= f->pending_len)
        ev |= UV_READABLE;
    if (f->to == fd && (f->in_pipe > 0 || f->pending_off < f->pending_len))
        ev |= UV_WRITABLE;
    return ev;
}

static void on_splice_ready(uv_poll_t *p, int status, int events);

static int splice_arm(struct egress_conn *c)
{
    uv_poll_t *polls[2] = {&c->down_poll, &c->up_poll};
    int fds[2] = {c->down_fd, c->up_fd};
    for (int i = 0; i < 2; i++) {
        int ev = flow_events(&c->to_up, fds[i]) | flow_events(&c->to_down, fds[i]);
        int rc = ev ? uv_poll_start(polls[i], ev, on_splice_ready) : uv_poll_stop(polls[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void on_splice_ready(uv_poll_t *p, int status, int events)
{
    struct egress_conn *c = p->data;
    (void)events;
    if (c->closing)
        return;
    if (status < 0 || flow_pump(&c->to_up) < 0 || flow_pump(&c->to_down) < 0) {
        conn_close(c, false);
        return;
    }
    if (c->to_up.shut && c->to_down.shut) {
        conn_close(c, false);
        return;
    }
    int rc = splice_arm(c);
    if (rc < 0)
        conn_drop(c, "watching its sockets", rc);
}

static void on_tcp_handed_over(uv_handle_t *h)
{
    conn_release(h->data);
}

/* Connected: the two sockets leave their libuv stream handles (dup'd, then the handles close)
 * for polls, and the copying starts with the bytes read for the name. */
static void splice_start(struct egress_conn *c)
{
    uv_os_fd_t down, up;
    uv_fileno((uv_handle_t *)&c->down, &down);
    uv_fileno((uv_handle_t *)&c->up, &up);
    c->down_fd = fcntl(down, F_DUPFD_CLOEXEC, 0);
    c->up_fd = fcntl(up, F_DUPFD_CLOEXEC, 0);
    /* Large pipes for the first connections only: a sandbox holding hundreds of stalled ones
     * must not pin 2 MiB of kernel memory each, outside its own memory limit. */
    c->big_pipes = egress_big_pipes < EGRESS_BIG_PIPES;
    egress_big_pipes += c->big_pipes;
    bool ok = c->down_fd >= 0 && c->up_fd >= 0 &&
              flow_init(&c->to_up, c->down_fd, c->up_fd, c->big_pipes) &&
              flow_init(&c->to_down, c->up_fd, c->down_fd, c->big_pipes);
    if (!ok) {
        conn_close(c, false);
        return;
    }
    c->to_up.pending = (char *)c->head, c->to_up.pending_len = c->head_len;
    c->splicing = true;
    uv_close((uv_handle_t *)&c->down, on_tcp_handed_over);
    uv_close((uv_handle_t *)&c->up, on_tcp_handed_over);
    c->up_init = false;
    int rc = uv_poll_init(c->eg->loop, &c->down_poll, c->down_fd);
    if (rc == 0) {
        c->down_polled = true, c->pending++;
        rc = uv_poll_init(c->eg->loop, &c->up_poll, c->up_fd);
    }
    if (rc == 0)
        c->up_polled = true, c->pending++;
    c->down_poll.data = c->up_poll.data = c;
    if (rc < 0) { /* a handle that failed its init was never made: it must not be closed */
        conn_drop(c, "polling its sockets", rc);
        return;
    }
    on_splice_ready(&c->down_poll, 0, 0);
}

/* ---- connections: secrets (egress_intercept.c) -------------------------------------------- */

/* The definitions of the secrets bound to the sandbox that may go to the connection's host: the
 * connection is then intercepted rather than spliced. Only a name mcpbox resolves itself counts,
 * so the secret goes to that name's own addresses, never to the one the sandbox dialled. */
static void bound_secrets(struct egress_conn *c)
{
    json_t *names = local_egress_secrets(c->eg->sb);
    json_t *defs = local_secrets_for_host(c->eg->sb->be->state_dir, names, c->name);
    json_t *vault = local_vault_for_host(c->eg->sb->be->state_dir, c->eg->sb->id, c->name,
                                         c->port); /* OpenSandbox's credential vault */
    json_array_extend(defs, vault);
    json_decref(vault);
    if (json_array_size(defs) > 0)
        c->secrets = defs;
    else
        json_decref(defs);
}

static void note_secrets_used(struct local_egress *eg, json_t *defs, const char *host)
{
    if (eg->secrets_used == NULL)
        eg->secrets_used = json_object();
    size_t i;
    json_t *def;
    json_array_foreach(defs, i, def)
    {
        const char *name = json_string_value(json_object_get(def, "name"));
        json_t *hosts = json_object_get(eg->secrets_used, name);
        if (hosts == NULL)
            json_object_set_new(eg->secrets_used, name, hosts = json_object());
        json_t *u = json_object_get(hosts, host);
        json_int_t n = json_integer_value(json_object_get(u, "count"));
        char when[32];
        format_rfc3339_ms(now_wall_ms(), when);
        json_object_set_new(hosts, host,
                            json_pack("{s:I, s:s}", "count", n + 1, "last_time", when));
    }
}

json_t *local_egress_secrets_used(struct lsbx *sb)
{
    return sb->egress && sb->egress->secrets_used ? json_deep_copy(sb->egress->secrets_used) : NULL;
}

/* Connected to a host the sandbox's secrets may go to: both sockets go to a thread of their own
 * (egress_intercept.c) with the bytes read so far and the definitions. */
static void intercept(struct egress_conn *c)
{
    uv_os_fd_t down, up;
    uv_fileno((uv_handle_t *)&c->down, &down);
    uv_fileno((uv_handle_t *)&c->up, &up);
    struct egress_intercept *ic = xcalloc(1, sizeof *ic);
    ic->down = fcntl(down, F_DUPFD_CLOEXEC, 0);
    ic->up = fcntl(up, F_DUPFD_CLOEXEC, 0);
    ic->head = c->head, ic->head_len = c->head_len, c->head = NULL;
    ic->defs = c->secrets, c->secrets = NULL;
    snprintf(ic->host, sizeof ic->host, "%s", c->name);
    snprintf(ic->sandbox_id, sizeof ic->sandbox_id, "%s", c->eg->sb->id);
    snprintf(ic->state_dir, sizeof ic->state_dir, "%s", c->eg->sb->be->state_dir);
    if (c->eg->intercepts == NULL)
        c->eg->intercepts = egress_intercept_share_new();
    ic->share = c->eg->intercepts;
    note_secrets_used(c->eg, ic->defs, c->name);
    if (egress_intercept_start(ic) < 0)
        log_warn("sandbox %s: a connection to %s closed: too many intercepted at once (at most "
                 "%d per sandbox, %d in all)",
                 c->eg->sb->id, c->name, EGRESS_INTERCEPT_PER_SANDBOX, EGRESS_INTERCEPT_MAX);
    c->splicing = true; /* the stream handles go; conn_close closes the rest */
    uv_close((uv_handle_t *)&c->down, on_tcp_handed_over);
    uv_close((uv_handle_t *)&c->up, on_tcp_handed_over);
    c->up_init = false;
    conn_close(c, false);
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
    uv_tcp_nodelay(&c->up, 1);
    if (c->secrets != NULL)
        intercept(c);
    else
        splice_start(c);
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
    if (c->n_addrs == 0 && n > 0) { /* loopback, private, link-local, metadata, reserved */
        struct egress_refusal r = {.reason = "private_address"};
        conn_refuse(c, &r, &a[0]);
        return;
    }
    if (c->n_addrs == 0) {
        conn_refuse_for(c, "unresolved");
        return;
    }
    try_connect(c);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct egress_conn *c = req->data;
    struct in_addr found[EGRESS_MAX_ADDRS];
    size_t n = 0;
    c->resolving = false;
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
        conn_refuse_for(c, "unresolved");
        return;
    }
    c->resolving = true;
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
    const struct egress_policy *policy = local_egress_policy(c->eg->sb);
    struct egress_decision d = egress_policy_decide(policy, c->name, c->port);
    if (!d.allow) {
        struct egress_refusal r = {.reason = "policy", .policy = policy, .decision = d};
        conn_refuse(c, &r, NULL);
        return;
    }
    if (c->name[0]) {
        bound_secrets(c);
        resolve(c);
        return;
    }
    /* No name, allowed by the policy's default: the address the program used, unless it is
     * a synthetic one this process did not hand out (and no SNI or Host named it) or a blocked
     * one. */
    if (is_synthetic(ntohl(c->orig.sin_addr.s_addr))) {
        conn_refuse_for(c, "stale_dns_address");
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

/* Connections all sandboxes together may hold open in this process: each costs
 * EGRESS_FDS_PER_CONN descriptors, and a quarter of RLIMIT_NOFILE (at least
 * EGRESS_FD_RESERVE_MIN) stays for everything else, so sandboxes holding connections open can
 * never leave the server without descriptors for creates, commands and files (EMFILE). */
static unsigned egress_budget(void)
{
    static unsigned budget;
    if (budget == 0) {
        struct rlimit r;
        rlim_t n = getrlimit(RLIMIT_NOFILE, &r) == 0 ? r.rlim_cur : 1024;
        if (n == RLIM_INFINITY || n > (1u << 20))
            n = 1u << 20;
        rlim_t reserve = n / 4 > EGRESS_FD_RESERVE_MIN ? n / 4 : EGRESS_FD_RESERVE_MIN;
        budget = n > reserve + EGRESS_FDS_PER_CONN ? (unsigned)((n - reserve) / EGRESS_FDS_PER_CONN)
                                                   : 1;
    }
    return budget;
}

/* Whether a sandbox holding n connections (the new one counted) may have one more: never past
 * EGRESS_MAX_CONNS or the budget; and once half the budget is in use, only up to an even share
 * of it per sandbox, so one busy sandbox cannot take what the others would need. */
static bool egress_may_open(unsigned n)
{
    unsigned budget = egress_budget();
    unsigned even = budget / (egress_instances ? egress_instances : 1);
    if (n > EGRESS_MAX_CONNS || egress_conns_total > budget)
        return false;
    return egress_conns_total <= budget / 2 || n <= (even > 0 ? even : 1);
}

static void on_accept(uv_stream_t *server, int status)
{
    struct local_egress *eg = server->data;
    if (status < 0)
        return;
    struct egress_conn *c = xcalloc(1, sizeof *c);
    c->eg = eg;
    eg->refs++;
    eg->n_conns++;
    egress_conns_total++;
    c->next = eg->conns;
    if (eg->conns)
        eg->conns->prev = c;
    eg->conns = c;
    uv_tcp_init(eg->loop, &c->down);
    uv_timer_init(eg->loop, &c->timer);
    c->down.data = c->timer.data = c;
    c->pending = 2;
    c->down_fd = c->up_fd = -1;
    c->to_up.pipe[0] = c->to_up.pipe[1] = c->to_down.pipe[0] = c->to_down.pipe[1] = -1;
    if (uv_accept(server, (uv_stream_t *)&c->down) < 0) {
        conn_close(c, false);
        return;
    }
    uv_os_fd_t fd;
    socklen_t len = sizeof c->orig;
    if (uv_fileno((uv_handle_t *)&c->down, &fd) < 0 ||
        getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->orig, &len) < 0) {
        conn_refuse_for(c, "no_destination");
        return;
    }
    c->port = ntohs(c->orig.sin_port);
    if (!egress_may_open(eg->n_conns)) {
        conn_refuse_for(c, "too_many_connections");
        return;
    }
    uint32_t addr = ntohl(c->orig.sin_addr.s_addr);
    if ((addr >> 24) == 127) { /* nftables never redirects loopback: someone dialled us */
        conn_refuse_for(c, "direct_to_proxy");
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
    int rc = uv_read_start((uv_stream_t *)&c->down, head_alloc, on_head_read);
    if (rc < 0)
        conn_drop(c, "reading its first bytes", rc);
}

/* ---- the sandbox's egress ----------------------------------------------------------------- */

static void on_egress_handle_closed(uv_handle_t *h)
{
    egress_unref(h->data);
}

static struct local_egress *egress_serve(struct lsbx *sb, int tcp_fd, int udp_fd,
                                         struct mcp_error *err)
{
    uv_loop_t *loop = sb->be->base.loop;
    struct local_egress *eg = xcalloc(1, sizeof *eg);
    eg->loop = loop, eg->refs = 3, eg->sb = sb;
    lsbx_ref(sb);
    eg->synth = xcalloc(EGRESS_SYNTH_MAX, sizeof *eg->synth);
    egress_instances++;
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

void local_egress_stop(struct local_egress *eg)
{
    if (eg == NULL)
        return;
    uv_close((uv_handle_t *)&eg->listener, on_egress_handle_closed);
    uv_close((uv_handle_t *)&eg->dns, on_egress_handle_closed);
    /* The sandbox is gone or this process is leaving: its open connections go too (a process
     * exiting must not wait for a long download to end). */
    for (struct egress_conn *c = eg->conns; c; c = c->next)
        conn_close(c, false);
    egress_unref(eg);
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

int local_egress_start(struct lsbx *sb, struct mcp_error *err)
{
    int tcp, udp;
    if (fetch_sockets(sb->dir, &tcp, &udp, err) < 0)
        return -1;
    sb->egress = egress_serve(sb, tcp, udp, err);
    return sb->egress ? 0 : -1;
}
