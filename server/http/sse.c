/* SSE framing. A field value cannot contain a line break, so multi-line data is split into one
 * data: field per line; the client joins them back with LF. */
#include "server/http/sse.h"

#include <string.h>

#include "lib/base/buf.h"

static int append_field(struct buf *out, const char *name, const char *value, size_t len)
{
    if (buf_append_str(out, name) < 0 || buf_append(out, ": ", 2) < 0 ||
        buf_append(out, value, len) < 0 || buf_append(out, "\n", 1) < 0)
        return -1;
    return 0;
}

static int has_line_break(const char *s)
{
    return s && strpbrk(s, "\r\n") != NULL;
}

static int append_data(struct buf *out, const char *data, size_t len)
{
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && data[i] != '\r' && data[i] != '\n')
            continue;
        if (append_field(out, "data", data + start, i - start) < 0)
            return -1;
        if (i + 1 < len && data[i] == '\r' && data[i + 1] == '\n')
            i++;
        start = i + 1;
    }
    return 0;
}

int sse_event(struct buf *out, const char *event, const char *id, const char *data, size_t len)
{
    if (has_line_break(event) || has_line_break(id))
        return -1;
    if (event && append_field(out, "event", event, strlen(event)) < 0)
        return -1;
    if (id && append_field(out, "id", id, strlen(id)) < 0)
        return -1;
    if (append_data(out, data, len) < 0)
        return -1;
    return buf_append(out, "\n", 1);
}

int sse_priming(struct buf *out, const char *id, unsigned retry_ms)
{
    if (has_line_break(id))
        return -1;
    return buf_printf(out, "id: %s\nretry: %u\ndata: \n\n", id, retry_ms);
}

int sse_comment(struct buf *out, const char *text)
{
    if (has_line_break(text))
        return -1;
    return buf_printf(out, ": %s\n\n", text);
}
