/* The pool of pre-created sandboxes (backend/local/local_pool.c):
 *
 *   - a pooled sandbox, once taken, is indistinguishable from a fresh one to its user: same
 *     view from inside (env, uid, mounts, empty /tmp and /workspace, no other process, limits)
 *     as a sandbox made cold with the same spec, its own uid range in the store, owner, TTL and
 *     idle timeout as asked, and its agent enforces that TTL;
 *   - untaken pooled sandboxes are invisible (list, get) and never leak: they end with their
 *     own pool TTL (and are not refilled: an idle server drains), a normal exit destroys them,
 *     and after kill -9 of their mcpbox the next start's reconcile removes them;
 *   - pool 0 is off;
 *   - it refills as soon as a command finishes, not only after creates pause.
 * Exits 77 where local sandboxes cannot run. */
#include <fcntl.h>
#include <glob.h>
#include <linux/nsfs.h>
#include <signal.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "test.h"

#define POOL 2
#define WAIT_MS 20000
#define SHORT_TTL "2"
#define PROBE                                                                                     \
    "echo FOO=$FOO; id; hostname; ls -A /tmp /workspace /root; ulimit -n; "                       \
    "cut -d' ' -f5 /proc/self/mountinfo; cat /proc/1/comm; "                                      \
    "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo processes $n" /* the agent and sh */

static int64_t sql_int(struct harness *h, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(store_db(h->store), sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

static char *sql_text(struct harness *h, const char *sql)
{
    sqlite3_stmt *s = NULL;
    char *r = NULL;
    if (sqlite3_prepare_v2(store_db(h->store), sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) != NULL)
        r = xstrdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return r;
}

static int64_t pooled_count(struct harness *h)
{
    return sql_int(h, "SELECT COUNT(*) FROM sandboxes WHERE state = 'pooled'");
}

/* Runs the loop (as a live server would) until the pool holds n ready sandboxes. */
static bool wait_pooled(struct harness *h, int64_t n)
{
    uint64_t end = now_mono_ms() + WAIT_MS;
    while (now_mono_ms() < end) {
        uv_run(&h->loop, UV_RUN_NOWAIT);
        if (pooled_count(h) == n &&
            sql_int(h, "SELECT COUNT(*) FROM sandboxes s WHERE state = 'pooled' AND EXISTS "
                       "(SELECT 1 FROM events e WHERE e.sandbox_id = s.id AND e.kind = 'pooled')") == n)
            return true;
        usleep(10000);
    }
    return false;
}

static char *probe(struct harness *h, const char *id)
{
    struct harness_exec x;
    if (harness_exec(h, id, PROBE, &x) < 0 || x.exit_code != 0)
        TEST_FAIL("probe in %s failed: %s", id, h->err.msg);
    char *out = buf_steal(&x.out, NULL);
    harness_exec_release(&x);
    return out;
}

static bool was_pooled(struct harness *h, const char *id)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM events WHERE sandbox_id = '%s' AND kind = 'created' AND "
             "json_extract(data, '$.pooled') = 1", id);
    return sql_int(h, sql) == 1;
}

static uint64_t memory_limit_of(struct harness *h, const char *id)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT json_extract(record, '$.cgroups.memory') FROM sandboxes "
                               "WHERE id = '%s'", id);
    cleanup_free char *dir = sql_text(h, sql);
    char path[512];
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", dir ? dir : "");
    if (dir == NULL || dir[0] == '\0') { /* pure v2 */
        snprintf(sql, sizeof(sql), "SELECT json_extract(record, '$.cgroups.v2') FROM sandboxes "
                                   "WHERE id = '%s'", id);
        cleanup_free char *v2 = sql_text(h, sql);
        snprintf(path, sizeof(path), "%s/memory.max", v2 ? v2 : "");
    }
    FILE *f = fopen(path, "re");
    unsigned long long v = 0;
    if (f == NULL || fscanf(f, "%llu", &v) != 1)
        v = 0;
    if (f)
        fclose(f);
    return v;
}

static struct sandbox_spec user_spec(json_t *env, json_t *meta)
{
    return (struct sandbox_spec){.owner = "alice", .env = env, .metadata = meta,
                                 .timeout_seconds = 123, .idle_timeout_seconds = 77};
}

/* Harnesses a test opened: after a failed check (which skips the test's own cleanup) main
 * destroys their sandboxes and closes them, so that a failure leaks nothing either. */
