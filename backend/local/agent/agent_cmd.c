/* Commands inside the sandbox: /bin/sh -c with cwd, env, stdin, timeout; output kept in the
 * agent's private log directory (outside the sandbox's view) so any part can be read later. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/agent/agent.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define CMD_SHELL "/bin/sh"
#define CMD_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define CMD_PLAIN_MAX_ARGS 64     /* longer plain commands simply go through the shell */
#define CMD_PLAIN_MAX_LEN 4096

size_t agent_cmd_running(struct agent *a)
{
    size_t n = 0;
    for (struct cmd *c = a->cmds; c; c = c->next)
        n += c->state == CMD_RUNNING;
    return n;
}

static const char *cmd_status_name(const struct cmd *c)
{
    if (c->state == CMD_RUNNING)
        return "running";
    if (c->timed_out)
        return "timed_out";
    if (c->term_signal > 0 && c->kill_requested)
        return "killed";
    if (c->term_signal > 0)
        return "signaled";
    return "exited";
}

json_t *agent_cmd_status_json(const struct cmd *c)
{
    uint64_t end = c->state == CMD_RUNNING ? now_mono_ms() : c->end_ms;
    json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:b}", "command_id", c->id, "status",
                          cmd_status_name(c), "duration_ms", (json_int_t)(end - c->start_ms),
                          "stdout_bytes", (json_int_t)c->n_out, "stderr_bytes",
                          (json_int_t)c->n_err, "total_bytes", (json_int_t)c->n_log, "timed_out",
                          c->timed_out);
    json_object_set_new(j, "log_truncated", json_boolean(c->log_truncated));
    json_object_set_new(j, "exit_code", c->exit_code >= 0 ? json_integer(c->exit_code) : json_null());
    json_object_set_new(j, "signal", c->term_signal > 0 ? json_integer(c->term_signal) : json_null());
    json_object_set_new(j, "pid", json_integer(c->pid));
    json_object_set_new(j, "label", c->label[0] ? json_string(c->label) : json_null());
    return j;
}

/* Builds envp: base PATH/HOME/..., the sandbox env, then the request's env; PWD last, as the
 * shell would set it (a directly exec'd command gets the same environment). A command on a pty
 * gets TERM=xterm-256color unless an env sets TERM. */
static char **build_env(struct agent *a, json_t *extra, const char *cwd, bool pty)
{
    json_t *env =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "PATH", CMD_DEFAULT_PATH, "HOME", "/root", "LANG",
                  "C.UTF-8", "HOSTNAME", "sandbox", "TERM", pty ? "xterm-256color" : "dumb");
    json_object_update(env, a->env);
    if (json_is_object(extra))
        json_object_update(env, extra);
    json_object_set_new(env, "PWD", json_string(cwd));
    char **envp = xcalloc(json_object_size(env) + 1, sizeof *envp);
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        if (json_is_string(v) && strchr(k, '=') == NULL)
            envp[i++] = xasprintf("%s=%s", k, json_string_value(v));
    }
    json_decref(env);
    return envp;
}

static void free_env(char **envp)
{
    for (size_t i = 0; envp[i]; i++)
        free(envp[i]);
    free(envp);
}

/* In the vfork child: only async-signal-safe calls until execve, and no writes to the parent's
 * memory (which it shares until then) except *err_out. With a pty (tty) the child's new session
 * takes the terminal on its stdin as its controlling terminal. */
static void child_exec(const int stdio[3], bool tty, volatile int *err_out, const char *cwd,
                       const char *command, char **plain_argv, char **envp)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL); /* this process's own handler table: vfork does not share it */
    setsid();
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) { /* the memcg OOM killer picks commands before the agent */
        ssize_t w = write(fd, "1000", 4);
        (void)w;
        close(fd);
    }
    if (dup2(stdio[0], 0) < 0 || dup2(stdio[1], 1) < 0 || dup2(stdio[2], 2) < 0)
        goto fail;
    if (tty && ioctl(0, TIOCSCTTY, 0) < 0)
        goto fail;
    if (chdir(cwd) < 0)
        goto fail;
    if (plain_argv != NULL) /* on failure the shell runs it and reports as shells do */
        execve(plain_argv[0], plain_argv, envp);
    char *argv[] = {(char *)"sh", (char *)"-c", (char *)command, NULL};
    execve(CMD_SHELL, argv, envp);
fail:
    *err_out = errno ? errno : EIO;
    _exit(127);
}

