/* The local backend through its vtable on a real libuv loop: create, exec (streaming, exit codes,
 * timeout, background + command_get by offset), file operations (symlink to /etc/shadow, `..`),
 * pause/resume, TTL expiry enforced by the agent, and reconnect from a second backend instance.
 * Needs root and user namespaces; skips (77) elsewhere. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <linux/magic.h>

#include "backend/local/local.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_sandbox.h"
#include "lib/base/buf.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "test.h"
#include "lib/base/rmtree.h"

#define WAIT_MS 20000

static uv_loop_t *loop;
static struct store *st;
static struct backend *be;
static char state_dir[256];

/* ---- helpers --------------------------------------------------------------------------------- */

struct result {
    bool done;
    json_t *json;
    struct mcp_error err;
    bool failed;
};

static void on_result(void *arg, json_t *res, const struct mcp_error *err)
{
    struct result *r = arg;
    r->done = true;
    if (err) {
        r->failed = true;
        r->err = *err;
    } else {
        r->json = json_incref(res);
    }
}

static void on_timeout(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

static bool run_until(bool *flag, uint64_t ms)
{
    bool expired = false;
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &expired;
    uv_timer_start(&t, on_timeout, ms, 0);
    while (!*flag && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return *flag;
}

static void sleep_loop(uint64_t ms)
{
    bool never = false;
    run_until(&never, ms);
}

#define CALL(r, expr)                                                                              \
    do {                                                                                           \
        struct mcp_error _e;                                                                       \
        memset(&(r), 0, sizeof(r));                                                                \
        if ((expr) < 0)                                                                            \
            TEST_FAIL("%s failed at once: %s", #expr, _e.msg);                                     \
        if (!run_until(&(r).done, WAIT_MS))                                                        \
            TEST_FAIL("%s: no callback", #expr);                                                   \
    } while (0)

static char *create_sandbox_net(int64_t ttl, bool network)
{
    struct result r;
    struct sandbox_spec spec = {.owner = "test", .timeout_seconds = ttl, .network = network,
                                .memory_bytes = 256u << 20, .disk_bytes = 64u << 20};
    CALL(r, be->ops->create(be, &spec, on_result, &r, &_e));
    if (r.failed)
        TEST_FAIL("create: %s", r.err.msg);
    const char *id = json_string_value(json_object_get(r.json, "sandbox_id"));
    ASSERT(id && strncmp(id, "sbx-", 4) == 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "state")), "running");
    char *copy = xstrdup(id);
    json_decref(r.json);
    return copy;
}

static char *create_sandbox(int64_t ttl)
{
    return create_sandbox_net(ttl, false);
}

/* destroy answers once the record is gone for callers (state "destroyed"); the release
 * (init's exit, cgroups, directories, slot) follows on the loop and ends by deleting the
 * record: wait for that, so that what a test checks next is released. */
static void wait_released(const char *id)
{
    for (int i = 0; i < WAIT_MS / 10; i++) {
        struct store_sandbox rec = {0};
        struct mcp_error e;
        if (store_sandbox_get(st, id, &rec, &e) < 0)
            return;
        ASSERT_STR_EQ(rec.state, "destroyed");
        store_sandbox_release(&rec);
        sleep_loop(10);
    }
    TEST_FAIL("the release of %s did not finish", id);
}

static void destroy_sandbox(const char *id)
{
    struct result r;
    CALL(r, be->ops->destroy(be, id, on_result, &r, &_e));
    if (r.failed)
        TEST_FAIL("destroy: %s", r.err.msg);
    ASSERT(json_is_true(json_object_get(r.json, "destroyed")));
    json_decref(r.json);
    struct mcp_error e;
    ASSERT(be->ops->get(be, id, on_result, &r, &e) < 0); /* gone for callers at once */
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
    wait_released(id);
}

struct run {
    struct result r;
    char *cmd_id;
    struct buf out, err;
    bool started;
};

static void run_started(void *arg, const char *id)
{
    struct run *x = arg;
    x->started = true;
    x->cmd_id = xstrdup(id);
}

static void run_output(void *arg, enum exec_stream s, const char *data, size_t len)
{
    struct run *x = arg;
    buf_append(s == EXEC_STDERR ? &x->err : &x->out, data, len);
}

static void run_done(void *arg, json_t *res, const struct mcp_error *err)
{
    struct run *x = arg;
    on_result(&x->r, res, err);
}

/* Runs command to completion; returns the final status object (caller frees x). */
static void run_cmd(const char *id, const char *command, int64_t timeout_ms, struct run *x)
{
    memset(x, 0, sizeof *x);
    buf_init(&x->out, 1 << 20);
    buf_init(&x->err, 1 << 20);
    struct exec_request req = {.command = command, .timeout_ms = timeout_ms};
    struct exec_observer obs = {run_started, run_output, run_done, x};
    struct mcp_error e;
    if (be->ops->exec(be, id, &req, &obs, NULL, &e) < 0)
        TEST_FAIL("exec: %s", e.msg);
    if (!run_until(&x->r.done, WAIT_MS))
        TEST_FAIL("exec: no on_done");
    if (x->r.failed)
        TEST_FAIL("exec failed: %s", x->r.err.msg);
}

static void run_free(struct run *x)
{
    json_decref(x->r.json);
    free(x->cmd_id);
    buf_release(&x->out);
    buf_release(&x->err);
}

/* ---- tests ------------------------------------------------------------------------------------ */

TEST(create_exec_destroy)
{
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "echo hello; echo oops >&2; exit 3", 0, &x);
    ASSERT(x.started);
    ASSERT_STR_EQ(json_string_value(json_object_get(x.r.json, "status")), "exited");
    ASSERT_EQ(json_integer_value(json_object_get(x.r.json, "exit_code")), 3);
    ASSERT_STR_EQ(buf_cstr(&x.out), "hello\n");
    ASSERT_STR_EQ(buf_cstr(&x.err), "oops\n");
    run_free(&x);
    run_cmd(id, "hostname; id -u; cat /etc/hostname; ls /sys 2>&1 | head -1", 0, &x);
    ASSERT_CONTAINS(buf_cstr(&x.out), "sandbox\n0\nsandbox\n");
    ASSERT_CONTAINS(buf_cstr(&x.out), "No such file");
    run_free(&x);
    char dir[512], run[512], sock[600];
    snprintf(dir, sizeof dir, "%s/sandboxes/%s", state_dir, id);
    ASSERT_EQ(access(dir, F_OK), 0);
    /* the runtime files: where inspect says, on a tmpfs where the host has one */
    struct result r0;
    CALL(r0, be->ops->diagnose(be, id, "inspect", on_result, &r0, &_e));
    ASSERT(!r0.failed);
    json_t *insp = json_object_get(r0.json, "inspect");
    const char *runtime_dir = json_string_value(json_object_get(insp, "runtime_dir"));
    snprintf(run, sizeof run, "%s", runtime_dir ? runtime_dir : "");
    ASSERT_STR_EQ(json_string_value(json_object_get(insp, "logs_dir")), dir);
    json_decref(r0.json);
    snprintf(sock, sizeof sock, "%s/agent.sock", run);
    ASSERT_EQ(access(sock, F_OK), 0);
    struct statfs fs;
    bool tmpfs_host = (statfs("/run", &fs) == 0 && fs.f_type == TMPFS_MAGIC) ||
                      (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC);
    ASSERT_EQ(statfs(run, &fs), 0);
    ASSERT_EQ(fs.f_type == TMPFS_MAGIC, tmpfs_host);
    destroy_sandbox(id);
    ASSERT(access(dir, F_OK) < 0);
    ASSERT(access(run, F_OK) < 0);
    struct result r;
    struct mcp_error e;
    ASSERT(be->ops->get(be, id, on_result, &r, &e) < 0);
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
    free(id);
}

TEST(uid_map_not_host_root)
{
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "cat /proc/self/uid_map; grep CapEff /proc/self/status; "
                "grep NoNewPrivs /proc/self/status; grep Seccomp: /proc/self/status", 0, &x);
    unsigned inside = 1, outside = 0, count = 0;
    ASSERT_EQ(sscanf(buf_cstr(&x.out), "%u %u %u", &inside, &outside, &count), 3);
    ASSERT_EQ(inside, 0);
    ASSERT(outside >= 100000);
    ASSERT_EQ(count, 65536);
    ASSERT_CONTAINS(buf_cstr(&x.out), "CapEff:\t0000000000000000");
    ASSERT_CONTAINS(buf_cstr(&x.out), "NoNewPrivs:\t1");
    ASSERT_CONTAINS(buf_cstr(&x.out), "Seccomp:\t2");
    run_free(&x);
    /* The agent (pid 1) itself runs under exactly one filter, loaded by the child before the
     * exec, with no_new_privs and an empty bounding set. */
    run_cmd(id, "grep -E '^(Seccomp|Seccomp_filters|NoNewPrivs|CapBnd):' /proc/1/status", 0, &x);
    ASSERT_CONTAINS(buf_cstr(&x.out), "Seccomp:\t2");
    ASSERT_CONTAINS(buf_cstr(&x.out), "Seccomp_filters:\t1");
    ASSERT_CONTAINS(buf_cstr(&x.out), "NoNewPrivs:\t1");
    ASSERT_CONTAINS(buf_cstr(&x.out), "CapBnd:\t0000000000000000");
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

TEST(exec_timeout_and_background)
{
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "echo before; sleep 30", 300, &x);
    ASSERT_STR_EQ(json_string_value(json_object_get(x.r.json, "status")), "timed_out");
    ASSERT_STR_EQ(buf_cstr(&x.out), "before\n");
    run_free(&x);

    /* background: detach once started, then read the log by offset */
    memset(&x, 0, sizeof x);
    buf_init(&x.out, 1 << 20);
    buf_init(&x.err, 1 << 20);
    struct exec_request req = {.command = "for i in 1 2 3; do echo line$i; sleep 0.1; done"};
    struct exec_observer obs = {run_started, run_output, run_done, &x};
    struct exec_handle *h = NULL;
    struct mcp_error e;
    ASSERT_EQ(be->ops->exec(be, id, &req, &obs, &h, &e), 0);
    ASSERT(run_until(&x.started, WAIT_MS));
    be->ops->exec_detach(h);
    json_t *last = NULL;
    for (int i = 0; i < 100; i++) {
        struct result r;
        CALL(r, be->ops->command_get(be, id, x.cmd_id, 0, 0, on_result, &r, &_e));
        ASSERT(!r.failed);
        json_decref(last);
        last = r.json;
        if (json_is_true(json_object_get(last, "eof")))
            break;
        sleep_loop(50);
    }
    ASSERT(!x.r.done); /* detached: no callback */
    ASSERT_STR_EQ(json_string_value(json_object_get(last, "output")), "line1\nline2\nline3\n");
    ASSERT_EQ(json_integer_value(json_object_get(last, "exit_code")), 0);
    json_decref(last);
    struct result r;
    CALL(r, be->ops->command_get(be, id, x.cmd_id, 6, 6, on_result, &r, &_e));
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "output")), "line2\n");
    ASSERT_EQ(json_integer_value(json_object_get(r.json, "next_offset")), 12);
    json_decref(r.json);
    CALL(r, be->ops->diagnose(be, id, "logs", on_result, &r, &_e));
    ASSERT(!r.failed);
    json_t *cmds = json_object_get(r.json, "commands");
    ASSERT(json_array_size(cmds) >= 2);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(cmds, 0), "command_id")),
                  x.cmd_id); /* newest first */
    json_decref(r.json);
    /* a flood: the log keeps 64 MiB of it (bounded host disk), the stream counters all of it */
    struct run y;
    memset(&y, 0, sizeof y);
    struct exec_request flood = {.command = "head -c 70000000 /dev/zero"};
    struct exec_observer fobs = {run_started, NULL, run_done, &y};
    struct exec_handle *fh = NULL;
    ASSERT_EQ(be->ops->exec(be, id, &flood, &fobs, &fh, &e), 0);
    ASSERT(run_until(&y.started, WAIT_MS));
    be->ops->exec_detach(fh);
    bool eof = false;
    for (int i = 0; i < 200 && !eof; i++) {
        CALL(r, be->ops->command_get(be, id, y.cmd_id, 0, 1, on_result, &r, &_e));
        ASSERT(!r.failed);
        eof = strcmp(json_string_value(json_object_get(r.json, "status")), "running") != 0;
        if (eof)
            ASSERT_EQ(json_integer_value(json_object_get(r.json, "total_bytes")), 64 << 20);
        json_decref(r.json);
        if (!eof)
            sleep_loop(50);
    }
    ASSERT(eof);
    free(y.cmd_id);
    CALL(r, be->ops->command_get(be, id, "cmd-nope", 0, 0, on_result, &r, &_e));
    ASSERT(r.failed);
    ASSERT_EQ(r.err.code, MCP_ERR_NOT_FOUND);
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

