/* Terminals on an interactive command (mcp/tools/terminal_pty.c): which command a terminal_id
 * names in a sandbox, and where its last read stopped, kept in the store so that another mcpbox
 * process (a restarted stdio server, the CLI) finds both. A module table, migrated on first use;
 * rows of sandboxes the store no longer has, and starts that got no command within a minute
 * (their process died), are dropped when a terminal is reserved. */
#ifndef MCPBOX_STORE_TERMINALS_H
#define MCPBOX_STORE_TERMINALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

struct store;

struct store_terminal {
    char terminal_id[72];
    char command_id[72]; /* "" while its start is under way */
    uint64_t seen;       /* the log offset the last read stopped at */
    bool exited;         /* its program was seen to have ended (it no longer counts as live) */
};

/* Reserves terminal_id in sandbox_id while fewer than max of its terminals are live, in one
 * transaction: 0, or -1 with MCP_ERR_CONFLICT (the id exists) or MCP_ERR_LIMIT (max live). */
int store_terminal_reserve(struct store *st, const char *sandbox_id, const char *terminal_id,
                           unsigned max, struct mcp_error *err);
int store_terminal_set_command(struct store *st, const char *sandbox_id, const char *terminal_id,
                               const char *command_id, struct mcp_error *err);
/* MCP_ERR_NOT_FOUND when there is no such terminal. */
int store_terminal_get(struct store *st, const char *sandbox_id, const char *terminal_id,
                       struct store_terminal *out, struct mcp_error *err);
int store_terminal_set_seen(struct store *st, const char *sandbox_id, const char *terminal_id,
                            uint64_t seen, bool exited, struct mcp_error *err);
int store_terminal_delete(struct store *st, const char *sandbox_id, const char *terminal_id,
                          struct mcp_error *err);
/* The live (not exited) terminals of sandbox_id: *out (free()) of *n. */
int store_terminal_live(struct store *st, const char *sandbox_id, struct store_terminal **out,
                        size_t *n, struct mcp_error *err);

#endif
