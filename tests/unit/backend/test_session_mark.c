/* The end marker of a session command on the proc primitive (backend/shell_session_mark.h):
 * output before it passes on byte-exact in any chunking (no trailing newline added or lost),
 * the marker's status and cwd are read, what follows it is left to the caller, a marker with
 * another nonce (a forgery) stays output, and a flood inside a marker costs bounded memory. */
#include <stdlib.h>
#include <string.h>

#include "backend/shell_session_mark.h"
#include "lib/base/buf.h"
#include "test.h"

static const char nonce[] = "0123456789abcdef0123456789abcdef";

static void sink(void *arg, const char *data, size_t len)
{
    buf_append(arg, data, len);
}

/* Feeds text in chunks of step bytes until the marker ends; returns the output, sets *after to
 * the bytes not taken. */
static char *split(const char *text, size_t n, size_t step, struct shell_mark_result *res,
                   size_t *after)
{
    static struct shell_mark m;
    struct buf out;
    buf_init(&out, (size_t)-1);
    shell_mark_init(&m, nonce);
    size_t at = 0;
    while (at < n && !m.done) {
        size_t len = n - at < step ? n - at : step;
        at += shell_mark_feed(&m, text + at, len, sink, &out);
    }
    *after = n - at;
    shell_mark_result(&m, res);
    return buf_steal(&out, NULL);
}

TEST(output_exact_in_any_chunking)
{
    const char *text = "a\nb\n01no\n0123456789abcdef0123456789abcdef 0 /tmp/a b "
                       "0123456789abcdef0123456789abcdef\nlater";
    for (size_t step = 1; step < 80; step++) {
        struct shell_mark_result res;
        size_t after;
        char *out = split(text, strlen(text), step, &res, &after);
        ASSERT_STR_EQ(out, "a\nb\n01no");
        ASSERT_EQ(res.status, 0);
        ASSERT_STR_EQ(res.cwd, "/tmp/a b");
        ASSERT_EQ(after, strlen("later"));
        free(out);
    }
}

TEST(no_trailing_newline_and_words)
{
    const char *text = "no newline\n0123456789abcdef0123456789abcdef limit  "
                       "0123456789abcdef0123456789abcdef\n";
    struct shell_mark_result res;
    size_t after;
    char *out = split(text, strlen(text), 3, &res, &after);
    ASSERT_STR_EQ(out, "no newline");
    ASSERT_EQ(res.status, -1);
    ASSERT_STR_EQ(res.word, "limit");
    ASSERT_STR_EQ(res.cwd, "");
    free(out);
}

TEST(forged_marker_stays_output)
{
    const char *text = "x\nffffffffffffffffffffffffffffffff 0 /fake ffffffffffffffffffffffffffffffff\n"
                       "\n0123456789abcdef0123456789abcdeX\n";
    struct shell_mark_result res;
    size_t after;
    char *out = split(text, strlen(text), 5, &res, &after);
    /* no marker: everything but a possible start ("\n") is output, and nothing is done */
    ASSERT(strncmp(out, text, strlen(out)) == 0);
    ASSERT(strlen(out) >= strlen(text) - 1);
    ASSERT_EQ(res.status, -1);
    free(out);
}

TEST(flood_inside_marker_is_bounded)
{
    size_t n = 3 * SHELL_MARK_MAX;
    char *text = malloc(n + 100);
    strcpy(text, "\n0123456789abcdef0123456789abcdef 7 /");
    size_t at = strlen(text);
    memset(text + at, 'd', n - at);
    strcpy(text + n, " 0123456789abcdef0123456789abcdef\n");
    struct shell_mark_result res;
    size_t after;
    char *out = split(text, strlen(text), 4096, &res, &after);
    ASSERT_STR_EQ(out, "");
    ASSERT_EQ(res.status, 7);
    ASSERT_STR_EQ(res.cwd, ""); /* too long to keep: not a wrong one */
    ASSERT_EQ(after, 0);
    free(out);
    free(text);
}

int main(void)
{
    RUN(output_exact_in_any_chunking);
    RUN(no_trailing_newline_and_words);
    RUN(forged_marker_stays_output);
    RUN(flood_inside_marker_is_bounded);
    return test_done();
}
