/* Terminals over any backend's exec (docs/tools-design.md, "Terminals"): the path of backends
 * without command_input (opensandbox); the others run terminals on a pty the sandbox's agent
 * holds (mcp/tools/terminal_pty.h), which needs none of this in the image.
 *
 * A terminal is a program on a PTY inside the sandbox, held by script(1) in its own session
 * under /tmp/.mcpbox-terminals/<id>/ (so it outlives the exec that started it and the mcpbox
 * process): keys go in through a fifo, the screen comes out into an append-only log. Every
 * action (start, send, read, resize, close) is one exec of shell_terminal_sh; read returns the
 * log's bytes from an offset on stdout (by default from where the last read stopped, kept in the
 * sandbox) and each action ends with a status line on stderr. The program's own output never
 * reaches the helper's stderr, so that line is the helper's.
 */
#ifndef MCPBOX_SHELL_TERMINAL_H
#define MCPBOX_SHELL_TERMINAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "lib/base/error.h"

#define SHELL_TERMINAL_MAX 8 /* live terminals per sandbox */
#define SHELL_TERMINAL_READ_MAX (1u << 20)

extern const char shell_terminal_sh[];

/* The exec of one action: action "start" (command, rows, cols), "send" (the caller puts the bytes
 * on the exec's stdin), "read" (offset < 0: since the last read; at most limit bytes, the newest),
 * "resize" (rows, cols), "close". Fills req; *env is the exec's env, owned by the caller. */
struct shell_terminal_args {
    const char *action, *id, *command;
    int rows, cols;
    int64_t offset;
    uint64_t limit;
};
void shell_terminal_exec_request(const struct shell_terminal_args *a, json_t **env,
                                 struct exec_request *req);

/* The status line: offset and size of what read returned, and the program's state. */
struct shell_terminal_status {
    bool seen; /* a status line was found */
    uint64_t offset, size;
    bool running;  /* else exited (exit_code) or gone */
    bool gone;     /* no such terminal */
    int exit_code; /* -1: unknown */
};
/* Parses the last "mcpbox-terminal ..." line of the helper's stderr. */
void shell_terminal_parse_status(const char *err, size_t len, struct shell_terminal_status *st);
/* A sentence for the helper's exit code (10 to 15), or NULL. */
const char *shell_terminal_failure(int exit_code);

/* Decodes one key name ("Enter", "Tab", "Esc", "Up", "C-c", "^C", ...) into bytes (at most 8);
 * returns their count, or -1 for a name it does not know. */
int shell_terminal_key(const char *name, char out[8]);

#endif
