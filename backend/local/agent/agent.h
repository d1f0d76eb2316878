/* The sandbox agent: PID 1 of every local sandbox. It runs from a sealed memfd (never a host
 * binary reachable through /proc/1/exe), with the sandbox's credentials, no capabilities and the
 * sandbox's seccomp filter. It serves the protocol of backend/local/proto.h on the listening
 * socket mcpbox handed it, runs commands, does file operations inside the sandbox, reaps
 * zombies, and ends the sandbox itself when its TTL or idle timeout passes. */
#ifndef MCPBOX_AGENT_H
#define MCPBOX_AGENT_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/base/buf.h"
#include "backend/local/proto.h"
#include "lib/base/error.h"

#define AGENT_MAX_CONNS 64
#define AGENT_MAX_CMDS_KEPT 512              /* finished commands kept for command_get */
#define AGENT_MAX_RUNNING 256
#define AGENT_LOG_CAP (64ull << 20)          /* bytes of the interleaved log kept per command */
#define AGENT_TOTAL_LOG_CAP (256ull << 20)   /* bytes of logs kept per sandbox (on the host's
                                                disk): the oldest finished commands go first */
#define AGENT_WBUF_MAX (256u << 20)          /* unsent bytes before a slow client is dropped */
#define AGENT_READ_CHUNK 65536
#define AGENT_LIST_MAX 50                   /* commands one cmd_list returns */
#define AGENT_LIST_CMD_CHARS 200
#define AGENT_KEEP_BUF (1u << 20)          /* buffer capacity kept while idle */
#define AGENT_STATUS_OUTPUT_MAX (4u << 20)   /* bytes of log one cmd_status returns */
#define AGENT_SPARE_LOG ".spare.log"         /* the next command's log, made ahead of time */
/* Interactive commands (stdin kept open, or a pty): cmd_input feeds them. */
#define AGENT_MAX_INTERACTIVE 32         /* running at once per sandbox */
#define AGENT_INPUT_FRAME_MAX (1u << 20) /* bytes of one cmd_input */
#define AGENT_INPUT_QUEUE_MAX (4u << 20) /* bytes waiting for a command to read them */
/* Watches from any connection (cmd_watch) and the stream of each byte of a log: a run-length
 * list of the offsets where the stream changes. A command whose list is full keeps no more log
 * (log_truncated), so a replay never names a wrong stream. */
#define AGENT_RUNS_MAX 65536u       /* stream changes kept per command */
#define AGENT_TOTAL_RUNS (1u << 20) /* per sandbox: the oldest finished commands go first */
#define AGENT_MAX_WATCHERS 256
#define AGENT_WATCH_WBUF (1u << 20) /* unsent bytes before a replay waits for the reader */

struct conn {
    int fd;
    struct buf rbuf, wbuf;
    bool dead;
    struct conn *next;
};

enum cmd_state { CMD_RUNNING, CMD_DONE };

struct sigwatch; /* agent_sigwatch.c: a forwarded signal's delivery being checked */
struct watcher;  /* agent_watch.c: one cmd_watch */

#define AGENT_RUN_STDERR 0x80000000u /* a run's offset fits in 31 bits (AGENT_LOG_CAP) */

struct cmd {
    char id[24];
    pid_t pid;
    int out_fd, err_fd, in_fd;       /* pipes (-1 when closed) */
    char *in_data;                   /* stdin bytes still to write */
    size_t in_len, in_off, in_cap;
    bool stdin_open;                 /* interactive: stdin stays open for cmd_input */
    bool in_eof;                     /* close stdin once in_data is written */
    bool in_lost;                    /* the command closed its stdin: queued input was dropped */
    bool pty;                        /* out_fd and in_fd are the pty's master */
    int f_log;                       /* the log file while running */
    bool has_log;                    /* a log file was made (at the first output) */
    bool log_truncated;              /* output beyond a cap was not kept */
    uint64_t n_out, n_err, n_log;    /* bytes received per stream / in the log */
    uint64_t start_ms, end_ms;       /* monotonic */
    uint64_t deadline_ms;            /* 0: none */
    enum cmd_state state;
    int exit_code, term_signal;      /* -1 when not applicable */
    bool timed_out, kill_requested;
    struct conn *watch;              /* connection that receives events, or NULL */
    struct sigwatch *sigwatch;       /* a signal's delivery being checked, or NULL */
    char *command;
    char label[AGENT_LABEL_MAX + 1]; /* exec's "label" ("" for none): cmd_find looks it up */
    uint32_t *runs;                  /* offset of each stream change | AGENT_RUN_STDERR */
    size_t nruns, runs_cap;
    bool runs_full; /* AGENT_RUNS_MAX reached: nothing more is kept */
    struct cmd *next;
};

struct agent {
    int listen_fd, logdir_fd, sig_fd;
    int spare_log;                   /* AGENT_SPARE_LOG, open, or -1 */
    struct conn *conns;
    struct cmd *cmds;
    size_t ncmds;
    struct watcher *watchers; /* cmd_watch's, any connection */
    size_t nwatchers;
    uint64_t runs_total;             /* stream changes kept over all commands */
    uint64_t log_bytes;              /* bytes in all kept logs */
    int64_t expires_at_ms;           /* wall clock; 0: no TTL */
    int64_t idle_timeout_s;          /* 0: none */
    uint64_t last_active_ms;         /* monotonic */
    json_t *env;                     /* base environment of every command */
    int egress_tcp, egress_udp;      /* egress by policy: the sockets nftables sends to, or -1 */
    char workdir[256];
};

