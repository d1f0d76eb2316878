/* The agent: its binary (agent_blob.c) and the connection to it (agent_client.c). Internal to the
 * local backend. */
#ifndef MCPBOX_LOCAL_AGENT_H
#define MCPBOX_LOCAL_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#include "lib/base/error.h"

/* ---- the agent binary (agent_blob.c) ---- */
extern const unsigned char local_agent_blob[];
extern const unsigned char local_agent_blob_end[];
int local_agent_memfd(struct mcp_error *err);

/* ---- agent connection (agent_client.c) ---- */
struct agent_conn;
typedef void agent_reply_cb(void *arg, json_t *reply, const struct mcp_error *err);
typedef void agent_event_cb(void *arg, json_t *event);

struct agent_conn *agent_conn_open(uv_loop_t *loop, const char *sock_path, struct mcp_error *err);
void agent_conn_close(struct agent_conn *c); /* pending calls fail (asynchronously) */
bool agent_conn_alive(const struct agent_conn *c);
/* Sends req (stolen; "v" and "id" are added). cb gets the reply object or an error. */
int agent_call(struct agent_conn *c, json_t *req, agent_reply_cb *cb, void *arg,
               struct mcp_error *err);
void agent_watch(struct agent_conn *c, const char *cmd_id, agent_event_cb *cb, void *arg);
void agent_unwatch(struct agent_conn *c, const char *cmd_id);

#endif
