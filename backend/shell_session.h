/* Shell sessions over any backend's exec (docs/tools-design.md, "Shell sessions"); backends
 * with command_input run them on the proc primitive instead (shell_session_proc.h), which
 * shares the names, kinds and results here.
 *
 * A session is one long-lived bash inside the sandbox, started on first use and found again by
 * name (under $TMPDIR/.mcpbox-sessions-$UID/<name>/), so it outlives the mcpbox process that
 * started it. Each command is one ordinary exec of a small helper script: the helper hands the
 * command to the session's shell, which runs it in its own context (cwd, variables, functions,
 * aliases, jobs persist) with the helper's stdin, stdout and stderr, so the command's output
 * streams through the exec as run_command's does, streams kept apart. The helper then prints one
 * trailer line on stdout, "\n<nonce> <kind> <status> <cwd>\n", and exits with the command's
 * status. The nonce is fresh per command, so output that merely looks like a trailer is never
 * taken for one; shell_session_tail holds back the end of stdout until the trailer is cut off.
 * The sandbox can forge only its own session's results, which it controls anyway.
 */
#ifndef MCPBOX_SHELL_SESSION_H
#define MCPBOX_SHELL_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "lib/base/error.h"

#define SHELL_SESSION_NAME_MAX 64       /* [A-Za-z0-9_.-], not starting with '.' */
#define SHELL_SESSION_MAX 8             /* live sessions per sandbox (and per sandbox user) */
#define SHELL_SESSION_COMMAND_MAX 65536 /* bytes: the command travels in the environment */
#define SHELL_SESSION_NONCE_HEX 32
/* The held-back end of stdout: room for the trailer with a cwd up to PATH_MAX. */
#define SHELL_SESSION_TAIL_MAX (SHELL_SESSION_NONCE_HEX + 4096 + 64)

extern const char shell_session_helper_sh[];
extern const char shell_session_loop_sh[];

/* How the helper says the command went (the trailer's kind). */
enum shell_session_kind {
    SHELL_SESSION_NONE,    /* no trailer: the helper was killed or is not ours */
    SHELL_SESSION_DONE,    /* the command ended; status is its exit status */
    SHELL_SESSION_TIMEOUT, /* interrupted (SIGINT) after its timeout; the shell lives on */
    SHELL_SESSION_KILLED,  /* ignored the interrupt: the shell was killed, its state is gone */
    SHELL_SESSION_EXITED,  /* the shell exited during the command (status: the shell's) */
    SHELL_SESSION_GONE,    /* the shell had died before this command, which did not run */
    SHELL_SESSION_BUSY,    /* another command is running in this session */
    SHELL_SESSION_LIMIT,   /* SHELL_SESSION_MAX sessions live already */
    SHELL_SESSION_NOBASH,  /* the sandbox has no bash */
    SHELL_SESSION_ERROR,   /* could not make the session's directory or fifos */
    SHELL_SESSION_MISSING, /* no such session, and the caller asked not to start one */
};

/* One command prepared for exec. */
struct shell_session_cmd {
    char nonce[SHELL_SESSION_NONCE_HEX + 1];
    char *command; /* owned: the exec's /bin/sh -c line */
    json_t *env;   /* owned: the exec's env (the helper's inputs) */
};

/* Checks a session name; -1 with err saying what is allowed. */
int shell_session_check_name(const char *name, struct mcp_error *err);
/* Prepares command for session name: cwd (or NULL) is entered and env (object of strings, or
 * NULL) exported first, in the session, as `cd` and `export` typed there would; timeout_s > 0
 * interrupts the command after that long. -1 with err for a bad name or a command too long. */
int shell_session_prepare(const char *name, const char *command, const char *cwd, json_t *env,
                          int64_t timeout_s, struct shell_session_cmd *out, struct mcp_error *err);
void shell_session_cmd_release(struct shell_session_cmd *cmd);
/* After prepare: the command runs only in a session that exists (else kind MISSING). */
void shell_session_require_existing(struct shell_session_cmd *cmd);
/* The /bin/sh -c line that ends session name (its shell and everything it started); exits 3
 * when there is no such session. Owned by the caller. */
char *shell_session_delete_command(const char *name);
/* Fills req from cmd (the caller sets stdin); the exec's own timeout is a safety net past the
 * helper's. */
void shell_session_exec_request(const struct shell_session_cmd *cmd, int64_t timeout_s,
                                struct exec_request *req);

/* The held-back end of a session command's stdout. */
struct shell_session_tail {
    char nonce[SHELL_SESSION_NONCE_HEX + 1];
    char buf[SHELL_SESSION_TAIL_MAX];
    size_t len;
};
typedef void shell_session_emit_fn(void *arg, const char *data, size_t len);

struct shell_session_result {
    enum shell_session_kind kind;
    int status; /* exit status, or -1 when the trailer gave none */
    char cwd[4097];
    bool followed; /* proc primitive: it ran after a command an earlier process left running */
    const char *note; /* a backend's own word on the session (session_run), or NULL */
};

void shell_session_tail_init(struct shell_session_tail *t, const char *nonce);
/* Passes on (emit) what can no longer be part of the trailer, keeps the rest. */
void shell_session_tail_feed(struct shell_session_tail *t, const char *data, size_t len,
                             shell_session_emit_fn *emit, void *arg);
/* At the end: cuts the trailer off (if the held-back bytes end with one), emits the rest and
 * fills res. */
void shell_session_tail_finish(struct shell_session_tail *t, shell_session_emit_fn *emit, void *arg,
                               struct shell_session_result *res);
/* Parses a trailer at the very end of data[0..len); returns where it starts (len if none). */
size_t shell_session_parse_trailer(const char *nonce, const char *data, size_t len,
                                   struct shell_session_result *res);

/* The kind's name in a trailer ("done", ...), and a sentence for the kinds that are errors. */
const char *shell_session_kind_name(enum shell_session_kind kind);
/* A message for the failures (gone, busy, limit, nobash, error), or NULL for the others. */
const char *shell_session_failure(enum shell_session_kind kind);

#endif
