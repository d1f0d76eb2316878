/* Server-Sent Events framing (text/event-stream), as the Streamable HTTP transport uses it:
 * message events carrying one JSON-RPC message each, the priming event (id + retry, empty data)
 * and keep-alive comments. Appends to a struct buf; returns -1 if the buffer's limit is hit. */
#ifndef MCPBOX_HTTP_SSE_H
#define MCPBOX_HTTP_SSE_H

#include <stddef.h>

struct buf;

/* How long a client should wait before reconnecting, sent in the priming event. */
#define SSE_RETRY_MS 1000

/* "event: <event>\nid: <id>\ndata: <line>\n...\n\n". event and id may be NULL. Each line of
 * data becomes its own data: field (CR, LF and CRLF all end a line), so any text is framed
 * faithfully. id must not contain CR or LF (-1 otherwise). */
int sse_event(struct buf *out, const char *event, const char *id, const char *data, size_t len);
/* "id: <id>\nretry: <ms>\ndata: \n\n": tells the client the stream is resumable. */
int sse_priming(struct buf *out, const char *id, unsigned retry_ms);
/* ": <text>\n\n" (a comment; clients ignore it; keeps proxies and idle timers quiet). */
int sse_comment(struct buf *out, const char *text);

#endif
