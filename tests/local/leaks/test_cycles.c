/* Leaks (H6, H7): the host's mount table, the sandbox cgroups, processes, this process's file
 * descriptors, the state directory and the store are the same before and after N create/destroy
 * cycles (N = argv[1], default 200). Exits 77 where local sandboxes cannot run.
 *
 * The machine is shared, so cgroups and processes are compared by what this test created: no
 * cgroup directory or process may remain that belongs to one of its sandbox ids. The mount
 * table of the host mount namespace is compared whole. */
#include <dirent.h>
#include <glob.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "test.h"

#define DEFAULT_CYCLES 200
#define EXEC_EVERY 20 /* also run a command in every 20th sandbox */
#define TEST_DEADLINE_S 600

static struct harness h;
static int cycles = DEFAULT_CYCLES;
static char **ids;
static int nids;

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return xstrdup("");
    struct buf b;
    buf_init(&b, 64u << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        buf_append(&b, chunk, n);
    fclose(f);
    return buf_steal(&b, NULL);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static bool mentions_our_id(const char *text)
{
    for (int i = 0; i < nids; i++)
        if (strstr(text, ids[i]) != NULL)
            return true;
    return false;
}

/* Sandbox cgroups live in <hierarchy>/.../mcpbox/<id>: every such directory left of ours. */
static int leftover_cgroups(void)
{
    glob_t g;
    memset(&g, 0, sizeof(g));
    glob("/sys/fs/cgroup/*/mcpbox/sbx-*", GLOB_ONLYDIR, NULL, &g);
    glob("/sys/fs/cgroup/*/*/*/mcpbox/sbx-*", GLOB_ONLYDIR | GLOB_APPEND, NULL, &g);
    glob("/sys/fs/cgroup/mcpbox/sbx-*", GLOB_ONLYDIR | GLOB_APPEND, NULL, &g);
    int n = 0;
    for (size_t i = 0; i < g.gl_pathc; i++)
        if (mentions_our_id(g.gl_pathv[i])) {
            printf("# leftover cgroup %s\n", g.gl_pathv[i]);
            n++;
        }
    globfree(&g);
    return n;
}

static int leftover_processes(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%s/cgroup", e->d_name);
        cleanup_free char *cg = read_all(path);
        if (mentions_our_id(cg)) {
            char st[128];
            snprintf(st, sizeof(st), "/proc/%s/status", e->d_name);
            cleanup_free char *status = read_all(st); /* a zombie? whose? */
            printf("# leftover process %s in %s\n%.200s\n", e->d_name, cg, status);
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static int64_t count_rows(const char *sql)
{
    sqlite3_stmt *s = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(store_db(h.store), sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

/* Every sandbox this state directory has seen, pooled ones included (their "pooled" event). */
static void add_event_ids(void)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(store_db(h.store), "SELECT DISTINCT sandbox_id FROM events", -1, &s,
                           NULL) != SQLITE_OK)
        TEST_FAIL("events query: %s", sqlite3_errmsg(store_db(h.store)));
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(s, 0);
        bool known = false;
        for (int i = 0; i < nids && !known; i++)
            known = strcmp(ids[i], id) == 0;
        if (!known) {
            ids = xrealloc(ids, (size_t)(nids + 1) * sizeof(char *));
            ids[nids++] = xstrdup(id);
        }
    }
    sqlite3_finalize(s);
}

static int sandbox_dirs_left(void)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/sandboxes", h.state_dir);
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void one_cycle(int i)
{
    char *id = harness_create(&h, NULL);
    if (id == NULL)
        TEST_FAIL("cycle %d: create: %s", i, h.err.msg);
    ids[nids++] = id;
    if (i % EXEC_EVERY == 0) {
        struct harness_exec x;
        if (harness_exec(&h, id, "echo hi", &x) < 0 || x.exit_code != 0)
            TEST_FAIL("cycle %d: exec failed", i);
        harness_exec_release(&x);
    }
    if (harness_destroy(&h, id) < 0)
        TEST_FAIL("cycle %d: destroy %s: %s", i, id, h.err.msg);
}

TEST(create_destroy_cycles_leave_nothing)
{
    ids = xcalloc((size_t)cycles + 1, sizeof(char *));
    /* One warm-up cycle (with a command) first: the backend opens some descriptors once. */
    one_cycle(0);
    cleanup_free char *mounts_before = read_all("/proc/self/mountinfo");
    int fds_before = count_fds();
    uint64_t t0 = now_mono_ms();
    for (int i = 1; i <= cycles; i++)
        one_cycle(i);
    uint64_t ms = now_mono_ms() - t0;
    printf("# %d create/destroy cycles in %llu ms (%.1f ms each)\n", cycles,
           (unsigned long long)ms, (double)ms / cycles);
    /* The pool (on unless MCPBOX_LOCAL_POOL=0) holds untaken sandboxes, maybe one still being
     * made: freeing the backend must destroy them all, as a normal mcpbox exit does. */
    if (harness_reopen_backend(&h, 0) < 0)
        TEST_FAIL("reopen: %s", h.err.msg);
    int made = nids;
    add_event_ids();
    printf("# %d sandboxes were pooled and never taken\n", nids - made);
    cleanup_free char *mounts_after = read_all("/proc/self/mountinfo");
    ASSERT_STR_EQ(mounts_after, mounts_before);
    ASSERT_EQ(leftover_cgroups(), 0);
    ASSERT_EQ(leftover_processes(), 0);
    ASSERT_EQ(count_fds(), fds_before);
    ASSERT_EQ(count_rows("SELECT COUNT(*) FROM sandboxes"), 0);
    ASSERT_EQ(count_rows("SELECT COUNT(*) FROM slots"), 0);
    ASSERT_EQ(sandbox_dirs_left(), 0);
    ASSERT_EQ(harness_runtime_left(&h), 0);
    ASSERT_EQ(waitpid(-1, NULL, WNOHANG), -1); /* no child of ours, zombie or alive */
}

int main(int argc, char **argv)
{
    xalloc_install();
    alarm(TEST_DEADLINE_S);
    if (argc > 1)
        cycles = atoi(argv[1]);
    if (cycles <= 0) {
        fprintf(stderr, "usage: %s [CYCLES]\n", argv[0]);
        return 2;
    }
    int rc = harness_open(&h);
    if (rc != 0) {
        harness_close(&h);
        return rc == 77 ? 77 : 1;
    }
    RUN(create_destroy_cycles_leave_nothing);
    harness_close(&h);
    for (int i = 0; i < nids; i++)
        free(ids[i]);
    free(ids);
    return test_done();
}