/* A command's log file is made at its first output (a spare made ahead of time is renamed into
 * place): one that prints nothing has none and reads as empty; each log holds its own bytes. */
TEST(command_logs_made_at_first_output)
{
    char *id = create_sandbox(0);
    char path[700];
    struct run x;
    struct result r;
    run_cmd(id, "true", 0, &x);
    snprintf(path, sizeof path, "%s/sandboxes/%s/%s.log", state_dir, id, x.cmd_id);
    ASSERT(access(path, F_OK) < 0);
    CALL(r, be->ops->command_get(be, id, x.cmd_id, 0, 0, on_result, &r, &_e));
    ASSERT(!r.failed);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "output")), "");
    ASSERT(json_is_true(json_object_get(r.json, "eof")));
    json_decref(r.json);
    run_free(&x);
    for (int i = 0; i < 4; i++) { /* with and without a spare ready */
        char cmd[64], want[32];
        snprintf(cmd, sizeof cmd, "echo out%d; echo more%d", i, i);
        snprintf(want, sizeof want, "out%d\nmore%d\n", i, i);
        run_cmd(id, cmd, 0, &x);
        snprintf(path, sizeof path, "%s/sandboxes/%s/%s.log", state_dir, id, x.cmd_id);
        ASSERT_EQ(access(path, F_OK), 0);
        CALL(r, be->ops->command_get(be, id, x.cmd_id, 0, 0, on_result, &r, &_e));
        ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "output")), want);
        ASSERT_EQ(json_integer_value(json_object_get(r.json, "total_bytes")), (json_int_t)strlen(want));
        json_decref(r.json);
        run_free(&x);
        if (i % 2)
            sleep_loop(50);
    }
    destroy_sandbox(id);
    free(id);
}

/* A command that cannot start (its cwd does not exist) fails the exec with the cause, reported
 * by the agent's vfork child through memory it shares until the exec; the agent goes on. */
