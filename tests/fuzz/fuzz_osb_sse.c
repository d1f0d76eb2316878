/* libFuzzer target: an OpenSandbox execd event stream as the host reads it (backend/opensandbox/
 * sse.c): raw JSON lines, `data:` frames with event/id/retry lines and comments, NDJSON, split
 * into pieces the way curl might deliver them, then the end of the stream. Each event is read
 * the way exec.c reads it (type, text, code). */
#include <stddef.h>
#include <stdint.h>

#include "backend/opensandbox/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(void *arg, json_t *ev)
{
    size_t *n = arg;
    (*n)++;
    (void)json_string_value(json_object_get(ev, "type"));
    (void)json_string_value(json_object_get(ev, "text"));
    (void)json_integer_value(json_object_get(ev, "code"));
    return *n > 10000 ? -1 : 0; /* a consumer may stop the stream */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the size of the pieces (1..255 bytes, or all at once for 0). */
    size_t piece = size > 0 && data[0] ? data[0] : (size_t)-1;
    const char *p = (const char *)data + (size > 0);
    size_t left = size > 0 ? size - 1 : 0;
    size_t events = 0;
    struct osb_sse sse;
    osb_sse_init(&sse, on_event, &events);
    int rc = 0;
    while (left > 0 && rc == 0) {
        size_t n = left < piece ? left : piece;
        rc = osb_sse_feed(&sse, p, n);
        p += n, left -= n;
    }
    if (rc == 0)
        (void)osb_sse_finish(&sse);
    osb_sse_release(&sse);
    return 0;
}
