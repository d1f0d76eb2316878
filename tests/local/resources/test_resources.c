/* Resource limits (docs/internals/isolation-facts.md §4, H5 in §8): a fork bomb stops at the pids
 * limit, a memory
 * hog is OOM-killed and the kill is reported with its command, a disk fill hits the tmpfs limit;
 * meanwhile another sandbox and the host keep working. Exits 77 where local sandboxes cannot
 * run. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "test.h"

#define LIMITED_PIDS 48
#define LIMITED_MEMORY (128ULL << 20)
#define LIMITED_DISK (32ULL << 20)
#define HOG_MIB 400
#define FILL_MIB 200
#define TEST_DEADLINE_S 240

static struct harness h;
static char *limited, *other;

/* Forks sleepers until fork fails, reports, holds them a moment, then cleans up. */
static const char fork_bomb[] =
    "python3 -c '\n"
    "import os, sys, time\n"
    "kids = []\n"
    "try:\n"
    "    while len(kids) < 5000:\n"
    "        pid = os.fork()\n"
    "        if pid == 0:\n"
    "            time.sleep(30); os._exit(0)\n"
    "        kids.append(pid)\n"
    "except OSError as e:\n"
    "    print(\"forked\", len(kids), \"errno\", e.errno, flush=True)\n"
    "time.sleep(2)\n"
    "for k in kids: os.kill(k, 9)\n"
    "for k in kids: os.waitpid(k, 0)\n"
    "'";

static void exec_ok(const char *id, const char *cmd, const char *want_out)
{
    struct harness_exec x;
    if (harness_exec(&h, id, cmd, &x) < 0)
        TEST_FAIL("exec %s in %s: %s", cmd, id, h.err.msg);
    if (x.exit_code != 0 || strstr(buf_cstr(&x.out), want_out) == NULL)
        TEST_FAIL("exec %s in %s: exit %d, out '%s', err '%s'", cmd, id, x.exit_code,
                  buf_cstr(&x.out), buf_cstr(&x.err));
    harness_exec_release(&x);
}

static int host_fork_works(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? 1 : 0;
}

struct bomb {
    struct buf out;
    bool done;
    json_t *status;
};

static void bomb_output(void *arg, enum exec_stream s, const char *data, size_t len)
{
    buf_append(&((struct bomb *)arg)->out, data, len);
}

static void bomb_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct bomb *b = arg;
    b->done = true;
    b->status = result ? json_incref(result) : NULL;
}

TEST(fork_bomb_stops_at_pids_limit)
{
    struct bomb b = {0};
    buf_init(&b.out, 1 << 20);
    struct exec_request req = {.command = fork_bomb};
    struct exec_observer obs = {.on_output = bomb_output, .on_done = bomb_done, .arg = &b};
    struct mcp_error err = {0};
    ASSERT_EQ(h.be->ops->exec(h.be, limited, &req, &obs, NULL, &err), 0);
    while (!b.done && strstr(buf_cstr(&b.out), "forked") == NULL)
        uv_run(&h.loop, UV_RUN_ONCE);
    /* While the bomb holds every pid it may: the other sandbox and the host still work. */
    exec_ok(other, "echo fine", "fine");
    ASSERT(host_fork_works());
    while (!b.done)
        uv_run(&h.loop, UV_RUN_ONCE);
    int n = -1, e = -1;
    printf("# %s", buf_cstr(&b.out));
    ASSERT_EQ(sscanf(buf_cstr(&b.out), "forked %d errno %d", &n, &e), 2);
    ASSERT_EQ(e, EAGAIN);
    ASSERT(n > 0 && n < LIMITED_PIDS);
    json_decref(b.status);
    buf_release(&b.out);
    exec_ok(limited, "echo recovered", "recovered");
}

static bool events_have_oom(const char *id, const char *needle)
{
    json_t *events = NULL;
    struct mcp_error err = {0};
    if (store_event_list(h.store, id, 100, &events, &err) < 0)
        return false;
    cleanup_free char *text = json_dumps(events, JSON_COMPACT);
    json_decref(events);
    printf("# events: %.400s\n", text);
    return strstr(text, "oom") != NULL && strstr(text, needle) != NULL;
}

TEST(memory_hog_oom_killed_and_reported)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "python3 -c 'b = b\"x\" * (%d << 20); print(len(b))'", HOG_MIB);
    struct harness_exec x;
    ASSERT_EQ(harness_exec(&h, limited, cmd, &x), 0);
    cleanup_free char *st = json_dumps(x.status, JSON_COMPACT);
    printf("# hog: %s\n", st);
    ASSERT_STR_EQ(x.state, "oom_killed");
    harness_exec_release(&x);
    ASSERT(events_have_oom(limited, "python3"));
    exec_ok(other, "echo fine", "fine");
    exec_ok(limited, "echo alive", "alive"); /* the sandbox itself survives its command's OOM */
}

TEST(disk_fill_hits_tmpfs_limit)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of=/tmp/fill bs=1M count=%d", FILL_MIB);
    struct harness_exec x;
    ASSERT_EQ(harness_exec(&h, limited, cmd, &x), 0);
    printf("# fill: exit %d: %.200s\n", x.exit_code, buf_cstr(&x.err));
    ASSERT(x.exit_code != 0);
    ASSERT_CONTAINS(buf_cstr(&x.err), "No space left on device");
    harness_exec_release(&x);
    exec_ok(limited, "du -m /tmp/fill | cut -f1", "");
    char check[128];
    snprintf(check, sizeof(check), "test $(du -m /tmp/fill | cut -f1) -le %llu && echo bounded",
             (unsigned long long)(LIMITED_DISK >> 20));
    exec_ok(limited, check, "bounded");
    exec_ok(limited, "rm /tmp/fill && echo freed", "freed");
    exec_ok(other, "echo fine", "fine");
    ASSERT(host_fork_works());
}

int main(void)
{
    xalloc_install();
    alarm(TEST_DEADLINE_S);
    int rc = harness_open(&h);
    if (rc != 0) {
        harness_close(&h);
        return rc == 77 ? 77 : 1;
    }
    struct sandbox_spec spec = {.owner = "test", .pids = LIMITED_PIDS,
                                .memory_bytes = LIMITED_MEMORY, .disk_bytes = LIMITED_DISK};
    limited = harness_create(&h, &spec);
    other = limited ? harness_create(&h, NULL) : NULL;
    if (other == NULL) {
        printf("# create: %s\n", h.err.msg);
        harness_close(&h);
        return h.err.code == MCP_ERR_UNSUPPORTED ? 77 : 1;
    }
    RUN(fork_bomb_stops_at_pids_limit);
    RUN(memory_hog_oom_killed_and_reported);
    RUN(disk_fill_hits_tmpfs_limit);
    harness_destroy(&h, limited);
    harness_destroy(&h, other);
    free(limited);
    free(other);
    harness_close(&h);
    return test_done();
}
