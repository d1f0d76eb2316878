/* `mcpbox sandbox exec -it` (cli_sandbox_tty.c). */
#ifndef MCPBOX_CLI_SANDBOX_TTY_H
#define MCPBOX_CLI_SANDBOX_TTY_H

#include "backend/backend.h"
#include "cli/cli_sandbox.h"

/* Runs req (its command, cwd, env, timeout) on a terminal in sandbox id, this process's terminal
 * in raw mode in front of it until the command ends. -1 when it ran (c->result is its final
 * status), else the exit code for why it could not. */
int cli_sandbox_exec_tty(struct cli_sandbox *c, struct exec_request *req, const char *id);

#endif
