/* `mcpbox sandbox create|ls|get|exec|cp|logs|rm|pause|resume|diff|apply`: the local backend from the shell.
 *
 * Each invocation runs its own libuv loop, opens the shared state store and the local backend
 * (the same ones a running MCP server uses, so both see the same sandboxes), performs one
 * operation through the backend vtable and exits. The subcommands are in cli_sandbox_cmds.c and cli_sandbox_exec.c. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/backends.h"
#include "cli/cli.h"
#include "cli/cli_sandbox.h"
#include "cli/cli_util.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

struct cli_sandbox_cmd {
    const char *name;
    int (*fn)(struct cli_sandbox *c, int argc, char **argv);
    const char *summary;
};

static const struct cli_sandbox_cmd cli_sandbox_cmds[] = {
    {"create", cli_sandbox_create, "create a sandbox and print its id"},
    {"ls", cli_sandbox_ls, "list your sandboxes"},
    {"get", cli_sandbox_get, "show one sandbox"},
    {"exec", cli_sandbox_exec, "run a command in a sandbox (exit status = the command's)"},
    {"cp", cli_sandbox_cp, "copy files or directories in or out: cp SRC ID:PATH, cp ID:PATH DEST"},
    {"logs", cli_sandbox_logs, "events and commands; logs ID CMD [-f]: one command's output"},
    {"rm", cli_sandbox_rm, "destroy sandboxes"},
    {"pause", cli_sandbox_pause, "freeze a sandbox"},
    {"resume", cli_sandbox_pause, "thaw a paused sandbox"},
    {"diff", cli_sandbox_diff, "what it changed in its copy-on-write mounts (unified diff)"},
    {"apply", cli_sandbox_apply, "write copy-on-write changes to the host: apply ID [PATH...]"},
    {"network-policy", cli_sandbox_network_policy, "show or replace a sandbox's network policy"},
    {"snapshot", cli_sandbox_snapshot, "snapshots: create ID, ls, get, rm, restore SNAP, fork ID"},
};

static void cli_sandbox_usage(FILE *out)
{
    fputs("Usage: mcpbox sandbox [--state-dir DIR] [-o table|json] COMMAND [ARGS]\n\n"
          "Local sandboxes from the shell (the same ones the MCP server manages).\n\n"
          "Commands:\n",
          out);
    for (size_t i = 0; i < ARRAY_SIZE(cli_sandbox_cmds); i++)
        fprintf(out, "  %-14s %s\n", cli_sandbox_cmds[i].name, cli_sandbox_cmds[i].summary);
    fputs("\nRun `mcpbox sandbox COMMAND --help` for a command's options.\n"
          "Exit status: 0 ok, 1 failed, 2 usage, 3 not found, 4 local sandboxes unavailable on\n"
          "this host (run `mcpbox doctor`); exec exits with the command's status.\n",
          out);
}

static int cli_sandbox_open(struct cli_sandbox *c, const char *state_flag)
{
    struct mcp_error err = {0};
    c->state_dir = cli_state_dir(state_flag);
    snprintf(c->owner, sizeof(c->owner), "local:uid:%u", (unsigned)getuid());
    if (uv_loop_init(&c->loop) != 0) {
        fprintf(stderr, "mcpbox sandbox: cannot initialise the event loop\n");
        return CLI_EXIT_FAIL;
    }
    c->store = store_open(c->state_dir, &err);
    if (c->store == NULL)
        return cli_sandbox_fail("open", &err);
    /* No pool (one operation); host directories: the ones --mount names (backends_allow_dir). */
    c->be = backends_open("local", &c->loop, c->store, &err);
    if (c->be == NULL) {
        mcp_error_prefix(&err, "starting the local backend (see `mcpbox doctor`)");
        return cli_sandbox_fail("open", &err);
    }
    return CLI_EXIT_OK;
}

static void cli_sandbox_close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void cli_sandbox_close(struct cli_sandbox *c)
{
    if (c->be != NULL)
        c->be->ops->free(c->be);
    /* Let close callbacks run; close anything left so the loop can be closed. */
    uv_run(&c->loop, UV_RUN_NOWAIT);
    uv_walk(&c->loop, cli_sandbox_close_walk, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    uv_loop_close(&c->loop);
    store_close(c->store);
    json_decref(c->result);
    free(c->state_dir);
}

static const struct cli_sandbox_cmd *cli_sandbox_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(cli_sandbox_cmds); i++)
        if (strcmp(cli_sandbox_cmds[i].name, name) == 0)
            return &cli_sandbox_cmds[i];
    return NULL;
}

int cli_sandbox_main(int argc, char **argv)
{
    const char *state_flag = NULL;
    bool json = false;
    int rc = CLI_EXIT_OK;
    int at = cli_parse_globals(argc, argv, &state_flag, &json, cli_sandbox_usage, &rc);
    if (at < 0)
        return rc;
    const struct cli_sandbox_cmd *cmd = cli_sandbox_find(argv[at]);
    if (cmd == NULL) {
        fprintf(stderr, "mcpbox sandbox: unknown command '%s'\n\n", argv[at]);
        cli_sandbox_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    struct cli_sandbox *c = xcalloc(1, sizeof(*c));
    c->json = json;
    rc = cli_sandbox_open(c, state_flag);
    if (rc == CLI_EXIT_OK) {
        optind = 0; /* a fresh getopt for the subcommand */
        rc = cmd->fn(c, argc - at, argv + at);
    }
    cli_sandbox_close(c);
    free(c);
    return rc;
}

/* ---- one pending operation ------------------------------------------------------------------ */

void cli_sandbox_op_reset(struct cli_sandbox *c)
{
    json_decref(c->result);
    c->result = NULL;
    c->done = false;
    memset(&c->err, 0, sizeof(c->err));
}

void cli_sandbox_op_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct cli_sandbox *c = arg;
    c->done = true;
    if (err != NULL)
        mcp_error_copy(&c->err, err);
    else
        c->result = json_incref(result);
}

int cli_sandbox_wait(struct cli_sandbox *c)
{
    while (!c->done) {
        /* The backend keeps timers alive, so run until our callback rather than until idle. */
        if (uv_run(&c->loop, UV_RUN_ONCE) == 0 && !c->done) {
            mcp_error_set(&c->err, MCP_ERR_INTERNAL, 0,
                          "the backend went idle without completing the operation");
            return -1;
        }
    }
    return c->result != NULL ? 0 : -1;
}

int cli_sandbox_fail(const char *cmd, const struct mcp_error *err)
{
    char msg[sizeof err->msg + 256];
    cli_humane_message(err->msg, msg, sizeof msg);
    fprintf(stderr, "mcpbox sandbox %s: %s\n", cmd, msg);
    return cli_exit_for_error(err->code);
}
