/* The frames a code-interpreter driver writes inside the sandbox (backend/drivers/), read on the
 * host as hostile input: "<kind> <len>\n" then len bytes of payload. Kinds: 'o'/'e' output bytes
 * (streamed through as they arrive, never buffered), 'h' hello, 's' the start of a run, 'r' a
 * result, 'x' an error and 'd' the end of a run, each one JSON object of at most CODE_FRAME_JSON_MAX bytes (a longer one
 * is skipped and reported as dropped). Anything else breaks the stream for good: the context is
 * then lost. docs/local-backend.md, "Code contexts". */
#ifndef MCPBOX_BACKEND_CODE_FRAME_H
#define MCPBOX_BACKEND_CODE_FRAME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/buf.h"

#define CODE_FRAME_HEAD_MAX 24                   /* "x 1234567890\n" fits with room */
#define CODE_FRAME_JSON_MAX (2u * 1024u * 1024u) /* one result (a PNG in base64) at most */
#define CODE_FRAME_LEN_MAX (1ull << 40)          /* a larger length is a broken stream */

struct code_frame_sink {
    /* Output bytes of kind 'o' or 'e', possibly a piece of a frame. */
    void (*on_output)(void *arg, char kind, const char *data, size_t len);
    /* A complete JSON frame ('h', 'r', 'x', 'd'); obj is borrowed. */
    void (*on_json)(void *arg, char kind, json_t *obj, size_t len);
    /* A JSON frame too large to keep (or not an object), skipped. */
    void (*on_dropped)(void *arg, char kind, uint64_t len);
    void *arg;
};

struct code_frame_parser {
    char head[CODE_FRAME_HEAD_MAX];
    size_t head_len;
    char kind;         /* the frame being read, 0 between frames */
    uint64_t left;     /* its payload bytes still to come */
    bool skipping;     /* a JSON frame past the limit: its bytes are dropped */
    uint64_t skip_len; /* its full length */
    struct buf json;   /* a JSON frame's payload so far */
    char broken[96];   /* why the stream broke ("" while fine) */
};

void code_frame_init(struct code_frame_parser *p);
void code_frame_release(struct code_frame_parser *p);
/* Feeds bytes as they came; -1 once the stream is broken (p->broken says why; later calls do
 * nothing and return -1). */
int code_frame_feed(struct code_frame_parser *p, const char *data, size_t len,
                    const struct code_frame_sink *sink);

#endif
