/* The scripted protocol core of fake_core.c (for test_http_transport only). */
#ifndef MCPBOX_TEST_FAKE_CORE_H
#define MCPBOX_TEST_FAKE_CORE_H

#include <uv.h>

struct mcp_server;

/* Counters read from the client thread (atomically). */
extern int fake_cancelled;
extern int fake_sessions_open;

struct mcp_server *fake_server_new(uv_loop_t *loop);
/* Runs the stop hook the transport registered (closes listener, connections, sessions). */
void fake_server_stop(struct mcp_server *srv);

#endif