#define MAX_OPEN 4
static struct harness *opened[MAX_OPEN];

static int open_tracked(struct harness *h, const char *dir, int pool)
{
    int rc = harness_open_dir(h, dir, pool);
    for (int i = 0; i < MAX_OPEN; i++)
        if (opened[i] == NULL) {
            opened[i] = h;
            break;
        }
    return rc;
}

static void close_tracked(struct harness *h)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (opened[i] == h)
            opened[i] = NULL;
    sqlite3_stmt *s = NULL;
    char *ids[64];
    int n = 0;
    if (h->store && sqlite3_prepare_v2(store_db(h->store), "SELECT id FROM sandboxes WHERE "
                                       "state <> 'pooled'", -1, &s, NULL) == SQLITE_OK)
        while (n < 64 && sqlite3_step(s) == SQLITE_ROW)
            ids[n++] = xstrdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    for (int i = 0; i < n; i++) {
        if (h->be)
            harness_destroy(h, ids[i]);
        free(ids[i]);
    }
    harness_close(h); /* frees the backend: the pooled ones go */
}

static void close_leftovers(void)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (opened[i] != NULL)
            close_tracked(opened[i]);
}

TEST(taken_sandbox_is_like_a_fresh_one)
{
    static struct harness pooled, cold;
    ASSERT_EQ(open_tracked(&pooled, NULL, POOL), 0);
    ASSERT_EQ(open_tracked(&cold, NULL, 0), 0);
    /* The pool starts with a process's second create. */
    char *warm[2] = {harness_create(&pooled, NULL), harness_create(&pooled, NULL)};
    ASSERT(warm[0] && warm[1]);
    ASSERT(!was_pooled(&pooled, warm[0]) && !was_pooled(&pooled, warm[1]));
    ASSERT(wait_pooled(&pooled, POOL));
    /* Invisible while pooled: not listed, not found. */
    harness_reset(&pooled);
    ASSERT_EQ(pooled.be->ops->list(pooled.be, NULL, NULL, harness_cb, &pooled, &pooled.err), 0);
    ASSERT_EQ(harness_wait(&pooled), 0);
    ASSERT_EQ(json_array_size(json_object_get(pooled.result, "sandboxes")), 2);
    cleanup_free char *pid = sql_text(&pooled, "SELECT id FROM sandboxes WHERE state = 'pooled'");
    struct mcp_error e;
    ASSERT(pooled.be->ops->get(pooled.be, pid, harness_cb, &pooled, &e) < 0);
    ASSERT_EQ(e.code, MCP_ERR_NOT_FOUND);

    json_t *env = json_pack("{s:s}", "FOO", "bar"), *meta = json_pack("{s:s}", "k", "v");
    struct sandbox_spec spec = user_spec(env, meta);
    int64_t t0 = now_wall_ms();
    char *a = harness_create(&pooled, &spec), *b = harness_create(&cold, &spec);
    ASSERT(a && b);
    ASSERT(was_pooled(&pooled, a));
    ASSERT(!was_pooled(&cold, b));
    cleanup_free char *pa = probe(&pooled, a);
    cleanup_free char *pb = probe(&cold, b);
    ASSERT_STR_EQ(pa, pb);
    ASSERT_CONTAINS(pa, "FOO=bar");
    ASSERT_CONTAINS(pa, "processes 2");
    ASSERT_EQ(memory_limit_of(&pooled, a), memory_limit_of(&cold, b));
    ASSERT(memory_limit_of(&pooled, a) > 0);
    /* The record: the caller's owner, TTL, idle timeout, metadata; its own uid range. */
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT owner || ' ' || state || ' ' || idle_timeout_s || ' ' || "
                               "json_extract(record, '$.metadata.k') FROM sandboxes WHERE id = '%s'", a);
    cleanup_free char *row = sql_text(&pooled, sql);
    ASSERT_STR_EQ(row, "alice running 77 v");
    snprintf(sql, sizeof(sql), "SELECT expires_at_ms FROM sandboxes WHERE id = '%s'", a);
    int64_t exp = sql_int(&pooled, sql);
    ASSERT(exp >= t0 + 123000 && exp <= now_wall_ms() + 123000);
    /* (a refill may be under way: its record has no uid_base yet). Rootless, every sandbox
     * shares the server's one mapping (backend/local/identity.h): nothing more to compare. */
    if (geteuid() == 0)
    ASSERT_EQ(sql_int(&pooled, "SELECT COUNT(DISTINCT json_extract(record, '$.uid_base')) FROM "
                               "sandboxes"),
              sql_int(&pooled, "SELECT COUNT(*) FROM sandboxes WHERE "
                               "json_extract(record, '$.uid_base') IS NOT NULL"));
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM sandboxes WHERE id <> '%s' AND "
             "json_extract(record, '$.uid_base') = (SELECT json_extract(record, '$.uid_base') "
             "FROM sandboxes WHERE id = '%s')", a, a);
    ASSERT_EQ(sql_int(&pooled, sql), geteuid() == 0 ? 0 : sql_int(&pooled, "SELECT COUNT(*) - 1 "
                                   "FROM sandboxes WHERE json_extract(record, '$.uid_base') "
                                   "IS NOT NULL"));
    json_decref(env);
    json_decref(meta);
    harness_destroy(&pooled, a);
    harness_destroy(&cold, b);
    harness_destroy(&pooled, warm[0]);
    harness_destroy(&pooled, warm[1]);
    free(a), free(b), free(warm[0]), free(warm[1]);
    close_tracked(&cold);
    /* A normal exit takes the untaken ones along. */
    ASSERT_EQ(harness_reopen_backend(&pooled, 0), 0);
    ASSERT_EQ(sql_int(&pooled, "SELECT COUNT(*) FROM sandboxes"), 0);
    ASSERT_EQ(sql_int(&pooled, "SELECT COUNT(*) FROM slots"), 0);
    close_tracked(&pooled);
}

