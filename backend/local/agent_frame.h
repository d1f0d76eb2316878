/* The host side of the agent's frame protocol (proto.h), without I/O: splitting the bytes read
 * from the agent's socket into frames, and reading an error reply. The agent runs inside the
 * sandbox, so everything here treats its bytes as untrusted (tests/fuzz/fuzz_agent_frame.c). */
#ifndef MCPBOX_LOCAL_AGENT_FRAME_H
#define MCPBOX_LOCAL_AGENT_FRAME_H

#include <jansson.h>

#include "lib/base/buf.h"
#include "lib/base/error.h"

enum agent_frame_rc {
    AGENT_FRAME_NONE,  /* no complete frame in the buffer yet */
    AGENT_FRAME_OK,    /* *msg is the next frame's JSON object (new reference) */
    AGENT_FRAME_SKIP,  /* a complete frame that is not a JSON object: consumed, ignored */
    AGENT_FRAME_TOO_BIG /* a length over AGENT_FRAME_MAX: the connection must be dropped */
};

/* Takes the next frame from the front of rbuf (consuming it). */
enum agent_frame_rc agent_frame_next(struct buf *rbuf, json_t **msg);

/* The error of a reply with "ok" not true: its code mapped to ours (MCP_ERR_BACKEND for one
 * we do not know), its message, its errno. */
void agent_reply_error(const json_t *msg, struct mcp_error *err);

#endif