TEST(missing_cwd_fails_the_exec)
{
    char *id = create_sandbox(0);
    struct run x;
    memset(&x, 0, sizeof x);
    buf_init(&x.out, 1 << 20);
    buf_init(&x.err, 1 << 20);
    struct exec_request req = {.command = "true", .cwd = "/no/such/dir"};
    struct exec_observer obs = {run_started, run_output, run_done, &x};
    struct mcp_error e;
    ASSERT_EQ(be->ops->exec(be, id, &req, &obs, NULL, &e), 0);
    ASSERT(run_until(&x.r.done, WAIT_MS));
    ASSERT(x.r.failed);
    ASSERT_EQ(x.r.err.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(x.r.err.msg, "cannot start command in '/no/such/dir'");
    run_free(&x);
    run_cmd(id, "echo still here", 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), "still here\n");
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

struct read_result {
    bool done, failed;
    struct mcp_error err;
    char data[4096];
    size_t len;
};

static void on_read(void *arg, const struct file_read_result *res, const struct mcp_error *err)
{
    struct read_result *r = arg;
    r->done = true;
    if (err) {
        r->failed = true;
        r->err = *err;
        return;
    }
    r->len = res->len < sizeof r->data - 1 ? res->len : sizeof r->data - 1;
    memcpy(r->data, res->data, r->len);
    r->data[r->len] = '\0';
}

TEST(file_operations)
{
    char *id = create_sandbox(0);
    struct result r;
    CALL(r, be->ops->file_write(be, id, "dir/a.txt", "one two one", 11, 0600, false, on_result, &r,
                                &_e));
    ASSERT(!r.failed);
    ASSERT_EQ(json_integer_value(json_object_get(r.json, "size")), 11);
    json_decref(r.json);
    struct read_result rr;
    CALL(rr, be->ops->file_read(be, id, "/workspace/dir/a.txt", 4, 3, on_read, &rr, &_e));
    ASSERT(!rr.failed);
    ASSERT_STR_EQ(rr.data, "two");

    json_t *args = json_pack("{s:s, s:s, s:s}", "path", "dir/a.txt", "old", "one", "new", "1");
    CALL(r, be->ops->file_op(be, id, "replace", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(!r.failed);
    ASSERT_EQ(json_integer_value(json_object_get(r.json, "replacements")), 2);
    json_decref(r.json);
    CALL(rr, be->ops->file_read(be, id, "dir/a.txt", 0, 0, on_read, &rr, &_e));
    ASSERT_STR_EQ(rr.data, "1 two 1");

    /* a symlink planted in the sandbox to the host's /etc/shadow: resolved inside the sandbox,
     * where /etc is generated and has no shadow file */
    struct run x;
    run_cmd(id, "ln -s /etc/shadow /workspace/evil && mkfifo /workspace/fifo", 0, &x);
    run_free(&x);
    CALL(rr, be->ops->file_read(be, id, "evil", 0, 0, on_read, &rr, &_e));
    ASSERT(rr.failed);
    ASSERT_EQ(rr.err.code, MCP_ERR_NOT_FOUND);
    CALL(rr, be->ops->file_read(be, id, "fifo", 0, 0, on_read, &rr, &_e));
    ASSERT(rr.failed); /* not blocked, refused */
    ASSERT_CONTAINS(rr.err.msg, "not a regular file");
    /* `..` cannot climb out: this is the sandbox's /etc/hostname */
    CALL(rr, be->ops->file_read(be, id, "../../../../../etc/hostname", 0, 0, on_read, &rr, &_e));
    ASSERT(!rr.failed);
    ASSERT_STR_EQ(rr.data, "sandbox\n");
    CALL(r, be->ops->file_write(be, id, "../../../../etc/pwned", "x", 1, 0, false, on_result, &r, &_e));
    ASSERT(r.failed); /* /etc is read-only in the sandbox; the host's /etc is not there at all */
    ASSERT(access("/etc/pwned", F_OK) < 0);

    args = json_pack("{s:s, s:i}", "path", ".", "depth", 2);
    CALL(r, be->ops->file_op(be, id, "list", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(!r.failed);
    ASSERT(json_array_size(json_object_get(r.json, "entries")) >= 4);
    json_decref(r.json);
    args = json_pack("{s:s, s:s}", "path", "/workspace", "pattern", "*.txt");
    CALL(r, be->ops->file_op(be, id, "search", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT_STR_EQ(json_string_value(json_array_get(json_object_get(r.json, "matches"), 0)),
                  "/workspace/dir/a.txt");
    json_decref(r.json);
    args = json_pack("{s:s, s:s}", "source", "dir/a.txt", "destination", "b.txt");
    CALL(r, be->ops->file_op(be, id, "move", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(!r.failed);
    json_decref(r.json);
    args = json_pack("{s:s}", "path", "b.txt");
    CALL(r, be->ops->file_op(be, id, "stat", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "type")), "file");
    ASSERT_EQ(json_integer_value(json_object_get(r.json, "mode")), 0600);
    json_decref(r.json);
    args = json_pack("{s:s, s:b}", "path", "dir", "recursive", 1);
    CALL(r, be->ops->file_op(be, id, "delete", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(!r.failed);
    json_decref(r.json);
    destroy_sandbox(id);
    free(id);
}

TEST(pause_resume)
{
    char *id = create_sandbox(0);
    struct result r;
    CALL(r, be->ops->pause(be, id, on_result, &r, &_e));
    ASSERT(!r.failed);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "state")), "paused");
    json_decref(r.json);
    struct exec_request req = {.command = "true"};
    struct exec_observer obs = {NULL, NULL, on_result, &r};
    struct mcp_error e;
    ASSERT(be->ops->exec(be, id, &req, &obs, NULL, &e) < 0);
    ASSERT_EQ(e.code, MCP_ERR_CONFLICT);
    CALL(r, be->ops->resume(be, id, on_result, &r, &_e));
    ASSERT(!r.failed);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "state")), "running");
    json_decref(r.json);
    struct run x;
    run_cmd(id, "echo alive", 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), "alive\n");
    run_free(&x);
    CALL(r, be->ops->get(be, id, on_result, &r, &_e));
    json_t *usage = json_object_get(r.json, "usage");
    ASSERT(json_integer_value(json_object_get(usage, "memory_bytes")) > 0);
    ASSERT(json_integer_value(json_object_get(usage, "pids")) >= 1); /* the agent */
    json_decref(r.json);
    destroy_sandbox(id);
    free(id);
}

TEST(ttl_enforced_by_agent)
{
    char *id = create_sandbox(1);
    sleep_loop(2500);
    struct result r;
    CALL(r, be->ops->get(be, id, on_result, &r, &_e));
    ASSERT(!r.failed);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "state")), "expired");
    json_decref(r.json);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/sandboxes/%s", state_dir, id);
    ASSERT(access(dir, F_OK) < 0); /* resources released at expiry */
    destroy_sandbox(id);           /* removes the record */
    free(id);
}

static const char *state_of(const char *id)
{
    static char state[32];
    struct result r;
    CALL(r, be->ops->get(be, id, on_result, &r, &_e));
    ASSERT(!r.failed);
    snprintf(state, sizeof state, "%s", json_string_value(json_object_get(r.json, "state")));
    json_decref(r.json);
    return state;
}

/* Issue #18.2: a lifetime, idle time or renewal of 2^62 s wrapped (s * 1000) into a deadline in
 * the past, and the sandbox expired at once; now they saturate to MAX_DURATION_S. */
TEST(huge_durations_saturate)
{
    struct result r;
    struct sandbox_spec spec = {.owner = "test", .timeout_seconds = INT64_C(1) << 62,
                                .idle_timeout_seconds = INT64_C(1) << 62,
                                .memory_bytes = 128u << 20, .disk_bytes = 8u << 20};
    CALL(r, be->ops->create(be, &spec, on_result, &r, &_e));
    if (r.failed)
        TEST_FAIL("create: %s", r.err.msg);
    char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
    json_decref(r.json);
    sleep_loop(2500);
    ASSERT_STR_EQ(state_of(id), "running");
    struct mcp_error e;
    struct store_sandbox rec = {0};
    ASSERT(store_sandbox_get(st, id, &rec, &e) == 0);
    ASSERT(rec.expires_at_ms > now_wall_ms() + (MAX_DURATION_S - 60) * 1000);
    ASSERT_EQ(rec.idle_timeout_s, MAX_DURATION_S);
    store_sandbox_release(&rec);
    CALL(r, be->ops->renew(be, id, INT64_C(1) << 62, on_result, &r, &_e));
    ASSERT(!r.failed);
    json_decref(r.json);
    sleep_loop(2500);
    ASSERT_STR_EQ(state_of(id), "running");
    destroy_sandbox(id);
    free(id);
}

/* Creates with env; returns the id, or NULL with the error message in msg. */
static char *create_with_env(json_t *env, char *msg, size_t size)
{
    struct result r;
    struct mcp_error e;
    struct sandbox_spec spec = {.owner = "test", .env = env, .memory_bytes = 128u << 20,
                                .disk_bytes = 8u << 20};
    memset(&r, 0, sizeof r);
    msg[0] = '\0';
    if (be->ops->create(be, &spec, on_result, &r, &e) < 0) {
        snprintf(msg, size, "%s", e.msg);
        return NULL;
    }
    if (!run_until(&r.done, WAIT_MS))
        TEST_FAIL("create: no callback");
    if (r.failed) {
        snprintf(msg, size, "%s", r.err.msg);
        return NULL;
    }
    char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
    json_decref(r.json);
    return id;
}

static json_t *env_of(int vars, size_t value_len)
{
    json_t *env = json_object();
    char *value = xmalloc(value_len + 1);
    memset(value, 'x', value_len);
    value[value_len] = '\0';
    for (int i = 0; i < vars; i++) {
        char name[16];
        snprintf(name, sizeof name, "BIG%d", i);
        json_object_set_new(env, name, json_string(value));
    }
    free(value);
    return env;
}

/* Issue #18.5: a 1 MB env value was accepted and then every command failed with "Argument list
 * too long"; create refuses what exec cannot pass, naming the limit. */
TEST(env_that_exec_cannot_pass_is_refused)
{
    char msg[512];
    json_t *env = env_of(1, 1 << 20);
    char *id = create_with_env(env, msg, sizeof msg);
    json_decref(env);
    if (id != NULL)
        TEST_FAIL("a 1 MiB env value was accepted (%s)", id);
    ASSERT_CONTAINS(msg, "MAX_ARG_STRLEN");
    ASSERT_CONTAINS(msg, "write_file");
    /* each fits, together they pass what the agent's configuration can carry */
    env = env_of(2, 100 << 10);
    id = create_with_env(env, msg, sizeof msg);
    json_decref(env);
    if (id != NULL)
        TEST_FAIL("2 x 100 KiB of env was accepted (%s)", id);
    ASSERT_CONTAINS(msg, "MAX_ARG_STRLEN");
    struct mcp_error e; /* the limit every backend shares (OpenSandbox's commands run on Linux) */
    env = env_of(9, 120 << 10);
    ASSERT_EQ(backend_check_env(env, "env", &e), -1);
    ASSERT_CONTAINS(e.msg, "ARG_MAX");
    json_decref(env);
    env = env_of(4, 30 << 10); /* what is accepted works */
    id = create_with_env(env, msg, sizeof msg);
    json_decref(env);
    if (id == NULL)
        TEST_FAIL("4 x 30 KiB of env refused: %s", msg);
    struct run x;
    run_cmd(id, "echo ${#BIG0} ${#BIG3}", 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), "30720 30720\n");
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

