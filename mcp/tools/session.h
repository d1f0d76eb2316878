/* run_command's session argument (mcp/tools/session.c). */
#ifndef MCPBOX_TOOLS_SESSION_H
#define MCPBOX_TOOLS_SESSION_H

#include "backend/shell_session.h"
#include "backend/shell_session_proc.h"
#include "mcp/tools/tools-internal.h"

/* One session command of run_command. */
struct session_run {
    char *name;                      /* NULL: not a session command */
    struct shell_session_cmd cmd;    /* what the exec runs */
    struct shell_session_tail *tail; /* the held-back end of stdout (helper scripts only) */
    struct shell_session_result res; /* filled at the end */
    struct shell_session_handle *proc; /* on the proc primitive, while it runs */
    /* Sessions the backend's remote keeps (backend.h's session_run): */
    bool remote;    /* the command went to session_run */
    json_t *args;   /* run_command's arguments, for the fallback below */
    char *fallback; /* why the remote's sessions were not used, or NULL */
};

/* Starts run_command's args (which have a session) in be's sandbox_id, watched by obs: on the
 * proc primitive where be has it, else in the remote's own sessions where be has them
 * (session_run), else as an exec of the helper into *h; -1 with err. */
int session_run_start(struct backend *be, const char *sandbox_id, json_t *args,
                      struct session_run *sr, const struct exec_observer *obs,
                      struct exec_handle **h, struct mcp_error *err);
/* After session_run failed with MCP_ERR_UNSUPPORTED before it started (err): the same command
 * on the helper scripts instead, the reason kept for the note; -1 with err. */
int session_run_fallback(struct backend *be, const char *sandbox_id, struct session_run *sr,
                         const struct mcp_error *why, const struct exec_observer *obs,
                         struct exec_handle **h, struct mcp_error *err);
/* Stops watching the command (it goes on): the helper's exec h, or the proc command. */
void session_run_detach(struct session_run *sr, struct backend *be, struct exec_handle *h);
void session_run_release(struct session_run *sr);
/* Adds session {name, cwd} and the session's note to res (run_command's result); -1 with err
 * when the command did not run in the session (busy, gone, too many, no bash). */
int session_run_decorate(const struct session_run *sr, json_t *res, struct mcp_error *err);

#endif
