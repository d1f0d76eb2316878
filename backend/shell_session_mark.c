/* Splitting a session command's stream at its end marker (shell_session_mark.h). */
#include "backend/shell_session_mark.h"

#include <stdio.h>
#include <string.h>

void shell_mark_init(struct shell_mark *m, const char *nonce)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->start, sizeof m->start, "\n%.*s ", SHELL_MARK_NONCE_HEX, nonce);
    snprintf(m->end, sizeof m->end, " %.*s\n", SHELL_MARK_NONCE_HEX, nonce);
}

/* Output up to the marker's start; returns the bytes taken (len, or just past the start). */
static size_t scan_output(struct shell_mark *m, const char *data, size_t len,
                          shell_mark_emit_fn *emit, void *arg)
{
    size_t slen = strlen(m->start);
    if (m->held > 0) { /* a start cut by the previous chunk: does data go on with it? */
        size_t n = slen - m->held < len ? slen - m->held : len;
        if (memcmp(data, m->start + m->held, n) == 0) {
            m->held += n;
            m->inside = m->held == slen;
            if (m->inside)
                m->held = 0;
            return n;
        }
        emit(arg, m->start, m->held); /* it was output after all (only its first byte is '\n') */
        m->held = 0;
    }
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(data + i, '\n', len - i);
        if (nl == NULL)
            break;
        size_t at = (size_t)(nl - data), n = slen < len - at ? slen : len - at;
        if (memcmp(data + at, m->start, n) == 0) {
            emit(arg, data, at);
            m->inside = n == slen;
            m->held = m->inside ? 0 : n;
            return at + n;
        }
        i = at + 1;
    }
    emit(arg, data, len);
    return len;
}

/* The marker's body up to its end; keeps its head and a sliding window for the end. */
static size_t read_body(struct shell_mark *m, const char *data, size_t len)
{
    size_t elen = strlen(m->end);
    for (size_t i = 0; i < len; i++) {
        if (m->body_len == sizeof m->body) {
            m->overflow = true;
            memmove(m->body + sizeof m->body - elen, m->body + sizeof m->body - elen + 1, elen - 1);
            m->body_len--;
        }
        m->body[m->body_len++] = data[i];
        if (m->body_len >= elen && memcmp(m->body + m->body_len - elen, m->end, elen) == 0) {
            m->done = true;
            return i + 1;
        }
    }
    return len;
}

size_t shell_mark_feed(struct shell_mark *m, const char *data, size_t len, shell_mark_emit_fn *emit,
                       void *arg)
{
    size_t used = 0;
    while (!m->done && used < len) {
        if (m->inside)
            used += read_body(m, data + used, len - used);
        else
            used += scan_output(m, data + used, len - used, emit, arg);
    }
    return used;
}

static void parse_status(const char *s, size_t n, struct shell_mark_result *res)
{
    static const char *const words[] = {"gone", "limit", "error", "nobash", "start"};
    res->status = n > 0 && n <= 3 ? 0 : -1;
    for (size_t i = 0; i < n && res->status >= 0; i++)
        res->status = s[i] >= '0' && s[i] <= '9' ? res->status * 10 + (s[i] - '0') : -1;
    if (res->status > 255)
        res->status = -1;
    for (size_t w = 0; res->status < 0 && w < sizeof words / sizeof words[0]; w++)
        if (strlen(words[w]) == n && memcmp(words[w], s, n) == 0)
            snprintf(res->word, sizeof res->word, "%s", words[w]);
}

bool shell_mark_result(const struct shell_mark *m, struct shell_mark_result *res)
{
    memset(res, 0, sizeof(*res));
    res->status = -1;
    if (!m->done)
        return false;
    size_t n = m->body_len - strlen(m->end);
    const char *sp = memchr(m->body, ' ', n);
    size_t slen = sp != NULL ? (size_t)(sp - m->body) : n;
    parse_status(m->body, slen, res);
    size_t cwd_len = sp != NULL ? n - slen - 1 : 0;
    if (sp != NULL && !m->overflow && cwd_len <= SHELL_MARK_CWD_MAX) {
        memcpy(res->cwd, sp + 1, cwd_len);
        res->cwd[cwd_len] = '\0';
    }
    return true;
}