/* A command's log file is made when its first output arrives (a command that prints nothing
 * has none: reads of it are empty). Creating a file on the host's ext4 costs 0.1-0.5 ms, so the
 * agent keeps one made ahead of time (AGENT_SPARE_LOG, made while it has nothing else to do) and
 * renames it into place (a few microseconds); without one it creates the file there and then. */
static int open_log(struct agent *a, struct cmd *c)
{
    char name[64];
    snprintf(name, sizeof name, "%s.log", c->id);
    c->has_log = true; /* from here on a name may exist: cmd_free unlinks it */
    if (a->spare_log >= 0 && renameat(a->logdir_fd, AGENT_SPARE_LOG, a->logdir_fd, name) == 0) {
        c->f_log = a->spare_log;
        a->spare_log = -1;
        return 0;
    }
    c->f_log = openat(a->logdir_fd, name,
                      O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_APPEND, 0600);
    return c->f_log;
}

void agent_cmd_make_spare_log(struct agent *a)
{
    if (a->spare_log < 0)
        a->spare_log = openat(a->logdir_fd, AGENT_SPARE_LOG,
                              O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_APPEND,
                              0600);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void cmd_free(struct agent *a, struct cmd *c)
{
    char name[64];
    snprintf(name, sizeof name, "%s.log", c->id);
    if (c->has_log)
        unlinkat(a->logdir_fd, name, 0);
    a->log_bytes -= c->n_log;
    agent_watch_cmd_gone(a, c);
    agent_sigwatch_free(&c->sigwatch);
    free(c->in_data);
    free(c->command);
    free(c);
}

/* Drops the oldest finished command; false if there is none. */
static bool evict_oldest(struct agent *a)
{
    struct cmd **victim = NULL;
    for (struct cmd **pp = &a->cmds; *pp; pp = &(*pp)->next)
        if ((*pp)->state == CMD_DONE)
            victim = pp; /* list is newest first: the last finished one is the oldest */
    if (victim == NULL)
        return false;
    struct cmd *c = *victim;
    *victim = c->next;
    a->ncmds--;
    cmd_free(a, c);
    return true;
}

/* Drops the oldest finished commands beyond the retention limit. */
static void cmd_gc(struct agent *a)
{
    while (a->ncmds > AGENT_MAX_CMDS_KEPT && evict_oldest(a)) {
    }
}

/* The child's stdin, stdout and stderr (child) and the agent's ends (in c): three pipes, or a
 * pty whose master the agent both reads and writes (two descriptors, so each is polled for its
 * own event) and whose slave is all three of the child's. */
static int open_stdio(struct cmd *c, json_t *req, int child[3], struct mcp_error *err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, master, slave;
    if (c->pty) {
        if (agent_pty_open(req, &master, &slave, err) < 0)
            return -1;
        c->out_fd = master;
        c->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 0);
        child[0] = child[1] = child[2] = slave;
        return 0;
    }
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++)
            close_fd(&in[i]), close_fd(&out[i]), close_fd(&errp[i]);
        return mcp_error_set(err, MCP_ERR_IO, e, "agent: pipe");
    }
    c->in_fd = in[1], c->out_fd = out[0], c->err_fd = errp[0];
    child[0] = in[0], child[1] = out[1], child[2] = errp[1];
    return 0;
}

static void close_child_ends(int child[3])
{
    for (int i = 0; i < 3; i++)
        if (child[i] >= 0 && (i == 0 || child[i] != child[i - 1]))
            close(child[i]);
}

/* vfork: the agent is suspended until the child has exec'd (or failed), which is what it waits
 * for anyway, and the child shares its memory instead of copying its page tables: 0.1-0.2 ms less
 * per command than fork (posix_spawn against fork+exec of /bin/true from a small process). A
 * failure before the exec (no such cwd) comes back in child_errno, which the child shares. */
