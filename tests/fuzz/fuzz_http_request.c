/* libFuzzer target: arbitrary bytes through the HTTP request reader, split into pieces the way
 * a socket might deliver them, pipelined requests taken one by one, and each complete request's
 * headers run through the admission rules and its body through SSE framing. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lib/base/buf.h"
#include "server/http/http_policy.h"
#include "mcp/http/http_version.h"
#include "server/http/http_request.h"
#include "server/http/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inspect(const struct http_request *req)
{
    static const struct http_policy pol = {.loopback = true, .port = 8765, .token = "t"};
    char path[256];
    bool dup;
    const char *host = http_request_header(req, "host", &dup);
    (void)http_policy_host_ok(&pol, host);
    (void)http_policy_origin_ok(&pol, http_request_header(req, "origin", NULL), host);
    (void)http_policy_auth_ok(&pol, http_request_header(req, "authorization", NULL));
    (void)http_accepts(http_request_header(req, "accept", NULL), "text/event-stream");
    (void)http_content_type_is_json(http_request_header(req, "content-type", NULL));
    (void)http_protocol_version_ok(http_request_header(req, "mcp-protocol-version", NULL));
    (void)http_request_path(req, path, sizeof(path));
    struct buf ev;
    buf_init(&ev, 2 * req->body.len + 64);
    (void)sse_event(&ev, "message", "1-1", req->body.data ? req->body.data : "", req->body.len);
    buf_release(&ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the size of the pieces (1..256 bytes, or all at once for 0). */
    size_t piece = size > 0 && data[0] ? data[0] : (size_t)-1;
    const char *p = (const char *)data + (size > 0);
    size_t left = size > 0 ? size - 1 : 0;
    struct http_reader r;
    http_reader_init(&r);
    while (left > 0) {
        size_t n = left < piece ? left : piece;
        size_t used = http_reader_feed(&r, p, n);
        if (r.state == HTTP_READER_ERROR)
            break;
        if (r.state == HTTP_READER_DONE) {
            inspect(&r.req);
            http_reader_next(&r);
        } else if (used != n) {
            __builtin_trap(); /* the reader must take every byte unless it stopped */
        }
        p += used;
        left -= used;
    }
    http_reader_release(&r);
    return 0;
}
