/* HTTP/1.1 request reader: bytes in, one validated request out, with hard limits.
 *
 * Pure (no I/O, no globals), on top of the packaged http-parser; a fuzz target
 * (tests/fuzz/fuzz_http_request.c) feeds it arbitrary bytes. The reader stops after each complete
 * message, so pipelined requests are taken one at a time: feed() reports how many bytes it used
 * and the caller keeps the rest for after http_reader_next(). */
#ifndef MCPBOX_HTTP_REQUEST_H
#define MCPBOX_HTTP_REQUEST_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/base/buf.h"

/* Request line plus header fields and values (counted as received). */
#define HTTP_MAX_HEADER_BYTES (16u * 1024u)
/* Header fields in one request. */
#define HTTP_MAX_HEADERS 64
/* Request target (path and query). */
#define HTTP_MAX_TARGET_BYTES 2048u
/* Request body kept whole (32 MiB): MCP's message limit, which mcp/http checks it equals (a
 * streamed body, http_ext_body_stream, has none). A declared Content-Length above it is refused
 * as soon as the headers are in, before any body is read. */
#define HTTP_MAX_BODY_BYTES ((size_t)32u * 1024u * 1024u)

enum http_reader_state {
    HTTP_READER_IDLE,    /* nothing of the next request received yet */
    HTTP_READER_HEADERS, /* inside the request line or headers */
    HTTP_READER_BODY,    /* headers complete, body in progress */
    HTTP_READER_DONE,    /* a complete request is in r->req */
    HTTP_READER_ERROR,   /* r->error_status and r->error_msg say why; the connection must close */
};

struct http_header {
    const char *name;  /* borrowed from the request's storage, lowercased */
    const char *value; /* borrowed, surrounding whitespace trimmed */
};

struct http_request {
    enum http_method method;
    unsigned short http_major, http_minor;
    bool keep_alive;            /* the connection may carry another request after this one */
    const char *target;         /* borrowed: request target as sent, NUL-terminated */
    struct http_header headers[HTTP_MAX_HEADERS];
    size_t nheaders;
    struct buf body;            /* the body (chunked bodies are decoded), capped */
    struct buf store;           /* owned storage for target and header strings */
};

struct http_reader {
    http_parser parser;
    enum http_reader_state state;
    struct http_request req;
    size_t header_bytes;        /* counted against HTTP_MAX_HEADER_BYTES */
    int last_cb;                /* which header callback ran last (field/value) */
    size_t target_len;
    size_t name_off[HTTP_MAX_HEADERS], value_off[HTTP_MAX_HEADERS];
    int error_status;           /* 400, 413, 414, 431, 505 */
    const char *error_msg;      /* static text */
    /* Set by the caller: stop once the head is in when a body follows (head_paused), so that
     * the body can be streamed rather than kept (body_sink). The next feed goes on. */
    bool stop_after_head;
    bool head_paused;
    /* Set: the body's bytes go here as they come, instead of into req.body (no size limit). */
    void (*body_sink)(void *arg, const char *data, size_t len);
    void *body_sink_arg;
};

void http_reader_init(struct http_reader *r);
void http_reader_release(struct http_reader *r);
/* Consumes bytes of the current request and returns how many were used (less than len when a
 * request completed or an error occurred). Never called again after DONE/ERROR without next(). */
size_t http_reader_feed(struct http_reader *r, const char *data, size_t len);
/* Forget the completed request and get ready for the next one on the same connection. */
void http_reader_next(struct http_reader *r);

/* The value of header `lname` (lowercase), or NULL. Sets *dup (if not NULL) when the header
 * occurs more than once. */
const char *http_request_header(const struct http_request *req, const char *lname, bool *dup);
/* The path part of the target (before '?'), copied into out; -1 if it does not fit or the
 * target is not origin-form ("/..."). */
int http_request_path(const struct http_request *req, char *out, size_t out_size);

#endif
