/* `mcpbox sandbox exec` (output streamed as it arrives, exit status = the command's) and
 * `mcpbox sandbox cp` (files in and out through the backend's file API, in chunks). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_sandbox.h"
#include "cli/cli_sandbox_tty.h"
#include "cli/cli_util.h"
#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

/* Bytes of stdin an exec may forward (it is sent in one request). */
#define CLI_EXEC_STDIN_MAX (16u * 1024 * 1024)
/* Bytes moved per file request (below the agent's per-request cap). */
#define CLI_CP_CHUNK (4u * 1024 * 1024)
#define CLI_EXIT_TIMED_OUT 124 /* as timeout(1) */

/* ---- exec ----------------------------------------------------------------------------------- */

struct cli_exec {
    struct cli_sandbox *c;
    char command_id[128];
    int early_signal; /* caught before the command id was known: forwarded once it is */
    bool verbose;
    uv_signal_t sigint, sigterm;
    const char *sandbox_id;
};

static void write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* stdout closed: keep running the command, drop its output */
        data += n;
        len -= (size_t)n;
    }
}

static void exec_on_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    write_all(stream == EXEC_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
}

static void exec_kill_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    (void)arg;
    if (err != NULL)
        fprintf(stderr, "mcpbox: could not signal the command: %s\n", err->msg);
}

static void exec_forward(struct cli_exec *x, int signum)
{
    struct mcp_error err = {0};
    if (x->c->be->ops->command_kill(x->c->be, x->sandbox_id, x->command_id, signum, exec_kill_cb,
                                    x, &err) < 0)
        fprintf(stderr, "mcpbox: could not signal the command: %s\n", err.msg);
}

/* Ctrl-C / SIGTERM: pass the signal on to the command; its end ends us. One that comes before
 * the agent has named the command waits for the name (see exec_on_started). */
static void exec_on_signal(uv_signal_t *h, int signum)
{
    struct cli_exec *x = h->data;
    if (x->command_id[0] == '\0')
        x->early_signal = signum;
    else
        exec_forward(x, signum);
}

static void exec_on_started(void *arg, const char *command_id)
{
    struct cli_exec *x = arg;
    snprintf(x->command_id, sizeof(x->command_id), "%s", command_id);
    if (x->verbose)
        fprintf(stderr, "mcpbox: command %s started\n", command_id);
    if (x->early_signal != 0)
        exec_forward(x, x->early_signal);
}

/* The exit status for a finished command, as a shell would give it. */
static int exec_exit_code(const json_t *st)
{
    const char *status = json_string_value(json_object_get(st, "status"));
    json_int_t code = json_integer_value(json_object_get(st, "exit_code"));
    json_int_t sig = json_integer_value(json_object_get(st, "signal"));
    if (status == NULL || strcmp(status, "lost") == 0) {
        fprintf(stderr, "mcpbox: the command was lost (its sandbox stopped?)\n");
        return CLI_EXIT_EXEC_FAILED;
    }
    if (strcmp(status, "timed_out") == 0) {
        fprintf(stderr, "mcpbox: the command timed out and was killed\n");
        return CLI_EXIT_TIMED_OUT;
    }
    if (strcmp(status, "oom_killed") == 0) {
        fprintf(stderr, "mcpbox: the command was killed: out of memory (the sandbox's memory "
                        "limit); see `mcpbox sandbox logs --events`\n");
        return CLI_EXIT_SIGNAL_BASE + SIGKILL;
    }
    if (json_is_integer(json_object_get(st, "exit_code")) && strcmp(status, "exited") == 0)
        return (int)(code & 0xff);
    return CLI_EXIT_SIGNAL_BASE + (int)(sig > 0 && sig < 64 ? sig : SIGKILL);
}