/* Issue #18.9: pids 1 was accepted and failed in clone3 with advice to run mcpbox doctor (or
 * the sandbox could not run a pipeline); too few are refused with the minimum. */
TEST(too_few_pids_refused_with_the_minimum)
{
    for (uint32_t pids = 1; pids <= LOCAL_MIN_PIDS; pids++) {
        struct result r;
        struct mcp_error e;
        struct sandbox_spec spec = {.owner = "test", .pids = pids, .memory_bytes = 128u << 20,
                                    .disk_bytes = 8u << 20};
        memset(&r, 0, sizeof r);
        int rc = be->ops->create(be, &spec, on_result, &r, &e);
        if (pids < LOCAL_MIN_PIDS) {
            if (rc == 0)
                TEST_FAIL("pids %u accepted", pids);
            ASSERT_CONTAINS(e.msg, "pids must be at least 8");
            continue;
        }
        if (rc < 0 || !run_until(&r.done, WAIT_MS) || r.failed)
            TEST_FAIL("pids %u refused: %s", pids, rc < 0 ? e.msg : r.err.msg);
        char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
        json_decref(r.json);
        struct run x;
        run_cmd(id, "echo hi | cat | cat", 0, &x);
        ASSERT_STR_EQ(buf_cstr(&x.out), "hi\n");
        run_free(&x);
        destroy_sandbox(id);
        free(id);
    }
}

/* Issue #18.4: get_command pages that end inside a character put U+FFFD at every boundary
 * (read_file got it right), and diagnose what=logs dropped a command whose 200th byte was
 * inside a character. Pages that follow next_offset now concatenate to the output. */
TEST(pages_never_split_characters)
{
    char *id = create_sandbox(0);
    /* 100 three-byte characters: 300 bytes */
    char cjk[301] = "", cmd[400];
    for (int i = 0; i < 100; i++)
        strcat(cjk, "\xe6\x97\xa5");
    snprintf(cmd, sizeof cmd, "printf  '%s'", cjk); /* 9 + 191: byte 200 splits one */
    struct run x;
    run_cmd(id, cmd, 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), cjk);
    struct buf all;
    buf_init(&all, 1 << 20);
    uint64_t off = 0;
    for (int pages = 0; pages < 400; pages++) {
        struct result r;
        CALL(r, be->ops->command_get(be, id, x.cmd_id, off, 7, on_result, &r, &_e));
        ASSERT(!r.failed);
        const char *out = json_string_value(json_object_get(r.json, "output"));
        ASSERT(strstr(out, "\xEF\xBF\xBD") == NULL);
        buf_append_str(&all, out);
        off = (uint64_t)json_integer_value(json_object_get(r.json, "next_offset"));
        bool eof = json_is_true(json_object_get(r.json, "eof"));
        json_decref(r.json);
        if (eof)
            break;
    }
    ASSERT_STR_EQ(buf_cstr(&all), cjk);
    buf_release(&all);
    run_free(&x);
    struct result r;
    CALL(r, be->ops->diagnose(be, id, "logs", on_result, &r, &_e));
    ASSERT(!r.failed);
    json_t *first = json_array_get(json_object_get(r.json, "commands"), 0);
    const char *listed = json_string_value(json_object_get(first, "command"));
    if (listed == NULL)
        TEST_FAIL("diagnose logs lost the command's text");
    ASSERT(strncmp(listed, cmd, strlen(listed)) == 0 && strlen(listed) >= 195);
    json_decref(r.json);
    destroy_sandbox(id);
    free(id);
}

/* The exact bytes of a listed path: its _base64 form when it has one, else its text. */
static char *listed_bytes(json_t *v, const char *key)
{
    char name[64];
    snprintf(name, sizeof name, "%s_base64", key);
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    const char *b64 = json_string_value(json_object_get(v, name));
    if (b64 == NULL)
        return xstrdup(json_string_value(json_object_get(v, key)));
    size_t n = 0;
    char *out = xmalloc(base64_decoded_max(strlen(b64)) + 1);
    ASSERT(base64_decode(b64, strlen(b64), (unsigned char *)out, &n) == 0);
    out[n] = '\0';
    return out;
}

static bool listed(json_t *array, const char *key, const char *bytes)
{
    size_t i;
    json_t *v;
    json_array_foreach(array, i, v) {
        char *b = listed_bytes(v, key);
        bool same = strcmp(b, bytes) == 0;
        free(b);
        if (same)
            return true;
    }
    return false;
}

/* Issue #18.3: list_files and search_files left out a file named latin\351.txt and everything
 * under a directory with such a name, and still said truncated: false. They are listed with
 * their exact bytes in path_base64, and every file operation takes that form back. */
TEST(non_utf8_names_are_listed_and_usable)
{
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "mkdir \"$(printf 'dir\\351')\" && echo hi > \"$(printf 'latin\\351.txt')\" && "
                "echo in > \"$(printf 'dir\\351')/inner.txt\" && echo ok > plain.txt", 0, &x);
    ASSERT_EQ(json_integer_value(json_object_get(x.r.json, "exit_code")), 0);
    run_free(&x);
    struct result r;
    json_t *args = json_pack("{s:s, s:i, s:i}", "path", ".", "depth", 2, "max_entries", 100);
    CALL(r, be->ops->file_op(be, id, "list", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(!r.failed);
    json_t *entries = json_object_get(r.json, "entries");
    ASSERT_EQ(json_array_size(entries), 4);
    ASSERT(json_is_false(json_object_get(r.json, "truncated")));
    ASSERT(listed(entries, "path", "/workspace/latin\351.txt"));
    ASSERT(listed(entries, "path", "/workspace/dir\351"));
    ASSERT(listed(entries, "path", "/workspace/dir\351/inner.txt"));
    ASSERT(listed(entries, "path", "/workspace/plain.txt"));
    json_decref(r.json);
    args = json_pack("{s:s, s:s, s:i}", "path", ".", "pattern", "*.txt", "max_results", 100);
    CALL(r, be->ops->file_op(be, id, "search", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(!r.failed);
    json_t *matches = json_object_get(r.json, "matches");
    ASSERT_EQ(json_array_size(matches), 3);
    ASSERT(listed(matches, "path", "/workspace/latin\351.txt"));
    ASSERT(listed(matches, "path", "/workspace/dir\351/inner.txt"));
    ASSERT(json_is_string(json_array_get(matches, 0)) || json_is_string(json_array_get(matches, 1)) ||
           json_is_string(json_array_get(matches, 2))); /* UTF-8 names stay plain strings */
    json_decref(r.json);
    struct read_result rr; /* read by its raw name: the backend passes it to the agent as base64 */
    CALL(rr, be->ops->file_read(be, id, "latin\351.txt", 0, 0, on_read, &rr, &_e));
    if (rr.failed)
        TEST_FAIL("read latin\\351.txt: %s", rr.err.msg);
    ASSERT_STR_EQ(rr.data, "hi\n");
    args = json_pack("{s:s, s:s, s:s}", "source", "latin?.txt", "source_base64", "bGF0aW7pLnR4dA==",
                     "destination", "latin.txt");
    CALL(r, be->ops->file_op(be, id, "move", args, on_result, &r, &_e));
    json_decref(args);
    if (r.failed)
        TEST_FAIL("move by source_base64: %s", r.err.msg);
    json_decref(r.json);
    CALL(rr, be->ops->file_read(be, id, "latin.txt", 0, 0, on_read, &rr, &_e));
    ASSERT(!rr.failed);
    ASSERT_STR_EQ(rr.data, "hi\n");
    args = json_pack("{s:s, s:s, s:b}", "path", "dir?", "path_base64", "ZGlyNQ==", "recursive", 1);
    CALL(r, be->ops->file_op(be, id, "delete", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(r.failed); /* "dir5" does not exist: path_base64 is used, not path */
    args = json_pack("{s:s, s:s, s:b}", "path", "dir?", "path_base64", "ZGly6Q==", "recursive", 1);
    CALL(r, be->ops->file_op(be, id, "delete", args, on_result, &r, &_e));
    json_decref(args);
    if (r.failed)
        TEST_FAIL("delete by path_base64: %s", r.err.msg);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "path_base64")),
                  "L3dvcmtzcGFjZS9kaXLp");
    json_decref(r.json);
    destroy_sandbox(id);
    free(id);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname %s)\" && cp -L %s %s", to, from, to);
    if (system(cmd) != 0)
        TEST_FAIL("%s failed", cmd);
}

/* A registered image: a tiny rootfs (dash and its libraries, owned by host root) as the idmapped
 * overlay lower layer. Files look root-owned inside, writes land in the sandbox's upper layer and
 * the image directory itself is never modified. */
