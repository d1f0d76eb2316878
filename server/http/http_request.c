/* The HTTP/1.1 request reader. http-parser does the tokenising and framing (chunked decoding,
 * Content-Length vs Transfer-Encoding conflicts); this file stores what it reports, enforces the
 * limits and stops at the end of each message so that pipelined requests wait their turn. */
#include "server/http/http_request.h"

#include <stdint.h>
#include <string.h>

enum { CB_TARGET, CB_FIELD, CB_VALUE };

/* Body buffer capacity kept between requests on one connection. */
#define HTTP_BODY_KEEP_BYTES (64u * 1024u)

/* Room for the target, the header bytes and one NUL after each string. */
#define STORE_LIMIT (HTTP_MAX_TARGET_BYTES + HTTP_MAX_HEADER_BYTES + 2 * HTTP_MAX_HEADERS + 8)

static struct http_reader *reader_of(http_parser *p)
{
    return p->data;
}

static int fail(struct http_reader *r, int status, const char *msg)
{
    if (r->state != HTTP_READER_ERROR) {
        r->state = HTTP_READER_ERROR;
        r->error_status = status;
        r->error_msg = msg;
    }
    return -1;
}

static int count_header_bytes(struct http_reader *r, size_t len)
{
    r->header_bytes += len;
    if (r->header_bytes > HTTP_MAX_HEADER_BYTES)
        return fail(r, 431, "Request Header Fields Too Large");
    return 0;
}

static int store_append(struct http_reader *r, const char *data, size_t len)
{
    if (buf_append(&r->req.store, data, len) < 0)
        return fail(r, 431, "Request Header Fields Too Large");
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct http_reader *r = reader_of(p);
    r->target_len += len;
    if (r->target_len > HTTP_MAX_TARGET_BYTES)
        return fail(r, 414, "URI Too Long");
    if (count_header_bytes(r, len) < 0)
        return -1;
    return store_append(r, at, len);
}

/* Terminates whatever string was being received before a new header field starts. */
static int finish_string(struct http_reader *r)
{
    if (store_append(r, "", 1) < 0)
        return -1;
    if (r->last_cb == CB_FIELD) { /* a field with no value callback: empty value */
        r->value_off[r->req.nheaders - 1] = r->req.store.len;
        return store_append(r, "", 1);
    }
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct http_reader *r = reader_of(p);
    if (r->state == HTTP_READER_BODY) /* chunked trailer fields: counted, not kept */
        return count_header_bytes(r, len);
    if (r->last_cb != CB_FIELD) {
        if (finish_string(r) < 0)
            return -1;
        if (r->req.nheaders == HTTP_MAX_HEADERS)
            return fail(r, 431, "Too many header fields");
        r->name_off[r->req.nheaders++] = r->req.store.len;
        r->last_cb = CB_FIELD;
    }
    if (count_header_bytes(r, len) < 0)
        return -1;
    return store_append(r, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct http_reader *r = reader_of(p);
    if (r->state == HTTP_READER_BODY)
        return count_header_bytes(r, len);
    if (r->last_cb != CB_VALUE) {
        if (store_append(r, "", 1) < 0)
            return -1;
        r->value_off[r->req.nheaders - 1] = r->req.store.len;
        r->last_cb = CB_VALUE;
    }
    if (count_header_bytes(r, len) < 0)
        return -1;
    return store_append(r, at, len);
}

/* RFC 9110 token characters: http-parser's lenient mode lets spaces into field names, which
 * is how requests get smuggled past proxies. */
static bool token_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Field value bytes: HTAB, SP, visible ASCII and obs-text (not NUL, other controls or DEL). */
static bool value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Lowercases a field name in place; false if it is empty or not a token. */
static bool lower_token(char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (!token_char(ch))
            return false;
        if (ch >= 'A' && ch <= 'Z')
            *s = (char)(ch + ('a' - 'A'));
    }
    return true;
}

/* Checks a field value's characters, then cuts its trailing blanks. */
static bool trim_field_value(char *s)
{
    char *p = s;
    while (value_char((unsigned char)*p))
        p++;
    if (*p)
        return false; /* stopped at a forbidden byte, not at the end */
    while (p > s && (p[-1] == ' ' || p[-1] == '\t'))
        p--;
    *p = '\0';
    return true;
}

/* The store no longer grows once the headers are complete, so pointers into it are stable.
 * Names are lowercased and values trimmed here, and both checked (one pass over each: this runs
 * for every request). */
static int resolve_headers(struct http_reader *r)
{
    struct http_request *req = &r->req;
    req->target = req->store.data;
    for (size_t i = 0; i < req->nheaders; i++) {
        char *name = req->store.data + r->name_off[i];
        char *value = req->store.data + r->value_off[i];
        req->headers[i].name = name;
        req->headers[i].value = value;
        bool name_ok = lower_token(name);
        if (!name_ok || !trim_field_value(value)) {
            req->nheaders = i + 1; /* no pointer left unset behind a failed request */
            return fail(r, 400, name_ok ? "invalid character in header field value"
                                        : "invalid character in header field name");
        }
    }
    return 0;
}