/* The agent of a taken sandbox enforces the caller's TTL, not the pool's. */
TEST(taken_sandbox_keeps_the_callers_ttl)
{
    static struct harness h;
    ASSERT_EQ(open_tracked(&h, NULL, POOL), 0);
    char *w1 = harness_create(&h, NULL), *w2 = harness_create(&h, NULL);
    ASSERT(wait_pooled(&h, POOL));
    struct sandbox_spec spec = {.owner = "alice", .timeout_seconds = 2};
    char *id = harness_create(&h, &spec);
    ASSERT(id && was_pooled(&h, id));
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT state FROM sandboxes WHERE id = '%s'", id);
    uint64_t end = now_mono_ms() + WAIT_MS;
    char *state = NULL;
    while (now_mono_ms() < end) {
        uv_run(&h.loop, UV_RUN_NOWAIT);
        free(state);
        state = sql_text(&h, sql);
        if (state && strcmp(state, "expired") == 0)
            break;
        usleep(20000);
    }
    ASSERT_STR_EQ(state, "expired");
    free(state);
    harness_destroy(&h, id);
    harness_destroy(&h, w1);
    harness_destroy(&h, w2);
    free(id), free(w1), free(w2);
    close_tracked(&h);
}

/* Untaken pooled sandboxes end with their own (pool) TTL, and are not made again until the
 * next create: an idle server holds none. */
TEST(untaken_sandboxes_expire_and_the_pool_drains)
{
    static struct harness h;
    setenv("MCPBOX_LOCAL_POOL_TTL", SHORT_TTL, 1);
    ASSERT_EQ(open_tracked(&h, NULL, POOL), 0);
    unsetenv("MCPBOX_LOCAL_POOL_TTL");
    char *w1 = harness_create(&h, NULL), *w2 = harness_create(&h, NULL);
    harness_destroy(&h, w1);
    harness_destroy(&h, w2);
    ASSERT(wait_pooled(&h, POOL));
    uint64_t end = now_mono_ms() + WAIT_MS;
    while (now_mono_ms() < end && sql_int(&h, "SELECT COUNT(*) FROM sandboxes") != 0) {
        uv_run(&h.loop, UV_RUN_NOWAIT);
        usleep(20000);
    }
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM sandboxes"), 0);
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM slots"), 0);
    usleep(500000); /* no refill follows */
    uv_run(&h.loop, UV_RUN_NOWAIT);
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM sandboxes"), 0);
    free(w1), free(w2);
    close_tracked(&h);
}