TEST(registered_image_overlay)
{
    char img[512], path[600];
    snprintf(img, sizeof img, "%s/images/mini", state_dir);
    snprintf(path, sizeof path, "%s/bin/sh", img);
    copy_file("/bin/dash", path);
    snprintf(path, sizeof path, "%s/lib/x86_64-linux-gnu/libc.so.6", img);
    copy_file("/lib/x86_64-linux-gnu/libc.so.6", path);
    snprintf(path, sizeof path, "%s/lib64/ld-linux-x86-64.so.2", img);
    copy_file("/lib64/ld-linux-x86-64.so.2", path);
    snprintf(path, sizeof path, "%s/etc", img);
    mkdir(path, 0755);
    struct result r;
    struct sandbox_spec spec = {.owner = "test", .image = "mini", .memory_bytes = 128u << 20,
                                .disk_bytes = 16u << 20};
    CALL(r, be->ops->create(be, &spec, on_result, &r, &_e));
    if (r.failed)
        TEST_FAIL("create: %s", r.err.msg);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "image")), "mini");
    char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
    json_decref(r.json);
    struct run x;
    if (geteuid() == 0) { /* idmapped: the image's root-owned files are the sandbox root's */
        run_cmd(id, "[ -O /bin/sh ] && echo owned; echo changed > /bin/sh2 && echo wrote; "
                    "read h < /etc/hostname; echo $h; echo $(pwd)", 0, &x);
        ASSERT_STR_EQ(buf_cstr(&x.out), "owned\nwrote\nsandbox\n/workspace\n");
    } else { /* rootless: no idmapped mounts of a host filesystem; the image shows as nobody's,
                read-only to the sandbox; /workspace is its own (docs/local-backend.md) */
        run_cmd(id, "[ -O /bin/sh ] || echo not-owned; echo changed > /bin/sh2 || echo refused; "
                    "echo w > /workspace/f && echo wrote; echo $(pwd)", 0, &x);
        ASSERT_CONTAINS(buf_cstr(&x.out), "not-owned\n");
        ASSERT_CONTAINS(buf_cstr(&x.out), "refused\nwrote\n/workspace\n");
    }
    run_free(&x);
    snprintf(path, sizeof path, "%s/bin/sh2", img);
    ASSERT(access(path, F_OK) < 0); /* the image is untouched */
    destroy_sandbox(id);
    free(id);
    spec.image = "../etc";
    struct mcp_error e;
    ASSERT(be->ops->create(be, &spec, on_result, &r, &e) < 0);
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);
}

TEST(idle_timeout_enforced_by_agent)
{
    struct result r;
    struct sandbox_spec spec = {.owner = "test", .memory_bytes = 128u << 20, .disk_bytes = 8u << 20,
                                .idle_timeout_seconds = 1};
    CALL(r, be->ops->create(be, &spec, on_result, &r, &_e));
    ASSERT(!r.failed);
    char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
    json_decref(r.json);
    struct run x;
    run_cmd(id, "sleep 1.5; echo busy-is-not-idle", 0, &x); /* a running command is activity */
    ASSERT_STR_EQ(buf_cstr(&x.out), "busy-is-not-idle\n");
    run_free(&x);
    sleep_loop(2500);
    CALL(r, be->ops->get(be, id, on_result, &r, &_e));
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "state")), "expired");
    json_decref(r.json);
    json_t *ev = NULL;
    CALL(r, be->ops->diagnose(be, id, "events", on_result, &r, &_e));
    char *text = json_dumps(r.json, 0);
    ASSERT_CONTAINS(text, "idle");
    free(text);
    json_decref(r.json);
    json_decref(ev);
    destroy_sandbox(id);
    free(id);
}

TEST(reconnect_from_second_instance)
{
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "echo keep > /workspace/k", 0, &x);
    run_free(&x);
    local_backend_free(be); /* like an mcpbox process exiting: the sandbox keeps running */
    uv_run(loop, UV_RUN_NOWAIT);
    struct mcp_error e;
    be = local_backend_new(loop, st, NULL, &e);
    if (be == NULL)
        TEST_FAIL("second instance: %s", e.msg);
    run_cmd(id, "cat /workspace/k", 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), "keep\n");
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

/* Egress through pasta: an interface besides lo, private ranges and the host's loopback
 * unreachable. (This machine has no internet, so reaching it is not tested here.) */
TEST(network_egress_blocks_private_ranges)
{
    if (access("/usr/bin/pasta", X_OK) < 0 || access("/usr/bin/python3", X_OK) < 0)
        SKIP("pasta or python3 missing");
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    ASSERT_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ASSERT_EQ(listen(lfd, 4), 0);
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    char *id = create_sandbox_net(0, true);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cat /etc/resolv.conf; python3 -c '\n"
             "import socket\n"
             "gw = [l.split()[2] for l in open(\"/proc/net/route\") if l.split()[1] == \"00000000\" and l.split()[7] == \"00000000\"]\n"
             "gw = socket.inet_ntoa(bytes.fromhex(gw[0])[::-1]) if gw else \"none\"\n"
             "print(\"gateway\", gw)\n"
             "for a in [\"10.1.2.3\", \"192.168.1.1\", \"169.254.169.254\", \"127.0.0.1\", gw]:\n"
             "    s = socket.socket(); s.settimeout(3)\n"
             "    try:\n"
             "        s.connect((a, %d)); print(a, \"OPEN\")\n"
             "    except OSError as e:\n"
             "        print(a, \"closed\", e.errno)\n"
             "'", ntohs(sa.sin_port));
    struct run x;
    run_cmd(id, cmd, 30000, &x);
    ASSERT_CONTAINS(buf_cstr(&x.out), "nameserver 169.254.1.1");
    ASSERT(strstr(buf_cstr(&x.out), "gateway none") == NULL);
    ASSERT(strstr(buf_cstr(&x.out), "OPEN") == NULL);
    ASSERT_CONTAINS(buf_cstr(&x.out), "10.1.2.3 closed");
    run_free(&x);
    destroy_sandbox(id);
    close(lfd);
    free(id);
}

/* Limits: a memory hog is OOM-killed and reported as such, a fork bomb stops at pids.max; the
 * confinement as seen from inside (seccomp denials, the agent's /proc/1/exe unreachable). */
TEST(limits_and_confinement)
{
    struct result r;
    struct sandbox_spec spec = {.owner = "test", .memory_bytes = 96u << 20, .disk_bytes = 16u << 20,
                                .pids = 32};
    CALL(r, be->ops->create(be, &spec, on_result, &r, &_e));
    if (r.failed)
        TEST_FAIL("create: %s", r.err.msg);
    char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
    json_decref(r.json);
    struct run x;
    run_cmd(id, "python3 -c 'b = bytearray(400 << 20); print(len(b))'", 0, &x);
    if (strcmp(json_string_value(json_object_get(x.r.json, "status")), "oom_killed") != 0) {
        char *dump = json_dumps(x.r.json, 0);
        printf("# %s\n# out %s\n# err %s\n", dump, buf_cstr(&x.out), buf_cstr(&x.err));
        free(dump);
    }
    ASSERT_STR_EQ(json_string_value(json_object_get(x.r.json, "status")), "oom_killed");
    struct result g;
    CALL(g, be->ops->command_get(be, id, x.cmd_id, 0, 0, on_result, &g, &_e));
    ASSERT_STR_EQ(json_string_value(json_object_get(g.json, "status")), "oom_killed");
    json_decref(g.json);
    run_free(&x);
    json_t *events = NULL;
    struct result d;
    sleep_loop(200); /* let the eventfd watcher run */
    CALL(d, be->ops->diagnose(be, id, "events", on_result, &d, &_e));
    ASSERT(!d.failed);
    char *text = json_dumps(d.json, 0);
    ASSERT_CONTAINS(text, "\"kind\": \"oom_kill\""); /* attributed to the command */
    ASSERT_CONTAINS(text, "\"kind\": \"oom\"");      /* seen by the memcg eventfd watcher */
    free(text);
    json_decref(d.json);
    json_decref(events);
    run_cmd(id, "for i in $(seq 1 64); do sleep 5 & done 2>&1 | grep -c -i 'fork\\|resource' ; "
                "kill $(jobs -p) 2>/dev/null; true", 20000, &x);
    ASSERT(atoi(buf_cstr(&x.out)) > 0); /* some forks failed at the pids limit */
    run_free(&x);
    run_cmd(id, "unshare -U true 2>&1; echo rc=$?; readlink /proc/1/exe 2>&1; echo rc=$?; "
                "cat /proc/1/environ 2>&1 >/dev/null; echo rc=$?; touch /etc/x 2>&1; echo rc=$?; "
                "touch /usr/x 2>&1; echo rc=$?", 0, &x);
    ASSERT(strstr(buf_cstr(&x.out), "rc=0") == NULL);
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

/* Two instances at once (two mcpbox processes on one state directory): a sandbox created by one
 * after the other started is adopted by the other on first use. */
TEST(concurrent_instance_adopts)
{
    struct mcp_error e;
    struct backend *other = local_backend_new(loop, st, NULL, &e);
    if (other == NULL)
        TEST_FAIL("second instance: %s", e.msg);
    char *id = create_sandbox(0);
    struct backend *mine = be;
    be = other;
    struct run x;
    run_cmd(id, "echo adopted", 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), "adopted\n");
    run_free(&x);
    destroy_sandbox(id);
    be = mine;
    local_backend_free(other);
    uv_run(loop, UV_RUN_NOWAIT);
    struct result r;
    ASSERT(be->ops->get(be, id, on_result, &r, &e) < 0);
    free(id);
}

