/* The HTTP listener: address parsing, accept, the periodic sweep that enforces every timeout
 * (and the front-end's, such as session expiry), and an orderly stop. */
#define LOG_MODULE "http"
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/config.h"
#include "server/http/http_conn.h"
#include "server/server.h"

/* Pending connections the kernel may queue. */
#define HTTP_LISTEN_BACKLOG 128

static void server_handle_closed(uv_handle_t *h)
{
    struct http_server *hs = h->data;
    if (--hs->open_handles == 0 && hs->nconns == 0)
        free(hs);
}

static void on_sweep(uv_timer_t *t)
{
    struct http_server *hs = t->data;
    uint64_t now = now_mono_ms();
    for (struct http_conn *c = hs->conns; c; c = c->next)
        http_conn_sweep(c, now);
    if (hs->fe.sweep)
        hs->fe.sweep(hs->fe.arg, now);
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct http_server *hs = listener->data;
    if (status < 0) {
        log_warn("accept: %s", uv_strerror(status));
        return;
    }
    http_conn_accept(hs);
}

static void http_stop(void *arg)
{
    struct http_server *hs = arg;
    if (hs->stopping)
        return;
    hs->stopping = true;
    if (hs->fe.stop)
        hs->fe.stop(hs->fe.arg); /* answers what is in progress while the connections are open */
    for (struct http_conn *c = hs->conns; c; c = c->next)
        http_conn_close(c);
    uv_close((uv_handle_t *)&hs->listener, server_handle_closed);
    uv_close((uv_handle_t *)&hs->sweep, server_handle_closed);
    uv_close((uv_handle_t *)&hs->resume, server_handle_closed);
    if (hs->ext && hs->ext->stop)
        hs->ext->stop(hs->ext->arg);
}

/* "host:port" or "[v6]:port" into a socket address; "localhost" means 127.0.0.1. */
static int parse_listen(const char *spec, struct sockaddr_storage *ss, struct mcp_error *err)
{
    char host[64];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || strlen(colon + 1) == 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "--http %s: expected HOST:PORT, e.g. 127.0.0.1:8765", spec);
    size_t n = (size_t)(colon - spec);
    if (spec[0] == '[' && spec[n - 1] == ']') {
        spec++;
        n -= 2;
    }
    if (n >= sizeof(host))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--http: host too long");
    memcpy(host, spec, n);
    host[n] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "--http: bad port '%s'", colon + 1);
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0 ||
        uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return mcp_error_set(err, MCP_ERR_INVALID, 0,
                         "--http: '%s' is not an IP address (use 127.0.0.1, [::1] or localhost)",
                         host);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
    return IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
}

static int bind_listener(struct http_server *hs, const struct sockaddr_storage *ss,
                         struct mcp_error *err)
{
    uv_tcp_init(hs->loop, &hs->listener);
    hs->listener.data = hs;
    hs->open_handles++;
    int rc = uv_tcp_bind(&hs->listener, (const struct sockaddr *)ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&hs->listener, HTTP_LISTEN_BACKLOG, on_connection);
    if (rc < 0)
        return mcp_error_set(err, MCP_ERR_IO, -rc, "cannot listen for HTTP: %s",
                             uv_strerror(rc));
    return 0;
}

static void announce(struct http_server *hs)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[64] = "?";
    uv_tcp_getsockname(&hs->listener, (struct sockaddr *)&ss, &len);
    if (ss.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        hs->policy.port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        fprintf(stderr, "listening on http://[%s]:%d%s\n", ip, hs->policy.port, hs->fe.endpoint);
    } else {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
        hs->policy.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        fprintf(stderr, "listening on http://%s:%d%s\n", ip, hs->policy.port, hs->fe.endpoint);
    }
    fflush(stderr);
}

struct http_server *http_server_listen(struct mcp_server *srv, const struct mcp_config *cfg,
                                       const struct http_frontend *fe,
                                       const struct http_extension *ext, struct mcp_error *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    const char *listen = cfg->http_listen ? cfg->http_listen : "127.0.0.1:8765";
    if (parse_listen(listen, &ss, err) < 0)
        return NULL;
    const char *token = cfg->token && *cfg->token ? cfg->token : NULL;
    if (!is_loopback(&ss) && !token) {
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "refusing to serve HTTP on the non-loopback address %s without a token: "
                      "pass --token TOKEN (or set MCPBOX_TOKEN)",
                      listen);
        return NULL;
    }
    struct http_server *hs = xcalloc(1, sizeof(*hs));
    hs->srv = srv;
    hs->loop = server_loop(srv);
    hs->policy.loopback = is_loopback(&ss);
    hs->policy.token = token;
    hs->fe = *fe;
    hs->ext = ext;
    if (bind_listener(hs, &ss, err) < 0) {
        hs->stopping = true;
        uv_close((uv_handle_t *)&hs->listener, server_handle_closed);
        return NULL;
    }
    uv_timer_init(hs->loop, &hs->sweep);
    uv_idle_init(hs->loop, &hs->resume);
    hs->sweep.data = hs->resume.data = hs;
    hs->open_handles += 2;
    uv_timer_start(&hs->sweep, on_sweep, HTTP_SWEEP_INTERVAL_MS, HTTP_SWEEP_INTERVAL_MS);
    announce(hs);
    server_on_stop(srv, http_stop, hs);
    return hs;
}
