/* What a session on the proc primitive writes to its shell's stdin (shell_session_proc.h). The
 * shell is `bash -s`: it reads a line at a time, so everything after the command in flight
 * stays in the pipe. A command is one compound command in the shell itself:
 *
 *   { cd -- 'DIR' && export 'K=V' && eval 'COMMAND'; } </dev/null; __mcpbox_s=$?; <markers>
 *
 * (with stdin: `builtin printf 'BYTES' | { ...; }`, lastpipe keeping the group in the shell).
 * The command is single-quoted, so whatever it holds (a syntax error, an unmatched quote) is
 * eval's problem and the markers still come; the nonce is in the text the shell parsed, not in
 * a variable the command could read. */
#include "backend/shell_session_proc-internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/buf.h"

/* The markers of nonce (shell_session_mark.h) with status word (or $__mcpbox_s), on the
 * descriptors the shell saved at start, so a command's own `exec >file` does not hide them. */
static void append_markers(struct buf *b, const char *nonce, const char *status)
{
    for (int i = 0; i < 2; i++)
        buf_printf(b, "builtin printf '\\n%%s %%s %%s %%s\\n' %s \"%s\" \"$PWD\" %s >&%s; ", nonce,
                   status, nonce, i == 0 ? "$__mcpbox_o" : "$__mcpbox_e");
}

static void append_quoted(struct buf *b, const char *s)
{
    buf_append_str(b, "'");
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            buf_append_str(b, "'\\''");
        else
            buf_append(b, p, 1);
    }
    buf_append_str(b, "'");
}

/* stdin bytes as a printf format: byte-exact, NULs and all. */
static void append_stdin(struct buf *b, const char *data, size_t len)
{
    buf_append_str(b, "builtin printf '");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\' || c == '%')
            buf_printf(b, "\\%03o", c);
        else
            buf_append(b, &data[i], 1);
    }
    buf_append_str(b, "' | ");
}

static void append_env(struct buf *b, json_t *env)
{
    const char *key;
    json_t *val;
    json_object_foreach(env, key, val)
    {
        struct buf pair;
        buf_init(&pair, (size_t)-1);
        buf_printf(&pair, "%s=%s", key, json_string_value(val) ? json_string_value(val) : "");
        buf_append_str(b, "export ");
        append_quoted(b, buf_cstr(&pair));
        buf_append_str(b, " && ");
        buf_release(&pair);
    }
}

char *sess_command_text(const struct shell_session_request *req, const char *nonce, size_t *len,
                        struct mcp_error *err)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    if (req->stdin_data != NULL)
        append_stdin(&b, req->stdin_data, req->stdin_len);
    buf_append_str(&b, "{ ");
    if (req->cwd != NULL) {
        buf_append_str(&b, "cd -- ");
        append_quoted(&b, req->cwd);
        buf_append_str(&b, " && ");
    }
    append_env(&b, req->env);
    size_t before = b.len;
    buf_append_str(&b, "eval ");
    append_quoted(&b, req->command);
    bool too_long = b.len - before > SHELL_SESSION_COMMAND_MAX + 64 ||
                    req->stdin_len > SESS_STDIN_MAX || b.len > BACKEND_INPUT_MAX - 4096;
    buf_append_str(&b, "\n}");
    buf_append_str(&b, req->stdin_data != NULL ? "; " : " </dev/null; ");
    buf_append_str(&b, "__mcpbox_s=$?; ");
    append_markers(&b, nonce, "$__mcpbox_s");
    buf_append_str(&b, "builtin :\n"); /* so that $_ does not keep the nonce */
    if (too_long) {
        buf_release(&b);
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "command: a session command may be at most 64 KiB and its stdin at most "
                      "256 KiB (less when most of it is control bytes); write longer ones to a "
                      "file with write_file and use it in the session (`. ./script.sh`, "
                      "`< file`)");
        return NULL;
    }
    return buf_steal(&b, len);
}

/* The checks of a new shell, in bash: a dead shell of this name not told yet (gone), the
 * sandbox's live sessions (limit), its directory and pid file (error); any of them prints the
 * markers with that word and exits. */
static const char start_checks[] =
    "__mcpbox_r=${TMPDIR:-/tmp}/.mcpbox-sessions-$UID\n"
    "__mcpbox_d=$__mcpbox_r/$__mcpbox_n __mcpbox_w=\n"
    "__mcpbox_boot() {\n"
    "    local x p n=0\n"
    "    if [ -z \"$1\" ] && [ -f \"$__mcpbox_d/pid\" ] && read -r p <\"$__mcpbox_d/pid\" &&\n"
    "        ! kill -0 \"$p\" 2>/dev/null; then\n"
    "        command rm -rf \"$__mcpbox_d\"; __mcpbox_w=gone; return\n"
    "    fi\n"
    "    for x in \"$__mcpbox_r\"/*/pid; do\n"
    "        [ -f \"$x\" ] && read -r p <\"$x\" && kill -0 \"$p\" 2>/dev/null && n=$((n + 1))\n"
    "    done\n"
    "    [ \"$n\" -lt \"$2\" ] || { __mcpbox_w=limit; return; }\n"
    "    command mkdir -p -m 700 \"$__mcpbox_r\" \"$__mcpbox_d\" 2>/dev/null &&\n"
    "        echo $$ >\"$__mcpbox_d/pid\" || __mcpbox_w=error\n"
    "}\n";

char *sess_with_start_marker(const char *nonce, const char *text, size_t text_len, size_t *len)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    append_markers(&b, nonce, "start");
    buf_append(&b, text, text_len);
    return buf_steal(&b, len);
}

void sess_label(const char *name, char *out, size_t size)
{
    if (strlen("session:") + strlen(name) <= BACKEND_LABEL_MAX) {
        snprintf(out, size, "session:%s", name);
        return;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a: names never hold ':', so no clash */
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(out, size, "session:%.39s:%016llx", name, (unsigned long long)h);
}

char *sess_shell_line(const char *nonce)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    buf_append_str(&b, "command -v bash >/dev/null 2>&1 || { ");
    for (int i = 1; i <= 2; i++)
        buf_printf(&b, "printf '\\n%%s nobash  %%s\\n' %s %s >&%d; ", nonce, nonce, i);
    buf_append_str(&b, "exit 127; }; exec bash --norc --noprofile -s");
    return buf_steal(&b, NULL);
}

char *sess_start_text(const char *name, const char *nonce, bool fresh, const char *text,
                      size_t text_len, size_t *len)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    buf_append_str(&b, "exec {__mcpbox_o}>&1 {__mcpbox_e}>&2\n__mcpbox_n=");
    append_quoted(&b, name);
    buf_append_str(&b, "\n");
    buf_append_str(&b, start_checks);
    buf_printf(&b, "__mcpbox_boot '%s' %d\nunset -f __mcpbox_boot\n", fresh ? "1" : "",
               SHELL_SESSION_MAX);
    buf_append_str(&b, "if [ -n \"$__mcpbox_w\" ]; then ");
    append_markers(&b, nonce, "$__mcpbox_w");
    buf_append_str(&b, "exit 0; fi\n");
    buf_append_str(&b, "trap 'command rm -rf \"$__mcpbox_d\"' EXIT\ntrap : INT\n"
                       "shopt -s expand_aliases lastpipe\n");
    buf_append(&b, text, text_len);
    return buf_steal(&b, len);
}