static int spawn(struct agent *a, struct cmd *c, json_t *req, const char *cwd, char **envp,
                 struct mcp_error *err)
{
    int child[3];
    char plain[CMD_PLAIN_MAX_LEN], *plain_argv[CMD_PLAIN_MAX_ARGS];
    bool is_plain = agent_plain_argv(c->command, plain, sizeof plain, plain_argv,
                                     CMD_PLAIN_MAX_ARGS) > 0;
    if (open_stdio(c, req, child, err) < 0)
        return -1;
    volatile int child_errno = 0;
    pid_t pid = vfork();
    if (pid < 0) {
        int e = errno;
        close_child_ends(child);
        close_fd(&c->in_fd), close_fd(&c->out_fd), close_fd(&c->err_fd);
        return mcp_error_set(err, e == EAGAIN ? MCP_ERR_LIMIT : MCP_ERR_IO, e,
                             "agent: fork (the sandbox's pids limit may be reached)");
    }
    if (pid == 0)
        child_exec(child, c->pty, &child_errno, cwd, c->command, is_plain ? plain_argv : NULL,
                   envp);
    close_child_ends(child);
    c->pid = pid;
    fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
    fcntl(c->in_fd, F_SETFL, O_NONBLOCK);
    if (child_errno != 0)
        return mcp_error_set(err, child_errno == ENOENT ? MCP_ERR_NOT_FOUND : MCP_ERR_IO,
                             child_errno, "cannot start command in '%s'", cwd);
    return 0;
}

/* exec's "label" (null or absent: none), then its stdin and pty. */
static int parse_request(struct agent *a, struct cmd *c, json_t *req, struct mcp_error *err)
{
    json_t *label = json_object_get(req, "label");
    if (label && !json_is_null(label) && !agent_label_valid(json_string_value(label)))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "exec: a label is 1 to %d characters of A-Z a-z 0-9 _ . : -",
                             AGENT_LABEL_MAX);
    if (json_is_string(label))
        snprintf(c->label, sizeof c->label, "%s", json_string_value(label));
    return agent_input_parse(a, c, req, err);
}

json_t *agent_cmd_exec(struct agent *a, struct conn *conn, json_t *req, struct mcp_error *err)
{
    const char *command = json_string_value(json_object_get(req, "command"));
    const char *cwd_in = json_string_value(json_object_get(req, "cwd"));
    char cwd[4096];
    if (command == NULL) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "exec: command missing");
        return NULL;
    }
    if (agent_cmd_running(a) >= AGENT_MAX_RUNNING) {
        mcp_error_set(err, MCP_ERR_LIMIT, 0, "too many running commands (%d)", AGENT_MAX_RUNNING);
        return NULL;
    }
    if (agent_resolve(a, cwd_in ? cwd_in : a->workdir, cwd, sizeof cwd, err) < 0)
        return NULL;
    struct cmd *c = xcalloc(1, sizeof *c);
    random_id(c->id, sizeof c->id, "cmd-", 8);
    c->command = xstrdup(command);
    c->exit_code = c->term_signal = -1;
    c->out_fd = c->err_fd = c->in_fd = c->f_log = -1;
    if (parse_request(a, c, req, err) < 0) {
        cmd_free(a, c);
        return NULL;
    }
    char **envp = build_env(a, json_object_get(req, "env"), cwd, c->pty);
    int rc = spawn(a, c, req, cwd, envp, err);
    free_env(envp);
    if (rc < 0 && c->pid <= 0) { /* nothing was started: forget it */
        cmd_free(a, c);
        return NULL;
    }
    c->start_ms = now_mono_ms();
    json_int_t timeout = json_integer_value(json_object_get(req, "timeout_ms"));
    c->deadline_ms = timeout > 0 ? c->start_ms + (uint64_t)timeout : 0;
    if (json_is_true(json_object_get(req, "watch")))
        c->watch = conn;
    c->next = a->cmds;
    a->cmds = c;
    a->ncmds++;
    if (rc < 0) { /* the child exits 127; it is reaped and recorded like any command */
        c->watch = NULL;
        return NULL;
    }
    if (c->in_len == 0 && !c->stdin_open)
        close_fd(&c->in_fd);
    cmd_gc(a);
    return json_pack("{s:s, s:i}", "command_id", c->id, "pid", (int)c->pid);
}

static void emit_output(struct agent *a, struct cmd *c, const char *stream, const char *data,
                        size_t len)
{
    if (c->watch == NULL && a->watchers == NULL)
        return;
    char *b64 = xmalloc(base64_encoded_len(len) + 1);
    base64_encode(data, len, b64);
    if (c->watch)
        agent_send(c->watch, json_pack("{s:s, s:s, s:s, s:s}", "ev", "output", "cmd", c->id,
                                       "stream", stream, "data", b64));
    agent_watch_output(a, c, stream, b64);
    free(b64);
}

/* Appends to the command's log within its cap and the sandbox's total budget (evicting the
 * oldest finished commands first). Offsets in the log are those of the bytes actually kept. */
