/* The host's parser of a code driver's frames (backend/code_frame.c): what each kind becomes,
 * byte by byte as well as at once, and the hostile inputs that must be skipped or break the
 * stream for good. */
#include <string.h>

#include "backend/code_frame.h"
#include "test.h"

struct seen {
    char out[256];
    size_t out_len;
    char kinds[32]; /* the JSON frames' kinds in order, 'D' for a dropped one */
    size_t n;
    long long count; /* the last 'd' frame's count */
};

static void on_output(void *arg, char kind, const char *data, size_t len)
{
    struct seen *s = arg;
    if (s->out_len + len + 2 < sizeof(s->out)) {
        s->out[s->out_len++] = kind;
        memcpy(s->out + s->out_len, data, len);
        s->out_len += len;
    }
}

static void on_json(void *arg, char kind, json_t *obj, size_t len)
{
    struct seen *s = arg;
    (void)len;
    if (s->n + 1 < sizeof(s->kinds))
        s->kinds[s->n++] = kind;
    if (kind == 'd')
        s->count = (long long)json_integer_value(json_object_get(obj, "count"));
}

static void on_dropped(void *arg, char kind, uint64_t len)
{
    struct seen *s = arg;
    (void)kind, (void)len;
    if (s->n + 1 < sizeof(s->kinds))
        s->kinds[s->n++] = 'D';
}

/* Feeds in pieces of step bytes (0: all at once); the feed's last result. */
static int feed(struct seen *s, const char *in, size_t step, char *broken, size_t broken_size)
{
    struct code_frame_parser p;
    struct code_frame_sink sink = {on_output, on_json, on_dropped, s};
    code_frame_init(&p);
    memset(s, 0, sizeof(*s));
    size_t len = strlen(in);
    int rc = 0;
    for (size_t off = 0; off < len && rc == 0;) {
        size_t n = step == 0 || len - off < step ? len - off : step;
        rc = code_frame_feed(&p, in + off, n, &sink);
        off += n;
    }
    snprintf(broken, broken_size, "%s", p.broken);
    code_frame_release(&p);
    return rc;
}

static const char RUN_FRAMES[] = "h 2\n{}s 12\n{\"tag\":\"a1\"}o 3\nhi\ne 4\nerr\n"
                                 "r 27\n{\"mime\":{\"text/plain\":\"4\"}}"
                                 "d 25\n{\"count\":7,\"status\":\"ok\"}";

TEST(a_run_at_once_and_byte_by_byte)
{
    char broken[96];
    for (size_t step = 0; step <= 1; step++) {
        struct seen s;
        ASSERT_EQ(feed(&s, RUN_FRAMES, step, broken, sizeof(broken)), 0);
        ASSERT_STR_EQ(s.kinds, "hsrd"); /* s: a run's start, with its tag (issue 34) */
        ASSERT_EQ(s.count, 7);
        s.out[s.out_len] = '\0';
        /* output comes through as it arrives: byte by byte, each byte its own piece */
        ASSERT_STR_EQ(s.out, step ? "ohoio\neeerere\n" : "ohi\neerr\n");
    }
}

TEST(hostile_frames_break_the_stream_for_good)
{
    static const char *const bad[] = {
        "zz not a frame\n",            /* unknown kind */
        "o 12x\nhello\n",              /* not a number */
        "o 99999999999999999999999\n", /* too large */
        "o\n",                         /* no length */
        "o 1234567890123456789012345", /* a header past its limit */
        "d 2\n{}\nmore",               /* a stray byte after a frame */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char broken[96];
        struct seen s;
        ASSERT_EQ(feed(&s, bad[i], 0, broken, sizeof(broken)), -1);
        ASSERT(broken[0] != '\0');
    }
}

TEST(json_frames_too_large_or_not_objects_are_dropped_not_fatal)
{
    char broken[96];
    struct seen s;
    ASSERT_EQ(feed(&s, "r 2\n[]r 5\n{\"a\":d 25\n{\"count\":1,\"status\":\"ok\"}", 0, broken,
                   sizeof(broken)),
              0);
    ASSERT_STR_EQ(s.kinds, "DDd");
    /* a JSON frame over CODE_FRAME_JSON_MAX is skipped without being kept */
    char head[64];
    snprintf(head, sizeof(head), "r %u\nxyz", CODE_FRAME_JSON_MAX + 1);
    ASSERT_EQ(feed(&s, head, 0, broken, sizeof(broken)), 0);
    ASSERT_EQ(s.n, 0); /* not complete yet: nothing reported, nothing buffered */
}

int main(void)
{
    RUN(a_run_at_once_and_byte_by_byte);
    RUN(hostile_frames_break_the_stream_for_good);
    RUN(json_frames_too_large_or_not_objects_are_dropped_not_fatal);
    return test_done();
}
