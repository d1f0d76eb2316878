/* Output capping (head + tail + cut marker), UTF-8 repair, progress tail. */
#include <stdint.h>
#include <stdlib.h>

#include "lib/base/buf.h"
#include "lib/base/util.h"
#include "fake.h"
#include "mcp/tools/tools-internal.h"
#include "test.h"

static char *render(const struct out_capture *oc, bool *truncated)
{
    json_t *j = out_capture_render(oc, truncated);
    char *s = strdup(json_string_value(j));
    ASSERT(utf8_is_text(s, strlen(s)));
    json_decref(j);
    return s;
}

TEST(small_output_is_whole)
{
    struct out_capture oc;
    bool t = true;
    out_capture_init(&oc, 64);
    out_capture_add(&oc, "hello ", 6);
    out_capture_add(&oc, "world\n", 6);
    char *s = render(&oc, &t);
    ASSERT_STR_EQ(s, "hello world\n");
    ASSERT(!t);
    ASSERT_EQ(oc.total, 12);
    free(s);
    out_capture_release(&oc);
}

TEST(exact_cap_is_not_truncated)
{
    struct out_capture oc;
    bool t = true;
    char data[100];
    memset(data, 'x', sizeof(data));
    out_capture_init(&oc, 100);
    out_capture_add(&oc, data, 30);
    out_capture_add(&oc, data, 70);
    char *s = render(&oc, &t);
    ASSERT_EQ(strlen(s), 100);
    ASSERT(!t);
    free(s);
    out_capture_release(&oc);
}

TEST(cut_keeps_head_and_tail_and_counts)
{
    struct out_capture oc;
    bool t = false;
    out_capture_init(&oc, 20);
    out_capture_add(&oc, "HEAD-12345", 10);             /* fills the head exactly */
    for (int i = 0; i < 100; i++)
        out_capture_add(&oc, "..........", 10);          /* 1000 bytes in the middle */
    out_capture_add(&oc, "TAIL-67890", 10);             /* the last 10 bytes */
    char *s = render(&oc, &t);
    ASSERT(t);
    ASSERT(strncmp(s, "HEAD-12345", 10) == 0);
    ASSERT(strlen(s) >= 10 && strcmp(s + strlen(s) - 10, "TAIL-67890") == 0);
    ASSERT_CONTAINS(s, "[... 1000 bytes cut; call get_command with offset to read the rest ...]");
    free(s);
    out_capture_release(&oc);
}

TEST(hundred_mib_stays_within_cap)
{
    enum { CAP = 16384, CHUNK = 65536 };
    struct out_capture oc;
    bool t = false;
    char *chunk = malloc(CHUNK);
    for (size_t i = 0; i < CHUNK; i++)
        chunk[i] = (char)('a' + i % 26);
    out_capture_init(&oc, CAP);
    out_capture_add(&oc, "BEGIN", 5);
    uint64_t total = 5;
    while (total < (100u << 20)) {
        out_capture_add(&oc, chunk, CHUNK);
        total += CHUNK;
    }
    out_capture_add(&oc, "END", 3);
    total += 3;
    char *s = render(&oc, &t);
    ASSERT(t);
    ASSERT_EQ(oc.total, total);
    ASSERT(strlen(s) <= CAP + 120);
    ASSERT(strncmp(s, "BEGIN", 5) == 0);
    ASSERT(strcmp(s + strlen(s) - 3, "END") == 0);
    char marker[128];
    snprintf(marker, sizeof(marker), "[... %llu bytes cut", (unsigned long long)(total - CAP));
    ASSERT_CONTAINS(s, marker);
    free(s);
    free(chunk);
    out_capture_release(&oc);
}

TEST(invalid_utf8_replaced_and_binary_bounded)
{
    struct out_capture oc;
    bool t = false;
    out_capture_init(&oc, 64);
    out_capture_add(&oc, "ok\xff\xfe", 4);
    char *s = render(&oc, &t);
    ASSERT_STR_EQ(s, "ok\xEF\xBF\xBD\xEF\xBF\xBD");
    ASSERT(!t);
    free(s);
    out_capture_release(&oc);

    /* 64 bytes of 0xff would triple when replaced: the result must still fit the cap. */
    char bin[64];
    memset(bin, 0xff, sizeof(bin));
    out_capture_init(&oc, 64);
    out_capture_add(&oc, bin, sizeof(bin));
    s = render(&oc, &t);
    ASSERT(t);
    ASSERT(strlen(s) <= 64 + 120);
    free(s);
    out_capture_release(&oc);
}

TEST(multibyte_split_at_cut_points)
{
    /* "é" is 2 bytes: with a 5-byte head the head ends inside one; the tail may start inside
     * one too. Neither may produce replacement characters. */
    struct out_capture oc;
    bool t = false;
    out_capture_init_split(&oc, 5, 5);
    for (int i = 0; i < 50; i++)
        out_capture_add(&oc, "\xC3\xA9", 2);
    char *s = render(&oc, &t);
    ASSERT(t);
    ASSERT(strstr(s, "\xEF\xBF\xBD") == NULL);
    ASSERT(strncmp(s, "\xC3\xA9\xC3\xA9\n[...", 9) == 0);
    free(s);
    out_capture_release(&oc);
}

