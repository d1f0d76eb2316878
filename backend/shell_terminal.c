/* Terminals over exec: the helper's inputs, its status line, key names (shell_terminal.h). */
#include "backend/shell_terminal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void set_int(json_t *env, const char *key, long long v)
{
    char s[24];
    snprintf(s, sizeof s, "%lld", v);
    json_object_set_new(env, key, json_string(s));
}

void shell_terminal_exec_request(const struct shell_terminal_args *a, json_t **env,
                                 struct exec_request *req)
{
    memset(req, 0, sizeof(*req));
    json_t *e = json_pack("{s:s, s:s}", "MCPBOX_TA", a->action, "MCPBOX_TI", a->id);
    json_object_set_new(e, "MCPBOX_TC", json_string(a->command ? a->command : "exec bash -i"));
    set_int(e, "MCPBOX_TR", a->rows > 0 ? a->rows : 24);
    set_int(e, "MCPBOX_TK", a->cols > 0 ? a->cols : 80);
    set_int(e, "MCPBOX_TM", SHELL_TERMINAL_MAX);
    set_int(e, "MCPBOX_TL", (long long)(a->limit ? a->limit : SHELL_TERMINAL_READ_MAX));
    if (a->offset >= 0)
        set_int(e, "MCPBOX_TO", a->offset);
    *env = e;
    req->command = shell_terminal_sh;
    req->env = e;
    req->timeout_ms = 30000; /* every action is quick; a hung one is ended */
}

void shell_terminal_parse_status(const char *err, size_t len, struct shell_terminal_status *st)
{
    memset(st, 0, sizeof(*st));
    st->exit_code = -1;
    static const char tag[] = "mcpbox-terminal ";
    const char *last = NULL;
    for (size_t i = 0; i + sizeof tag - 1 <= len; i++)
        if ((i == 0 || err[i - 1] == '\n') && memcmp(err + i, tag, sizeof tag - 1) == 0)
            last = err + i;
    if (last == NULL)
        return;
    char line[96] = {0}, state[32] = {0};
    size_t n = (size_t)(err + len - last);
    memcpy(line, last, n < sizeof line - 1 ? n : sizeof line - 1);
    unsigned long long off, size;
    if (sscanf(line, "mcpbox-terminal %llu %llu %31s", &off, &size, state) != 3)
        return;
    st->seen = true;
    st->offset = off;
    st->size = size;
    st->running = strcmp(state, "running") == 0;
    st->gone = strcmp(state, "none") == 0;
    if (!st->running && !st->gone && isdigit((unsigned char)state[0]))
        st->exit_code = atoi(state);
}

const char *shell_terminal_failure(int exit_code)
{
    switch (exit_code) {
    case 10:
        return "no terminal with this terminal_id in the sandbox (it was closed, or never "
               "started); start one with action start";
    case 11:
        return "the terminal's program has exited, so it takes no more input; read shows what "
               "it printed last, close removes it, start runs a new one";
    case 12:
        return "the sandbox has the most terminals it may have (8) open; close one first";
    case 13:
        return "terminals need script(1) and setsid(1) (util-linux) in the sandbox's image; "
               "install util-linux, or use run_command";
    case 14:
        return "could not make the terminal's directory and fifo under /tmp in the sandbox; "
               "check that /tmp is writable (diagnose_sandbox)";
    case 15:
        return "a terminal with this terminal_id exists already; use it, close it, or start "
               "one without terminal_id";
    default:
        return NULL;
    }
}

struct key_name {
    const char *name, *bytes;
};
static const struct key_name key_names[] = {
    {"Enter", "\r"},       {"Tab", "\t"},         {"Esc", "\x1b"},         {"Escape", "\x1b"},
    {"Backspace", "\x7f"}, {"Space", " "},        {"Up", "\x1b[A"},        {"Down", "\x1b[B"},
    {"Right", "\x1b[C"},   {"Left", "\x1b[D"},    {"Home", "\x1b[H"},      {"End", "\x1b[F"},
    {"Delete", "\x1b[3~"}, {"PageUp", "\x1b[5~"}, {"PageDown", "\x1b[6~"},
};

int shell_terminal_key(const char *name, char out[8])
{
    for (size_t i = 0; i < sizeof key_names / sizeof key_names[0]; i++)
        if (strcasecmp(name, key_names[i].name) == 0) {
            size_t n = strlen(key_names[i].bytes);
            memcpy(out, key_names[i].bytes, n);
            return (int)n;
        }
    /* ^C, C-c, Ctrl-C, Ctrl+C: the letter (or @[\]^_?) with the control bit */
    const char *c = NULL;
    if (name[0] == '^' && name[1] != '\0' && name[2] == '\0')
        c = name + 1;
    else if (strncasecmp(name, "C-", 2) == 0 && name[2] != '\0' && name[3] == '\0')
        c = name + 2;
    else if ((strncasecmp(name, "Ctrl-", 5) == 0 || strncasecmp(name, "Ctrl+", 5) == 0) &&
             name[5] != '\0' && name[6] == '\0')
        c = name + 5;
    if (c == NULL)
        return -1;
    int u = toupper((unsigned char)*c);
    if (u == '?') {
        out[0] = 0x7f;
        return 1;
    }
    if (u < '@' || u > '_')
        return -1;
    out[0] = (char)(u & 0x1f);
    return 1;
}
