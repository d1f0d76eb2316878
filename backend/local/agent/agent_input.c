/* Interactive commands: stdin kept open ("stdin":"pipe") or a pseudo-terminal ("pty"), fed by
 * cmd_input and sized by cmd_resize. Input waits in a per-command queue (at most
 * AGENT_INPUT_QUEUE_MAX) and is written as the command reads it, on POLLOUT: the agent never
 * blocks on a command that does not read, and such a command costs only its own queue. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "backend/local/agent/agent.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41) /* Linux 4.13; older musl headers lack it */
#endif

#define PTY_DIM_MAX 65535u           /* struct winsize holds unsigned short */
#define INPUT_KEEP_CAP (64u * 1024u) /* queue capacity kept once it is empty */
#define PTY_EOF "\004"               /* what a terminal sends for Ctrl-D (VEOF) */

struct cmd *agent_cmd_find(struct agent *a, const char *id)
{
    for (struct cmd *c = a->cmds; c; c = c->next)
        if (id && strcmp(c->id, id) == 0)
            return c;
    return NULL;
}

size_t agent_cmd_interactive(struct agent *a)
{
    size_t n = 0;
    for (struct cmd *c = a->cmds; c; c = c->next)
        n += c->state == CMD_RUNNING && c->stdin_open;
    return n;
}

/* rows and cols of a "pty" object (or of cmd_resize), each 1..65535. */
static int parse_size(json_t *obj, unsigned *rows, unsigned *cols, struct mcp_error *err)
{
    json_int_t r = json_integer_value(json_object_get(obj, "rows"));
    json_int_t c = json_integer_value(json_object_get(obj, "cols"));
    if (r < 1 || c < 1 || r > PTY_DIM_MAX || c > PTY_DIM_MAX)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "a terminal's rows and cols are whole numbers from 1 to %u (as 24 "
                             "and 80)",
                             PTY_DIM_MAX);
    *rows = (unsigned)r, *cols = (unsigned)c;
    return 0;
}

/* Appends len bytes to c's input queue, all or nothing, within cap bytes waiting. */
static int queue_input(struct cmd *c, const char *data, size_t len, size_t cap,
                       struct mcp_error *err)
{
    size_t pending = c->in_len - c->in_off;
    if (pending + len > cap)
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                             "busy: command %s has not read %zu bytes of its input yet (at most "
                             "%u MiB may wait); none of this input was written: send it again "
                             "once the command has read more",
                             c->id, pending, AGENT_INPUT_QUEUE_MAX >> 20);
    if (c->in_off > 0) {
        memmove(c->in_data, c->in_data + c->in_off, pending);
        c->in_len = pending, c->in_off = 0;
    }
    if (c->in_len + len > c->in_cap) {
        c->in_cap = c->in_len + len;
        c->in_data = xrealloc(c->in_data, c->in_cap + 1);
    }
    if (len > 0)
        memcpy(c->in_data + c->in_len, data, len);
    c->in_len += len;
    return 0;
}

/* base64 text (at most max bytes once decoded), then trailer bytes, into c's queue. */
static int queue_b64(struct cmd *c, const char *b64, size_t max, const char *trailer, size_t cap,
                     size_t *out_len, struct mcp_error *err)
{
    size_t n = strlen(b64), len = 0, extra = strlen(trailer);
    if (n > base64_encoded_len(max))
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "one input carries at most %zu MiB: send it in pieces", max >> 20);
    char *bytes = xmalloc(base64_decoded_max(n) + extra + 1);
    int rc = base64_decode(b64, n, (unsigned char *)bytes, &len);
    if (rc < 0)
        mcp_error_set(err, MCP_ERR_INVALID, 0, "input data is not base64");
    memcpy(bytes + len, trailer, extra);
    if (rc == 0)
        rc = queue_input(c, bytes, len + extra, cap, err);
    free(bytes);
    *out_len = len;
    return rc;
}

int agent_input_parse(struct agent *a, struct cmd *c, json_t *req, struct mcp_error *err)
{
    json_t *in = json_object_get(req, "stdin"), *pty = json_object_get(req, "pty");
    bool pipe = json_is_string(in) && strcmp(json_string_value(in), "pipe") == 0;
    /* "stdin_data" carries the first bytes of a pipe (and, from a newer mcpbox, any stdin) */
    const char *data = json_string_value(json_object_get(req, "stdin_data"));
    unsigned rows, cols;
    size_t len;
    if (data == NULL && !pipe)
        data = json_string_value(in);
    if (pty != NULL && !json_is_null(pty) && parse_size(pty, &rows, &cols, err) < 0)
        return -1;
    c->pty = pty != NULL && !json_is_null(pty);
    c->stdin_open = pipe || c->pty;
    if (c->stdin_open && agent_cmd_interactive(a) >= AGENT_MAX_INTERACTIVE)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "this sandbox already runs %d interactive commands (stdin open or "
                             "a pty), its limit: end one first (cmd_input with eof, or kill it)",
                             AGENT_MAX_INTERACTIVE);
    /* the first bytes come in exec's own frame, bounded by it, as stdin always did */
    return data ? queue_b64(c, data, SIZE_MAX >> 2, "", SIZE_MAX, &len, err) : 0;
}

