/* Preloaded into `mcpbox serve` by test_egress_faults.py: makes chosen libuv calls on IPv4
 * TCP sockets fail, so the egress proxy's paths for calls that do not fail in practice run.
 * UVFAULT_POLL_INIT, UVFAULT_POLL_START, UVFAULT_READ_START: comma-separated call numbers
 * (from 1, counting only calls on such sockets) that fail, without touching the handle, with an
 * error libuv itself returns there. Over stdio the egress proxy is mcpbox's only user of TCP. */
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

static bool inet_stream(int fd)
{
    int type = 0;
    socklen_t tl = sizeof type;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    return fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
           type == SOCK_STREAM && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 &&
           sa.ss_family == AF_INET;
}

/* Counts this call; whether its number is listed in env. */
static bool fails(const char *env, unsigned *calls)
{
    unsigned n = ++*calls;
    const char *list = getenv(env);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        if (strtoul(p, NULL, 10) == n)
            return true;
    return false;
}

/* libuv's own function: into *fn (memcpy: ISO C has no cast from void * to a function). */
static void real(const char *name, void *fn, size_t size)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL)
        abort();
    memcpy(fn, &f, size);
}

int uv_poll_init(uv_loop_t *loop, uv_poll_t *handle, int fd)
{
    static unsigned calls;
    if (inet_stream(fd) && fails("UVFAULT_POLL_INIT", &calls))
        return UV_EEXIST; /* the descriptor is watched already */
    int (*f)(uv_loop_t *, uv_poll_t *, int);
    real("uv_poll_init", &f, sizeof f);
    return f(loop, handle, fd);
}

int uv_poll_start(uv_poll_t *handle, int events, uv_poll_cb cb)
{
    static unsigned calls;
    uv_os_fd_t fd = -1;
    if (uv_fileno((uv_handle_t *)handle, &fd) == 0 && inet_stream(fd) &&
        fails("UVFAULT_POLL_START", &calls))
        return UV_EEXIST;
    int (*f)(uv_poll_t *, int, uv_poll_cb);
    real("uv_poll_start", &f, sizeof f);
    return f(handle, events, cb);
}

int uv_read_start(uv_stream_t *stream, uv_alloc_cb alloc, uv_read_cb cb)
{
    static unsigned calls;
    uv_os_fd_t fd = -1;
    if (stream->type == UV_TCP && uv_fileno((uv_handle_t *)stream, &fd) == 0 && inet_stream(fd) &&
        fails("UVFAULT_READ_START", &calls))
        return UV_ENOTCONN;
    int (*f)(uv_stream_t *, uv_alloc_cb, uv_read_cb);
    real("uv_read_start", &f, sizeof f);
    return f(stream, alloc, cb);
}