/* agent_main.c */
void agent_send(struct conn *c, json_t *msg); /* steals msg */
void agent_touch(struct agent *a);

/* agent_cmd.c */
/* Splits a command that needs no shell (absolute path, literal words only) into argv inside
 * store; returns argc, or 0 when the command must go through /bin/sh -c. */
int agent_plain_argv(const char *command, char *store, size_t store_size, char **argv,
                     size_t max_args);
json_t *agent_cmd_exec(struct agent *a, struct conn *c, json_t *req, struct mcp_error *err);
json_t *agent_cmd_status(struct agent *a, json_t *req, struct mcp_error *err);
json_t *agent_cmd_kill(struct agent *a, json_t *req, struct mcp_error *err);
json_t *agent_cmd_list(struct agent *a, json_t *req, struct mcp_error *err); /* newest first */
void agent_cmd_reap(struct agent *a);
/* Makes AGENT_SPARE_LOG if there is none (the agent calls it when it has nothing to do). */
void agent_cmd_make_spare_log(struct agent *a);
void agent_cmd_timeouts(struct agent *a);
int agent_cmd_poll_fds(struct agent *a, struct pollfd *pfd, struct cmd **owner, int max);
void agent_cmd_on_fd(struct agent *a, struct cmd *cmd, int fd, short revents);
void agent_cmd_forget_conn(struct agent *a, struct conn *c);
uint64_t agent_cmd_next_deadline(struct agent *a);
size_t agent_cmd_running(struct agent *a);

/* agent_input.c: interactive commands (stdin "pipe", pty). */
struct cmd *agent_cmd_find(struct agent *a, const char *id);
size_t agent_cmd_interactive(struct agent *a); /* running interactive commands */
/* Parses exec's "stdin" and "pty" into c (stdin data, stdin_open, pty); -1 with err. */
int agent_input_parse(struct agent *a, struct cmd *c, json_t *req, struct mcp_error *err);
/* A fresh pty for c: *master (non-blocking) and *slave, sized from req's "pty"; -1 with err. */
int agent_pty_open(json_t *req, int *master, int *slave, struct mcp_error *err);
/* Writes what c has queued on its stdin; closes it after an eof. */
void agent_input_feed(struct cmd *c);
json_t *agent_cmd_input(struct agent *a, json_t *req, struct mcp_error *err);
json_t *agent_cmd_resize(struct agent *a, json_t *req, struct mcp_error *err);
/* The process group a signal to c goes to: its own (c->pid: it leads its session), except that
 * SIGINT, SIGQUIT and SIGTSTP to a pty command go to its terminal's foreground group, as Ctrl-C,
 * Ctrl-\ and Ctrl-Z would send them. */
pid_t agent_cmd_signal_group(struct cmd *c, int sig);

/* agent_sigwatch.c: signals a command's process group, and resends the signal to a process
 * that a shell's vfork child swallowed it for; poll and next drive the follow-up. */
void agent_sigwatch_send(struct sigwatch **w, pid_t pgrp, int sig);
void agent_sigwatch_poll(struct sigwatch **w, uint64_t now_ms);
uint64_t agent_sigwatch_next(const struct sigwatch *w);
void agent_sigwatch_free(struct sigwatch **w);

/* agent_egress.c: the sockets of egress by policy (config "egress": true). */
int agent_egress_open(struct agent *a);
/* Config "egress_ca" (secrets over TLS, issue 37): the CA mcpbox's proxy issues certificates
 * with, written alone (ca.pem) and after the system bundle (ca-bundle.pem, unless the spawn
 * made it already, host root) into AGENT_EGRESS_TRUST_DIR, where SSL_CERT_FILE and the like
 * point commands. */
void agent_egress_trust(const char *ca_pem);
/* Answers "egress_sockets" on c with both fds attached; false: none (not an egress sandbox). */
bool agent_egress_send(struct agent *a, struct conn *c, json_t *id);

/* agent_watch.c: cmd_watch (replay of a command's log with its streams, then its live output
 * and exit, on the asking connection), cmd_find (a running command by label), and the stream
 * runs beside each log. */
json_t *agent_cmd_status_json(const struct cmd *c); /* agent_cmd.c: cmd_status without output */
json_t *agent_cmd_watch(struct agent *a, struct conn *conn, json_t *req, struct mcp_error *err);
json_t *agent_cmd_find_label(struct agent *a, json_t *req, struct mcp_error *err);
/* Records that len > 0 bytes of stream is_err go into c's log at c->n_log; false when c's run
 * list (or the sandbox's budget of runs) is full: keep nothing. */
bool agent_runs_note(struct agent *a, struct cmd *c, bool is_err);
bool agent_runs_would_grow(const struct cmd *c, bool is_err);
/* Sends output to the live watchers of c (after it is kept in the log). */
void agent_watch_output(struct agent *a, struct cmd *c, const char *stream, const char *b64);
/* c has ended: its live watchers get the exit event and end. */
void agent_watch_finished(struct agent *a, struct cmd *c);
/* c is being freed (evicted): its watchers get the exit event and end; its runs go. */
void agent_watch_cmd_gone(struct agent *a, struct cmd *c);
void agent_watch_forget_conn(struct agent *a, struct conn *conn);
/* Moves every replay on while its connection has room (before each poll). */
void agent_watch_pump(struct agent *a);

/* agent_fs.c */
json_t *agent_fs_op(struct agent *a, const char *op, json_t *req, struct mcp_error *err);
int agent_resolve(const struct agent *a, const char *in, char *out, size_t out_size,
                  struct mcp_error *err);

#endif
