/* run_command's session argument (mcp/tools/session.c). */
#ifndef MCPBOX_TOOLS_SESSION_H
#define MCPBOX_TOOLS_SESSION_H

#include "backend/shell_session.h"
#include "mcp/tools/tools-internal.h"

/* One session command of run_command. */
struct session_run {
    char *name;                      /* NULL: not a session command */
    struct shell_session_cmd cmd;    /* what the exec runs */
    struct shell_session_tail *tail; /* the held-back end of stdout */
    struct shell_session_result res; /* filled at the end */
};

/* Prepares the exec of run_command's args (which have a session) into req; -1 with err. */
int session_run_prepare(json_t *args, struct session_run *sr, struct exec_request *req,
                        struct mcp_error *err);
void session_run_release(struct session_run *sr);
/* Adds session {name, cwd} and the session's note to res (run_command's result); -1 with err
 * when the command did not run in the session (busy, gone, too many, no bash). */
int session_run_decorate(const struct session_run *sr, json_t *res, struct mcp_error *err);

#endif
