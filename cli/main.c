/* mcpbox: argv -> subcommand -> its main. `serve` is here (the backends come from the
 * composition root, cli/backends.c); the other subcommands are in cli/cli_*.c. */
#define LOG_MODULE "main"
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/backends.h"
#include "cli/cli.h"
#include "lib/base/cleanup.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "server/config.h"
#include "mcp/http/http_transport.h"
#include "osapi/osapi.h"
#include "mcp/registry.h"
#include "mcp/server.h"
#include "mcp/transport_stdio.h"

struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *help;
};

static const struct subcommand subcommands[] = {
    {"serve", cli_serve_main, "serve MCP over stdio, or Streamable HTTP with --http ADDR:PORT"},
    {"sandbox", cli_sandbox_main, "list, inspect, exec in and destroy sandboxes from a terminal"},
    {"image", cli_image_main, "pull, list and remove the local backend's OCI images"},
    {"volume", cli_volume_main, "create, list, inspect and remove named volumes"},
    {"secret", cli_secret_main, "add, list and remove secrets sandboxes use without seeing them"},
    {"doctor", cli_doctor_main, "check this host can run local sandboxes"},
    {"setup", cli_setup_main,
     "--user NAME [--undo]: as root, once, let NAME run local sandboxes as itself"},
    {"skill", cli_skill_main,
     "install [--dir DIR | --project] [--force] | uninstall | show | path: the "
     "troubleshoot-sandbox skill"},
};

static int start_transport(struct mcp_server *srv, const struct mcp_config *cfg,
                           struct mcp_error *err)
{
    if (!cfg->http_listen)
        return stdio_transport_start(srv, STDIN_FILENO, STDOUT_FILENO, err);
    const struct http_extension *ext = NULL;
    if (cfg->osapi_enabled) {
        /* One secret for both APIs by default: the same owner sees the same sandboxes. */
        const char *key = cfg->osapi_key && *cfg->osapi_key ? cfg->osapi_key : cfg->token;
        if (!(ext = osapi_new(srv, key, err)))
            return -1;
        osapi_approval_set(&cfg->approval); /* approvals: the person's settings decide */
    }
    return http_transport_start(srv, cfg, ext, err);
}

static int serve(const struct mcp_config *cfg)
{
    struct mcp_error err = {0};
    struct mcp_server *srv = server_new(cfg, &err);

    if (srv)
        server_set_backends(srv, backends_start);
    if (!srv || cli_serve_extras(srv, cfg, &err) < 0 || server_add_sandbox_tools(srv, &err) < 0 ||
        start_transport(srv, cfg, &err) < 0) {
        fprintf(stderr, "mcpbox: %s\n", err.msg);
        if (srv) {
            server_stop(srv);
            server_free(srv);
        }
        return 1;
    }
    server_run(srv);
    server_free(srv);
    log_info("bye");
    return 0;
}

int cli_serve_main(int argc, char **argv)
{
    struct mcp_config cfg;
    struct mcp_error err = {0};
    int r;

    config_init(&cfg);
    argc = cli_serve_take_options(argc, argv);
    r = config_parse_args(&cfg, argc, argv, &err);
    if (r == 0 && config_check(&cfg, &err) < 0)
        r = -1;
    if (r < 0)
        fprintf(stderr, "mcpbox serve: %s\n", err.msg);
    bool done = r == 1; /* --help printed */
    if (r == 0) {
        /* On stdio, stderr is the client's log (Claude Code shows every line as [ERROR]): by
         * default only warnings and errors go there. */
        if (!cfg.http_listen && !cfg.log_level_given)
            cfg.log_level = LOG_LEVEL_WARN;
        log_set_level(cfg.log_level);
        backends_before_serve(argc, argv); /* e.g. rootless on systemd: a delegated scope */
        r = serve(&cfg); /* 1 when the server could not start */
    }
    config_release(&cfg);
    return r < 0 ? 2 : done ? 0 : r;
}

static void print_version(void)
{
    printf("mcpbox %s\n", MCPBOX_VERSION);
    printf("protocol: MCP 2025-11-25 (also 2026-07-28, 2025-06-18, 2025-03-26)\n");
    printf("license: Apache-2.0\n");
    printf("backends: %s\n", backends_names());
    printf("transports: stdio, http\n");
}

static void print_help(FILE *out)
{
    fprintf(out, "mcpbox %s: an MCP server that gives AI agents sandboxes\n\n"
                 "Usage: mcpbox COMMAND [OPTIONS]\n       mcpbox help [COMMAND] | --help | "
                 "--version\n\n"
                 "Commands:\n", MCPBOX_VERSION);
    for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].help);
    fprintf(out, "\nRun `mcpbox COMMAND --help` for a command's options.\n\n");
    config_print_usage(out);
    fprintf(out, "\nConnect a client:\n"
                 "  claude mcp add sandbox -- mcpbox serve\n"
                 "  claude mcp add --transport http sandbox http://127.0.0.1:8765/mcp\n"
                 "  Cursor: {\"mcpServers\": {\"sandbox\": {\"command\": \"mcpbox\", "
                 "\"args\": [\"serve\"]}}}\n");
}

int main(int argc, char **argv)
{
    int status;
    if (backends_helper(argc, argv, &status)) /* a backend's helper process, before anything */
        return status;
    xalloc_install();
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        print_version();
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        (strcmp(argv[1], "help") == 0 && argc == 2)) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0) { /* help COMMAND: that command's --help */
        static char help_flag[] = "--help";
        argv[1] = argv[2];
        argv[2] = help_flag;
        argc = 3;
    }
    for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++) {
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].main(argc - 1, argv + 1);
    }
    fprintf(stderr, "mcpbox: unknown command \"%s\" (see mcpbox --help)\n", argv[1]);
    return 2;
}