static int cgroups_of(const char *id)
{
    char pat[256];
    glob_t g;
    memset(&g, 0, sizeof(g));
    snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/mcpbox/%s", id);
    glob(pat, GLOB_ONLYDIR, NULL, &g);
    snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/*/*/mcpbox/%s", id);
    glob(pat, GLOB_ONLYDIR | GLOB_APPEND, NULL, &g);
    snprintf(pat, sizeof(pat), "/sys/fs/cgroup/mcpbox/%s", id);
    glob(pat, GLOB_ONLYDIR | GLOB_APPEND, NULL, &g);
    int n = (int)g.gl_pathc;
    globfree(&g);
    return n;
}

/* In a child: a server that made two creates and filled its pool, then waits to be killed. */
static void pooling_child(int fd)
{
    struct harness h;
    if (harness_open_dir(&h, NULL, POOL) != 0)
        _exit(3);
    char *a = harness_create(&h, NULL), *b = harness_create(&h, NULL);
    if (a == NULL || b == NULL || !wait_pooled(&h, POOL))
        _exit(4);
    if (write(fd, h.state_dir, strlen(h.state_dir) + 1) < 0)
        _exit(5);
    pause();
    _exit(0);
}

TEST(kill_9_then_restart_reaps_the_pool)
{
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    pid_t child = fork();
    if (child == 0) {
        close(p[0]);
        pooling_child(p[1]);
    }
    close(p[1]);
    char dir[128] = "";
    ssize_t n = read(p[0], dir, sizeof(dir) - 1);
    close(p[0]);
    ASSERT(n > 0);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    static struct harness h;
    ASSERT_EQ(open_tracked(&h, dir, 0), 0); /* the restart: reconcile runs */
    ASSERT_EQ(pooled_count(&h), 0);
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM sandboxes"), 2); /* the two real ones live on */
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM events WHERE kind = 'reaped'"), POOL);
    char *ids[2] = {sql_text(&h, "SELECT id FROM sandboxes ORDER BY id LIMIT 1"),
                    sql_text(&h, "SELECT id FROM sandboxes ORDER BY id DESC LIMIT 1")};
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(harness_destroy(&h, ids[i]), 0);
        free(ids[i]);
    }
    /* Nothing of any sandbox this directory has seen is left. */
    sqlite3_stmt *s = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(store_db(h.store), "SELECT DISTINCT sandbox_id FROM events", -1,
                                 &s, NULL), SQLITE_OK);
    int seen = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        ASSERT_EQ(cgroups_of((const char *)sqlite3_column_text(s, 0)), 0);
        seen++;
    }
    sqlite3_finalize(s);
    ASSERT_EQ(seen, 2 + POOL);
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM sandboxes"), 0);
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM slots"), 0);
    ASSERT_EQ(harness_runtime_left(&h), 0); /* nor in the runtime directory (a tmpfs) */
    close_tracked(&h);
}

static const char *battery_path;

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return NULL;
    struct buf b;
    buf_init(&b, 64u << 20);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        buf_append(&b, chunk, n);
    fclose(f);
    return buf_steal(&b, len);
}

/* The escape and hardening battery (tests/local/battery), as run_battery.py runs it: every check
 * must pass. */
static void run_battery_in(struct harness *h, const char *id)
{
    size_t len = 0;
    cleanup_free char *bin = read_file(battery_path, &len);
    ASSERT(bin != NULL);
    char name[64];
    snprintf(name, sizeof(name), "sbx-battery-pool-%d", (int)getpid());
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path + 1, name, strlen(name));
    ASSERT_EQ(bind(ls, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                                           1 + strlen(name))), 0);
    ASSERT_EQ(listen(ls, 8), 0);
    ASSERT_EQ(harness_write(h, id, "/workspace/battery", bin, len), 0);
    char cmd[2048], run[1024];
    ASSERT_EQ(harness_runtime_dir(h, run, sizeof(run)), 0);
    snprintf(cmd, sizeof(cmd), "chmod 555 /workspace/battery && BATTERY_ABSTRACT_NAME=%s "
             "BATTERY_HOST_PATHS=%s:%s/mcpbox.db:%s/sandboxes:%s /workspace/battery", name,
             h->state_dir, h->state_dir, h->state_dir, run);
    struct harness_exec x;
    ASSERT_EQ(harness_exec(h, id, cmd, &x), 0);
    cleanup_free char *out = buf_steal(&x.out, NULL);
    int pass = 0, fail = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        pass += strncmp(line, "PASS ", 5) == 0;
        if (strncmp(line, "FAIL ", 5) == 0) {
            printf("# %s\n", line);
            fail++;
        }
    }
    printf("# battery in %s: %d pass, %d fail\n", id, pass, fail);
    ASSERT_EQ(fail, 0);
    ASSERT(pass >= 51);
    ASSERT_EQ(x.exit_code, 0);
    harness_exec_release(&x);
    close(ls);
}

