#include "backend/local/agent_frame.h"

#include <string.h>

#include "backend/local/proto.h"
#include "lib/base/json_in.h"

enum agent_frame_rc agent_frame_next(struct buf *rbuf, json_t **msg)
{
    *msg = NULL;
    if (rbuf->len < 4)
        return AGENT_FRAME_NONE;
    const unsigned char *p = (const unsigned char *)rbuf->data;
    size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    if (len > AGENT_FRAME_MAX)
        return AGENT_FRAME_TOO_BIG;
    if (rbuf->len - 4 < len)
        return AGENT_FRAME_NONE;
    /* the agent's frames are small and plain: the fast parser, jansson for the rest */
    json_t *j = json_in_parse(rbuf->data + 4, len);
    if (j == NULL)
        j = json_loadb(rbuf->data + 4, len, 0, NULL);
    buf_consume(rbuf, 4 + len);
    if (!json_is_object(j)) {
        json_decref(j);
        return AGENT_FRAME_SKIP;
    }
    *msg = j;
    return AGENT_FRAME_OK;
}

void agent_reply_error(const json_t *msg, struct mcp_error *err)
{
    static const int codes[] = {MCP_ERR_NOT_FOUND,   MCP_ERR_CONFLICT,    MCP_ERR_DENIED,
                                MCP_ERR_LIMIT,       MCP_ERR_TIMEOUT,     MCP_ERR_UNAVAILABLE,
                                MCP_ERR_UNSUPPORTED, MCP_ERR_IO,          MCP_ERR_INVALID};
    json_t *e = json_object_get(msg, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *text = json_string_value(json_object_get(e, "message"));
    int ecode = MCP_ERR_BACKEND;
    for (size_t i = 0; code && i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(code, mcp_error_code_name(codes[i])) == 0)
            ecode = codes[i];
    /* The agent's message already ends with the errno text: keep the number only. */
    mcp_error_set(err, ecode, 0, "%s", text ? text : "agent error");
    err->sys_errno = (int)json_integer_value(json_object_get(e, "errno"));
}