/* A command that is an absolute path plus literal words runs without /bin/sh (its parent is the
 * agent, PID 1) yet behaves as under the shell: same environment (PWD too), same word
 * splitting, and the shell's 127 when the program is missing. Anything else still uses sh. */
TEST(plain_commands_skip_the_shell)
{
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "/bin/grep PPid: /proc/self/status", 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), "PPid:\t1\n");
    run_free(&x);
    run_cmd(id, "/usr/bin/env", 0, &x);
    ASSERT_CONTAINS(buf_cstr(&x.out), "PWD=/workspace\n");
    ASSERT_CONTAINS(buf_cstr(&x.out), "PATH=/usr/local/sbin:");
    run_free(&x);
    run_cmd(id, "/bin/echo a   b\tc", 0, &x);
    ASSERT_STR_EQ(buf_cstr(&x.out), "a b c\n");
    run_free(&x);
    run_cmd(id, "/bin/no-such-program x", 0, &x);
    ASSERT_EQ(json_integer_value(json_object_get(x.r.json, "exit_code")), 127);
    ASSERT_CONTAINS(buf_cstr(&x.err), "not found");
    run_free(&x);
    run_cmd(id, "/bin/echo $HOME '*'", 0, &x); /* expansion and quotes: the shell's job */
    ASSERT_STR_EQ(buf_cstr(&x.out), "/root *\n");
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

/* mcp_error_set appends the errno text itself: it must appear once, through the agent too. */
TEST(errno_text_once)
{
    char *id = create_sandbox(0);
    struct result r;
    json_t *args = json_pack("{s:s}", "path", "missing/parent/dir");
    CALL(r, be->ops->file_op(be, id, "mkdir", args, on_result, &r, &_e));
    json_decref(args);
    ASSERT(r.failed);
    const char *text = strerror(ENOENT), *first = strstr(r.err.msg, text);
    ASSERT(first != NULL);
    if (strstr(first + strlen(text), text) != NULL)
        TEST_FAIL("errno text repeated: %s", r.err.msg);
    ASSERT_EQ(r.err.sys_errno, ENOENT);
    destroy_sandbox(id);
    free(id);
}

static bool pid_alive(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    char state = 'X';
    if (f != NULL && fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
        state = 'X';
    if (f != NULL)
        fclose(f);
    return state != 'X' && state != 'Z';
}

/* destroy from an instance that is not the sandbox's parent (another mcpbox process that
 * started before the sandbox existed): when its release is done (the record deleted), nothing of
 * the sandbox may still run, so its cgroups are already removed. */
TEST(destroy_waits_for_non_children)
{
    struct mcp_error e;
    struct backend *other = local_backend_new(loop, st, NULL, &e);
    if (other == NULL)
        TEST_FAIL("second instance: %s", e.msg);
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "sleep 600 >/dev/null 2>&1 &", 0, &x);
    run_free(&x);
    struct store_sandbox rec = {0};
    ASSERT(store_sandbox_get(st, id, &rec, &e) == 0);
    int init = (int)json_integer_value(json_object_get(rec.record, "init_pid"));
    json_t *cgs = json_deep_copy(json_object_get(rec.record, "cgroups"));
    store_sandbox_release(&rec);
    ASSERT(init > 0 && pid_alive(init));
    struct backend *mine = be;
    be = other;
    destroy_sandbox(id);
    be = mine;
    ASSERT(!pid_alive(init));
    const char *key;
    json_t *path;
    json_object_foreach(cgs, key, path)
    {
        const char *p = json_string_value(path);
        if (p != NULL && p[0] != '\0' && access(p, F_OK) == 0)
            TEST_FAIL("%s cgroup %s still there when the release was done", key, p);
    }
    json_decref(cgs);
    local_backend_free(other);
    uv_run(loop, UV_RUN_NOWAIT);
    free(id);
}

static bool procs_has(const char *dir, int pid)
{
    char path[600];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "re");
    int p;
    bool found = false;
    while (f != NULL && !found && fscanf(f, "%d", &p) == 1)
        found = p == pid;
    if (f != NULL)
        fclose(f);
    return found;
}

static int dumpable_at_start; /* before any sandbox: see clone_in_shared_memory_where_it_can */

static char *created_event_text(const char *id)
{
    struct result d;
    CALL(d, be->ops->diagnose(be, id, "events", on_result, &d, &_e));
    ASSERT(!d.failed);
    char *text = json_dumps(d.json, 0);
    json_decref(d.json);
    return text;
}

/* The sandbox's child is cloned in mcpbox's own memory (clone_shared.c: no copy of mcpbox's
 * address space) and mcpbox stays dumpable after the child's change of uid (as a user, the next
 * child's newuidmap depends on it: the creates before this test and the two here show it);
 * MCPBOX_LOCAL_CLONE_VM=0 copies it. Either way the sandbox works. */
TEST(clone_in_shared_memory_where_it_can)
{
    bool shared_here = true;
#if !defined(__x86_64__)
    shared_here = false;
#endif
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            setenv("MCPBOX_LOCAL_CLONE_VM", "0", 1);
        char *id = create_sandbox(0);
        char *text = created_event_text(id);
        ASSERT_CONTAINS(text, round == 0 && shared_here ? "\"clone\": \"shared memory\""
                                                         : "\"clone\": \"copy\"");
        free(text);
        struct run x;
        run_cmd(id, "echo ok; cat /proc/self/uid_map | wc -l", 0, &x);
        ASSERT_STR_EQ(buf_cstr(&x.out), "ok\n1\n");
        run_free(&x);
        ASSERT_EQ(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), dumpable_at_start);
        destroy_sandbox(id);
        free(id);
    }
    unsetenv("MCPBOX_LOCAL_CLONE_VM");
    if (shared_here) {
        /* fork() inside a shared child's window (as a user, the image unpacker's child then
         * gets its maps from newuidmap, which refuses a non-dumpable target): the child's own
         * copy is dumpable again */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        pid_t c = fork();
        if (c == 0)
            _exit(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == dumpable_at_start ? 0 : 1);
        prctl(PR_SET_DUMPABLE, dumpable_at_start, 0, 0, 0);
        int status = 0;
        ASSERT_EQ(waitpid(c, &status, 0), c);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* Whether cloned by a spawner thread that sat in the v1 cgroups beforehand or attached by pid
 * afterwards (back-to-back creates use both), the init is in every cgroup its record names,
 * and no mcpbox thread stays in them. */
TEST(init_in_its_cgroups)
{
    enum { N = 4 };
    char *ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = create_sandbox(0);
    for (int i = 0; i < N; i++) {
        struct mcp_error e;
        struct store_sandbox rec = {0};
        ASSERT(store_sandbox_get(st, ids[i], &rec, &e) == 0);
        int init = (int)json_integer_value(json_object_get(rec.record, "init_pid"));
        json_t *cgs = json_object_get(rec.record, "cgroups");
        const char *key;
        json_t *path;
        json_object_foreach(cgs, key, path)
        {
            const char *p = json_string_value(path);
            if (p == NULL || p[0] == '\0')
                continue;
            if (!procs_has(p, init))
                TEST_FAIL("init %d is not in its %s cgroup %s", init, key, p);
            /* the spawner thread moves on to the next set in the background (a grace period) */
            for (int ms = 0; ms < 2000 && procs_has(p, (int)getpid()); ms += 10)
                usleep(10000);
            if (procs_has(p, (int)getpid()))
                TEST_FAIL("an mcpbox thread stays in the %s cgroup %s", key, p);
        }
        store_sandbox_release(&rec);
    }
    for (int i = 0; i < N; i++) {
        destroy_sandbox(ids[i]);
        free(ids[i]);
    }
}

static unsigned long long cgroup_number(const char *dir, const char *file)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "re");
    unsigned long long v = 0;
    if (f == NULL || fscanf(f, "%llu", &v) != 1)
        v = 0;
    if (f != NULL)
        fclose(f);
    return v;
}

/* Issue #18.1: on a warm server (from its second create on, spawner threads prepare cgroup sets
 * with the default limits, memory.memsw.limit_in_bytes included) a sandbox above the default
 * memory failed with EINVAL from memory.limit_in_bytes; a smaller one must still work after. */
