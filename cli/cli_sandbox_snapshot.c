/* `mcpbox sandbox snapshot create|ls|get|rm|restore|fork|push` (issue 36): snapshots of local
 * sandboxes from the shell, through the backend's snapshot operation, as snapshot_sandbox and
 * create_sandbox {snapshot_id} do over MCP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_sandbox.h"
#include "cli/cli_util.h"

static const char snap_usage[] =
    "Usage: mcpbox sandbox snapshot COMMAND [ARGS] [-o table|json]\n"
    "  create ID [--name NAME]  snapshot a running sandbox's files (/workspace, /tmp, /root)\n"
    "  ls [ID]                  your snapshots (of one sandbox)\n"
    "  get SNAP                 one snapshot\n"
    "  rm SNAP...               delete snapshots\n"
    "  restore SNAP             a new sandbox from a snapshot; prints its id\n"
    "  fork ID [--count N]      N new sandboxes from a running one's files; prints their ids\n"
    "  push SNAP REF            push a snapshot to an OCI registry as image REF\n"
    "                           (registry/repository:tag; your docker/podman login)\n";

/* Our options out of argv (-o, --name, --count); the operands stay, in order. */
static int snap_opts(struct cli_sandbox *c, int *argc, char **argv, json_t *args)
{
    int out = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i];
        bool takes = strcmp(a, "-o") == 0 || strcmp(a, "--name") == 0 || strcmp(a, "--count") == 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || (takes && i + 1 >= *argc))
            return -1;
        if (strcmp(a, "-o") == 0 && cli_parse_output(argv[i + 1], &c->json) < 0)
            return -1;
        if (strcmp(a, "--name") == 0)
            json_object_set_new(args, "name", json_string(argv[i + 1]));
        if (strcmp(a, "--count") == 0)
            json_object_set_new(args, "count", json_integer(atoi(argv[i + 1])));
        if (takes)
            i++;
        else
            argv[out++] = argv[i];
    }
    *argc = out;
    return 0;
}

static void print_snapshot(json_t *s)
{
    const char *name = json_string_value(json_object_get(s, "name"));
    printf("%s\t%s\t%.1f MB\t%s\t%s\t%s\n", json_string_value(json_object_get(s, "snapshot_id")),
           json_string_value(json_object_get(s, "state")),
           (double)json_integer_value(json_object_get(s, "size_bytes")) / 1e6,
           json_string_value(json_object_get(s, "sandbox_id")),
           json_string_value(json_object_get(s, "created_at")), name ? name : "-");
}

static void print_result(struct cli_sandbox *c, const char *action)
{
    size_t i;
    json_t *x;
    if (c->json) {
        cli_print_json(c->result);
    } else if (strcmp(action, "list") == 0) {
        json_array_foreach(json_object_get(c->result, "snapshots"), i, x) print_snapshot(x);
    } else if (strcmp(action, "fork") == 0) {
        json_array_foreach(json_object_get(c->result, "sandboxes"), i, x)
            puts(json_string_value(json_object_get(x, "sandbox_id")));
    } else if (strcmp(action, "push") == 0) {
        printf("%s@%s\n", json_string_value(json_object_get(c->result, "reference")),
               json_string_value(json_object_get(c->result, "digest")));
    } else if (strcmp(action, "delete") != 0) {
        print_snapshot(c->result);
    }
}

static int snap_call(struct cli_sandbox *c, const char *action, json_t *args)
{
    cli_sandbox_op_reset(c);
    if (c->be->ops->snapshot(c->be, c->owner, action, args, cli_sandbox_op_cb, c, &c->err) < 0 ||
        cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("snapshot", &c->err);
    print_result(c, action);
    return CLI_EXIT_OK;
}

static int snap_restore(struct cli_sandbox *c, const char *snap)
{
    struct sandbox_spec spec = {.owner = c->owner, .snapshot_id = snap};
    cli_sandbox_op_reset(c);
    if (c->be->ops->create(c->be, &spec, cli_sandbox_op_cb, c, &c->err) < 0 ||
        cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("snapshot restore", &c->err);
    if (c->json)
        cli_print_json(c->result);
    else
        puts(json_string_value(json_object_get(c->result, "sandbox_id")));
    return CLI_EXIT_OK;
}

/* Each operand of rm in turn; the first failure's exit code. */
static int snap_rm(struct cli_sandbox *c, int argc, char **argv)
{
    int rc = CLI_EXIT_OK;
    for (int i = 2; i < argc; i++) {
        json_t *args = json_pack("{s:s}", "snapshot_id", argv[i]);
        int r = snap_call(c, "delete", args);
        json_decref(args);
        rc = rc == CLI_EXIT_OK ? r : rc;
    }
    return rc;
}

static int snap_dispatch(struct cli_sandbox *c, int argc, char **argv, json_t *args)
{
    const char *cmd = argv[1], *operand = argc > 2 ? argv[2] : NULL;
    bool one = argc == 3;
    if (strcmp(cmd, "ls") == 0 && argc <= 3) {
        if (operand)
            json_object_set_new(args, "sandbox_id", json_string(operand));
        return snap_call(c, "list", args);
    }
    if ((strcmp(cmd, "create") == 0 || strcmp(cmd, "fork") == 0) && one) {
        json_object_set_new(args, "sandbox_id", json_string(operand));
        return snap_call(c, cmd, args);
    }
    if (strcmp(cmd, "get") == 0 && one) {
        json_object_set_new(args, "snapshot_id", json_string(operand));
        return snap_call(c, "get", args);
    }
    if (strcmp(cmd, "restore") == 0 && one)
        return snap_restore(c, operand);
    if (strcmp(cmd, "push") == 0 && argc == 4) {
        json_object_set_new(args, "snapshot_id", json_string(operand));
        json_object_set_new(args, "reference", json_string(argv[3]));
        return snap_call(c, "push", args);
    }
    if (strcmp(cmd, "rm") == 0 && argc > 2)
        return snap_rm(c, argc, argv);
    fputs(snap_usage, stderr);
    return CLI_EXIT_USAGE;
}

int cli_sandbox_snapshot(struct cli_sandbox *c, int argc, char **argv)
{
    json_t *args = json_object();
    bool help = argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0);
    if (help || snap_opts(c, &argc, argv, args) < 0 || argc < 2) {
        fputs(snap_usage, help ? stdout : stderr);
        json_decref(args);
        return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    int rc = snap_dispatch(c, argc, argv, args);
    json_decref(args);
    return rc;
}
