/* `mcpbox secret add|ls|rm`: the secrets the egress proxy may inject into a sandbox's requests
 * (backend/secrets.h, docs/secrets.md). A value is read from an env var, a file or a command,
 * never from the command line (others could read it in /proc), and never printed. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/secrets.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

static void usage(FILE *out)
{
    fputs("Usage: mcpbox secret [--state-dir DIR] [-o table|json] COMMAND [ARGS]\n\n"
          "Secrets that sandboxes may use without seeing them: mcpbox's egress proxy adds the\n"
          "value to requests to the secret's hosts (docs/secrets.md).\n\n"
          "Commands:\n"
          "  add NAME (--from-env VAR | --from-file FILE | --from-command CMD) --host HOST...\n"
          "      [--header HEADER] [--placeholder] [--no-egress]\n"
          "        define (or replace) NAME; HEADER is the header to send, {} standing for\n"
          "        the value ('Authorization: Bearer {}'); --from-env keeps the value now, a\n"
          "        file or a command is read each time it is used; --placeholder: sandboxes get\n"
          "        MCPBOX_SECRET_<NAME> in their env, replaced by the value on the way out;\n"
          "        --no-egress: binding it does not allow egress to its hosts\n"
          "  ls            list the names, their hosts and how they are sent (never values)\n"
          "  rm NAME...    remove definitions\n\n"
          "Exit status: 0 ok, 1 failed, 2 usage, 3 not found.\n",
          out);
}

static int fail(const struct mcp_error *err)
{
    fprintf(stderr, "mcpbox secret: %s\n", err->msg);
    return cli_exit_for_error(err->code);
}

/* One of add's options into def; false (said why) on an unset env var or an unknown option. */
static bool add_option(json_t *def, int opt, const char *arg)
{
    json_t *from = json_object_get(def, "from");
    char abs[PATH_MAX];
    const char *env = opt == 'e' ? getenv(arg) : NULL;
    if (opt == 'e' && env == NULL)
        fprintf(stderr,
                "mcpbox secret: %s is not set in this environment; export it and run "
                "again\n",
                arg);
    else if (opt == 'e')
        json_object_set_new(from, "value", json_string(env));
    else if (opt == 'f')
        json_object_set_new(from, "file", json_string(realpath(arg, abs) ? abs : arg));
    else if (opt == 'c')
        json_object_set_new(from, "command", json_string(arg));
    else if (opt == 'H')
        json_array_append_new(json_object_get(def, "hosts"), json_string(arg));
    else if (opt == 'h')
        json_object_set_new(def, "header", json_string(arg));
    else if (opt == 'p' || opt == 'n')
        json_object_set_new(def, opt == 'p' ? "placeholder" : "egress", json_boolean(opt == 'p'));
    else
        usage(stderr);
    return strchr("efcHhpn", opt) != NULL && (opt != 'e' || env != NULL);
}

/* The definition from add's options; NULL (said why) on a bad command line. */
static json_t *parse_add(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"from-env", required_argument, NULL, 'e'},     {"from-file", required_argument, NULL, 'f'},
        {"from-command", required_argument, NULL, 'c'}, {"host", required_argument, NULL, 'H'},
        {"header", required_argument, NULL, 'h'},       {"placeholder", no_argument, NULL, 'p'},
        {"no-egress", no_argument, NULL, 'n'},          {NULL, 0, NULL, 0},
    };
    json_t *def = json_pack("{s:[], s:{}}", "hosts", "from");
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (!add_option(def, opt, optarg)) {
            json_decref(def);
            return NULL;
        }
    }
    return def;
}

static int cmd_add(json_t *defs, const char *state_dir, int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    cleanup_json json_t *def = parse_add(argc - 1, argv + 1);
    if (def == NULL)
        return CLI_EXIT_USAGE;
    if (!json_object_get(def, "header") && !json_is_true(json_object_get(def, "placeholder")))
        json_object_set_new(def, "header", json_string("Authorization: Bearer {}"));
    json_object_set_new(def, "name", json_string(name));
    struct mcp_error err = {0};
    size_t len = 0;
    char *v = NULL;
    /* Read once now, so a wrong file or command shows here rather than in a sandbox. */
    if (secret_def_check(name, def, &err) < 0 || (v = secret_value(def, &len, &err)) == NULL)
        return fail(&err);
    explicit_bzero(v, len);
    free(v);
    json_object_del(def, "name");
    json_object_set(defs, name, def);
    if (secrets_save(state_dir, defs, &err) < 0)
        return fail(&err);
    printf("secret %s: sent to %zu host(s)\n", name,
           json_array_size(json_object_get(def, "hosts")));
    return CLI_EXIT_OK;
}

static int cmd_ls(json_t *defs, bool json)
{
    cleanup_json json_t *list = secrets_describe(defs);
    if (json) {
        cli_print_json(list);
        return CLI_EXIT_OK;
    }
    static const char *const header[] = {"NAME", "HOSTS", "SENT AS"};
    struct cli_table t;
    cli_table_init(&t, 3, header);
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d)
    {
        cleanup_free char *hosts = NULL, *as = NULL;
        json_t *h;
        size_t k;
        json_array_foreach(json_object_get(d, "hosts"), k, h)
        {
            char *prev = hosts;
            hosts = xasprintf("%s%s%s", prev ? prev : "", prev ? "," : "", json_string_value(h));
            free(prev);
        }
        const char *hd = json_string_value(json_object_get(d, "header"));
        const char *ph = json_string_value(json_object_get(d, "placeholder"));
        as = xasprintf("%s%s%s", hd ? hd : "", hd && ph ? ", " : "", ph ? ph : "");
        const char *row[] = {json_string_value(json_object_get(d, "name")), hosts, as};
        cli_table_add(&t, row);
    }
    cli_table_print(&t, stdout);
    cli_table_release(&t);
    return CLI_EXIT_OK;
}

static int cmd_rm(json_t *defs, const char *state_dir, int argc, char **argv)
{
    int rc = CLI_EXIT_OK;
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    for (int i = 1; i < argc; i++)
        if (json_object_del(defs, argv[i]) < 0) {
            fprintf(stderr, "mcpbox secret: no secret %s (mcpbox secret ls lists them)\n", argv[i]);
            rc = CLI_EXIT_NOT_FOUND;
        }
    struct mcp_error err = {0};
    return secrets_save(state_dir, defs, &err) < 0 ? fail(&err) : rc;
}

static int run(const char *state_dir, bool json, int argc, char **argv)
{
    struct mcp_error err = {0};
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    mkdir(state_dir, 0700);
    cleanup_json json_t *defs = secrets_load(state_dir, &err);
    if (defs == NULL)
        return fail(&err);
    if (strcmp(argv[0], "add") == 0)
        return cmd_add(defs, state_dir, argc, argv);
    if (strcmp(argv[0], "ls") == 0)
        return cmd_ls(defs, json);
    if (strcmp(argv[0], "rm") == 0)
        return cmd_rm(defs, state_dir, argc, argv);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

int cli_secret_main(int argc, char **argv)
{
    const char *state_flag = NULL;
    bool json = false;
    int rc, at = cli_parse_globals(argc, argv, &state_flag, &json, usage, &rc);
    if (at < 0)
        return rc;
    cleanup_free char *state_dir = cli_state_dir(state_flag);
    return run(state_dir, json, argc - at, argv + at);
}