static void exec_usage(FILE *out)
{
    fputs("Usage: mcpbox sandbox exec [options] ID [--] COMMAND [ARG...]\n\n"
          "Runs COMMAND with /bin/sh -c in the sandbox, streaming its stdout and stderr. A lone\n"
          "COMMAND is a shell command line ('ls | wc -l'); with ARGs, each word is passed as is\n"
          "(quoted for the shell). Exits with the command's exit status (128+N if killed by\n"
          "signal N, 124 on timeout, 137 when OOM-killed, 125 if it could not run). Ctrl-C\n"
          "(SIGINT) and SIGTERM are passed on to the command.\n\n"
          "  -w, --cwd DIR         working directory (default: the workspace)\n"
          "  -e, --env KEY=VALUE   extra environment (repeatable)\n"
          "  -t, --timeout SECONDS kill the command after this long\n"
          "  -i, --stdin           forward this process's stdin (up to 16 MiB)\n"
          "  -it, --tty            an interactive terminal, as docker exec -it: keys go to the\n"
          "                        command as typed (Ctrl-C too), window size follows\n"
          "  -v, --verbose         report the command id and final status on stderr\n",
          out);
}

static int exec_read_stdin(struct buf *b)
{
    char chunk[65536];
    for (;;) {
        ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        if (buf_append(b, chunk, (size_t)n) < 0)
            return -1;
    }
}

struct exec_opts {
    struct exec_request req;
    json_t *env;
    bool read_stdin, verbose, tty;
};

static int exec_parse(struct exec_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"cwd", required_argument, NULL, 'w'},     {"env", required_argument, NULL, 'e'},
        {"timeout", required_argument, NULL, 't'}, {"stdin", no_argument, NULL, 'i'},
        {"verbose", no_argument, NULL, 'v'},       {"help", no_argument, NULL, 'h'},
        {"tty", no_argument, NULL, 'T'},           {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "+w:e:t:ivh", longopts, NULL)) != -1) {
        if (opt == 'w')
            o->req.cwd = optarg;
        else if (opt == 'e' && cli_parse_kv(o->env, optarg) == 0)
            continue;
        else if (opt == 't' && cli_parse_seconds(optarg, &o->req.timeout_ms) == 0)
            o->req.timeout_ms = o->req.timeout_ms < 0 ? 0 : o->req.timeout_ms;
        else if (opt == 'i')
            o->read_stdin = true;
        else if (opt == 'T')
            o->tty = true;
        else if (opt == 'v')
            o->verbose = true;
        else {
            exec_usage(opt == 'h' ? stdout : stderr);
            return opt == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
    }
    if (argc - optind < 2) {
        exec_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* A word the shell reads back as itself: as is when it has nothing the shell would interpret,
 * else in single quotes (a ' inside written as '\''). */
static void exec_append_word(struct buf *b, const char *word)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "_@%+:,./-"; /* no =: a first word a=b would be an assignment */
    if (word[0] != '\0' && word[strspn(word, plain)] == '\0') {
        buf_append_str(b, word);
        return;
    }
    buf_append_str(b, "'");
    for (const char *p = word; *p; p++)
        if (*p == '\'')
            buf_append_str(b, "'\\''");
        else
            buf_append(b, p, 1);
    buf_append_str(b, "'");
}

/* The command for /bin/sh -c. One ARG is a shell command line and runs as given ("ls | wc -l",
 * as with ssh); several are words, each quoted, so `sh -c 'echo a b'` keeps its three words
 * (joined as they were, the shell would run `sh -c echo a b` and print an empty line). */
static char *exec_join(int argc, char **argv)
{
    struct buf b;
    buf_init(&b, SIZE_MAX);
    if (argc == 1)
        buf_append_str(&b, argv[0]);
    for (int i = 0; argc > 1 && i < argc; i++) {
        if (i > 0)
            buf_append_str(&b, " ");
        exec_append_word(&b, argv[i]);
    }
    return buf_steal(&b, NULL);
}

static void exec_signals(struct cli_exec *x, bool on)
{
    uv_signal_t *hs[] = {&x->sigint, &x->sigterm};
    int sigs[] = {SIGINT, SIGTERM};
    for (size_t i = 0; i < ARRAY_SIZE(hs); i++) {
        if (on) {
            uv_signal_init(&x->c->loop, hs[i]);
            hs[i]->data = x;
            uv_signal_start(hs[i], exec_on_signal, sigs[i]);
        } else {
            uv_close((uv_handle_t *)hs[i], NULL);
        }
    }
}

static void exec_on_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct cli_exec *x = arg;
    if (x->verbose && result != NULL) {
        char *text = json_dumps(result, JSON_COMPACT);
        fprintf(stderr, "mcpbox: %s\n", text ? text : "");
        free(text);
    }
    cli_sandbox_op_cb(x->c, result, err);
}