static void keep_log(struct agent *a, struct cmd *c, const char *data, size_t len, bool is_err)
{
    while (a->log_bytes + len > AGENT_TOTAL_LOG_CAP && evict_oldest(a)) {
    }
    while (agent_runs_would_grow(c, is_err) && a->runs_total >= AGENT_TOTAL_RUNS &&
           evict_oldest(a)) {
    }
    uint64_t room = AGENT_LOG_CAP - c->n_log;
    uint64_t budget = AGENT_TOTAL_LOG_CAP > a->log_bytes ? AGENT_TOTAL_LOG_CAP - a->log_bytes : 0;
    size_t n = len;
    if (n > room)
        n = (size_t)room;
    if (n > budget)
        n = (size_t)budget;
    if (n > 0 && !agent_runs_note(a, c, is_err))
        n = 0;
    if (n > 0 && !c->has_log)
        open_log(a, c);
    ssize_t w = n > 0 && c->f_log >= 0 ? write(c->f_log, data, n) : 0;
    if (w < 0)
        w = 0;
    c->n_log += (uint64_t)w;
    a->log_bytes += (uint64_t)w;
    if ((size_t)w < len)
        c->log_truncated = true;
}

/* Reads what a pipe has now; returns false at EOF or error. */
static bool drain(struct agent *a, struct cmd *c, int fd)
{
    char chunk[AGENT_READ_CHUNK];
    bool is_out = fd == c->out_fd;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n <= 0)
            return false;
        *(is_out ? &c->n_out : &c->n_err) += (uint64_t)n;
        keep_log(a, c, chunk, (size_t)n, !is_out);
        emit_output(a, c, is_out ? "stdout" : "stderr", chunk, (size_t)n);
    }
}

int agent_cmd_poll_fds(struct agent *a, struct pollfd *pfd, struct cmd **owner, int max)
{
    int n = 0;
    for (struct cmd *c = a->cmds; c; c = c->next) {
        if (c->state != CMD_RUNNING || n + 3 > max)
            continue;
        if (c->out_fd >= 0)
            owner[n] = c, pfd[n++] = (struct pollfd){.fd = c->out_fd, .events = POLLIN};
        if (c->err_fd >= 0)
            owner[n] = c, pfd[n++] = (struct pollfd){.fd = c->err_fd, .events = POLLIN};
        if (c->in_fd >= 0 && c->in_off < c->in_len) /* an open stdin with nothing to write waits */
            owner[n] = c, pfd[n++] = (struct pollfd){.fd = c->in_fd, .events = POLLOUT};
    }
    return n;
}

void agent_cmd_on_fd(struct agent *a, struct cmd *c, int fd, short revents)
{
    if (fd == c->in_fd) {
        agent_input_feed(c);
        return;
    }
    if (!drain(a, c, fd)) {
        if (fd == c->out_fd)
            close_fd(&c->out_fd);
        else
            close_fd(&c->err_fd);
    }
}

static void finish(struct agent *a, struct cmd *c, int status)
{
    if (c->out_fd >= 0)
        drain(a, c, c->out_fd);
    if (c->err_fd >= 0)
        drain(a, c, c->err_fd);
    close_fd(&c->out_fd), close_fd(&c->err_fd), close_fd(&c->in_fd);
    close_fd(&c->f_log);
    free(c->in_data); /* input nobody read: a finished command keeps only its log */
    c->in_data = NULL;
    c->in_len = c->in_off = c->in_cap = 0;
    agent_sigwatch_free(&c->sigwatch);
    c->state = CMD_DONE;
    c->end_ms = now_mono_ms();
    if (WIFEXITED(status))
        c->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        c->term_signal = WTERMSIG(status);
    if (c->watch) {
        json_t *ev = agent_cmd_status_json(c);
        json_object_set_new(ev, "ev", json_string("exit"));
        json_object_set_new(ev, "cmd", json_string(c->id));
        agent_send(c->watch, ev);
        c->watch = NULL;
    }
    agent_watch_finished(a, c);
}

/* PID 1 reaps every child, including orphans re-parented to it. */
void agent_cmd_reap(struct agent *a)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (struct cmd *c = a->cmds; c; c = c->next)
            if (c->pid == pid && c->state == CMD_RUNNING)
                finish(a, c, status);
    }
}

