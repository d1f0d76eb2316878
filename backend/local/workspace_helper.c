/* The review and apply engine in a helper process that joins the sandbox's user namespace
 * (rootless servers). A sandbox's files in the upper layer belong to the user, but the sandbox
 * chooses their modes: a `chmod 000` file or directory would be unreadable to the user's own
 * server. Inside the sandbox's user namespace, which the user created and so holds every
 * capability of, the helper may read them (CAP_DAC_READ_SEARCH over ids mapped there, the user
 * included), while everything it creates on the host still belongs to the user (joining a
 * namespace changes no ids).
 *
 * The helper is a fresh exec of the mcpbox executable ("mcpbox __workspace-helper"): setns to a
 * user namespace needs a single-threaded caller, and between the server's fork and that exec
 * only async-signal-safe calls run (another thread may hold the allocator's lock). It reads one
 * request (JSON) on stdin, joins the namespace of the pidfd on fd 3, runs ws_review or ws_apply
 * and writes the result, or {"error": {code, message}}, on stdout. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/local/workspace_review.h"
#include "lib/base/buf.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define HELPER_NS_FD 3
#define HELPER_OUT_MAX (64u << 20)

/* ---- the request, both sides ---- */

static json_t *request_json(const char *action, const struct ws_mount *mounts, size_t n,
                            const struct ws_options *o, json_t *args)
{
    json_t *ms = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(ms, json_pack("{s:i, s:s, s:s, s:s, s:s?, s:I, s:I}", "source_fd",
                                            mounts[i].source_fd, "source", mounts[i].source,
                                            "target", mounts[i].target, "upper", mounts[i].upper,
                                            "journal", mounts[i].journal, "owner_uid",
                                            (json_int_t)mounts[i].owner_uid, "owner_gid",
                                            (json_int_t)mounts[i].owner_gid));
    return json_pack("{s:s, s:o, s:I, s:s, s:s?, s:s?, s:o, s:I, s:b}", "action", action, "mounts",
                     ms, "since_ns", (json_int_t)o->since_ns, "xattr_prefix", o->xattr_prefix,
                     "reviews_dir", o->reviews_dir, "review", o->review, "args",
                     args ? json_incref(args) : json_object(), "apply_max_bytes",
                     (json_int_t)o->apply_max_bytes, "group_write", o->group_write);
}

static json_t *run_request(json_t *req, struct mcp_error *err)
{
    json_t *ms = json_object_get(req, "mounts");
    size_t n = json_array_size(ms);
    struct ws_mount *mounts = xcalloc(n + 1, sizeof *mounts);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(ms, i);
        json_t *fd = json_object_get(m, "source_fd");
        mounts[i] = (struct ws_mount){
            /* inherited from the server, which verified it (workspace_source.c) */
            .source_fd = json_is_integer(fd) ? (int)json_integer_value(fd) : -1,
            .source = json_string_value(json_object_get(m, "source")),
            .target = json_string_value(json_object_get(m, "target")),
            .upper = json_string_value(json_object_get(m, "upper")),
            .journal = json_string_value(json_object_get(m, "journal")),
            .owner_uid = json_integer_value(json_object_get(m, "owner_uid")),
            .owner_gid = json_integer_value(json_object_get(m, "owner_gid")),
        };
        if (!mounts[i].source || !mounts[i].target || !mounts[i].upper) {
            free(mounts);
            mcp_error_set(err, MCP_ERR_INTERNAL, 0, "malformed workspace helper request");
            return NULL;
        }
    }
    struct ws_options o = {
        .since_ns = json_integer_value(json_object_get(req, "since_ns")),
        .xattr_prefix = json_string_value(json_object_get(req, "xattr_prefix")),
        .reviews_dir = json_string_value(json_object_get(req, "reviews_dir")),
        .review = json_string_value(json_object_get(req, "review")),
        .apply_max_bytes = (uint64_t)json_integer_value(json_object_get(req, "apply_max_bytes")),
        .group_write = json_is_true(json_object_get(req, "group_write")),
    };
    if (o.xattr_prefix == NULL)
        o.xattr_prefix = "user.overlay.";
    json_t *args = json_object_get(req, "args");
    json_t *paths = json_object_get(args, "paths");
    json_t *res;
    const char *action = json_string_value(json_object_get(req, "action"));
    if (action && strcmp(action, "apply") == 0)
        res = ws_apply(mounts, n, &o, paths, json_is_true(json_object_get(args, "overwrite")), err);
    else
        res = ws_review(mounts, n, &o, paths,
                        (uint64_t)json_integer_value(json_object_get(args, "offset")),
                        (uint64_t)json_integer_value(json_object_get(args, "max_bytes")), err);
    free(mounts);
    return res;
}

/* ---- the helper's side ---- */

static int reply(json_t *res, const struct mcp_error *err)
{
    json_t *out =
        res ? res : json_pack("{s:{s:i, s:s}}", "error", "code", err->code, "message", err->msg);
    char *text = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    int rc = text && write_full(STDOUT_FILENO, text, strlen(text)) == 0 ? 0 : 1;
    free(text);
    return rc;
}

