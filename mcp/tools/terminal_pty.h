/* The terminal tool on backends with interactive commands (command_input): each terminal is one
 * exec on a fresh pty held by the sandbox's agent; keys go in with command_input, the screen
 * comes out of command_get by offset, and the store keeps which command a terminal_id names and
 * where its last read stopped (lib/store/store_terminals.h), so any mcpbox process can drive it.
 * Backends without command_input keep the exec helper (backend/shell_terminal.h). */
#ifndef MCPBOX_TERMINAL_PTY_H
#define MCPBOX_TERMINAL_PTY_H

#include <stdbool.h>
#include <stddef.h>

#include "mcp/tools/tools-internal.h"

/* Whether the job's backend takes this path. */
bool terminal_pty_supported(const struct tool_job *job);

/* Runs action ("start", "send", "read", "resize", "close"; static) on terminal id for a bound
 * job, finishing it; keys (send's bytes, taken over) may be NULL. */
void terminal_pty_run(struct tool_job *job, const char *action, const char *id, char *keys,
                      size_t keys_len, bool raw);

/* What a program printed, as the tool returns it: cleaned of escape sequences unless raw, the
 * newest cap bytes (cut before a character); *cut says whether anything was dropped. */
json_t *terminal_text(const char *data, size_t len, bool raw, size_t cap, bool *cut);

#endif