void agent_cmd_timeouts(struct agent *a)
{
    uint64_t now = now_mono_ms();
    for (struct cmd *c = a->cmds; c; c = c->next) {
        agent_sigwatch_poll(&c->sigwatch, now);
        if (c->state == CMD_RUNNING && c->deadline_ms && now >= c->deadline_ms && !c->timed_out) {
            c->timed_out = true;
            kill(-c->pid, SIGKILL);
            kill(c->pid, SIGKILL);
        }
    }
}

uint64_t agent_cmd_next_deadline(struct agent *a)
{
    uint64_t next = 0;
    for (struct cmd *c = a->cmds; c; c = c->next) {
        uint64_t w = agent_sigwatch_next(c->sigwatch);
        if (c->state == CMD_RUNNING && c->deadline_ms && !c->timed_out &&
            (next == 0 || c->deadline_ms < next))
            next = c->deadline_ms;
        if (w && (next == 0 || w < next))
            next = w;
    }
    return next;
}

void agent_cmd_forget_conn(struct agent *a, struct conn *conn)
{
    for (struct cmd *c = a->cmds; c; c = c->next)
        if (c->watch == conn)
            c->watch = NULL;
}

static int read_log(struct agent *a, const struct cmd *c, uint64_t off, uint64_t limit,
                    json_t *out)
{
    char name[64];
    snprintf(name, sizeof name, "%s.log", c->id);
    uint64_t total = c->n_log;
    if (off > total)
        off = total;
    if (limit == 0 || limit > AGENT_STATUS_OUTPUT_MAX)
        limit = AGENT_STATUS_OUTPUT_MAX;
    size_t want = (size_t)(total - off < limit ? total - off : limit);
    char *data = xmalloc(want + 1);
    ssize_t got = 0;
    int fd = want > 0 ? openat(a->logdir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd >= 0)
        got = pread(fd, data, want, (off_t)off);
    if (fd >= 0)
        close(fd);
    if (got < 0)
        got = 0;
    char *b64 = xmalloc(base64_encoded_len((size_t)got) + 1);
    base64_encode(data, (size_t)got, b64);
    json_object_set_new(out, "output", json_string(b64));
    json_object_set_new(out, "offset", json_integer((json_int_t)off));
    json_object_set_new(out, "next_offset", json_integer((json_int_t)(off + (uint64_t)got)));
    json_object_set_new(out, "eof", json_boolean(c->state == CMD_DONE &&
                                                 off + (uint64_t)got >= total));
    free(data);
    free(b64);
    return 0;
}

json_t *agent_cmd_status(struct agent *a, json_t *req, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(req, "cmd"));
    struct cmd *c = agent_cmd_find(a, id);
    if (c == NULL) {
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no command '%s' in this sandbox", id ? id : "");
        return NULL;
    }
    json_t *j = agent_cmd_status_json(c);
    read_log(a, c, (uint64_t)json_integer_value(json_object_get(req, "offset")),
             (uint64_t)json_integer_value(json_object_get(req, "limit")), j);
    return j;
}

json_t *agent_cmd_kill(struct agent *a, json_t *req, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(req, "cmd"));
    json_int_t sig = json_integer_value(json_object_get(req, "signal"));
    struct cmd *c = agent_cmd_find(a, id);
    if (c == NULL) {
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no command '%s' in this sandbox", id ? id : "");
        return NULL;
    }
    if (sig <= 0 || sig >= 65)
        sig = SIGKILL;
    if (c->state == CMD_RUNNING) {
        c->kill_requested = true;
        agent_sigwatch_send(&c->sigwatch, agent_cmd_signal_group(c, (int)sig), (int)sig);
    }
    return json_pack("{s:s, s:i, s:s}", "command_id", c->id, "signal", (int)sig, "status",
                     cmd_status_name(c));
}

json_t *agent_cmd_list(struct agent *a, json_t *req, struct mcp_error *err)
{
    json_t *list = json_array();
    size_t n = 0;
    for (struct cmd *c = a->cmds; c && n < AGENT_LIST_MAX; c = c->next, n++) {
        json_t *j = agent_cmd_status_json(c);
        /* cut before a character the limit would split: jansson refuses invalid UTF-8 */
        size_t cut = strnlen(c->command, AGENT_LIST_CMD_CHARS);
        json_object_set_new(j, "command",
                            json_stringn(c->command, utf8_complete_prefix(c->command, cut)));
        json_array_append_new(list, j);
    }
    return json_pack("{s:o, s:I}", "commands", list, "total", (json_int_t)a->ncmds);
}
