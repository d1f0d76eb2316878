/* Parser for execd's event streams. execd writes each event as one line of raw JSON followed by a
 * blank line ({json}\n\n); SSE-speaking proxies and the SDK tests use `data: {json}\n\n` frames
 * (with optional event:/id:/retry: lines and `:` comments). Both are accepted; NDJSON
 * (/metrics/watch, single \n) works too because a line starting with '{' is a whole event. */
#ifndef OSB_SSE_H
#define OSB_SSE_H

#include <jansson.h>
#include <stddef.h>

#include "lib/base/buf.h"

#define OSB_SSE_LINE_MAX (4u << 20) /* the Go SDK's limit for one event */

/* Called for each complete event; return -1 to stop parsing. ev is borrowed. */
typedef int osb_sse_event_fn(void *arg, json_t *ev);

struct osb_sse {
    struct buf line; /* the incomplete line */
    struct buf data; /* accumulated data: lines of the current frame */
    osb_sse_event_fn *on_event;
    void *arg;
    size_t bad_events; /* lines that were not valid JSON objects (skipped) */
    int error;         /* -1 once a line exceeded OSB_SSE_LINE_MAX or on_event stopped */
};

void osb_sse_init(struct osb_sse *p, osb_sse_event_fn *on_event, void *arg);
void osb_sse_release(struct osb_sse *p);
/* Feeds bytes; returns -1 when parsing must stop (see p->error). */
int osb_sse_feed(struct osb_sse *p, const char *data, size_t len);
/* End of stream: dispatches what is pending. */
int osb_sse_finish(struct osb_sse *p);

#endif