static int exec_run(struct cli_sandbox *c, struct exec_opts *o, const char *id)
{
    if (o->tty) { /* cli_sandbox_tty.c */
        int rc = cli_sandbox_exec_tty(c, &o->req, id);
        return rc >= 0 ? rc : exec_exit_code(c->result);
    }
    struct cli_exec x = {.c = c, .verbose = o->verbose, .sandbox_id = id};
    struct exec_observer obs = {.on_started = exec_on_started,
                                .on_output = exec_on_output,
                                .on_done = exec_on_done,
                                .arg = &x};
    struct exec_handle *h = NULL;
    cli_sandbox_op_reset(c);
    /* Armed before the request goes out: from then on a Ctrl-C must reach the command, not
     * end this process and leave the command running. */
    exec_signals(&x, true);
    int r = c->be->ops->exec(c->be, id, &o->req, &obs, &h, &c->err) < 0 ? -1 : cli_sandbox_wait(c);
    exec_signals(&x, false);
    uv_run(&c->loop, UV_RUN_NOWAIT); /* let the signal handles close while x is alive */
    if (r < 0) {
        cli_sandbox_fail("exec", &c->err);
        return CLI_EXIT_EXEC_FAILED;
    }
    return exec_exit_code(c->result);
}

/* docker's -it (and -ti) before the id: an interactive terminal. -t alone keeps its meaning
 * (--timeout), so the pair is read as one word. */
static void exec_tty_words(int argc, char **argv)
{
    static const char *const with_value[] = {"-w", "-e", "-t", "--cwd", "--env", "--timeout"};
    for (int i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-it") == 0 || strcmp(argv[i], "-ti") == 0)
            argv[i] = (char *)"--tty";
        for (size_t k = 0; k < ARRAY_SIZE(with_value); k++)
            i += strcmp(argv[i], with_value[k]) == 0; /* skip the option's value */
    }
}

int cli_sandbox_exec(struct cli_sandbox *c, int argc, char **argv)
{
    struct exec_opts o = {.env = json_object()};
    exec_tty_words(argc, argv);
    struct buf in;
    buf_init(&in, CLI_EXEC_STDIN_MAX);
    int rc = exec_parse(&o, argc, argv);
    if (rc < 0 && o.read_stdin && !o.tty && exec_read_stdin(&in) < 0) {
        fprintf(stderr, "mcpbox sandbox exec: stdin could not be read or exceeds %u bytes\n",
                CLI_EXEC_STDIN_MAX);
        rc = CLI_EXIT_USAGE;
    }
    int cmd_at = optind + 1; /* after the id; getopt stopped at the id, so skip a "--" */
    if (cmd_at < argc && strcmp(argv[cmd_at], "--") == 0)
        cmd_at++;
    if (rc < 0 && cmd_at >= argc) {
        exec_usage(stderr);
        rc = CLI_EXIT_USAGE;
    }
    if (rc < 0) {
        cleanup_free char *command = exec_join(argc - cmd_at, argv + cmd_at);
        o.req.command = command;
        o.req.env = json_object_size(o.env) ? o.env : NULL;
        o.req.stdin_data = o.read_stdin ? buf_cstr(&in) : NULL;
        o.req.stdin_len = in.len;
        rc = exec_run(c, &o, argv[optind]);
    }
    buf_release(&in);
    json_decref(o.env);
    return rc;
}

