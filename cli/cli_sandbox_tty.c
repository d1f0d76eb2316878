/* `mcpbox sandbox exec -it`: the command on a terminal in the sandbox, this terminal in raw mode
 * in front of it, as `docker exec -it` (issue 35). Every byte typed goes to the sandbox as it is
 * (Ctrl-C is the byte 0x03, which the sandbox's terminal turns into SIGINT for its foreground
 * program), window size changes follow (SIGWINCH -> command_resize), and the command's exit
 * status is ours. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli_sandbox.h"
#include "cli/cli_sandbox_tty.h"
#include "cli/cli_util.h"

struct cli_tty {
    struct cli_sandbox *c;
    const char *sandbox_id;
    char command_id[128];
    uv_poll_t in;
    uv_signal_t winch;
    struct termios saved;
    bool raw, input_open;
};

static void tty_write_all(const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDOUT_FILENO, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

static void tty_on_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    (void)arg, (void)stream;
    tty_write_all(data, len);
}

static void tty_op_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    (void)arg, (void)result;
    if (err != NULL && err->code != MCP_ERR_CONFLICT) /* conflict: the command has ended */
        fprintf(stderr, "\r\nmcpbox: %s\r\n", err->msg);
}

static void tty_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws = {0};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
        ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
    *rows = ws.ws_row ? ws.ws_row : 24;
    *cols = ws.ws_col ? ws.ws_col : 80;
}

static void tty_on_winch(uv_signal_t *h, int signum)
{
    (void)signum;
    struct cli_tty *t = h->data;
    unsigned rows, cols;
    struct mcp_error err;
    tty_size(&rows, &cols);
    if (t->command_id[0] != '\0' &&
        t->c->be->ops->command_resize(t->c->be, t->sandbox_id, t->command_id, rows, cols, tty_op_cb,
                                      t, &err) < 0)
        tty_op_cb(t, NULL, &err);
}

/* Keys: each read goes to the sandbox whole; end of input (stdin closed) ends its input too. */
static void tty_on_input(uv_poll_t *h, int status, int events)
{
    (void)status, (void)events;
    struct cli_tty *t = h->data;
    char buf[4096];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    bool eof = n <= 0;
    struct mcp_error err;
    if (t->command_id[0] != '\0' && t->input_open &&
        t->c->be->ops->command_input(t->c->be, t->sandbox_id, t->command_id, buf,
                                     eof ? 0 : (size_t)n, eof, tty_op_cb, t, &err) < 0)
        tty_op_cb(t, NULL, &err);
    if (eof) {
        t->input_open = false;
        uv_poll_stop(h);
    }
}

static void tty_on_started(void *arg, const char *command_id)
{
    struct cli_tty *t = arg;
    snprintf(t->command_id, sizeof t->command_id, "%s", command_id);
    uv_poll_start(&t->in, UV_READABLE, tty_on_input); /* keys typed early wait in the tty */
}

static int tty_raw(struct cli_tty *t)
{
    if (tcgetattr(STDIN_FILENO, &t->saved) < 0)
        return -1;
    struct termios raw = t->saved;
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) < 0)
        return -1;
    t->raw = true;
    return 0;
}

static void tty_handles(struct cli_tty *t, bool on)
{
    if (on) {
        uv_poll_init(&t->c->loop, &t->in, STDIN_FILENO);
        uv_signal_init(&t->c->loop, &t->winch);
        t->in.data = t->winch.data = t;
        uv_signal_start(&t->winch, tty_on_winch, SIGWINCH);
        return;
    }
    uv_close((uv_handle_t *)&t->in, NULL);
    uv_close((uv_handle_t *)&t->winch, NULL);
    uv_run(&t->c->loop, UV_RUN_NOWAIT); /* let them close while t is alive */
}

static void tty_on_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct cli_tty *t = arg;
    cli_sandbox_op_cb(t->c, result, err);
}

int cli_sandbox_exec_tty(struct cli_sandbox *c, struct exec_request *req, const char *id)
{
    if (!isatty(STDIN_FILENO)) {
        fputs("mcpbox sandbox exec: -it needs a terminal on stdin; use -i to forward stdin from "
              "a pipe or file\n",
              stderr);
        return CLI_EXIT_USAGE;
    }
    struct cli_tty t = {.c = c, .sandbox_id = id, .input_open = true};
    unsigned rows, cols;
    tty_size(&rows, &cols);
    req->pty_rows = (uint16_t)rows;
    req->pty_cols = (uint16_t)cols;
    req->stdin_open = true;
    struct exec_observer obs = {tty_on_started, tty_on_output, tty_on_done, &t};
    cli_sandbox_op_reset(c);
    tty_handles(&t, true);
    if (tty_raw(&t) < 0) {
        tty_handles(&t, false);
        fprintf(stderr, "mcpbox sandbox exec: cannot put the terminal in raw mode: %s\n",
                strerror(errno));
        return CLI_EXIT_FAIL;
    }
    int r = c->be->ops->exec(c->be, id, req, &obs, NULL, &c->err) < 0 ? -1 : cli_sandbox_wait(c);
    tcsetattr(STDIN_FILENO, TCSANOW, &t.saved);
    tty_handles(&t, false);
    if (r < 0) {
        cli_sandbox_fail("exec", &c->err);
        return CLI_EXIT_EXEC_FAILED;
    }
    return -1;
}