/* Random chunkings of random ASCII against the obvious answer: first H bytes, marker, last T. */
TEST(random_chunks_match_reference)
{
    enum { N = 50000 };
    char *data = malloc(N);
    for (int round = 0; round < 40; round++) {
        unsigned seed = 0;
        random_bytes(&seed, sizeof(seed));
        srand(seed);
        size_t total = (size_t)rand() % N, head = 1 + (size_t)rand() % 2000,
               tail = 1 + (size_t)rand() % 2000;
        for (size_t i = 0; i < total; i++)
            data[i] = (char)('a' + rand() % 26);
        struct out_capture oc;
        out_capture_init_split(&oc, head, tail);
        for (size_t off = 0; off < total;) {
            size_t n = 1 + (size_t)rand() % (rand() % 2 ? 7 : 3000);
            if (n > total - off)
                n = total - off;
            out_capture_add(&oc, data + off, n);
            off += n;
        }
        bool t = false;
        char *s = render(&oc, &t);
        if (total <= head + tail) {
            ASSERT(!t);
            ASSERT_EQ(strlen(s), total);
            ASSERT(memcmp(s, data, total) == 0);
        } else {
            char marker[128];
            int m = snprintf(marker, sizeof(marker),
                             "\n[... %zu bytes cut; call get_command with offset to read the "
                             "rest ...]\n", total - head - tail);
            ASSERT(t);
            ASSERT_EQ(strlen(s), head + (size_t)m + tail);
            ASSERT(memcmp(s, data, head) == 0);
            ASSERT(memcmp(s + head, marker, (size_t)m) == 0);
            ASSERT(memcmp(s + head + (size_t)m, data + total - tail, tail) == 0);
        }
        free(s);
        out_capture_release(&oc);
    }
    free(data);
}

TEST(utf8_helpers)
{
    ASSERT_EQ(utf8_complete_prefix("ab\xC3", 3), 2);
    ASSERT_EQ(utf8_complete_prefix("ab\xE2\x82", 4), 2);
    ASSERT_EQ(utf8_complete_prefix("ab\xE2\x82\xAC", 5), 5);
    ASSERT_EQ(utf8_complete_prefix("abc", 3), 3);
    ASSERT_EQ(utf8_skip_continuation("\x82\xAC" "x", 3), 2);
    struct buf b;
    buf_init(&b, SIZE_MAX);
    ASSERT_EQ(utf8_sanitize_append(&b, "a\xED\xA0\x80z", 5, SIZE_MAX), 5); /* surrogate: invalid */
    ASSERT_STR_EQ(buf_cstr(&b), "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
    buf_reset(&b);
    ASSERT_EQ(utf8_sanitize_append(&b, "abcdef", 6, 4), 4); /* stops at max */
    buf_release(&b);
}

TEST(progress_tail_text)
{
    struct out_capture oc;
    out_capture_init_split(&oc, 0, 32);
    out_capture_add(&oc, "line one\n", 9);
    out_capture_add(&oc, "a\0b", 3);
    out_capture_add(&oc, "0123456789012345678901234567890123456789", 40);
    char *tail = out_capture_tail_text(&oc, 10);
    ASSERT_STR_EQ(tail, "0123456789");
    free(tail);
    out_capture_release(&oc);
    out_capture_init_split(&oc, 0, 32);
    out_capture_add(&oc, "a\0b", 3);
    tail = out_capture_tail_text(&oc, 10);
    ASSERT_STR_EQ(tail, "a" UTF8_REPLACEMENT "b"); /* NUL is never text (lib/base/utf8.h) */
    free(tail);
    out_capture_release(&oc);
}

TEST(progress_heartbeat)
{
    struct tool_call call = {0};
    struct out_capture oc;
    out_capture_init_split(&oc, 0, 64);
    out_capture_add(&oc, "hello", 5);
    double last = 0;
    tools_progress_heartbeat(&call, "running code", now_mono_ms(), &last, &oc);
    ASSERT_STR_EQ(call.last_progress, "running code for 0 s, 5 bytes of output; last output: hello");
    double first = last;
    ASSERT(first > 0); /* strictly above the previous (0) even within the same millisecond */
    tools_progress_heartbeat(&call, "running", now_mono_ms(), &last, &oc);
    ASSERT(last > first);
    ASSERT_EQ(call.progress_count, 2);
    out_capture_release(&oc);
}

int main(void)
{
    RUN(small_output_is_whole);
    RUN(exact_cap_is_not_truncated);
    RUN(cut_keeps_head_and_tail_and_counts);
    RUN(hundred_mib_stays_within_cap);
    RUN(invalid_utf8_replaced_and_binary_bounded);
    RUN(multibyte_split_at_cut_points);
    RUN(random_chunks_match_reference);
    RUN(utf8_helpers);
    RUN(progress_tail_text);
    RUN(progress_heartbeat);
    return test_done();
}
