/* Drives interactive commands (exec with stdin open or a pty, command_input, command_resize)
 * through the local backend's vtable on the harness's loop: for tests/local/proc and the
 * round-trip benchmark. */
#ifndef MCPBOX_TESTS_PROC_DRIVER_H
#define MCPBOX_TESTS_PROC_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "lib/base/buf.h"

struct proc {
    struct harness *h;
    char id[32];    /* command_id once started */
    struct buf out; /* stdout (a pty's output) as it came through the observer */
    bool started, done;
    json_t *status;       /* the final status (owned), or NULL */
    struct mcp_error err; /* why it did not start */
};

/* Starts command in sandbox sbx with stdin open (and a pty when rows and cols are non-zero);
 * waits until it has its command_id. -1 with p->err. */
int proc_start(struct proc *p, struct harness *h, const char *sbx, const char *command,
               unsigned rows, unsigned cols);
/* The same for any request (not necessarily interactive). */
int proc_start_req(struct proc *p, struct harness *h, const char *sbx,
                   const struct exec_request *req);
/* Runs the loop until p's output holds needle, or ms pass; true when it does. */
bool proc_wait_output(struct proc *p, const char *needle, uint64_t ms);
/* Runs the loop until p has ended, or ms pass. */
bool proc_wait_done(struct proc *p, uint64_t ms);
void proc_release(struct proc *p);

/* command_input / command_resize / command_get / command_kill, synchronously on h (result in
 * h->result, error in h->err). */
int proc_input(struct harness *h, const char *sbx, const char *cmd, const char *data, size_t len,
               bool eof);
int proc_resize(struct harness *h, const char *sbx, const char *cmd, unsigned rows, unsigned cols);
int proc_get(struct harness *h, const char *sbx, const char *cmd);
int proc_kill(struct harness *h, const char *sbx, const char *cmd, int sig);
/* Runs the loop for about ms (to let something in the sandbox happen). */
void proc_pause(struct harness *h, uint64_t ms);

#endif
