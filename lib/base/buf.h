/* A growable byte buffer with a hard cap (for anything that grows with peer input). */
#ifndef MCP_BASE_BUF_H
#define MCP_BASE_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct buf {
    char *data; /* owned; always NUL-terminated when len > 0 or after buf_cstr */
    size_t len;
    size_t cap;   /* allocated bytes */
    size_t limit; /* the most len may ever be */
};

void buf_init(struct buf *b, size_t limit);
void buf_release(struct buf *b);
void buf_reset(struct buf *b);
/* Append; returns -1 (and appends nothing) if the result would exceed the limit. */
int buf_append(struct buf *b, const void *data, size_t len);
int buf_append_str(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as one single-quoted POSIX shell word (each ' written as '\'''). */
int buf_append_shell_word(struct buf *b, const char *s);
/* Drop the first n bytes. */
void buf_consume(struct buf *b, size_t n);
/* The contents as a C string (never NULL). */
const char *buf_cstr(struct buf *b);
/* Take ownership of the contents (NUL-terminated); the buffer is left empty. */
char *buf_steal(struct buf *b, size_t *len);

#endif