static void create_with_memory(uint64_t bytes)
{
    sleep_loop(1500); /* the spawner threads have a prepared set ready */
    struct result r;
    struct sandbox_spec spec = {.owner = "test", .memory_bytes = bytes, .disk_bytes = 64u << 20};
    CALL(r, be->ops->create(be, &spec, on_result, &r, &_e));
    if (r.failed)
        TEST_FAIL("create with memory %llu: %s", (unsigned long long)bytes, r.err.msg);
    char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
    json_decref(r.json);
    struct mcp_error e;
    struct store_sandbox rec = {0};
    ASSERT(store_sandbox_get(st, id, &rec, &e) == 0);
    const char *mem = json_string_value(json_object_get(json_object_get(rec.record, "cgroups"),
                                                        "memory"));
    if (mem != NULL && mem[0] != '\0') {
        ASSERT_EQ(cgroup_number(mem, "memory.limit_in_bytes"), (unsigned long long)bytes);
        unsigned long long memsw = cgroup_number(mem, "memory.memsw.limit_in_bytes");
        if (memsw != 0) /* 0: no swap accounting */
            ASSERT_EQ(memsw, (unsigned long long)bytes);
    }
    store_sandbox_release(&rec);
    destroy_sandbox(id);
    free(id);
}

TEST(memory_above_and_below_default_on_warm_server)
{
    char *a = create_sandbox(0), *b = create_sandbox(0);
    create_with_memory(2ULL << 30);
    create_with_memory(2ULL << 30);
    create_with_memory(96ULL << 20);
    create_with_memory(3ULL << 30);
    destroy_sandbox(a);
    destroy_sandbox(b);
    free(a);
    free(b);
}

/* A dead creator's pid still answers kill(pid, 0) while it is an unreaped zombie. */
static pid_t make_zombie(uint64_t *start)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(p[1]);
        ssize_t n = read(p[0], &c, 1);
        _exit(n < 0);
    }
    close(p[0]);
    *start = local_proc_starttime(pid);
    close(p[1]); /* the child exits now */
    for (int i = 0; i < 2000 && pid_alive(pid); i++)
        usleep(1000);
    return pid;
}

/* A record left in "creating" by a creator that died after releasing the child but before
 * recording the init's pid: a new instance must clean it up at once (never adopt it, never
 * wait), and find the init through <dir>/init. */
TEST(reconcile_cleans_half_made)
{
    struct mcp_error e;
    char *id = create_sandbox(0);
    struct store_sandbox rec = {0};
    ASSERT(store_sandbox_get(st, id, &rec, &e) == 0);
    int init = (int)json_integer_value(json_object_get(rec.record, "init_pid"));
    json_t *cgs = json_deep_copy(json_object_get(rec.record, "cgroups"));
    uint64_t start = 0;
    pid_t zombie = make_zombie(&start);
    ASSERT(zombie > 0 && start != 0);
    json_object_set_new(rec.record, "creator_pid", json_integer(zombie));
    json_object_set_new(rec.record, "creator_start", json_integer((json_int_t)start));
    json_object_del(rec.record, "init_pid");
    json_object_del(rec.record, "init_start");
    ASSERT(store_sandbox_update(st, &rec, &e) == 0);
    store_sandbox_release(&rec);
    ASSERT(store_sandbox_set_state(st, id, "creating", &e) == 0);
    struct backend *other = local_backend_new(loop, st, NULL, &e); /* reconciles */
    if (other == NULL)
        TEST_FAIL("second instance: %s", e.msg);
    ASSERT(store_sandbox_get(st, id, &rec, &e) < 0 && e.code == MCP_ERR_NOT_FOUND);
    ASSERT(!pid_alive(init));
    const char *key;
    json_t *path;
    json_object_foreach(cgs, key, path)
    {
        const char *p = json_string_value(path);
        if (p != NULL && p[0] != '\0' && access(p, F_OK) == 0)
            TEST_FAIL("%s cgroup %s left", key, p);
    }
    json_decref(cgs);
    waitpid(zombie, NULL, 0);
    local_backend_free(other);
    uv_run(loop, UV_RUN_NOWAIT);
    free(id);
}

struct destroy_at_once {
    bool done;
    char id[LOCAL_ID_LEN];
    int init;
    struct result destroyed;
};

static void destroy_from_callback(void *arg, json_t *res, const struct mcp_error *err)
{
    struct destroy_at_once *d = arg;
    d->done = true;
    if (err != NULL)
        return;
    snprintf(d->id, sizeof d->id, "%s", json_string_value(json_object_get(res, "sandbox_id")));
    struct store_sandbox rec = {0};
    struct mcp_error e;
    if (store_sandbox_get(st, d->id, &rec, &e) == 0) {
        d->init = (int)json_integer_value(json_object_get(rec.record, "init_pid"));
        store_sandbox_release(&rec);
    }
    if (be->ops->destroy(be, d->id, on_result, &d->destroyed, &e) < 0)
        d->destroyed.failed = true, d->destroyed.done = true;
}

/* The create's reply comes before the sandbox's exit is watched (local_create.c,
 * create_finish): a caller that destroys it from the reply's callback still gets it released:
 * init gone, record gone. */
TEST(destroy_from_the_create_callback)
{
    struct destroy_at_once d = {0};
    struct mcp_error e;
    struct sandbox_spec spec = {.owner = "test", .memory_bytes = 256u << 20,
                                .disk_bytes = 64u << 20};
    ASSERT(be->ops->create(be, &spec, destroy_from_callback, &d, &e) == 0);
    ASSERT(run_until(&d.done, WAIT_MS));
    ASSERT(d.id[0] != '\0' && d.init > 0);
    ASSERT(run_until(&d.destroyed.done, WAIT_MS));
    ASSERT(!d.destroyed.failed);
    json_decref(d.destroyed.json);
    wait_released(d.id);
    ASSERT(!pid_alive(d.init));
}

/* The ids the spawner threads have prepared (their markers in the runtime directory), once at
 * least one is; n found. */
static int prepared_ids(char ids[LOCAL_SPAWNERS][LOCAL_ID_LEN])
{
    const char *run_dir = ((struct local_backend *)be)->run_dir;
    int n = 0;
    for (int tries = 0; tries < WAIT_MS / 10 && n == 0; tries++) {
        sleep_loop(10);
        DIR *d = opendir(run_dir);
        ASSERT(d != NULL);
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < LOCAL_SPAWNERS)
            if (strncmp(e->d_name, "prepared-sbx-", 13) == 0)
                snprintf(ids[n++], LOCAL_ID_LEN, "%s", e->d_name + 9);
        closedir(d);
    }
    return n;
}

