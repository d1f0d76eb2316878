#include "lib/base/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

void buf_init(struct buf *b, size_t limit)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit;
}

void buf_release(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->data != NULL)
        b->data[0] = '\0';
}

static void reserve(struct buf *b, size_t need)
{
    if (need + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need + 1)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
    if (len > b->limit || b->len > b->limit - len)
        return -1;
    reserve(b, b->len + len);
    if (len > 0)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_append_shell_word(struct buf *b, const char *s)
{
    int r = buf_append_str(b, "'");
    for (; *s && r == 0; s++)
        r = *s == '\'' ? buf_append_str(b, "'\\''") : buf_append(b, s, 1);
    return r == 0 ? buf_append_str(b, "'") : r;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    int r = buf_append(b, s, (size_t)n);
    free(s);
    return r;
}

void buf_consume(struct buf *b, size_t n)
{
    if (n >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

const char *buf_cstr(struct buf *b)
{
    if (b->data == NULL)
        return "";
    return b->data;
}

char *buf_steal(struct buf *b, size_t *len)
{
    reserve(b, b->len);
    char *p = b->data;
    p[b->len] = '\0';
    if (len != NULL)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}