/* ... in a sandbox that came from the pool, */
TEST(battery_passes_in_a_pooled_sandbox)
{
    if (battery_path == NULL)
        SKIP("no battery binary given");
    static struct harness h;
    ASSERT_EQ(open_tracked(&h, NULL, POOL), 0);
    char *w1 = harness_create(&h, NULL), *w2 = harness_create(&h, NULL);
    ASSERT(wait_pooled(&h, POOL));
    char *id = harness_create(&h, NULL);
    ASSERT(id && was_pooled(&h, id));
    run_battery_in(&h, id);
    harness_destroy(&h, id);
    harness_destroy(&h, w1);
    harness_destroy(&h, w2);
    free(id), free(w1), free(w2);
    close_tracked(&h);
}

static bool made_by_spawner(struct harness *h, const char *id)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM events WHERE sandbox_id = '%s' AND kind = 'created' AND "
             "json_extract(data, '$.spawner') = 1", id);
    return sql_int(h, sql) == 1;
}

/* Whose user namespace owns the sandbox init's netns: the host's means a spawner made it. */
static bool netns_owned_by_host_userns(struct harness *h, const char *id)
{
    char sql[256], path[64];
    snprintf(sql, sizeof(sql), "SELECT json_extract(record, '$.init_pid') FROM sandboxes "
                               "WHERE id = '%s'", id);
    snprintf(path, sizeof(path), "/proc/%lld/ns/net", (long long)sql_int(h, sql));
    int net = open(path, O_RDONLY | O_CLOEXEC);
    int owner = net >= 0 ? ioctl(net, NS_GET_USERNS) : -1;
    struct stat a, b;
    bool host = owner >= 0 && fstat(owner, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 &&
                a.st_ino == b.st_ino && a.st_dev == b.st_dev;
    if (owner >= 0)
        close(owner);
    if (net >= 0)
        close(net);
    return host;
}

#define LOOPBACK_PROBE                                                                            \
    "readlink /proc/self/ns/net; python3 -c \"import socket; s = socket.socket(); "               \
    "s.bind(('127.0.0.1', 0)); s.listen(); c = socket.create_connection(s.getsockname()); "       \
    "a, _ = s.accept(); c.send(b'x'); print('loopback', a.recv(1).decode())\""

/* ... and in a cold sandbox whose network namespace a spawner thread made ahead of time (owned
 * by the host's user namespace): its own netns, different from every other's, with a working
 * loopback. */
TEST(spawner_netns_is_private_with_loopback)
{
    if (battery_path == NULL)
        SKIP("no battery binary given");
    static struct harness h;
    ASSERT_EQ(open_tracked(&h, NULL, 0), 0);
    char *w1 = harness_create(&h, NULL), *w2 = harness_create(&h, NULL); /* starts the spawners */
    char *ids[2];
    char *ns[2];
    for (int i = 0; i < 2; i++) {
        usleep(300000); /* a spawner gets ready (cgroups, grace period, netns) */
        ids[i] = harness_create(&h, NULL);
        ASSERT(ids[i] != NULL);
        if (!made_by_spawner(&h, ids[i]))
            SKIP("no spawner thread here (pure cgroup v2 host): clone3 makes the netns");
        struct harness_exec x;
        ASSERT_EQ(harness_exec(&h, ids[i], LOOPBACK_PROBE, &x), 0);
        ns[i] = buf_steal(&x.out, NULL);
        printf("# %s: %s", ids[i], ns[i]);
        ASSERT_CONTAINS(ns[i], "loopback x");
        harness_exec_release(&x);
    }
    /* The pre-made one was used; rootless there is none (a netns needs a user namespace of its
     * own, which must be the sandbox's): clone3 made it. */
    ASSERT(netns_owned_by_host_userns(&h, ids[0]) == (geteuid() == 0));
    char host_ns[64] = "";
    ASSERT(readlink("/proc/self/ns/net", host_ns, sizeof(host_ns) - 1) > 0);
    ASSERT(strncmp(ns[0], ns[1], strcspn(ns[0], "\n")) != 0);
    ASSERT(strncmp(ns[0], host_ns, strlen(host_ns)) != 0);
    run_battery_in(&h, ids[0]);
    for (int i = 0; i < 2; i++) {
        harness_destroy(&h, ids[i]);
        free(ids[i]);
        free(ns[i]);
    }
    harness_destroy(&h, w1);
    harness_destroy(&h, w2);
    free(w1), free(w2);
    close_tracked(&h);
}

/* The pool refills as soon as a command finishes (5 ms later), not only after creates paused:
 * an agent making a sandbox every 20 ms still finds one ready. With the idle rule stretched to
 * 3 s (MCPBOX_LOCAL_POOL_IDLE_MS, a test knob) so that timing cannot decide: the pool emptied by
 * creates back to back stays empty for 300 ms without a command, and a refill begins (its record
 * exists) well within a second after one. */
static bool refill_begins_within(struct harness *h, uint64_t ms)
{
    uint64_t end = now_mono_ms() + ms;
    while (now_mono_ms() < end && pooled_count(h) == 0) {
        uv_run(&h->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return pooled_count(h) > 0;
}

TEST(pool_refills_after_a_command)
{
    static struct harness h;
    setenv("MCPBOX_LOCAL_POOL_IDLE_MS", "3000", 1);
    int rc = open_tracked(&h, NULL, POOL);
    unsetenv("MCPBOX_LOCAL_POOL_IDLE_MS");
    ASSERT_EQ(rc, 0);
    char *a = harness_create(&h, NULL), *b = harness_create(&h, NULL);
    ASSERT(a && b && wait_pooled(&h, POOL));
    char *ids[POOL];
    for (int i = 0; i < POOL; i++) { /* back to back: the pool is empty after these */
        ids[i] = harness_create(&h, NULL);
        ASSERT(ids[i] && was_pooled(&h, ids[i]));
    }
    ASSERT_EQ(pooled_count(&h), 0);
    ASSERT(!refill_begins_within(&h, 300)); /* no command: the (stretched) idle rule waits */
    struct harness_exec x;
    ASSERT_EQ(harness_exec(&h, ids[0], "true", &x), 0);
    harness_exec_release(&x);
    ASSERT(refill_begins_within(&h, 1500));
    for (int i = 0; i < POOL; i++) {
        harness_destroy(&h, ids[i]);
        free(ids[i]);
    }
    harness_destroy(&h, a), harness_destroy(&h, b);
    free(a), free(b);
    close_tracked(&h);
}

TEST(pool_zero_is_off)
{
    static struct harness h;
    ASSERT_EQ(open_tracked(&h, NULL, 0), 0);
    char *ids[3];
    for (int i = 0; i < 3; i++) {
        ids[i] = harness_create(&h, NULL);
        ASSERT(ids[i] && !was_pooled(&h, ids[i]));
        uv_run(&h.loop, UV_RUN_NOWAIT);
    }
    ASSERT_EQ(sql_int(&h, "SELECT COUNT(*) FROM events WHERE kind = 'pooled'"), 0);
    for (int i = 0; i < 3; i++) {
        harness_destroy(&h, ids[i]);
        free(ids[i]);
    }
    close_tracked(&h);
}

int main(int argc, char **argv)
{
    battery_path = argc > 1 ? argv[1] : NULL;
    xalloc_install();
    alarm(300);
    struct harness probe_h;
    int rc = harness_open_dir(&probe_h, NULL, 0);
    harness_close(&probe_h);
    if (rc != 0)
        return rc == 77 ? 77 : 1;
    RUN(taken_sandbox_is_like_a_fresh_one);
    close_leftovers();
    RUN(taken_sandbox_keeps_the_callers_ttl);
    close_leftovers();
    RUN(untaken_sandboxes_expire_and_the_pool_drains);
    close_leftovers();
    RUN(kill_9_then_restart_reaps_the_pool);
    close_leftovers();
    RUN(pool_zero_is_off);
    close_leftovers();
    RUN(pool_refills_after_a_command);
    close_leftovers();
    RUN(battery_passes_in_a_pooled_sandbox);
    close_leftovers();
    RUN(spawner_netns_is_private_with_loopback);
    close_leftovers();
    return test_done();
}
