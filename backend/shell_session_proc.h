/* Shell sessions on the interactive-process primitive (docs/tools-design.md, "Shell sessions"),
 * for backends with command_input; the others keep the helper scripts of shell_session.h.
 *
 * A session is one long-lived bash started by exec with stdin open (label "session:<name>"),
 * reading its commands from stdin. Each command is written to that stdin (command_input) as
 * one compound command that runs it in the shell itself (so cwd, variables, functions, aliases
 * and jobs persist) with its own stdin, then prints the end marker of shell_session_mark.h with
 * the status and $PWD on both streams, through descriptors the shell saved at start. The watcher
 * splits each stream at its marker. No process is started per command.
 *
 * Command ids: a session command's id is "<shell's command id>.<offset>", where its output
 * starts in the shell's log (unique in the shell, whichever process sent it); get_command and kill_command route such ids here (shell_session_proc_is_command_id):
 * output is the shell's interleaved log between the command's start and its marker, a signal is
 * an interrupt (SIGINT to the shell's process group), and KILL adds the kill of the shell 3 s
 * later, as a timeout does. An id this process did not record (an earlier one sent it) can
 * still be interrupted: the signal goes to the shell by its command id.
 */
#ifndef MCPBOX_SHELL_SESSION_PROC_H
#define MCPBOX_SHELL_SESSION_PROC_H

#include "backend/backend.h"
#include "backend/shell_session.h"

/* One command for a session. */
struct shell_session_request {
    const char *name;       /* the session (shell_session_check_name) */
    const char *command;    /* at most SHELL_SESSION_COMMAND_MAX bytes with cwd and env */
    const char *cwd;        /* NULL, or entered first (as `cd` typed in the session) */
    json_t *env;            /* NULL, or exported first (object of strings) */
    const char *stdin_data; /* NULL: /dev/null */
    size_t stdin_len;
    int64_t timeout_s; /* > 0: SIGINT after that long, the shell killed 3 s later */
    bool must_exist;   /* no shell of that name: kind MISSING, nothing started */
};

struct shell_session_handle;

/* True when be's sessions run here (be has command_input). */
bool shell_session_proc_available(const struct backend *be);
/* Runs req in its session of sandbox_id, starting the shell on first use. obs as for exec:
 * on_started with the command's id, on_output per chunk of its own streams (markers cut off),
 * on_done with the exec-shaped final status; *res (may be NULL) is filled just before on_done
 * with how it went (kind BUSY, GONE, LIMIT, ... for a command that did not run). -1 with err
 * for a bad name or a command too long. */
int shell_session_proc_run(struct backend *be, const char *sandbox_id,
                           const struct shell_session_request *req, const struct exec_observer *obs,
                           struct shell_session_result *res, struct shell_session_handle **out,
                           struct mcp_error *err);
/* Stops watching: no callback after this; the command goes on, its end is still recorded. */
void shell_session_proc_detach(struct shell_session_handle *h);

/* True for the id of a session command (as opposed to an exec's). */
bool shell_session_proc_is_command_id(const char *command_id);
/* command_get and command_kill (backend.h's shapes) for a session command's id. */
int shell_session_proc_command_get(struct backend *be, const char *sandbox_id,
                                   const char *command_id, uint64_t offset, uint64_t limit,
                                   backend_cb *cb, void *arg, struct mcp_error *err);
int shell_session_proc_command_kill(struct backend *be, const char *sandbox_id,
                                    const char *command_id, int signal, backend_cb *cb, void *arg,
                                    struct mcp_error *err);

/* After the session's shell was ended from outside (OpenSandbox's DELETE /session): its next
 * command is told MISSING (with must_exist), not GONE. */
void shell_session_proc_forget(struct backend *be, const char *sandbox_id, const char *name);
/* Forgets be's sessions (at shutdown): their shells live on in the sandboxes; a command in
 * flight is reported lost. */
void shell_session_proc_release(struct backend *be);

#endif
