/* local_spawn's failures before the clone (backend/local/spawn.c): when pipe2 fails the
 * socketpair made just before is closed, and the error says what failed even when the caller's
 * err was never written (callers pass an uninitialised one). And the store writes whose return
 * codes the backend does not act on are logged when they fail. No sandbox is made. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/local_spawn.h"
#include "backend/local/local_sandbox.h"
#include "lib/base/log.h"
#include "test.h"
#include "lib/base/rmtree.h"

static char base[64];

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* Fills every free descriptor below the first one after the highest open one; returns that
 * bound: the next descriptors handed out are bound, bound + 1, ... in order. */
static int fill_fd_holes(int *held, int *n_held)
{
    int high = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fd_open(fd))
            high = fd + 1;
    *n_held = 0;
    for (int fd = 0; fd < high; fd++)
        if (!fd_open(fd))
            held[(*n_held)++] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return high;
}

TEST(pipe_failure_closes_the_socketpair_and_says_why)
{
    char dir[128], logs[128];
    snprintf(dir, sizeof dir, "%s/sb", base);
    snprintf(logs, sizeof logs, "%s/logs", base);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    struct local_identity ident = {.mode = LOCAL_ID_SINGLE, .uid_base = (uint32_t)geteuid(),
                                   .uid_count = 1, .gid_base = (uint32_t)getegid(),
                                   .gid_count = 1};
    struct spawn_request req = {.id = "sb", .dir = dir, .logs_dir = logs,
                                .ident = &ident, .disk_bytes = 1 << 20,
                                .memory_bytes = 64 << 20, .pids = 16, .agent_config = "{}",
                                .agent_exe_fd = -1};
    int held[1024], n_held;
    int bound = fill_fd_holes(held, &n_held);
    /* prepare() takes bound and bound+1 (log directory, listener), the socketpair bound+2 and
     * bound+3: pipe2 is the first call refused. */
    struct rlimit old, lim;
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)bound + 4;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
    struct spawn_result res;
    struct mcp_error err;
    memset(&err, 0x55, sizeof err); /* as a caller's uninitialised err */
    int rc = local_spawn(&req, &res, &err);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    ASSERT_EQ(rc, -1);
    ASSERT(memchr(err.msg, '\0', sizeof err.msg) != NULL);
    ASSERT_CONTAINS(err.msg, "pipe");
    ASSERT_CONTAINS(err.msg, strerror(EMFILE));
    for (int fd = bound; fd < bound + 4; fd++)
        if (fd_open(fd))
            TEST_FAIL("descriptor %d is still open after the failed spawn", fd);
    for (int i = 0; i < n_held; i++)
        close(held[i]);
}

/* Runs fn with stderr (where logs go) sent to a file; returns what was written there. */
static char *stderr_of(void (*fn)(struct store *), struct store *st)
{
    static char text[4096];
    char path[128];
    snprintf(path, sizeof path, "%s/stderr", base);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (saved < 0 || fd < 0 || dup2(fd, STDERR_FILENO) < 0)
        TEST_FAIL("cannot redirect stderr");
    close(fd);
    fn(st);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    return text;
}

static void refused_event(struct store *st)
{
    struct mcp_error err;
    ASSERT_EQ(local_event(st, "sbx-test", NULL, json_object(), &err), -1); /* no kind */
}

static void delete_of_a_missing_record(struct store *st)
{
    local_record_delete(st, "sbx-never-made"); /* another process deleted it: nothing to say */
}

TEST(refused_store_writes_are_logged)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/state", base);
    struct mcp_error err;
    struct store *st = store_open(dir, &err);
    if (st == NULL)
        TEST_FAIL("store_open: %s", err.msg);
    log_set_level(LOG_LEVEL_WARN);
    ASSERT_CONTAINS(stderr_of(refused_event, st), "event was not recorded");
    ASSERT_STR_EQ(stderr_of(delete_of_a_missing_record, st), "");
    store_close(st);
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/mbx-spawn-XXXXXX");
    if (mkdtemp(base) == NULL)
        return 1;
    RUN(pipe_failure_closes_the_socketpair_and_says_why);
    RUN(refused_store_writes_are_logged);
    if (rmtree(base) < 0)
        fprintf(stderr, "could not remove %s\n", base);
    return test_done();
}
