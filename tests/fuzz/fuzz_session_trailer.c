/* A session command's stdout as the sandbox sends it (backend/shell_session.h): fed in chunks of
 * the sizes the first byte picks, the bytes passed on plus the trailer cut off are exactly the
 * input, and a trailer is taken only at the very end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shell_session.h"

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
    static struct shell_session_tail tail;
    size_t step = (size_t)data[0] * 37 + 1;
    struct sink s = {malloc(size), 0};
    shell_session_tail_init(&tail, nonce);
    for (size_t at = 1; at < size; at += step)
        shell_session_tail_feed(&tail, (const char *)data + at, size - at < step ? size - at : step,
                                emit, &s);
    struct shell_session_result res;
    shell_session_tail_finish(&tail, emit, &s, &res);
    if (memcmp(s.buf, data + 1, s.len) != 0 || s.len > size - 1)
        abort();
    if (res.kind != SHELL_SESSION_NONE &&
        (data[size - 1] != '\n' || memcmp(data + 1 + s.len + 1, nonce, 32) != 0))
        abort();
    if (res.kind == SHELL_SESSION_NONE && s.len != size - 1)
        abort();
    free(s.buf);
    return 0;
}