/* ---- cp ------------------------------------------------------------------------------------- */

struct cli_cp_read {
    struct cli_sandbox *c;
    int fd;           /* destination */
    uint64_t next;    /* offset of the next chunk */
    bool more;
    uint32_t mode;
    int write_errno;
};

static void cp_read_cb(void *arg, const struct file_read_result *res,
                       const struct mcp_error *err)
{
    struct cli_cp_read *r = arg;
    r->c->done = true;
    if (err != NULL) {
        mcp_error_copy(&r->c->err, err);
        return;
    }
    r->c->result = json_true(); /* success marker for cli_sandbox_wait */
    r->mode = res->mode;
    ssize_t n = res->len ? write(r->fd, res->data, res->len) : 0;
    if (n < 0 || (size_t)n != res->len)
        r->write_errno = n < 0 ? errno : EIO;
    r->next = res->offset + res->len;
    r->more = res->truncated && res->len > 0;
}

/* "ID:PATH" -> id (malloc'd) and path; NULL if arg has no sandbox prefix. */
static char *cp_split(const char *arg, const char **path)
{
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    if (colon == NULL || colon == arg || (slash != NULL && slash < colon))
        return NULL;
    *path = colon + 1;
    return xstrndup(arg, (size_t)(colon - arg));
}

static int cp_out(struct cli_sandbox *c, const char *id, const char *path, const char *dest)
{
    bool to_stdout = strcmp(dest, "-") == 0;
    int fd = to_stdout ? STDOUT_FILENO
                       : open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        fprintf(stderr, "mcpbox sandbox cp: %s: %s\n", dest, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    struct cli_cp_read r = {.c = c, .fd = fd, .more = true};
    int rc = CLI_EXIT_OK;
    while (r.more && rc == CLI_EXIT_OK) {
        cli_sandbox_op_reset(c);
        r.more = false;
        if (c->be->ops->file_read(c->be, id, path, r.next, CLI_CP_CHUNK, cp_read_cb, &r,
                                  &c->err) < 0 ||
            cli_sandbox_wait(c) < 0)
            rc = cli_sandbox_fail("cp", &c->err);
        else if (r.write_errno != 0) {
            fprintf(stderr, "mcpbox sandbox cp: writing %s: %s\n", dest, strerror(r.write_errno));
            rc = CLI_EXIT_FAIL;
        }
    }
    if (!to_stdout) {
        /* The content is all there by now: like a failed write, a failed chmod leaves the file
         * and says so (a file we may write but do not own, without CAP_FOWNER: EPERM). Only a
         * regular file takes the sandbox file's mode: a device or FIFO named as the
         * destination (/dev/null) keeps its own. */
        struct stat st;
        if (rc == CLI_EXIT_OK && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            fchmod(fd, r.mode & 0777) < 0) {
            fprintf(stderr, "mcpbox sandbox cp: %s: copied, but its mode could not be set to "
                            "%03o: %s\n", dest, r.mode & 0777, strerror(errno));
            rc = CLI_EXIT_FAIL;
        }
        /* Some filesystems (NFS, FUSE) report a failed write only here. */
        if (close(fd) < 0 && rc == CLI_EXIT_OK) {
            fprintf(stderr, "mcpbox sandbox cp: writing %s: %s\n", dest, strerror(errno));
            rc = CLI_EXIT_FAIL;
        }
    }
    return rc;
}

static int cp_in(struct cli_sandbox *c, const char *src, const char *id, const char *path)
{
    cleanup_close int fd = open(src, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "mcpbox sandbox cp: %s: %s\n", src,
                fd < 0 ? strerror(errno) : "not a regular file");
        return CLI_EXIT_FAIL;
    }
    cleanup_free char *chunk = xmalloc(CLI_CP_CHUNK);
    bool first = true;
    for (;;) {
        ssize_t n = read(fd, chunk, CLI_CP_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "mcpbox sandbox cp: reading %s: %s\n", src, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        if (n == 0 && !first)
            break;
        cli_sandbox_op_reset(c);
        if (c->be->ops->file_write(c->be, id, path, chunk, (size_t)n, sb.st_mode & 0777, !first,
                                   cli_sandbox_op_cb, c, &c->err) < 0 ||
            cli_sandbox_wait(c) < 0)
            return cli_sandbox_fail("cp", &c->err);
        first = false;
        if (n == 0)
            break;
    }
    if (c->json)
        cli_print_json(c->result);
    return CLI_EXIT_OK;
}

/* ---- cp of directories, and into directories ---------------------------------------------- */

/* The type ("file", "directory", ...) of a sandbox path, or NULL when it does not exist. */
static const char *cp_remote_type(struct cli_sandbox *c, const char *id, const char *path,
                                  char *type, size_t size)
{
    json_t *args = json_pack("{s:s}", "path", path);
    cli_sandbox_op_reset(c);
    int r = c->be->ops->file_op(c->be, id, "stat", args, cli_sandbox_op_cb, c, &c->err);
    json_decref(args);
    if (r < 0 || cli_sandbox_wait(c) < 0)
        return NULL;
    const char *t = json_string_value(json_object_get(c->result, "type"));
    snprintf(type, size, "%s", t != NULL ? t : "");
    return type;
}

static const char *cp_basename(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *p = path + n;
    while (p > path && p[-1] != '/')
        p--;
    return p;
}

/* dir/name, without a doubled slash; malloc'd. name may end in slashes (dropped). */
static char *cp_join(const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    while (d > 1 && dir[d - 1] == '/')
        d--;
    while (n > 0 && name[n - 1] == '/')
        n--;
    return xasprintf("%.*s/%.*s", (int)d, dir, (int)n, name);
}

static int cp_in_tree(struct cli_sandbox *c, const char *src, const char *id, const char *path);

/* A host directory into the sandbox: path is created, then each entry copied (symlinks and
 * special files are skipped with a note). */
static int cp_in_dir(struct cli_sandbox *c, const char *src, const char *id, const char *path)
{
    json_t *args = json_pack("{s:s, s:b}", "path", path, "parents", 1);
    cli_sandbox_op_reset(c);
    int r = c->be->ops->file_op(c->be, id, "mkdir", args, cli_sandbox_op_cb, c, &c->err);
    json_decref(args);
    if (r < 0 || cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("cp", &c->err);
    DIR *d = opendir(src);
    if (d == NULL) {
        fprintf(stderr, "mcpbox sandbox cp: %s: %s\n", src, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    int rc = CLI_EXIT_OK;
    struct dirent *e;
    while (rc == CLI_EXIT_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        cleanup_free char *from = cp_join(src, e->d_name);
        cleanup_free char *to = cp_join(path, e->d_name);
        rc = cp_in_tree(c, from, id, to);
    }
    closedir(d);
    return rc;
}

static int cp_in_tree(struct cli_sandbox *c, const char *src, const char *id, const char *path)
{
    struct stat st;
    if (lstat(src, &st) < 0) {
        fprintf(stderr, "mcpbox sandbox cp: %s: %s\n", src, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (S_ISDIR(st.st_mode))
        return cp_in_dir(c, src, id, path);
    if (S_ISREG(st.st_mode))
        return cp_in(c, src, id, path);
    fprintf(stderr, "mcpbox sandbox cp: skipping %s (not a file or directory)\n", src);
    return CLI_EXIT_OK;
}

static int cp_out_tree(struct cli_sandbox *c, const char *id, const char *path, const char *dest);

/* A sandbox directory out: dest is created, then each entry copied. */
static int cp_out_dir(struct cli_sandbox *c, const char *id, const char *path, const char *dest)
{
    if (mkdir(dest, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "mcpbox sandbox cp: %s: %s\n", dest, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    json_t *args = json_pack("{s:s, s:i}", "path", path, "depth", 1);
    cli_sandbox_op_reset(c);
    int r = c->be->ops->file_op(c->be, id, "list", args, cli_sandbox_op_cb, c, &c->err);
    json_decref(args);
    if (r < 0 || cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("cp", &c->err);
    json_t *entries = json_incref(json_object_get(c->result, "entries"));
    int rc = CLI_EXIT_OK;
    size_t i;
    json_t *ent;
    json_array_foreach(entries, i, ent) {
        const char *p = json_string_value(json_object_get(ent, "path"));
        const char *type = json_string_value(json_object_get(ent, "type"));
        if (p == NULL || type == NULL || rc != CLI_EXIT_OK)
            continue;
        cleanup_free char *to = cp_join(dest, cp_basename(p));
        if (strcmp(type, "directory") == 0)
            rc = cp_out_dir(c, id, p, to);
        else if (strcmp(type, "file") == 0)
            rc = cp_out(c, id, p, to);
        else
            fprintf(stderr, "mcpbox sandbox cp: skipping %s (a %s)\n", p, type);
    }
    json_decref(entries);
    return rc;
}

static int cp_out_tree(struct cli_sandbox *c, const char *id, const char *path, const char *dest)
{
    char type[32];
    if (cp_remote_type(c, id, path, type, sizeof type) == NULL)
        return cli_sandbox_fail("cp", &c->err);
    struct stat st;
    bool into = strcmp(dest, "-") != 0 && stat(dest, &st) == 0 && S_ISDIR(st.st_mode);
    cleanup_free char *target = into ? cp_join(dest, cp_basename(path)) : xstrdup(dest);
    if (strcmp(type, "directory") == 0) {
        if (strcmp(dest, "-") == 0) {
            fprintf(stderr, "mcpbox sandbox cp: %s is a directory; copy it to a host path\n", path);
            return CLI_EXIT_USAGE;
        }
        return cp_out_dir(c, id, path, target);
    }
    return cp_out(c, id, path, target);
}

/* Into the sandbox: PATH ending in / or naming a directory there receives the source under its
 * own name, as cp(1) does. */
static int cp_in_top(struct cli_sandbox *c, const char *src, const char *id, const char *path)
{
    char type[32];
    size_t n = strlen(path);
    bool into = (n > 0 && path[n - 1] == '/') ||
                (cp_remote_type(c, id, path, type, sizeof type) != NULL &&
                 strcmp(type, "directory") == 0);
    cleanup_free char *target = into ? cp_join(path, cp_basename(src)) : xstrdup(path);
    return cp_in_tree(c, src, id, target);
}

int cli_sandbox_cp(struct cli_sandbox *c, int argc, char **argv)
{
    const char *usage = "Usage: mcpbox sandbox cp FILE|DIR ID:PATH   (copy a host file or directory in)\n"
                        "       mcpbox sandbox cp ID:PATH FILE|DIR|-  (copy a sandbox file or directory out)\n"
                        "  A destination ending in / or naming a directory receives the source\n"
                        "  under its own name, as cp(1) does; directories are copied whole.\n";
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (argc != 3) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *src_path = NULL, *dst_path = NULL;
    cleanup_free char *src_id = cp_split(argv[1], &src_path);
    cleanup_free char *dst_id = cp_split(argv[2], &dst_path);
    if ((src_id == NULL) == (dst_id == NULL)) {
        fprintf(stderr, "mcpbox sandbox cp: exactly one side must be ID:PATH\n%s", usage);
        return CLI_EXIT_USAGE;
    }
    if (src_id != NULL)
        return cp_out_tree(c, src_id, src_path, argv[2]);
    return cp_in_top(c, argv[1], dst_id, dst_path);
}
