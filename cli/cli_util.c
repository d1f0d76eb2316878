/* Helpers shared by the CLI commands: state directory, exit codes, output formats, tables. */
#include "cli/cli_util.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

char *cli_state_dir(const char *flag)
{
    if (flag != NULL && *flag != '\0')
        return xstrdup(flag);
    const char *xdg = getenv("XDG_STATE_HOME");
    if (xdg != NULL && *xdg == '/')
        return xasprintf("%s/mcpbox", xdg);
    /* The same default as the server's (mcp/config.c), so both see the same sandboxes. */
    const char *home = getenv("HOME");
    return xasprintf("%s/.local/state/mcpbox", home && *home ? home : "/tmp");
}

/* Tool name -> what a person runs instead (%s: the sandbox id). */
static const struct {
    const char *tool, *command;
} cli_tool_commands[] = {
    {"call update_sandbox with paused: false", "run `mcpbox sandbox resume %s`"},
    {"update_sandbox with paused: false", "`mcpbox sandbox resume %s`"},
    {"update_sandbox with a network_policy", "`mcpbox sandbox network-policy %s`"},
    {"call list_sandboxes", "run `mcpbox sandbox ls`"},
    {"list_sandboxes", "`mcpbox sandbox ls`"},
    {"call get_sandbox", "run `mcpbox sandbox get %s`"},
    {"get_sandbox", "`mcpbox sandbox get %s`"},
    {"call destroy_sandbox", "run `mcpbox sandbox rm %s`"},
    {"destroy_sandbox", "`mcpbox sandbox rm %s`"},
    {"call create_sandbox", "run `mcpbox sandbox create`"},
    {"create_sandbox", "`mcpbox sandbox create`"},
    {"call diagnose_sandbox without a sandbox_id", "run `mcpbox doctor`"},
    {"call diagnose_sandbox", "run `mcpbox sandbox logs %s`"},
    {"diagnose_sandbox", "`mcpbox sandbox logs %s`"},
    {"call get_command", "run `mcpbox sandbox logs %s COMMAND_ID`"},
    {"get_command", "`mcpbox sandbox logs %s COMMAND_ID`"},
    {"call run_command", "run `mcpbox sandbox exec %s`"},
    {"run_command", "`mcpbox sandbox exec %s`"},
    {"call doctor", "run `mcpbox doctor`"},
};

void cli_humane_message(const char *msg, char *out, size_t size)
{
    char id[64] = "ID";
    const char *sbx = strstr(msg, "sbx-");
    if (sbx != NULL)
        snprintf(id, sizeof id, "%.*s", (int)strspn(sbx, "sbx-0123456789abcdef"), sbx);
    size_t n = 0;
    while (*msg && n + 1 < size) {
        size_t i = 0;
        while (i < sizeof cli_tool_commands / sizeof cli_tool_commands[0] &&
               strncmp(msg, cli_tool_commands[i].tool, strlen(cli_tool_commands[i].tool)) != 0)
            i++;
        if (i == sizeof cli_tool_commands / sizeof cli_tool_commands[0]) {
            out[n++] = *msg++;
            continue;
        }
        const char *cmd = cli_tool_commands[i].command, *hole = strstr(cmd, "%s");
        int w = hole ? snprintf(out + n, size - n, "%.*s%s%s", (int)(hole - cmd), cmd, id, hole + 2)
                     : snprintf(out + n, size - n, "%s", cmd);
        n = w < 0 || (size_t)w >= size - n ? size - 1 : n + (size_t)w;
        msg += strlen(cli_tool_commands[i].tool);
    }
    out[n] = '\0';
}

int cli_exit_for_error(int code)
{
    switch (code) {
    case MCP_ERR_NOT_FOUND: return CLI_EXIT_NOT_FOUND;
    case MCP_ERR_INVALID:
    case MCP_ERR_INVALID_PARAMS: return CLI_EXIT_USAGE;
    case MCP_ERR_UNSUPPORTED: return CLI_EXIT_UNAVAILABLE;
    default: return CLI_EXIT_FAIL;
    }
}

int cli_parse_output(const char *value, bool *json)
{
    if (strcmp(value, "json") == 0)
        *json = true;
    else if (strcmp(value, "table") == 0 || strcmp(value, "text") == 0)
        *json = false;
    else
        return -1;
    return 0;
}

int cli_parse_seconds(const char *s, int64_t *ms)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || isnan(v))
        return -1;
    if (v < 0)
        *ms = -1000;
    else /* compared as a double first: a huge value must not overflow the conversion */
        *ms = v >= (double)MAX_DURATION_S ? MAX_DURATION_S * 1000 : (int64_t)(v * 1000);
    return 0;
}

int cli_parse_kv(json_t *obj, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv)
        return -1;
    char *key = xstrndup(kv, (size_t)(eq - kv));
    json_object_set_new(obj, key, json_string(eq + 1));
    free(key);
    return 0;
}

void cli_print_json(const json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (s != NULL)
        printf("%s\n", s);
    free(s);
    fflush(stdout);
}

void cli_table_init(struct cli_table *t, size_t cols, const char *const *header)
{
    memset(t, 0, sizeof(*t));
    t->cols = cols;
    cli_table_add(t, header);
}

void cli_table_add(struct cli_table *t, const char *const *row)
{
    if (t->rows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->cells = xrealloc(t->cells, t->cap * t->cols * sizeof(char *));
    }
    for (size_t c = 0; c < t->cols; c++)
        t->cells[t->rows * t->cols + c] = xstrdup(row[c] != NULL ? row[c] : "-");
    t->rows++;
}

void cli_table_print(const struct cli_table *t, FILE *out)
{
    size_t width[16] = {0};
    for (size_t r = 0; r < t->rows; r++)
        for (size_t c = 0; c < t->cols && c < 16; c++) {
            size_t len = strlen(t->cells[r * t->cols + c]);
            width[c] = len > width[c] ? len : width[c];
        }
    for (size_t r = 0; r < t->rows; r++) {
        for (size_t c = 0; c < t->cols; c++) {
            const char *cell = t->cells[r * t->cols + c];
            if (c + 1 == t->cols)
                fprintf(out, "%s\n", cell);
            else
                fprintf(out, "%-*s  ", (int)(c < 16 ? width[c] : 0), cell);
        }
    }
    fflush(out);
}

void cli_table_release(struct cli_table *t)
{
    for (size_t i = 0; i < t->rows * t->cols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

int cli_parse_globals(int argc, char **argv, const char **state_flag, bool *json,
                      void (*usage)(FILE *out), int *rc)
{
    static const struct option longopts[] = {
        {"state-dir", required_argument, NULL, 's'}, {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    int opt;
    optind = 0; /* glibc: 0 re-initialises getopt fully */
    while ((opt = getopt_long(argc, argv, "+o:h", longopts, NULL)) != -1) {
        if (opt == 's')
            *state_flag = optarg;
        else if (opt != 'o' || cli_parse_output(optarg, json) != 0) {
            usage(opt == 'h' ? stdout : stderr);
            *rc = opt == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
            return -1;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        *rc = CLI_EXIT_USAGE;
        return -1;
    }
    return optind;
}
