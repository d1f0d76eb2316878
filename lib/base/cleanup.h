/* Scope-bound cleanup (gnu11 cleanup attribute), as crun and bubblewrap use it.
 * Always initialise: `cleanup_free char *p = NULL;`, `cleanup_close int fd = -1;`.
 * Hand a resource out with steal_ptr(&p) / steal_fd(&fd). */
#ifndef MCP_BASE_CLEANUP_H
#define MCP_BASE_CLEANUP_H

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_freep(void *p)
{
    free(*(void **)p);
}

static inline void cleanup_closep(const int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

static inline void cleanup_jsonp(json_t **j)
{
    json_decref(*j);
}

#define cleanup_free  __attribute__((cleanup(cleanup_freep)))
#define cleanup_close __attribute__((cleanup(cleanup_closep)))
#define cleanup_json  __attribute__((cleanup(cleanup_jsonp)))

/* Takes the pointer out of *pp (pp points to any object pointer) and leaves NULL there. */
static inline void *steal_ptr(void *pp)
{
    void **p = pp;
    void *stolen = *p;
    *p = NULL;
    return stolen;
}

static inline int steal_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

#endif
