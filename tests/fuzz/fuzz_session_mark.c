/* A session shell's stream as the sandbox sends it (backend/shell_session_mark.h), fed in chunks
 * of the sizes the first byte picks: what is passed on plus the marker plus what is left after
 * it are exactly the input, output never holds the marker's start, and memory stays bounded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shell_session_mark.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sink {
    char *buf;
    size_t len;
};

static void emit(void *arg, const char *d, size_t n)
{
    struct sink *s = arg;
    memcpy(s->buf + s->len, d, n);
    s->len += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const char nonce[] = "0123456789abcdef0123456789abcdef";
    static struct shell_mark m;
    size_t step = (size_t)data[0] * 37 + 1;
    struct sink s = {malloc(size), 0};
    shell_mark_init(&m, nonce);
    size_t at = 1;
    while (at < size && !m.done) {
        size_t n = shell_mark_feed(&m, (const char *)data + at, size - at < step ? size - at : step,
                                   emit, &s);
        if (n == 0)
            abort();
        at += n;
    }
    if (s.len > at - 1 || memcmp(s.buf, data + 1, s.len) != 0)
        abort();
    if (memmem(s.buf, s.len, "\n0123456789abcdef0123456789abcdef ", 34) != NULL)
        abort();
    struct shell_mark_result res;
    if (shell_mark_result(&m, &res) != m.done || (m.done && data[at - 1] != '\n'))
        abort();
    free(s.buf);
    return 0;
}