/* The slave side of master, without a path walk where the kernel has TIOCGPTPEER. */
static int open_slave(int master)
{
    int fd = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    unsigned n;
    if (fd >= 0 || errno != EINVAL || ioctl(master, TIOCGPTN, &n) < 0)
        return fd;
    char path[32];
    snprintf(path, sizeof path, "/dev/pts/%u", n);
    return open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW);
}

/* The sandbox's own devpts (a newinstance mount, ptmxmode=0666: spawn.c) makes the pair. */
int agent_pty_open(json_t *req, int *master, int *slave, struct mcp_error *err)
{
    unsigned rows, cols;
    if (parse_size(json_object_get(req, "pty"), &rows, &cols, err) < 0)
        return -1;
    int m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK), unlock = 0;
    if (m < 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, errno,
                             "this sandbox has no pseudo-terminals (/dev/pts/ptmx): run the "
                             "command without pty");
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    int s = ioctl(m, TIOCSPTLCK, &unlock) == 0 ? open_slave(m) : -1;
    if (s < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0) {
        int e = errno;
        close(m);
        if (s >= 0)
            close(s);
        return mcp_error_set(err, MCP_ERR_IO, e, "agent: cannot open a pseudo-terminal");
    }
    *master = m, *slave = s;
    return 0;
}

static void close_input(struct cmd *c)
{
    if (c->in_fd >= 0)
        close(c->in_fd);
    c->in_fd = -1;
    free(c->in_data);
    c->in_data = NULL;
    c->in_len = c->in_off = c->in_cap = 0;
}

void agent_input_feed(struct cmd *c)
{
    while (c->in_off < c->in_len) {
        ssize_t n = write(c->in_fd, c->in_data + c->in_off, c->in_len - c->in_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) { /* the reader went away: what is queued can never be read */
            c->in_lost = true;
            close_input(c);
            return;
        }
        c->in_off += (size_t)n;
    }
    if (!c->stdin_open || c->in_eof) {
        close_input(c); /* all written: EOF */
        return;
    }
    c->in_len = c->in_off = 0;
    if (c->in_cap > INPUT_KEEP_CAP) { /* an idle session keeps little */
        free(c->in_data);
        c->in_data = NULL;
        c->in_cap = 0;
    }
}

/* The running interactive command req names, or NULL with err saying why it takes no input. */
static struct cmd *input_target(struct agent *a, json_t *req, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(req, "cmd"));
    struct cmd *c = agent_cmd_find(a, id);
    if (c == NULL)
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no command '%s' in this sandbox", id ? id : "");
    else if (!c->stdin_open)
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "command %s is not interactive: its input was given when it started; "
                      "start it with stdin \"pipe\" or a pty to write to it later",
                      c->id);
    else if (c->state == CMD_DONE)
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "command %s has exited: start a new one to send it input", c->id);
    else
        return c;
    return NULL;
}

json_t *agent_cmd_input(struct agent *a, json_t *req, struct mcp_error *err)
{
    struct cmd *c = input_target(a, req, err);
    const char *data = json_string_value(json_object_get(req, "data"));
    bool eof = json_is_true(json_object_get(req, "eof"));
    size_t len = 0;
    if (c == NULL)
        return NULL;
    if (c->in_fd < 0 || c->in_eof) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "command %s takes no more input: its stdin was ended (eof) or closed by "
                      "the command",
                      c->id);
        return NULL;
    }
    /* a terminal has no end of input: Ctrl-D ends a line-mode read, as at a keyboard */
    const char *trailer = eof && c->pty ? PTY_EOF : "";
    if (queue_b64(c, data ? data : "", AGENT_INPUT_FRAME_MAX, trailer, AGENT_INPUT_QUEUE_MAX, &len,
                  err) < 0)
        return NULL;
    c->in_eof = eof;
    agent_input_feed(c); /* at once: a keystroke's echo should not wait for the next poll */
    if (c->in_lost) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "command %s closed its stdin: this input was not read, and no more can be",
                      c->id);
        return NULL;
    }
    return json_pack("{s:s, s:I, s:I}", "command_id", c->id, "written", (json_int_t)len, "pending",
                     (json_int_t)(c->in_len - c->in_off));
}

json_t *agent_cmd_resize(struct agent *a, json_t *req, struct mcp_error *err)
{
    struct cmd *c = input_target(a, req, err);
    unsigned rows, cols;
    if (c == NULL || parse_size(req, &rows, &cols, err) < 0)
        return NULL;
    int fd = c->out_fd >= 0 ? c->out_fd : c->in_fd;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (!c->pty) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "command %s has no terminal to resize: start it with pty", c->id);
        return NULL;
    }
    if (fd < 0 || ioctl(fd, TIOCSWINSZ, &ws) < 0) { /* the kernel sends SIGWINCH */
        mcp_error_set(err, MCP_ERR_CONFLICT, errno, "command %s's terminal is closed", c->id);
        return NULL;
    }
    return json_pack("{s:s, s:i, s:i}", "command_id", c->id, "rows", (int)rows, "cols", (int)cols);
}

pid_t agent_cmd_signal_group(struct cmd *c, int sig)
{
    pid_t fg = 0;
    int fd = c->out_fd >= 0 ? c->out_fd : c->in_fd;
    bool from_terminal = sig == SIGINT || sig == SIGQUIT || sig == SIGTSTP;
    if (c->pty && from_terminal && fd >= 0 && ioctl(fd, TIOCGPGRP, &fg) == 0 && fg > 0)
        return fg;
    return c->pid;
}