/* A Content-Length above what a kept body may hold (content_length is ULLONG_MAX when the
 * request has none). */
static bool declared_too_large(const http_parser *p)
{
    return !(p->flags & F_CHUNKED) && p->content_length != UINT64_MAX &&
           p->content_length > HTTP_MAX_BODY_BYTES;
}

static int on_headers_complete(http_parser *p)
{
    struct http_reader *r = reader_of(p);
    if (finish_string(r) < 0)
        return -1;
    if (resolve_headers(r) < 0)
        return -1;
    r->req.method = (enum http_method)p->method;
    r->req.http_major = p->http_major;
    r->req.http_minor = p->http_minor;
    if (p->http_major != 1)
        return fail(r, 505, "HTTP Version Not Supported");
    r->state = HTTP_READER_BODY;
    bool body_follows =
        (p->flags & F_CHUNKED) || (p->content_length != UINT64_MAX && p->content_length > 0);
    if (r->stop_after_head && body_follows) {
        r->head_paused = true; /* the length is checked once it is known the body is kept */
        http_parser_pause(p, 1);
        return 0;
    }
    return declared_too_large(p) ? fail(r, 413, "Payload Too Large") : 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct http_reader *r = reader_of(p);
    if (r->body_sink) {
        r->body_sink(r->body_sink_arg, at, len);
        return 0;
    }
    if (buf_append(&r->req.body, at, len) < 0)
        return fail(r, 413, "Payload Too Large");
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct http_reader *r = reader_of(p);
    r->req.keep_alive = http_should_keep_alive(p) != 0;
    r->state = HTTP_READER_DONE;
    http_parser_pause(p, 1); /* one message at a time: pipelined bytes stay unread */
    return 0;
}

static const http_parser_settings reader_settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void reader_reset(struct http_reader *r)
{
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
    r->state = HTTP_READER_IDLE;
    r->header_bytes = 0;
    r->target_len = 0;
    r->last_cb = CB_TARGET;
    r->error_status = 0;
    r->error_msg = NULL;
    r->head_paused = false;
    r->body_sink = NULL;
    r->body_sink_arg = NULL;
    r->req.nheaders = 0;
    r->req.target = NULL;
    r->req.keep_alive = false;
    if (r->req.body.cap > HTTP_BODY_KEEP_BYTES)
        buf_release(&r->req.body); /* do not pin a large body's memory on an idle connection */
    buf_reset(&r->req.body);
    buf_reset(&r->req.store);
}

void http_reader_init(struct http_reader *r)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->req.body, HTTP_MAX_BODY_BYTES);
    buf_init(&r->req.store, STORE_LIMIT);
    reader_reset(r);
}

void http_reader_release(struct http_reader *r)
{
    buf_release(&r->req.body);
    buf_release(&r->req.store);
}

void http_reader_next(struct http_reader *r)
{
    reader_reset(r);
}

size_t http_reader_feed(struct http_reader *r, const char *data, size_t len)
{
    if (r->state == HTTP_READER_DONE || r->state == HTTP_READER_ERROR || len == 0)
        return 0;
    if (r->state == HTTP_READER_IDLE)
        r->state = HTTP_READER_HEADERS;
    if (r->head_paused) {
        r->head_paused = false;
        if (!r->body_sink && declared_too_large(&r->parser)) {
            fail(r, 413, "Payload Too Large");
            return 0;
        }
        http_parser_pause(&r->parser, 0);
    }
    size_t n = http_parser_execute(&r->parser, &reader_settings, data, len);
    if (r->state == HTTP_READER_ERROR || r->state == HTTP_READER_DONE || r->head_paused)
        return n;
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (e == HPE_HEADER_OVERFLOW)
        fail(r, 431, "Request Header Fields Too Large");
    else if (e != HPE_OK)
        fail(r, 400, http_errno_description(e));
    else if (r->parser.upgrade)
        fail(r, 400, "Protocol upgrade is not supported");
    return n;
}

const char *http_request_header(const struct http_request *req, const char *lname, bool *dup)
{
    const char *found = NULL;
    if (dup)
        *dup = false;
    for (size_t i = 0; i < req->nheaders; i++) {
        /* First byte before strcmp: this runs several times per request. */
        if (req->headers[i].name[0] != lname[0] || strcmp(req->headers[i].name, lname) != 0)
            continue;
        if (found) {
            if (dup)
                *dup = true;
            break;
        }
        found = req->headers[i].value;
    }
    return found;
}

int http_request_path(const struct http_request *req, char *out, size_t out_size)
{
    if (!req->target || req->target[0] != '/')
        return -1;
    size_t n = strcspn(req->target, "?#");
    if (n + 1 > out_size)
        return -1;
    memcpy(out, req->target, n);
    out[n] = '\0';
    return 0;
}
