/* Shell sessions over exec: preparing a command for the helper, and reading its trailer back
 * (shell_session.h says how the two sides talk). */
#include "backend/shell_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/util.h"

/* Runs the helper in bash, or says in a trailer that there is none. */
static const char session_exec_line[] =
    "command -v bash >/dev/null 2>&1 || { printf '\\n%s nobash 127 \\n' \"$MCPBOX_SK\"; "
    "exit 127; }; exec bash --norc --noprofile -c \"$MCPBOX_SH\" mcpbox-session";

static const char *const kind_names[] = {
    [SHELL_SESSION_NONE] = "",           [SHELL_SESSION_DONE] = "done",
    [SHELL_SESSION_TIMEOUT] = "timeout", [SHELL_SESSION_KILLED] = "killed",
    [SHELL_SESSION_EXITED] = "exited",   [SHELL_SESSION_GONE] = "gone",
    [SHELL_SESSION_BUSY] = "busy",       [SHELL_SESSION_LIMIT] = "limit",
    [SHELL_SESSION_NOBASH] = "nobash",   [SHELL_SESSION_ERROR] = "error",
    [SHELL_SESSION_MISSING] = "missing",
};

const char *shell_session_kind_name(enum shell_session_kind kind)
{
    return kind_names[kind];
}

const char *shell_session_failure(enum shell_session_kind kind)
{
    switch (kind) {
    case SHELL_SESSION_GONE:
        return "the session's shell had exited since its last command (it ran exit in the "
               "background, or was killed), so its state is gone and this command did not run; "
               "run it again to start a fresh session with this name";
    case SHELL_SESSION_BUSY:
        return "the session is running another command; wait for it (get_command with its "
               "command_id), interrupt it (kill_command with signal INT), or use another "
               "session name";
    case SHELL_SESSION_LIMIT:
        return "the sandbox has the most sessions it may have (8) running; end one by running "
               "exit in it, or reuse a session's name";
    case SHELL_SESSION_NOBASH:
        return "sessions need bash in the sandbox's image; install it, or run the command "
               "without session";
    case SHELL_SESSION_MISSING:
        return "no such session in the sandbox (it was deleted, its shell exited, or it was "
               "never created); create one first";
    case SHELL_SESSION_ERROR:
        return "could not set up the session's directory and fifos under $TMPDIR (or /tmp) in "
               "the sandbox; check that it is writable (diagnose_sandbox) and try again";
    default:
        return NULL;
    }
}

int shell_session_check_name(const char *name, struct mcp_error *err)
{
    size_t n = strlen(name);
    bool ok = n > 0 && n <= SHELL_SESSION_NAME_MAX && name[0] != '.';
    for (size_t i = 0; ok && i < n; i++)
        ok = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", name[i]) !=
             NULL;
    if (!ok) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "session: use a name of 1 to 64 letters, digits, '_', '-' or '.' (not "
                      "starting with '.'), e.g. \"main\"");
        return -1;
    }
    return 0;
}

/* The text the session's shell sources: cd and exports first (as if typed), then command. */
static char *session_script(const char *command, const char *cwd, json_t *env)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    if (cwd != NULL) {
        buf_append_str(&b, "cd -- ");
        buf_append_shell_word(&b, cwd);
        buf_append_str(&b, " || return\n");
    }
    const char *key;
    json_t *val;
    json_object_foreach(env, key, val)
    {
        buf_append_str(&b, "export ");
        struct buf pair;
        buf_init(&pair, (size_t)-1);
        buf_printf(&pair, "%s=%s", key, json_string_value(val) ? json_string_value(val) : "");
        buf_append_shell_word(&b, buf_cstr(&pair));
        buf_release(&pair);
        buf_append_str(&b, "\n");
    }
    buf_append_str(&b, command);
    return buf_steal(&b, NULL);
}

int shell_session_prepare(const char *name, const char *command, const char *cwd, json_t *env,
                          int64_t timeout_s, struct shell_session_cmd *out, struct mcp_error *err)
{
    memset(out, 0, sizeof(*out));
    if (shell_session_check_name(name, err) < 0)
        return -1;
    char *script = session_script(command, cwd, env);
    if (strlen(script) > SHELL_SESSION_COMMAND_MAX) {
        free(script);
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "command: a session command may be at most 64 KiB; write a longer script "
                      "to a file with write_file and run it with `. ./script.sh` in the session");
        return -1;
    }
    unsigned char raw[SHELL_SESSION_NONCE_HEX / 2];
    random_bytes(raw, sizeof raw);
    hex_encode(raw, sizeof raw, out->nonce);
    char timeout[24], most[8];
    snprintf(timeout, sizeof timeout, "%lld", (long long)(timeout_s > 0 ? timeout_s : 0));
    snprintf(most, sizeof most, "%d", SHELL_SESSION_MAX);
    out->env = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "MCPBOX_SN", name, "MCPBOX_SK",
                         out->nonce, "MCPBOX_SC", script, "MCPBOX_ST", timeout, "MCPBOX_SM", most,
                         "MCPBOX_SL", shell_session_loop_sh, "MCPBOX_SH", shell_session_helper_sh);
    free(script);
    out->command = strdup(session_exec_line);
    if (out->env == NULL || out->command == NULL)
        abort();
    return 0;
}

