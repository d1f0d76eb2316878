/* Reads a code driver's frames (code_frame.h) a byte range at a time, bounded in memory: a header
 * of at most CODE_FRAME_HEAD_MAX bytes, output passed on as it comes, a JSON frame kept up to
 * CODE_FRAME_JSON_MAX. */
#include "backend/code_frame.h"

#include <stdio.h>
#include <string.h>

void code_frame_init(struct code_frame_parser *p)
{
    memset(p, 0, sizeof(*p));
    buf_init(&p->json, CODE_FRAME_JSON_MAX);
}

void code_frame_release(struct code_frame_parser *p)
{
    buf_release(&p->json);
}

static int broken(struct code_frame_parser *p, const char *why)
{
    snprintf(p->broken, sizeof(p->broken), "%s", why);
    return -1;
}

static bool kind_known(char k)
{
    return k && strchr("oehrxds", k) != NULL;
}

/* "<kind> <digits>" (without the newline) into p->kind and p->left. */
static int parse_head(struct code_frame_parser *p)
{
    const char *h = p->head;
    if (p->head_len < 3 || !kind_known(h[0]) || h[1] != ' ')
        return broken(p, "a frame header is malformed");
    uint64_t n = 0;
    for (size_t i = 2; i < p->head_len; i++) {
        if (h[i] < '0' || h[i] > '9' || n > CODE_FRAME_LEN_MAX)
            return broken(p, "a frame length is malformed");
        n = n * 10 + (uint64_t)(h[i] - '0');
    }
    if (n > CODE_FRAME_LEN_MAX)
        return broken(p, "a frame length is too large");
    p->kind = h[0];
    p->left = n;
    p->skipping = (p->kind != 'o' && p->kind != 'e') && n > CODE_FRAME_JSON_MAX;
    p->skip_len = n;
    buf_reset(&p->json);
    return 0;
}

/* Takes header bytes up to the newline; how many bytes were used, or -1. */
static long take_head(struct code_frame_parser *p, const char *data, size_t len)
{
    const char *nl = memchr(data, '\n', len);
    size_t n = nl ? (size_t)(nl - data) : len;
    if (p->head_len + n >= CODE_FRAME_HEAD_MAX)
        return broken(p, "a frame header is too long");
    memcpy(p->head + p->head_len, data, n);
    p->head_len += n;
    if (!nl)
        return (long)n;
    if (parse_head(p) < 0)
        return -1;
    p->head_len = 0;
    return (long)n + 1;
}

static void json_frame_done(struct code_frame_parser *p, const struct code_frame_sink *sink)
{
    if (p->skipping) {
        sink->on_dropped(sink->arg, p->kind, p->skip_len);
        return;
    }
    json_error_t jerr;
    json_t *obj =
        json_loadb(p->json.data ? p->json.data : "", p->json.len, JSON_REJECT_DUPLICATES, &jerr);
    if (json_is_object(obj))
        sink->on_json(sink->arg, p->kind, obj, p->json.len);
    else
        sink->on_dropped(sink->arg, p->kind, p->skip_len);
    json_decref(obj);
    buf_reset(&p->json);
}

/* Takes payload bytes of the current frame; how many were used. */
static size_t take_payload(struct code_frame_parser *p, const char *data, size_t len,
                           const struct code_frame_sink *sink)
{
    size_t n = (uint64_t)len < p->left ? len : (size_t)p->left;
    if (p->kind == 'o' || p->kind == 'e') {
        if (n)
            sink->on_output(sink->arg, p->kind, data, n);
    } else if (!p->skipping) {
        buf_append(&p->json, data, n); /* fits: the length was checked against the limit */
    }
    p->left -= n;
    if (p->left == 0) {
        if (p->kind != 'o' && p->kind != 'e')
            json_frame_done(p, sink);
        p->kind = 0;
    }
    return n;
}

int code_frame_feed(struct code_frame_parser *p, const char *data, size_t len,
                    const struct code_frame_sink *sink)
{
    if (p->broken[0])
        return -1;
    while (len > 0) {
        if (p->kind == 0) {
            long used = take_head(p, data, len);
            if (used < 0)
                return -1;
            data += used, len -= (size_t)used;
            if (p->kind != 0 && p->left == 0)
                take_payload(p, data, 0, sink); /* an empty frame ends at once */
            continue;
        }
        size_t used = take_payload(p, data, len, sink);
        data += used, len -= used;
    }
    return 0;
}
