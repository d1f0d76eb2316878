/* `mcpbox sandbox ...`: shared state of one CLI invocation (its own loop, the store, the local
 * backend) and the subcommands, one function each. */
#ifndef MCPBOX_CLI_SANDBOX_H
#define MCPBOX_CLI_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "backend/backend.h"
#include "lib/base/error.h"

struct store;

struct cli_sandbox {
    uv_loop_t loop;
    char *state_dir; /* owned */
    struct store *store;
    struct backend *be;
    char owner[64]; /* "local:uid:<uid>", the same owner a stdio server of this user has */
    bool json;      /* -o json */
    /* The pending operation (one at a time). */
    bool done;
    json_t *result;        /* owned once done, NULL on error */
    struct mcp_error err;  /* filled when done with an error */
};

/* Waits on the loop until cli_sandbox_op_cb has been called for the pending operation. */
int cli_sandbox_wait(struct cli_sandbox *c);
/* backend_cb for operations: records the result in the cli_sandbox passed as arg. */
void cli_sandbox_op_cb(void *arg, json_t *result, const struct mcp_error *err);
/* Starts nothing; resets the pending-operation fields. */
void cli_sandbox_op_reset(struct cli_sandbox *c);
/* Prints err as "mcpbox sandbox CMD: message" and returns the exit code for it. */
int cli_sandbox_fail(const char *cmd, const struct mcp_error *err);

/* Subcommands: argv[0] is the subcommand name. Return the process exit code. */
int cli_sandbox_create(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_ls(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_get(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_rm(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_logs(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_pause(struct cli_sandbox *c, int argc, char **argv); /* pause and resume */
int cli_sandbox_exec(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_cp(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_diff(struct cli_sandbox *c, int argc, char **argv);  /* cli_sandbox_review.c */
int cli_sandbox_apply(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_network_policy(struct cli_sandbox *c, int argc, char **argv);
int cli_sandbox_snapshot(struct cli_sandbox *c, int argc, char **argv); /* cli_sandbox_snapshot.c */

/* "512M", "2G", "1048576", "64KiB" -> bytes; -1 if malformed. */
int cli_parse_size(const char *s, uint64_t *out);

#endif
