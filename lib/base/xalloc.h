/* Allocation that aborts on out-of-memory (as crun, bubblewrap and h2o do). jansson and libuv are
 * pointed at the same allocator at startup (xalloc_install), so a NULL from jansson means a type
 * error, never OOM. */
#ifndef MCP_BASE_XALLOC_H
#define MCP_BASE_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Make jansson use xmalloc/free. Call once at startup, before any json_* call. */
void xalloc_install(void);

#endif
