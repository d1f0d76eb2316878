/* libFuzzer target: bytes from a sandbox's agent, as the host reads them (backend/local/
 * agent_frame.c, used by agent_client.c): split into pieces the way the socket might deliver
 * them, frames taken one by one, and each object read the ways dispatch() reads it: an event's
 * names, a reply's id, an error reply's code, message and errno. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/local/agent_frame.h"
#include "backend/local/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inspect(json_t *msg)
{
    (void)json_string_value(json_object_get(msg, "ev"));
    (void)json_string_value(json_object_get(msg, "cmd"));
    (void)json_integer_value(json_object_get(msg, "id"));
    if (!json_is_true(json_object_get(msg, "ok"))) {
        struct mcp_error err;
        agent_reply_error(msg, &err);
        if (memchr(err.msg, '\0', sizeof err.msg) == NULL)
            __builtin_trap(); /* the message must stay a C string */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the size of the pieces (1..255 bytes, or all at once for 0). */
    size_t piece = size > 0 && data[0] ? data[0] : (size_t)-1;
    const char *p = (const char *)data + (size > 0);
    size_t left = size > 0 ? size - 1 : 0;
    struct buf rbuf;
    buf_init(&rbuf, AGENT_FRAME_MAX + 4 + 65536); /* as agent_conn_open */
    bool dropped = false;
    while (left > 0 && !dropped) {
        size_t n = left < piece ? left : piece;
        if (buf_append(&rbuf, p, n) < 0)
            break;
        p += n, left -= n;
        for (;;) {
            json_t *msg;
            enum agent_frame_rc rc = agent_frame_next(&rbuf, &msg);
            if (rc == AGENT_FRAME_TOO_BIG)
                dropped = true;
            if (rc == AGENT_FRAME_NONE || rc == AGENT_FRAME_TOO_BIG)
                break;
            if (rc == AGENT_FRAME_OK)
                inspect(msg);
            json_decref(msg);
        }
    }
    buf_release(&rbuf);
    return 0;
}