int ws_helper_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    struct mcp_error err = {0};
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    json_t *req = json_loadf(stdin, 0, NULL);
    if (!json_is_object(req)) {
        json_decref(req);
        mcp_error_set(&err, MCP_ERR_INTERNAL, 0, "malformed workspace helper request");
        return reply(NULL, &err);
    }
    if (fcntl(HELPER_NS_FD, F_GETFD) >= 0 && setns(HELPER_NS_FD, CLONE_NEWUSER) < 0) {
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                      "cannot enter the sandbox's user namespace to read its files (%s); is it "
                      "still running?",
                      strerror(errno));
        json_decref(req);
        return reply(NULL, &err);
    }
    close(HELPER_NS_FD);
    json_t *res = run_request(req, &err);
    json_decref(req);
    return reply(res, &err);
}

/* ---- the server's side (a worker thread) ---- */

/* Between fork and exec: async-signal-safe calls only. The mounts' host directories stay open
 * across the exec (they are above HELPER_NS_FD: the server keeps 0 to 2 for itself). */
__attribute__((noreturn)) static void exec_helper(int in, int out, int ns_fd,
                                                  const struct ws_mount *mounts, size_t n)
{
    /* Only what is named here crosses the exec: not a descriptor another thread opened without
     * O_CLOEXEC (a library's data file), since the helper runs in the sandbox's namespaces. */
    syscall(SYS_close_range, HELPER_NS_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC);
    for (size_t i = 0; i < n; i++)
        if (mounts[i].source_fd > HELPER_NS_FD)
            fcntl(mounts[i].source_fd, F_SETFD, 0);
    int fds[3] = {in, out, ns_fd};
    for (int i = 0; i < 3; i++) /* first out of the way of 0..3, then into place */
        if (fds[i] <= HELPER_NS_FD)
            fds[i] = fcntl(fds[i], F_DUPFD, HELPER_NS_FD + 1);
    dup2(fds[0], STDIN_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[2], HELPER_NS_FD);
    char *const argv[] = {(char *)"mcpbox", (char *)WS_HELPER_ARGV1, NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
}

static json_t *parse_reply(struct buf *out, int status, struct mcp_error *err)
{
    json_t *res = out->len ? json_loadb(out->data, out->len, 0, NULL) : NULL;
    json_t *e = json_object_get(res, "error");
    if (json_is_object(res) && e == NULL)
        return res;
    const char *msg = json_string_value(json_object_get(e, "message"));
    if (json_is_object(e))
        mcp_error_set(err, (int)json_integer_value(json_object_get(e, "code")), 0, "%s",
                      msg ? msg : "the helper failed");
    else
        mcp_error_set(err, MCP_ERR_BACKEND, 0,
                      "the review helper died (status %d); call again, and if it persists "
                      "diagnose_sandbox",
                      status);
    json_decref(res);
    return NULL;
}

static json_t *run_helper(int ns_fd, const char *action, const struct ws_mount *mounts, size_t n,
                          const struct ws_options *o, json_t *args, struct mcp_error *err)
{
    json_t *req = request_json(action, mounts, n, o, args);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    int in[2], out[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
        mcp_error_set(err, MCP_ERR_IO, errno, "pipe");
        if (out[0] < 0)
            close(in[0]), close(in[1]);
        free(text);
        return NULL;
    }
    pid_t pid = fork();
    if (pid == 0)
        exec_helper(in[0], out[1], ns_fd, mounts, n);
    close(in[0]), close(out[1]);
    /* The helper reads its whole request before it writes anything: no deadlock. */
    if (pid > 0)
        write_full(in[1], text, strlen(text));
    close(in[1]);
    free(text);
    struct buf b;
    buf_init(&b, HELPER_OUT_MAX);
    char chunk[65536];
    ssize_t r;
    while (pid > 0 && ((r = read(out[0], chunk, sizeof chunk)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0 && buf_append(&b, chunk, (size_t)r) < 0)
            break;
    close(out[0]);
    int status = 0;
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    json_t *res = NULL;
    if (pid < 0)
        mcp_error_set(err, MCP_ERR_IO, errno, "fork");
    else
        res = parse_reply(&b, status, err);
    buf_release(&b);
    return res;
}

/* The helper's copies of the mounts' descriptors, above the numbers exec_helper moves things
 * to (-1 where the original was). */
static struct ws_mount *helper_mounts(const struct ws_mount *mounts, size_t n)
{
    struct ws_mount *own = xcalloc(n + 1, sizeof *own);
    for (size_t i = 0; i < n; i++) {
        own[i] = mounts[i];
        own[i].source_fd = mounts[i].source_fd < 0
                               ? -1
                               : fcntl(mounts[i].source_fd, F_DUPFD_CLOEXEC, HELPER_NS_FD + 1);
    }
    return own;
}

static void helper_mounts_free(struct ws_mount *own, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (own[i].source_fd >= 0)
            close(own[i].source_fd);
    free(own);
}

json_t *ws_run_in_userns(int ns_fd, const char *action, const struct ws_mount *mounts, size_t n,
                         const struct ws_options *o, json_t *args, struct mcp_error *err)
{
    struct ws_mount *own = helper_mounts(mounts, n);
    json_t *res = run_helper(ns_fd, action, own, n, o, args, err);
    helper_mounts_free(own, n);
    return res;
}
