/* libFuzzer target: what a code-interpreter driver writes inside a sandbox, as the host reads it
 * (backend/code_frame.c, fed by code_interp.c): split into pieces the way exec's output events
 * might deliver them. Checks what the host relies on: output passed on is never more than the
 * input, JSON frames are objects within CODE_FRAME_JSON_MAX, and a broken stream stays broken. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/code_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    size_t output;
};

static void on_output(void *arg, char kind, const char *data, size_t len)
{
    struct seen *s = arg;
    if (kind != 'o' && kind != 'e')
        __builtin_trap();
    s->output += len;
    (void)data;
}

static void on_json(void *arg, char kind, json_t *obj, size_t len)
{
    if (!json_is_object(obj) || len > CODE_FRAME_JSON_MAX || kind == 'o' || kind == 'e')
        __builtin_trap();
    (void)json_integer_value(json_object_get(obj, "count"));
    (void)json_string_value(json_object_get(obj, "status"));
    (void)arg;
}

static void on_dropped(void *arg, char kind, uint64_t len)
{
    (void)arg, (void)kind, (void)len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the size of the pieces (1..255 bytes, or all at once for 0). */
    size_t piece = size > 0 && data[0] ? data[0] : (size_t)-1;
    const char *p = (const char *)data + (size > 0);
    size_t left = size > 0 ? size - 1 : 0, total = left;
    struct seen s = {0};
    struct code_frame_sink sink = {on_output, on_json, on_dropped, &s};
    struct code_frame_parser fp;
    code_frame_init(&fp);
    int rc = 0;
    while (left > 0) {
        size_t n = left < piece ? left : piece;
        int r = code_frame_feed(&fp, p, n, &sink);
        if (rc < 0 && r == 0)
            __builtin_trap(); /* broken is for good */
        rc = r;
        p += n, left -= n;
    }
    if (s.output > total || (rc < 0 && fp.broken[0] == '\0'))
        __builtin_trap();
    code_frame_release(&fp);
    return 0;
}
