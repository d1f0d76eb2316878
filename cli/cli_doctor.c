/* `mcpbox doctor [-o json] [--state-dir DIR]`: can this host run local sandboxes? Prints each
 * check with the exact fix for a failure. Exit 0 when every required check passes, 1 otherwise,
 * 2 for a bad command line. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/backends.h"
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

static const char *check_text(const json_t *check, const char *key)
{
    const char *s = json_string_value(json_object_get(check, key));
    return s ? s : "";
}

static bool check_is(const json_t *check, const char *key)
{
    return json_is_true(json_object_get(check, key));
}

static const char *doctor_status(const json_t *check)
{
    if (check_is(check, "ok"))
        return "ok";
    return check_is(check, "required") ? "FAIL" : "warn";
}

static void doctor_print_fixes(const json_t *checks)
{
    bool header_done = false;
    size_t i;
    const json_t *c;
    json_array_foreach(checks, i, c) {
        if (check_is(c, "ok") || check_text(c, "fix")[0] == '\0')
            continue;
        if (!header_done)
            printf("\nHow to fix:\n");
        header_done = true;
        printf("  %s%s:\n    %s\n", check_text(c, "name"),
               check_is(c, "required") ? "" : " (optional)", check_text(c, "fix"));
    }
}

/* report: backends_doctor's {ok, checks}. */
static void doctor_print_table(const json_t *report)
{
    static const char *const header[] = {"CHECK", "STATUS", "DETAIL"};
    const json_t *checks = json_object_get(report, "checks"), *c;
    size_t i;
    struct cli_table t;
    cli_table_init(&t, 3, header);
    json_array_foreach(checks, i, c) {
        const char *row[] = {check_text(c, "name"), doctor_status(c), check_text(c, "detail")};
        cli_table_add(&t, row);
    }
    cli_table_print(&t, stdout);
    cli_table_release(&t);
    doctor_print_fixes(checks);
    printf("\n%s\n", check_is(report, "ok") ? "This host can run local sandboxes."
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
    cleanup_json json_t *report = backends_doctor(state_dir);
    if (json)
        cli_print_json(report);
    else
        doctor_print_table(report);
    return check_is(report, "ok") ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