/* Whether a host-wide uid slot lease names this sandbox (root mode; uid_slots.c). */
static bool slot_leased_to(const char *id)
{
    const struct local_backend *lb = (const struct local_backend *)be;
    DIR *d = lb->ident.mode == LOCAL_ID_SLICES ? opendir(lb->slots_dir) : NULL;
    bool found = false;
    struct dirent *e;
    while (d != NULL && !found && (e = readdir(d)) != NULL) {
        char path[LOCAL_PATH_MAX + 300], text[128] = "";
        snprintf(path, sizeof path, "%s/%s", lb->slots_dir, e->d_name);
        FILE *f = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
        if (f != NULL && fgets(text, sizeof text, f) != NULL)
            found = strncmp(text, id, strlen(id)) == 0 && text[strlen(id)] == ' ';
        if (f != NULL)
            fclose(f);
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* Another backend's rows with the prepared ids, so that the create that takes one of these
 * sets cannot write its record. */
static void occupy(char ids[LOCAL_SPAWNERS][LOCAL_ID_LEN], int n)
{
    struct mcp_error e;
    for (int i = 0; i < n; i++) {
        struct store_sandbox other = {.id = ids[i], .backend = (char *)"elsewhere",
                                      .owner = (char *)"test", .state = (char *)"running",
                                      .created_at_ms = now_wall_ms(), .record = json_object()};
        ASSERT(store_sandbox_insert(st, &other, &e) == 0);
        json_decref(other.record);
    }
}

static void free_ids(char ids[LOCAL_SPAWNERS][LOCAL_ID_LEN], int n)
{
    struct mcp_error e;
    for (int i = 0; i < n; i++)
        ASSERT(store_sandbox_delete(st, ids[i], &e) == 0);
}

/* A spawner's create writes the record while the thread clones, and the thread releases the
 * child only once it is written. When the record cannot be written (here: another backend's
 * row already has the prepared id), the create fails with that error, the child is killed, its
 * cgroups, directories and uid slot lease go, and the row it ran into stays. (A create that
 * takes a set whose marker was not seen yet succeeds: it is destroyed and the test tries again.) */
TEST(no_child_released_without_its_record)
{
    struct local_backend *lb = (struct local_backend *)be;
    if (lb->cg.layout != CG_HYBRID) {
        printf("# no spawner threads on this host's cgroups (%s): their creates cannot be "
               "tried\n", cg_layout_name(lb->cg.layout));
        return;
    }
    char *warm = create_sandbox(0); /* the spawners start with a backend's second create */
    destroy_sandbox(warm);
    free(warm);
    struct mcp_error e;
    char ids[LOCAL_SPAWNERS][LOCAL_ID_LEN];
    int n = 0;
    bool failed = false;
    for (int attempt = 0; attempt < 10 && !failed; attempt++) {
        n = prepared_ids(ids);
        ASSERT(n > 0);
        occupy(ids, n);
        struct result r = {0};
        struct sandbox_spec spec = {.owner = "test", .memory_bytes = 256u << 20,
                                    .disk_bytes = 64u << 20};
        /* the spawn, and so this failure, happen within the call */
        failed = be->ops->create(be, &spec, on_result, &r, &e) < 0;
        if (failed)
            break;
        ASSERT(run_until(&r.done, WAIT_MS) && !r.failed);
        char *id = xstrdup(json_string_value(json_object_get(r.json, "sandbox_id")));
        json_decref(r.json);
        destroy_sandbox(id);
        free(id);
        free_ids(ids, n);
    }
    ASSERT(failed);
    ASSERT_EQ(e.code, MCP_ERR_CONFLICT);
    for (int i = 0; i < n; i++) {
        struct store_sandbox rec = {0};
        ASSERT(store_sandbox_get(st, ids[i], &rec, &e) == 0); /* not deleted by the failure */
        ASSERT_STR_EQ(rec.backend, "elsewhere");
        store_sandbox_release(&rec);
        char path[LOCAL_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/prepared-%s", lb->run_dir, ids[i]);
        if (access(path, F_OK) == 0)
            continue; /* the set the create did not take */
        snprintf(path, sizeof path, "%s/%s", lb->run_dir, ids[i]);
        ASSERT(access(path, F_OK) < 0);
        ASSERT(!slot_leased_to(ids[i])); /* leased with the set, released with it */
        snprintf(path, sizeof path, "%s/sandboxes/%s", state_dir, ids[i]);
        ASSERT(access(path, F_OK) < 0);
        const char *bases[] = {lb->cg.v2_base, lb->cg.mem_base, lb->cg.pids_base,
                               lb->cg.cpu_base};
        for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
            if (bases[b][0] == '\0')
                continue;
            snprintf(path, sizeof path, "%s/%s", bases[b], ids[i]);
            if (access(path, F_OK) == 0)
                TEST_FAIL("cgroup %s left", path);
        }
    }
    free_ids(ids, n);
    char *id = create_sandbox(0); /* and the next create works */
    ASSERT(lb->ident.mode != LOCAL_ID_SLICES || slot_leased_to(id));
    destroy_sandbox(id);
    free(id);
}

struct http_get {
    int port;
    bool done;
    char reply[8192];
};

static void *http_get_thread(void *arg)
{
    struct http_get *g = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    size_t got = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        const char req[] = "GET /hello.txt HTTP/1.0\r\n\r\n";
        if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
            ssize_t n;
            while (got < sizeof g->reply - 1 && (n = read(fd, g->reply + got, sizeof g->reply - 1 - got)) > 0)
                got += (size_t)n;
        }
    }
    g->reply[got] = '\0';
    close(fd);
    __atomic_store_n(&g->done, true, __ATOMIC_RELEASE);
    return NULL;
}

/* endpoint: a web server on the sandbox's loopback, reached from the host through the
 * forwarder. */
TEST(endpoint_forwards_from_host)
{
    if (access("/usr/bin/python3", X_OK) < 0)
        SKIP("python3 missing");
    char *id = create_sandbox(0);
    struct run x;
    run_cmd(id, "echo hello-from-sandbox > /workspace/hello.txt", 0, &x);
    run_free(&x);
    memset(&x, 0, sizeof x);
    buf_init(&x.out, 1 << 20);
    buf_init(&x.err, 1 << 20);
    struct exec_request req = {.command = "cd /workspace && exec python3 -m http.server 8000 "
                                          "--bind 127.0.0.1"};
    struct exec_observer obs = {run_started, run_output, run_done, &x};
    struct exec_handle *h = NULL;
    struct mcp_error e;
    ASSERT_EQ(be->ops->exec(be, id, &req, &obs, &h, &e), 0);
    ASSERT(run_until(&x.started, WAIT_MS));
    be->ops->exec_detach(h);
    struct run probe;
    run_cmd(id, "for i in $(seq 1 100); do python3 -c 'import socket; "
                "socket.create_connection((\"127.0.0.1\", 8000))' 2>/dev/null && break; "
                "sleep 0.1; done", 20000, &probe);
    run_free(&probe);
    struct result r;
    CALL(r, be->ops->endpoint(be, id, 8000, on_result, &r, &_e));
    ASSERT(!r.failed);
    ASSERT_STR_EQ(json_string_value(json_object_get(r.json, "reachable_from")), "host");
    struct http_get g = {.port = (int)json_integer_value(json_object_get(r.json, "host_port"))};
    json_decref(r.json);
    pthread_t t;
    pthread_create(&t, NULL, http_get_thread, &g);
    for (int i = 0; i < 200 && !__atomic_load_n(&g.done, __ATOMIC_ACQUIRE); i++)
        sleep_loop(25);
    pthread_join(t, NULL);
    ASSERT_CONTAINS(g.reply, "200");
    ASSERT_CONTAINS(g.reply, "hello-from-sandbox");
    run_free(&x);
    destroy_sandbox(id);
    free(id);
}

int main(void)
{
    struct mcp_error e;
    dumpable_at_start = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    if (local_backend_probe(&e) < 0) { /* root, or a user (docs/local-backend.md) */
        printf("1..0 # SKIP %s\n", e.msg);
        return 77;
    }
    snprintf(state_dir, sizeof state_dir, "/tmp/mcpbox-local-test-XXXXXX");
    if (mkdtemp(state_dir) == NULL)
        return 1;
    loop = uv_default_loop();
    st = store_open(state_dir, &e);
    if (st == NULL) {
        printf("# store_open: %s\n", e.msg);
        return 1;
    }
    be = local_backend_new(loop, st, NULL, &e);
    if (be == NULL) {
        printf("1..0 # SKIP local backend unavailable: %s\n", e.msg);
        return e.code == MCP_ERR_UNSUPPORTED ? 77 : 1;
    }
    /* The kernel may refuse the namespaces (e.g. AppArmor's userns restriction): skip then. */
    struct result probe;
    struct sandbox_spec spec = {.owner = "test", .memory_bytes = 128u << 20, .disk_bytes = 8u << 20};
    memset(&probe, 0, sizeof probe);
    if (be->ops->create(be, &spec, on_result, &probe, &e) < 0 || !run_until(&probe.done, WAIT_MS) ||
        probe.failed) {
        const struct mcp_error *pe = probe.failed ? &probe.err : &e;
        printf("1..0 # SKIP cannot create a local sandbox here: %s\n", pe->msg);
        return pe->code == MCP_ERR_UNSUPPORTED ? 77 : 1;
    }
    struct result gone;
    memset(&gone, 0, sizeof gone);
    if (be->ops->destroy(be, json_string_value(json_object_get(probe.json, "sandbox_id")), on_result,
                         &gone, &e) == 0)
        run_until(&gone.done, WAIT_MS);
    json_decref(probe.json);
    json_decref(gone.json);
    RUN(create_exec_destroy);
    RUN(uid_map_not_host_root);
    RUN(exec_timeout_and_background);
    RUN(command_logs_made_at_first_output);
    RUN(missing_cwd_fails_the_exec);
    RUN(file_operations);
    RUN(pause_resume);
    RUN(ttl_enforced_by_agent);
    RUN(huge_durations_saturate);
    RUN(env_that_exec_cannot_pass_is_refused);
    RUN(too_few_pids_refused_with_the_minimum);
    RUN(pages_never_split_characters);
    RUN(non_utf8_names_are_listed_and_usable);
    RUN(registered_image_overlay);
    RUN(idle_timeout_enforced_by_agent);
    RUN(reconnect_from_second_instance);
    RUN(concurrent_instance_adopts);
    RUN(plain_commands_skip_the_shell);
    RUN(errno_text_once);
    RUN(destroy_waits_for_non_children);
    RUN(reconcile_cleans_half_made);
    RUN(no_child_released_without_its_record);
    RUN(destroy_from_the_create_callback);
    RUN(init_in_its_cgroups);
    RUN(clone_in_shared_memory_where_it_can);
    RUN(memory_above_and_below_default_on_warm_server);
    RUN(endpoint_forwards_from_host);
    RUN(network_egress_blocks_private_ranges);
    RUN(limits_and_confinement);
    local_backend_free(be);
    uv_run(loop, UV_RUN_DEFAULT);
    store_close(st);
    if (rmtree(state_dir) < 0)
        printf("# could not remove %s\n", state_dir);
    return test_done();
}
