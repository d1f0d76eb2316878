/* `mcpbox volume create|ls|inspect|rm`: the caller's named volumes from the shell (issue 36),
 * through the local backend's volume op on the shared state store, as the `volume` tool does
 * for a stdio server of the same user (the same owner, "local:uid:<uid>"). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/backends.h"
#include "cli/cli.h"
#include "cli/cli_sandbox.h"
#include "cli/cli_util.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

static void volume_usage(FILE *out)
{
    fputs("Usage: mcpbox volume [--state-dir DIR] [-o table|json] COMMAND [ARGS]\n\n"
          "Named volumes: storage that outlives sandboxes, mounted with create_sandbox's\n"
          "mounts [{\"volume\": NAME, \"target\": PATH, \"mode\": \"rw\"|\"ro\"}].\n\n"
          "Commands:\n"
          "  create NAME [--size SIZE]   make one (SIZE: bytes or 64M, 2G; default 1G)\n"
          "  ls                          list yours\n"
          "  inspect NAME                its size, limit and the sandboxes that use it (JSON)\n"
          "  rm NAME...                  delete (refused while a sandbox uses it)\n",
          out);
}

static int volume_open(struct cli_sandbox *c, const char *state_flag)
{
    struct mcp_error err = {0};
    c->state_dir = cli_state_dir(state_flag);
    snprintf(c->owner, sizeof c->owner, "local:uid:%u", (unsigned)getuid());
    if (uv_loop_init(&c->loop) != 0) {
        fprintf(stderr, "mcpbox volume: cannot initialise the event loop\n");
        return CLI_EXIT_FAIL;
    }
    if ((c->store = store_open(c->state_dir, &err)) == NULL ||
        (c->be = backends_open("local", &c->loop, c->store, &err)) == NULL) {
        fprintf(stderr, "mcpbox volume: %s\n", err.msg);
        return cli_exit_for_error(err.code);
    }
    return CLI_EXIT_OK;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void volume_close(struct cli_sandbox *c)
{
    if (c->be != NULL)
        c->be->ops->free(c->be);
    uv_run(&c->loop, UV_RUN_NOWAIT);
    uv_walk(&c->loop, close_walk, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    uv_loop_close(&c->loop);
    store_close(c->store);
    json_decref(c->result);
    free(c->state_dir);
}

/* One op; the result stays in c->result. Prints the error and returns an exit code. */
static int volume_op(struct cli_sandbox *c, const char *cmd, json_t *args)
{
    struct mcp_error err = {0};
    cli_sandbox_op_reset(c);
    const char *action = json_string_value(json_object_get(args, "action"));
    int rc = c->be->ops->volume(c->be, c->owner, action, args, cli_sandbox_op_cb, c, &err);
    json_decref(args);
    if (rc < 0 || cli_sandbox_wait(c) < 0) {
        const struct mcp_error *e = rc < 0 ? &err : &c->err;
        fprintf(stderr, "mcpbox volume %s: %s\n", cmd, e->msg);
        return cli_exit_for_error(e->code);
    }
    return CLI_EXIT_OK;
}

static void print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2));
    puts(s ? s : "null");
    free(s);
}

static int volume_create(struct cli_sandbox *c, int argc, char **argv)
{
    uint64_t size = 0;
    int at = 1;
    if (argc >= 4 && strcmp(argv[2], "--size") == 0 && cli_parse_size(argv[3], &size) == 0)
        at = 4;
    if (argc != (at == 4 ? 4 : 2)) {
        volume_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    json_t *args = json_pack("{s:s, s:s}", "action", "create", "name", argv[1]);
    if (size > 0)
        json_object_set_new(args, "size_bytes", json_integer((json_int_t)size));
    int rc = volume_op(c, "create", args);
    if (rc == CLI_EXIT_OK && c->json)
        print_json(c->result);
    else if (rc == CLI_EXIT_OK)
        puts(argv[1]);
    return rc;
}

static int volume_ls(struct cli_sandbox *c)
{
    int rc = volume_op(c, "ls", json_pack("{s:s}", "action", "list"));
    if (rc != CLI_EXIT_OK || c->json) {
        if (rc == CLI_EXIT_OK)
            print_json(c->result);
        return rc;
    }
    printf("%-24s %-14s %-26s %s\n", "NAME", "LIMIT", "CREATED", "LIMIT ENFORCED BY");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(c->result, "volumes"), i, v)
    {
        const char *by = json_string_value(json_object_get(v, "limit_enforced_by"));
        printf("%-24s %-14lld %-26s %s\n", json_string_value(json_object_get(v, "name")),
               (long long)json_integer_value(json_object_get(v, "size_limit_bytes")),
               json_string_value(json_object_get(v, "created_at")),
               by ? by : "not enforced (see inspect)");
    }
    return rc;
}

static int volume_each(struct cli_sandbox *c, const char *cmd, const char *action, int argc,
                       char **argv)
{
    int worst = CLI_EXIT_OK;
    if (argc < 2 || (strcmp(cmd, "inspect") == 0 && argc != 2)) {
        volume_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        int rc = volume_op(c, cmd, json_pack("{s:s, s:s}", "action", action, "name", argv[i]));
        if (rc == CLI_EXIT_OK && strcmp(cmd, "inspect") == 0)
            print_json(c->result);
        else if (rc == CLI_EXIT_OK)
            puts(argv[i]);
        worst = rc != CLI_EXIT_OK ? rc : worst;
    }
    return worst;
}

static int volume_run(struct cli_sandbox *c, int argc, char **argv)
{
    const char *cmd = argv[0];
    if (strcmp(cmd, "create") == 0)
        return volume_create(c, argc, argv);
    if (strcmp(cmd, "ls") == 0 && argc == 1)
        return volume_ls(c);
    if (strcmp(cmd, "inspect") == 0)
        return volume_each(c, cmd, "inspect", argc, argv);
    if (strcmp(cmd, "rm") == 0)
        return volume_each(c, cmd, "delete", argc, argv);
    volume_usage(stderr);
    return CLI_EXIT_USAGE;
}

int cli_volume_main(int argc, char **argv)
{
    const char *state_flag = NULL;
    bool json = false;
    int rc, at = cli_parse_globals(argc, argv, &state_flag, &json, volume_usage, &rc);
    if (at < 0)
        return rc;
    for (int i = at; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            volume_usage(stdout);
            return CLI_EXIT_OK;
        }
    struct cli_sandbox *c = xcalloc(1, sizeof *c);
    c->json = json;
    rc = volume_open(c, state_flag);
    if (rc == CLI_EXIT_OK)
        rc = volume_run(c, argc - at, argv + at);
    volume_close(c);
    free(c);
    return rc;
}
