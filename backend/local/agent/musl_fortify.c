/* The three checked string functions that Debian's libjansson.a calls (it was compiled against
 * glibc with _FORTIFY_SOURCE=2), for the agent built with musl, which has no _chk entry points
 * (backend/local/CMakeLists.txt). Each checks what glibc's does, the destination's size as the
 * compiler knew it, and aborts on an overflow as glibc does; the work is musl's own function. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, va_list ap);
int __snprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, ...);
char *__strncpy_chk(char *dst, const char *src, size_t n, size_t dstlen);

int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, va_list ap)
{
    (void)flag; /* glibc's %n checks; musl's printf is used as it is */
    if (maxlen > slen)
        abort();
    return vsnprintf(s, maxlen, fmt, ap);
}

int __snprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __vsnprintf_chk(s, maxlen, flag, slen, fmt, ap);
    va_end(ap);
    return n;
}

char *__strncpy_chk(char *dst, const char *src, size_t n, size_t dstlen)
{
    if (n > dstlen)
        abort();
    return strncpy(dst, src, n);
}
