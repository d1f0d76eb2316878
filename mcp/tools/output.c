/* Output capping: keep the head and the tail of a command's output, say how much was cut, and
 * hand the agent valid UTF-8 whatever the command printed. */
#include "mcp/tools/tools-internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define CUT_MARKER_FMT                                                                             \
    "\n[... %" PRIu64 " bytes cut; call get_command with offset to read the rest ...]\n"

void out_capture_init_split(struct out_capture *oc, size_t head_cap, size_t tail_cap)
{
    memset(oc, 0, sizeof(*oc));
    oc->head_cap = head_cap;
    oc->tail_cap = tail_cap;
    oc->head = head_cap ? xmalloc(head_cap) : NULL;
    oc->tail = tail_cap ? xmalloc(tail_cap) : NULL;
}

void out_capture_init(struct out_capture *oc, size_t cap)
{
    out_capture_init_split(oc, cap / 2, cap - cap / 2);
}

void out_capture_release(struct out_capture *oc)
{
    free(oc->head);
    free(oc->tail);
    memset(oc, 0, sizeof(*oc));
}

static void ring_add(struct out_capture *oc, const char *data, size_t len)
{
    if (oc->tail_cap == 0)
        return;
    if (len >= oc->tail_cap) { /* only the last tail_cap bytes can survive */
        memcpy(oc->tail, data + len - oc->tail_cap, oc->tail_cap);
        oc->tail_start = 0;
        oc->tail_len = oc->tail_cap;
        return;
    }
    for (size_t done = 0; done < len;) {
        size_t end = (oc->tail_start + oc->tail_len) % oc->tail_cap;
        size_t room = oc->tail_len < oc->tail_cap ? oc->tail_cap - oc->tail_len : 0;
        size_t chunk = len - done;
        if (room == 0) { /* full: overwrite the oldest byte(s) */
            end = oc->tail_start;
            room = oc->tail_cap;
        }
        if (chunk > oc->tail_cap - end)
            chunk = oc->tail_cap - end;
        if (chunk > room)
            chunk = room;
        memcpy(oc->tail + end, data + done, chunk);
        if (oc->tail_len + chunk <= oc->tail_cap) {
            oc->tail_len += chunk;
        } else {
            oc->tail_start = (oc->tail_start + chunk) % oc->tail_cap;
        }
        done += chunk;
    }
}

void out_capture_add(struct out_capture *oc, const char *data, size_t len)
{
    oc->total += len;
    size_t to_head = oc->head_cap - oc->head_len;
    if (to_head > len)
        to_head = len;
    if (to_head > 0) {
        memcpy(oc->head + oc->head_len, data, to_head);
        oc->head_len += to_head;
    }
    ring_add(oc, data + to_head, len - to_head);
}

/* The ring's bytes, oldest first, into a new buffer of tail_len bytes. */
static char *ring_linear(const struct out_capture *oc)
{
    char *out = xmalloc(oc->tail_len + 1);
    size_t first = oc->tail_cap - oc->tail_start;
    if (first > oc->tail_len)
        first = oc->tail_len;
    memcpy(out, oc->tail + oc->tail_start, first);
    memcpy(out + first, oc->tail, oc->tail_len - first);
    return out;
}

/* The shortest suffix start s of data (at a character boundary) whose sanitized text fits in
 * max bytes; the text goes to out. */
static size_t tail_fit(const char *data, size_t n, size_t max, struct buf *out)
{
    size_t s = utf8_skip_continuation(data, n);
    for (;;) {
        buf_reset(out);
        utf8_sanitize_append(out, data + s, n - s, SIZE_MAX);
        if (out->len <= max)
            return s;
        s += out->len - max; /* dropping k input bytes drops at least k output bytes */
        if (s > n)
            s = n;
        s += utf8_skip_continuation(data + s, n - s);
    }
}

/* Renders head (hn bytes) + cut marker + the tail of tail (tn bytes); total counts every byte
 * the stream had. */
static json_t *render_cut(const char *head, size_t hn, const char *tail, size_t tn,
                          uint64_t total, size_t head_max, size_t tail_max)
{
    struct buf out, tbuf;
    buf_init(&out, SIZE_MAX);
    buf_init(&tbuf, SIZE_MAX);
    size_t used_head = utf8_sanitize_append(&out, head, utf8_complete_prefix(head, hn), head_max);
    size_t s = tail_fit(tail, tn, tail_max, &tbuf);
    buf_printf(&out, CUT_MARKER_FMT, total - used_head - (tn - s));
    buf_append(&out, tbuf.data ? tbuf.data : "", tbuf.len);
    json_t *j = json_stringn(out.data ? out.data : "", out.len);
    buf_release(&out);
    buf_release(&tbuf);
    return j;
}

json_t *out_capture_render(const struct out_capture *oc, bool *truncated)
{
    char *tail = ring_linear(oc);
    size_t cap = oc->head_cap + oc->tail_cap;
    json_t *j;
    if (oc->total == oc->head_len + oc->tail_len) {
        /* Nothing dropped yet: try the whole output, which fits unless invalid bytes grew it. */
        char *all = xmalloc(oc->total + 1);
        memcpy(all, oc->head, oc->head_len);
        memcpy(all + oc->head_len, tail, oc->tail_len);
        struct buf out;
        buf_init(&out, SIZE_MAX);
        size_t used = utf8_sanitize_append(&out, all, oc->total, cap);
        *truncated = used < oc->total;
        if (!*truncated) {
            j = json_stringn(out.data ? out.data : "", out.len);
        } else {
            size_t head_used = oc->head_cap < oc->total ? oc->head_cap : oc->total;
            j = render_cut(all, head_used, all + head_used, oc->total - head_used, oc->total,
                           oc->head_cap, oc->tail_cap);
        }
        buf_release(&out);
        free(all);
    } else {
        *truncated = true;
        j = render_cut(oc->head, oc->head_len, tail, oc->tail_len, oc->total, oc->head_cap,
                       oc->tail_cap);
    }
    free(tail);
    return j;
}

char *out_capture_tail_text(const struct out_capture *oc, size_t max)
{
    char *tail = ring_linear(oc);
    size_t n = oc->tail_len;
    size_t start = n > max ? n - max : 0;
    struct buf tb;
    buf_init(&tb, SIZE_MAX);
    tail_fit(tail + start, n - start, max, &tb);
    free(tail);
    return buf_steal(&tb, NULL); /* no NUL: utf8_sanitize_append replaced it */
}

void tools_progress_heartbeat(struct tool_call *call, const char *what, uint64_t started_ms,
                              double *last, const struct out_capture *tail)
{
    double elapsed = (double)(now_mono_ms() - started_ms) / 1000.0;
    if (elapsed <= *last)
        elapsed = *last + 0.001; /* MCP: progress must increase with each notification */
    *last = elapsed;
    char *text = out_capture_tail_text(tail, TOOLS_PROGRESS_TAIL_BYTES);
    char *msg = xasprintf("%s for %.0f s, %" PRIu64 " bytes of output%s%s", what, elapsed,
                          tail->total, *text ? "; last output: " : "", text);
    tool_call_progress(call, elapsed, 0, msg);
    free(msg);
    free(text);
}
