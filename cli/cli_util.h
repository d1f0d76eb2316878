/* Small helpers shared by the `mcpbox sandbox` and `mcpbox doctor` commands. */
#ifndef MCPBOX_CLI_UTIL_H
#define MCPBOX_CLI_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of the CLI commands (exec returns the command's own code instead). */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAIL = 1,        /* the operation failed (message on stderr) */
    CLI_EXIT_USAGE = 2,       /* bad command line */
    CLI_EXIT_NOT_FOUND = 3,   /* no such sandbox / file */
    CLI_EXIT_UNAVAILABLE = 4, /* this host cannot run local sandboxes (see mcpbox doctor) */
};
/* exec: when the command was killed by a signal, 128 + signal, as a shell does. */
#define CLI_EXIT_SIGNAL_BASE 128
/* exec: the command could not be started, or was lost. */
#define CLI_EXIT_EXEC_FAILED 125

/* The state directory: --state-dir, else $XDG_STATE_HOME/mcpbox, else
 * ~/.local/state/mcpbox. Returns a malloc'd string. */
char *cli_state_dir(const char *flag);

/* The backend's messages are written for agents ("call update_sandbox with paused: false first"): out gets msg
 * with each tool named by the command a person runs ("run `mcpbox sandbox resume sbx-...`
 * first"; the sandbox id is the first sbx- word of msg, else ID). */
void cli_humane_message(const char *msg, char *out, size_t size);

/* Maps an mcp_error code to the exit code above. */
int cli_exit_for_error(int code);

/* "-o json" / "--output json" / "-o table": returns 0 and sets *json, -1 for a bad value. */
int cli_parse_output(const char *value, bool *json);
/* The options every `mcpbox NOUN` takes before its command: --state-dir DIR, -o/--output and
 * --help. Returns the index of the command in argv, or -1 with the exit code in *rc (usage was
 * printed: to stdout for --help, else to stderr). */
int cli_parse_globals(int argc, char **argv, const char **state_flag, bool *json,
                      void (*usage)(FILE *out), int *rc);

/* A duration in seconds (a fraction allowed): saturated to MAX_DURATION_S (lib/base/util.h)
 * above it, and to -1 below it when negative values mean "never"; -1 for a malformed value.
 * Returns milliseconds in *ms. */
int cli_parse_seconds(const char *s, int64_t *ms);

/* Parses KEY=VALUE into obj (string value); -1 if there is no '=' or the key is empty. */
int cli_parse_kv(json_t *obj, const char *kv);

/* Prints a JSON value on stdout, indented, with a newline. */
void cli_print_json(const json_t *v);

/* A text table: columns padded to their widest cell. */
struct cli_table {
    size_t cols, rows, cap;
    char **cells; /* rows x cols, owned */
};
void cli_table_init(struct cli_table *t, size_t cols, const char *const *header);
void cli_table_add(struct cli_table *t, const char *const *row);
void cli_table_print(const struct cli_table *t, FILE *out);
void cli_table_release(struct cli_table *t);

#endif