void shell_session_require_existing(struct shell_session_cmd *cmd)
{
    json_object_set_new(cmd->env, "MCPBOX_SE", json_string("1"));
}

char *shell_session_delete_command(const char *name)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    buf_printf(&b,
               "d=${TMPDIR:-/tmp}/.mcpbox-sessions-$(id -u)/%s; [ -f \"$d/pid\" ] || exit 3; "
               "read -r p <\"$d/pid\" && kill -KILL -\"$p\" 2>/dev/null; rm -rf \"$d\"",
               name);
    return buf_steal(&b, NULL);
}

void shell_session_cmd_release(struct shell_session_cmd *cmd)
{
    free(cmd->command);
    json_decref(cmd->env);
    cmd->command = NULL;
    cmd->env = NULL;
}

/* The helper interrupts at timeout_s and kills the shell 3 s later; the exec's own timeout only
 * catches a helper that hangs. */
#define SESSION_EXEC_GRACE_S 10

void shell_session_exec_request(const struct shell_session_cmd *cmd, int64_t timeout_s,
                                struct exec_request *req)
{
    memset(req, 0, sizeof(*req));
    req->command = cmd->command;
    req->env = cmd->env;
    if (timeout_s > 0 && timeout_s < MAX_DURATION_S - SESSION_EXEC_GRACE_S)
        req->timeout_ms = (timeout_s + SESSION_EXEC_GRACE_S) * 1000;
}

/* ---- the trailer ------------------------------------------------------------------------- */

void shell_session_tail_init(struct shell_session_tail *t, const char *nonce)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->nonce, sizeof t->nonce, "%s", nonce);
}

void shell_session_tail_feed(struct shell_session_tail *t, const char *data, size_t len,
                             shell_session_emit_fn *emit, void *arg)
{
    if (len >= sizeof t->buf) { /* all held bytes and the start of data are old enough */
        emit(arg, t->buf, t->len);
        emit(arg, data, len - sizeof t->buf);
        memcpy(t->buf, data + len - sizeof t->buf, sizeof t->buf);
        t->len = sizeof t->buf;
        return;
    }
    size_t over = t->len + len > sizeof t->buf ? t->len + len - sizeof t->buf : 0;
    if (over > 0) {
        emit(arg, t->buf, over);
        memmove(t->buf, t->buf + over, t->len - over);
        t->len -= over;
    }
    memcpy(t->buf + t->len, data, len);
    t->len += len;
}

static enum shell_session_kind kind_parse(const char *s, size_t n)
{
    for (size_t k = SHELL_SESSION_DONE; k < sizeof kind_names / sizeof kind_names[0]; k++)
        if (strlen(kind_names[k]) == n && memcmp(kind_names[k], s, n) == 0)
            return (enum shell_session_kind)k;
    return SHELL_SESSION_NONE;
}

/* "<kind> <status> <cwd>\n" after the nonce and its space; false if it is not that. */
static bool parse_fields(const char *p, const char *end, struct shell_session_result *res)
{
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    if (sp == NULL || (res->kind = kind_parse(p, (size_t)(sp - p))) == SHELL_SESSION_NONE)
        return false;
    p = sp + 1;
    sp = memchr(p, ' ', (size_t)(end - p));
    if (sp == NULL || sp == p || sp - p > 9)
        return false;
    res->status = 0;
    for (const char *q = p; q < sp; q++) {
        if (*q < '0' || *q > '9')
            res->status = -1; /* "?": the shell's status is not known */
        else if (res->status >= 0)
            res->status = res->status * 10 + (*q - '0');
    }
    size_t cwd_len = (size_t)(end - 1 - (sp + 1));
    if (cwd_len >= sizeof res->cwd)
        return false;
    memcpy(res->cwd, sp + 1, cwd_len);
    res->cwd[cwd_len] = '\0';
    return true;
}

size_t shell_session_parse_trailer(const char *nonce, const char *data, size_t len,
                                   struct shell_session_result *res)
{
    memset(res, 0, sizeof(*res));
    res->status = -1;
    size_t nl = strlen(nonce);
    if (nl == 0 || len < nl + 3 || data[len - 1] != '\n')
        return len;
    /* The trailer is the last "\n<nonce> " (a cwd cannot hold the nonce: it is fresh). */
    for (size_t at = len - nl - 2; at + 1 > 0; at--) {
        if (data[at] != '\n' || memcmp(data + at + 1, nonce, nl) != 0 || data[at + 1 + nl] != ' ')
            continue;
        struct shell_session_result r = {.status = -1};
        if (!parse_fields(data + at + 2 + nl, data + len, &r))
            return len;
        *res = r;
        return at;
    }
    return len;
}

void shell_session_tail_finish(struct shell_session_tail *t, shell_session_emit_fn *emit, void *arg,
                               struct shell_session_result *res)
{
    size_t keep = shell_session_parse_trailer(t->nonce, t->buf, t->len, res);
    emit(arg, t->buf, keep);
    t->len = 0;
}
