#include "backend/opensandbox/sse.h"

#include <string.h>

void osb_sse_init(struct osb_sse *p, osb_sse_event_fn *on_event, void *arg)
{
    memset(p, 0, sizeof(*p));
    buf_init(&p->line, OSB_SSE_LINE_MAX);
    buf_init(&p->data, OSB_SSE_LINE_MAX);
    p->on_event = on_event;
    p->arg = arg;
}

void osb_sse_release(struct osb_sse *p)
{
    buf_release(&p->line);
    buf_release(&p->data);
}

static int sse_dispatch_json(struct osb_sse *p, const char *text, size_t len)
{
    json_t *ev = json_loadb(text, len, 0, NULL);
    if (!json_is_object(ev)) {
        p->bad_events++;
        json_decref(ev);
        return 0;
    }
    int rc = p->on_event(p->arg, ev);
    json_decref(ev);
    if (rc != 0)
        p->error = -1;
    return rc;
}

static int sse_dispatch_data(struct osb_sse *p)
{
    if (p->data.len == 0)
        return 0;
    int rc = sse_dispatch_json(p, p->data.data, p->data.len);
    buf_reset(&p->data);
    return rc;
}

static int sse_line(struct osb_sse *p, const char *s, size_t len)
{
    if (len > 0 && s[len - 1] == '\r')
        len--;
    if (len == 0)
        return sse_dispatch_data(p);
    if (s[0] == '{') /* execd's native form: the line is the event */
        return sse_dispatch_json(p, s, len);
    if (len >= 5 && memcmp(s, "data:", 5) == 0) {
        s += 5, len -= 5;
        if (len > 0 && s[0] == ' ')
            s++, len--;
        if (p->data.len > 0 && buf_append(&p->data, "\n", 1) != 0)
            return p->error = -1;
        if (buf_append(&p->data, s, len) != 0)
            return p->error = -1;
    }
    return 0; /* comments, event:, id:, retry: and unknown fields are ignored */
}

int osb_sse_feed(struct osb_sse *p, const char *data, size_t len)
{
    if (p->error)
        return -1;
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t chunk = nl ? (size_t)(nl - data) : len;
        if (buf_append(&p->line, data, chunk) != 0)
            return p->error = -1;
        if (nl == NULL)
            return 0;
        data += chunk + 1, len -= chunk + 1;
        int rc = sse_line(p, p->line.data ? p->line.data : "", p->line.len);
        buf_reset(&p->line);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int osb_sse_finish(struct osb_sse *p)
{
    if (p->error)
        return -1;
    if (p->line.len > 0) {
        int rc = sse_line(p, p->line.data, p->line.len);
        buf_reset(&p->line);
        if (rc != 0)
            return -1;
    }
    return sse_dispatch_data(p);
}
