/* Terminal output to plain text (term_text.h). */
#include "lib/base/term_text.h"

#include <stdbool.h>
#include <string.h>

#include "lib/base/xalloc.h"

/* The line being built: bytes [start, end) of out, with the cursor at col bytes from start. */
struct line {
    char *out;
    size_t start, end, col;
};

static void put(struct line *l, char c)
{
    l->out[l->start + l->col] = c;
    l->col++;
    if (l->start + l->col > l->end)
        l->end = l->start + l->col;
}

static void newline(struct line *l)
{
    l->out[l->end++] = '\n';
    l->start = l->end;
    l->col = 0;
}

/* Length of the escape sequence at p (p[0] == ESC), everything up to n if it is cut off. */
static size_t escape_len(const unsigned char *p, size_t n)
{
    if (n < 2)
        return n;
    size_t i = 2;
    if (p[1] == '[') { /* CSI: parameters and intermediates, then a final byte 0x40-0x7e */
        while (i < n && (p[i] < 0x40 || p[i] > 0x7e))
            i++;
        return i < n ? i + 1 : n;
    }
    if (p[1] == ']' || p[1] == 'P' || p[1] == 'X' || p[1] == '^' || p[1] == '_') {
        for (; i < n; i++) { /* a string, ended by BEL or ST (ESC \) */
            if (p[i] == 0x07)
                return i + 1;
            if (p[i] == 0x1b && i + 1 < n && p[i + 1] == '\\')
                return i + 2;
        }
        return n;
    }
    i = 1; /* ESC, intermediates 0x20-0x2f, a final byte */
    while (i < n && p[i] >= 0x20 && p[i] <= 0x2f)
        i++;
    return i < n ? i + 1 : n;
}

char *term_text_clean(const char *data, size_t len, size_t *out_len)
{
    const unsigned char *p = (const unsigned char *)data;
    struct line l = {.out = xmalloc(len + 1)};
    for (size_t i = 0; i < len;) {
        unsigned char c = p[i];
        if (c == 0x1b) {
            size_t n = escape_len(p + i, len - i);
            if (n >= 3 && p[i + 1] == '[' && strchr("HfdJ", p[i + n - 1]) && l.end > l.start)
                newline(&l); /* a cursor move to another row: start a new line of text */
            i += n;
            continue;
        }
        i++;
        if (c == '\r' && i < len && p[i] == '\n')
            continue; /* CR LF: the LF ends the line */
        if (c == '\n')
            newline(&l);
        else if (c == '\r')
            l.col = 0;
        else if (c == '\b')
            l.col -= l.col > 0;
        else if ((c >= 0x20 && c != 0x7f) || c == '\t')
            put(&l, (char)c);
    }
    l.out[l.end] = '\0';
    *out_len = l.end;
    return l.out;
}
