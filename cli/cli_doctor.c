/* `mcpbox doctor [-o json] [--state-dir DIR]`: can this host run local sandboxes? Prints each
 * check with the exact fix for a failure. Exit 0 when every required check passes, 1 otherwise,
 * 2 for a bad command line. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/local/doctor.h"
#include "backend/local/local.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

static void doctor_usage(FILE *out)
{
    fputs("Usage: mcpbox doctor [-o table|json] [--state-dir DIR]\n"
          "\n"
          "Checks that this host can run local sandboxes: user namespaces (and the sysctls and\n"
          "AppArmor rules that restrict them), uid mapping, cgroup layout and delegation,\n"
          "seccomp, openat2, overlayfs, pasta (for network=true) and the state directory.\n"
          "Each failed check prints the command that fixes it.\n"
          "\n"
          "  -o, --output FORMAT   table (default) or json\n"
          "      --state-dir DIR   state directory to check (default: $XDG_STATE_HOME/mcpbox\n"
          "                        or ~/.local/state/mcpbox)\n"
          "  -h, --help            this text\n"
          "\n"
          "Exit status: 0 all required checks pass, 1 a required check failed, 2 usage.\n",
          out);
}

/* The backend's own verdict, when this mcpbox has the local backend built in. */
static void doctor_add_backend_probe(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "local_backend", true);
    struct mcp_error err = {0};
    if (local_backend_probe(&err) == 0)
        doctor_pass(c, "the local backend's own probe passes");
    else
        doctor_fail(c,
                    geteuid() != 0 ? "run mcpbox as root (for example: sudo mcpbox serve)"
                                   : "see the failed checks above",
                    "%s", err.msg);
}

static const char *doctor_status(const struct doctor_check *c)
{
    if (c->ok)
        return "ok";
    return c->required ? "FAIL" : "warn";
}

static void doctor_print_table(const struct doctor_report *r)
{
    static const char *const header[] = {"CHECK", "STATUS", "DETAIL"};
    struct cli_table t;
    cli_table_init(&t, 3, header);
    for (size_t i = 0; i < r->n; i++) {
        const char *row[] = {r->checks[i].name, doctor_status(&r->checks[i]),
                             r->checks[i].detail};
        cli_table_add(&t, row);
    }
    cli_table_print(&t, stdout);
    cli_table_release(&t);
    bool header_done = false;
    for (size_t i = 0; i < r->n; i++) {
        const struct doctor_check *c = &r->checks[i];
        if (c->ok || c->fix[0] == '\0')
            continue;
        if (!header_done)
            printf("\nHow to fix:\n");
        header_done = true;
        printf("  %s%s:\n    %s\n", c->name, c->required ? "" : " (optional)", c->fix);
    }
    printf("\n%s\n", doctor_report_ok(r) ? "This host can run local sandboxes."
                                         : "This host cannot run local sandboxes until the "
                                           "FAIL checks are fixed.");
}

/* Returns -1 to go on, else the exit code. */
static int doctor_parse(int argc, char **argv, bool *json, const char **state_flag)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"state-dir", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    optind = 0; /* glibc: 0 re-initialises getopt fully */
    while ((opt = getopt_long(argc, argv, "+o:h", longopts, NULL)) != -1) {
        if (opt == 'o' && cli_parse_output(optarg, json) == 0)
            continue;
        if (opt == 'o') {
            fprintf(stderr, "mcpbox doctor: unknown output format '%s' (use table or json)\n",
                    optarg);
            return CLI_EXIT_USAGE;
        }
        if (opt == 's') {
            *state_flag = optarg;
            continue;
        }
        doctor_usage(opt == 'h' ? stdout : stderr);
        return opt == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (optind < argc) {
        fprintf(stderr, "mcpbox doctor: unexpected argument '%s'\n", argv[optind]);
        doctor_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

int cli_doctor_main(int argc, char **argv)
{
    bool json = false;
    const char *state_flag = NULL;
    int rc = doctor_parse(argc, argv, &json, &state_flag);
    if (rc >= 0)
        return rc;
    cleanup_free char *state_dir = cli_state_dir(state_flag);
    struct doctor_report r;
    doctor_run(state_dir, &r);
    doctor_add_backend_probe(&r);
    if (json) {
        json_t *j = doctor_report_json(&r);
        cli_print_json(j);
        json_decref(j);
    } else {
        doctor_print_table(&r);
    }
    rc = doctor_report_ok(&r) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    doctor_report_release(&r);
    return rc;
}
