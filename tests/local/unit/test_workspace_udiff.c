/* The unified diff generator (backend/local/workspace_udiff.c): exact output on known cases, and
 * on thousands of random pairs the hunks rebuild the new text from the old one and change no
 * more lines than the shortest edit script (checked against a dynamic-programming LCS). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/local/workspace_udiff.h"
#include "lib/base/buf.h"
#include "test.h"

static char *diff_of(const char *a, const char *b, uint64_t *add, uint64_t *del)
{
    struct buf out;
    buf_init(&out, SIZE_MAX);
    udiff_hunks(a, strlen(a), b, strlen(b), &out, add, del);
    return buf_steal(&out, NULL);
}

TEST(equal_texts_give_nothing)
{
    uint64_t add = 9, del = 9;
    char *d = diff_of("a\nb\n", "a\nb\n", &add, &del);
    ASSERT_STR_EQ(d, "");
    ASSERT_EQ(add, 0);
    ASSERT_EQ(del, 0);
    free(d);
}

TEST(one_line_changed_with_context)
{
    char *d = diff_of("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n", NULL, NULL);
    ASSERT_STR_EQ(d, "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
    free(d);
}

TEST(new_file_and_deleted_file)
{
    char *d = diff_of("", "x\ny\n", NULL, NULL);
    ASSERT_STR_EQ(d, "@@ -0,0 +1,2 @@\n+x\n+y\n");
    free(d);
    d = diff_of("x\n", "", NULL, NULL);
    ASSERT_STR_EQ(d, "@@ -1 +0,0 @@\n-x\n");
    free(d);
}

TEST(missing_newline_at_end)
{
    char *d = diff_of("a\nb", "a\nb\n", NULL, NULL);
    ASSERT_STR_EQ(d, "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
    free(d);
}

TEST(far_apart_changes_make_two_hunks)
{
    struct buf a, b;
    buf_init(&a, SIZE_MAX);
    buf_init(&b, SIZE_MAX);
    for (int i = 0; i < 30; i++) {
        buf_printf(&a, "%d\n", i);
        buf_printf(&b, "%d\n", i == 2 ? 200 : i == 25 ? 2500 : i);
    }
    struct buf out;
    buf_init(&out, SIZE_MAX);
    udiff_hunks(a.data, a.len, b.data, b.len, &out, NULL, NULL);
    const char *s = buf_cstr(&out);
    ASSERT(strstr(s, "@@ -1,6 +1,6 @@\n") == s);
    ASSERT(strstr(s, "@@ -23,7 +23,7 @@\n 22\n 23\n 24\n-25\n+2500\n 26\n 27\n 28\n") != NULL);
    buf_release(&a), buf_release(&b), buf_release(&out);
}

/* ---- random pairs ---- */

static size_t lcs_len(const int *a, size_t n, const int *b, size_t m)
{
    size_t *row = calloc(m + 1, sizeof *row), *prev = calloc(m + 1, sizeof *prev);
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++)
            row[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1
                                          : (prev[j] > row[j - 1] ? prev[j] : row[j - 1]);
        size_t *t = prev;
        prev = row, row = t;
    }
    size_t r = prev[m];
    free(row), free(prev);
    return r;
}

static void make_text(const int *v, size_t n, struct buf *out)
{
    buf_reset(out);
    for (size_t i = 0; i < n; i++)
        buf_printf(out, "l%d\n", v[i]);
}

/* Applies the hunks to old (lines "l<n>") and returns the rebuilt text. */
static char *apply_hunks(const char *old, const char *diff)
{
    struct buf out;
    buf_init(&out, SIZE_MAX);
    const char *o = old;
    for (const char *p = diff; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = (size_t)(eol - p) + 1;
        if (p[0] == '@') {
            long start = strtol(p + 4, NULL, 10);
            /* copy old lines up to the hunk's start (1-based; ranges of 0 name the line before) */
            const char *comma = memchr(p + 4, ',', (size_t)(strchr(p + 4, ' ') - (p + 4)));
            long count = comma ? strtol(comma + 1, NULL, 10) : 1;
            long upto = count == 0 ? start : start - 1;
            long at = 0;
            for (const char *q = old; q < o; q++)
                at += *q == '\n';
            while (at < upto) {
                const char *e = strchr(o, '\n');
                buf_append(&out, o, (size_t)(e - o) + 1);
                o = e + 1, at++;
            }
        } else if (p[0] == ' ' || p[0] == '-') {
            const char *e = strchr(o, '\n');
            if (p[0] == ' ')
                buf_append(&out, o, (size_t)(e - o) + 1);
            o = e + 1;
        } else if (p[0] == '+') {
            buf_append(&out, p + 1, len - 1);
        }
        p += len;
    }
    buf_append_str(&out, o);
    return buf_steal(&out, NULL);
}

TEST(random_pairs_rebuild_and_are_minimal)
{
    srand(12345);
    struct buf ta, tb;
    buf_init(&ta, SIZE_MAX);
    buf_init(&tb, SIZE_MAX);
    for (int round = 0; round < 3000; round++) {
        size_t n = (size_t)(rand() % 40), m = (size_t)(rand() % 40);
        int alpha = 1 + rand() % 6;
        int a[40], b[40];
        for (size_t i = 0; i < n; i++)
            a[i] = rand() % alpha;
        for (size_t j = 0; j < m; j++)
            b[j] = (rand() % 3 == 0 && j < n) ? a[j] : rand() % alpha;
        make_text(a, n, &ta);
        make_text(b, m, &tb);
        struct buf out;
        buf_init(&out, SIZE_MAX);
        uint64_t add = 0, del = 0;
        udiff_hunks(buf_cstr(&ta), ta.len, buf_cstr(&tb), tb.len, &out, &add, &del);
        char *rebuilt = apply_hunks(buf_cstr(&ta), buf_cstr(&out));
        if (strcmp(rebuilt, buf_cstr(&tb)) != 0)
            TEST_FAIL("round %d: rebuilt text differs\nold:\n%s\nnew:\n%s\ndiff:\n%s", round,
                      buf_cstr(&ta), buf_cstr(&tb), buf_cstr(&out));
        size_t l = lcs_len(a, n, b, m);
        if (add + del != n + m - 2 * l)
            TEST_FAIL("round %d: %llu+%llu changes, the shortest script has %zu", round,
                      (unsigned long long)add, (unsigned long long)del, n + m - 2 * l);
        free(rebuilt);
        buf_release(&out);
    }
    buf_release(&ta), buf_release(&tb);
}

TEST(large_unrelated_files_stay_fast)
{
    /* 200,000 lines each, nothing in common: the budget turns it into one replacement. */
    struct buf a, b;
    buf_init(&a, SIZE_MAX);
    buf_init(&b, SIZE_MAX);
    for (int i = 0; i < 200000; i++) {
        buf_printf(&a, "a%d\n", i);
        buf_printf(&b, "b%d\n", i);
    }
    struct buf out;
    buf_init(&out, SIZE_MAX);
    uint64_t add = 0, del = 0;
    udiff_hunks(a.data, a.len, b.data, b.len, &out, &add, &del);
    ASSERT_EQ(add, 200000);
    ASSERT_EQ(del, 200000);
    buf_release(&a), buf_release(&b), buf_release(&out);
}

int main(void)
{
    RUN(equal_texts_give_nothing);
    RUN(one_line_changed_with_context);
    RUN(new_file_and_deleted_file);
    RUN(missing_newline_at_end);
    RUN(far_apart_changes_make_two_hunks);
    RUN(random_pairs_rebuild_and_are_minimal);
    RUN(large_unrelated_files_stay_fast);
    return test_done();
}
