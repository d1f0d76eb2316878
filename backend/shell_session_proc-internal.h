/* Shared by shell_session_proc.c (sessions and their commands), shell_session_proc_text.c (what
 * is written to the shell) and shell_session_proc_get.c (get_command and kill_command) only. */
#ifndef MCPBOX_SHELL_SESSION_PROC_INTERNAL_H
#define MCPBOX_SHELL_SESSION_PROC_INTERNAL_H

#include <uv.h>

#include "backend/shell_session_mark.h"
#include "backend/shell_session_proc.h"

#define SESS_KILL_GRACE_MS 3000 /* after the interrupt, before the shell is killed */
#define SESS_RECORDS 32         /* finished commands per session kept for get_command */
#define SESS_ID_MAX 80
#define SESS_KEEP_MAX 256 /* sessions this process remembers (a shell's, or a dead one's records) */
#define SESS_STDIN_MAX (256u * 1024u) /* bytes of a command's stdin (4 per byte at worst) */

enum sess_state {
    SESS_NONE,     /* no shell */
    SESS_FINDING,  /* looking for a shell an earlier process started (command_find, attach) */
    SESS_STARTING, /* exec sent, no command id yet */
    SESS_IDLE,
    SESS_BUSY,
    SESS_DEAD, /* the shell ended between commands: the next command is told */
};

/* Where a command's output lies in the shell's log, and how it ended. */
struct sess_record {
    char id[SESS_ID_MAX];
    uint64_t start, end; /* end: valid once done */
    uint64_t started_ms, duration_ms;
    bool done;
    const char *status; /* "running", "exited", "timed_out", "killed", "lost" */
    int exit_code;      /* -1: none */
};

struct sess;

/* One command (struct shell_session_handle to the caller). */
struct sess_cmd {
    struct sess *s;
    struct exec_observer obs; /* callbacks NULL once detached */
    struct shell_session_result *res;
    char nonce[SHELL_MARK_NONCE_HEX + 1];
    struct shell_mark mark[2]; /* stdout, stderr */
    bool started[2];           /* await_start: the stream's start marker has come */
    uint64_t bytes[2];
    uint64_t started_ms;
    int64_t timeout_ms;
    bool timed_out, kill_armed, killing;
    bool must_exist;  /* shell_session_request's */
    bool await_start; /* after an attach: output before the start marker is not this command's */
    bool followed;    /* ... and some came: a command of an earlier process ran to its end */
    enum shell_session_kind not_run; /* why it did not run (deferred), else NONE */
    char *text;                      /* what goes to the shell's stdin */
    size_t text_len;
    struct sess_record *rec;
};

struct sess {
    struct sess *next;
    struct backend *be;
    char *sandbox_id;
    char name[SHELL_SESSION_NAME_MAX + 1];
    char shell_id[64];
    struct exec_handle *h;
    enum sess_state state;
    bool reported;    /* a death already told: the next shell does not report it again */
    bool looked;      /* an earlier process's shell was looked for (once per process) */
    bool released;    /* the backend is stopping */
    uint64_t log_pos; /* bytes of the shell's output so far (its log's length) */
    unsigned seq;
    int refs; /* one for the list, one per agent call or watch in flight */
    struct sess_cmd *cur;
    uv_timer_t timer; /* the command's timeout, then the grace before the kill */
    struct sess_record recs[SESS_RECORDS];
};

/* shell_session_proc_text.c */
/* The compound command that runs req in the shell and prints nonce's markers; -1 with err when
 * it would be too long. */
char *sess_command_text(const struct shell_session_request *req, const char *nonce, size_t *len,
                        struct mcp_error *err);
/* What a new shell reads first (checks, its directory and pid, traps), then text. fresh: a
 * death of the session's last shell was told already. */
char *sess_start_text(const char *name, const char *nonce, bool fresh, const char *text,
                      size_t text_len, size_t *len);
/* The markers of nonce with the word start, then text: what a command sent to a shell this
 * process attached to is (so that what an earlier command prints is told apart). */
char *sess_with_start_marker(const char *nonce, const char *text, size_t text_len, size_t *len);
/* The label of session name's shell: "session:<name>" (a long name shortened with a hash). */
void sess_label(const char *name, char *out, size_t size);
/* The exec's /bin/sh -c line: bash reading stdin, or nonce's markers saying there is none. */
char *sess_shell_line(const char *nonce);

/* shell_session_proc.c */
/* The record of a session command of this process by its id, and its session; or NULL. */
struct sess_record *sess_find_record(struct backend *be, const char *sandbox_id,
                                     const char *command_id, struct sess **owner);
void sess_signal(struct sess *s, int sig);
/* Interrupts the running command (SIGINT); kill: the shell too, after the grace. */
void sess_interrupt(struct sess *s, bool kill);

#endif
