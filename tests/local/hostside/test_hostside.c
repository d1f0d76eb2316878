/* Host-side checks H1-H4 (docs/internals/isolation-facts.md §8) against the local backend's file
 * API, with a
 * hostile sandbox: symlinks to host files (absolute, relative, magic /proc links), ../ paths and
 * symlinked parents on write, a rename race swapping a directory for a symlink while reads run,
 * a FIFO, device nodes and a huge sparse file. Escapes are detected with host-only marker files
 * holding random secrets: any read that returns a secret, or any write that lands on the host,
 * is an escape. Exits 77 where local sandboxes cannot run. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "test.h"
#include "lib/base/rmtree.h"

#define RACE_SECONDS 4
#define RACE_MIN_READS 50
#define SPARSE_SIZE "64G"
#define TEST_DEADLINE_S 240 /* a file op that blocks forever must not hang CI */

static struct harness h;
static char *sid;
static char secret[64];    /* random content only the host's marker files hold */
static char host_dir[128]; /* host-only directory with the marker files */

static void sh(const char *cmd)
{
    struct harness_exec x;
    if (harness_exec(&h, sid, cmd, &x) < 0)
        TEST_FAIL("exec %s: %s", cmd, h.err.msg);
    if (x.exit_code != 0)
        TEST_FAIL("exec %s: exit %d: %s", cmd, x.exit_code, buf_cstr(&x.err));
    harness_exec_release(&x);
}

static bool host_exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* A read must never return host data; refused or inside-only content are both fine. */
static void expect_no_escape_read(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    int rc = harness_read(&h, sid, path, 0, 1 << 20, &data, &len, NULL);
    if (rc == 0 && data != NULL && strstr(data, secret) != NULL)
        TEST_FAIL("ESCAPE: reading %s returned the host secret", path);
    if (rc < 0)
        ASSERT(h.err.msg[0] != '\0'); /* a clear error */
    printf("# read %-40s -> %s\n", path, rc < 0 ? h.err.msg : "inside content");
    free(data);
}

TEST(h1_symlinks_to_host_files)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "ln -s %s/secret /tmp/abs && ln -s ../../../../../..%s/secret rel && "
             "ln -s /proc/1/root%s/secret magic && ln -s /etc/shadow shadow && "
             "ln -s /proc/self/root/../../../../etc/shadow magic2",
             host_dir, host_dir, host_dir);
    sh(cmd);
    const char *paths[] = {"/tmp/abs", "rel", "magic", "shadow", "magic2", "/etc/shadow"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
        expect_no_escape_read(paths[i]);
    char *data = NULL;
    size_t len;
    ASSERT_EQ(harness_read(&h, sid, "shadow", 0, 4096, &data, &len, NULL), -1);
    free(data);
}

/* A file the sandbox can see (host /usr is bound in) but that host permissions keep from
 * anyone but its owner: the file API must apply the sandbox's credentials, not mcpbox's
 * (docs/internals/isolation-facts.md §7: host root followed a sandbox symlink into a host-only
 * file). */
#define HOST_ONLY_DIR "/usr/share/polkit-1/rules.d"
#define HOST_ONLY_FILE HOST_ONLY_DIR "/50-default.rules"

TEST(h1_host_permissions_apply)
{
    struct stat sb;
    if (stat(HOST_ONLY_DIR, &sb) < 0 || (sb.st_mode & 0001) || access(HOST_ONLY_FILE, R_OK) < 0)
        SKIP("no host-only directory under /usr here (" HOST_ONLY_DIR ")");
    sh("ln -s " HOST_ONLY_FILE " polkit_link");
    const char *paths[] = {HOST_ONLY_FILE, "polkit_link"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        char *data = NULL;
        size_t len;
        int rc = harness_read(&h, sid, paths[i], 0, 4096, &data, &len, NULL);
        printf("# read %-40s -> %s\n", paths[i], rc < 0 ? h.err.msg : "CONTENT RETURNED");
        free(data);
        ASSERT_EQ(rc, -1);
        ASSERT(h.err.code == MCP_ERR_DENIED || h.err.sys_errno == EACCES ||
               strstr(h.err.msg, "ermission denied") != NULL);
    }
}

TEST(h2_writes_stay_inside)
{
    char path[256], host[256];
    snprintf(host, sizeof(host), "%s/escaped", host_dir);
    snprintf(path, sizeof(path), "../../../../../../..%s/escaped", host_dir);
    int rc = harness_write(&h, sid, path, "x", 1);
    printf("# write %s -> %s\n", path, rc < 0 ? h.err.msg : "written inside");
    ASSERT(!host_exists(host));
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "ln -s %s hostdir && ln -s / rootlink && ln -s /etc etclink",
             host_dir);
    sh(cmd);
    const char *targets[] = {"hostdir/escaped", "rootlink%s/escaped", "etclink/escaped"};
    for (size_t i = 0; i < ARRAY_SIZE(targets); i++) {
        snprintf(path, sizeof(path), targets[i], host_dir);
        rc = harness_write(&h, sid, path, "x", 1);
        printf("# write %-40s -> %s\n", path, rc < 0 ? h.err.msg : "written inside");
        ASSERT(!host_exists(host));
    }
    ASSERT(!host_exists("/etc/escaped"));
}

struct flipper {
    bool done;
    json_t *status;
};

static void flip_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct flipper *f = arg;
    f->done = true;
    f->status = result ? json_incref(result) : NULL;
}

TEST(h3_rename_race)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "mkdir -p race/d && echo inside > race/d/secret && ln -s %s race/dsym", host_dir);
    sh(cmd);
    /* Swap the directory and the symlink as fast as the sandbox can, for RACE_SECONDS. */
    snprintf(cmd, sizeof(cmd),
             "cd race && end=$(($(date +%%s) + %d)); while [ $(date +%%s) -lt $end ]; do "
             "mv d t && mv dsym d && mv d dsym && mv t d; done",
             RACE_SECONDS);
    struct flipper f = {0};
    struct exec_request req = {.command = cmd};
    struct exec_observer obs = {.on_done = flip_done, .arg = &f};
    struct mcp_error err = {0};
    ASSERT_EQ(h.be->ops->exec(h.be, sid, &req, &obs, NULL, &err), 0);
    int reads = 0, inside = 0, refused = 0;
    while (!f.done) {
        char *data = NULL;
        size_t len;
        int rc = harness_read(&h, sid, "race/d/secret", 0, 4096, &data, &len, NULL);
        reads++;
        if (rc == 0 && strstr(data, secret) != NULL)
            TEST_FAIL("ESCAPE after %d reads: the race returned the host secret", reads);
        inside += rc == 0;
        refused += rc < 0;
        free(data);
    }
    printf("# rename race: %d reads, %d inside, %d refused, 0 escapes\n", reads, inside, refused);
    ASSERT(reads >= RACE_MIN_READS);
    ASSERT(f.status != NULL);
    json_decref(f.status);
}

TEST(h4_fifo_and_devices_refused_without_blocking)
{
    sh("mkfifo /tmp/fifo");
    const char *paths[] = {"/tmp/fifo", "/dev/zero", "/dev/null", "/dev/urandom"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        uint64_t t0 = now_mono_ms();
        char *data = NULL;
        size_t len;
        int rc = harness_read(&h, sid, paths[i], 0, 4096, &data, &len, NULL);
        printf("# read %s -> %s (%llu ms)\n", paths[i], rc < 0 ? h.err.msg : "data",
               (unsigned long long)(now_mono_ms() - t0));
        free(data);
        ASSERT_EQ(rc, -1); /* refused as not a regular file */
    }
}

TEST(h4_huge_sparse_file_bounded)
{
    sh("truncate -s " SPARSE_SIZE " /tmp/huge && echo -n tail >> /tmp/huge");
    char *data = NULL;
    size_t len = 0;
    bool truncated = false;
    uint64_t t0 = now_mono_ms();
    int rc = harness_read(&h, sid, "/tmp/huge", 0, UINT64_MAX, &data, &len, &truncated);
    printf("# read whole %s sparse file -> %s, %zu bytes, truncated=%d (%llu ms)\n", SPARSE_SIZE,
           rc < 0 ? h.err.msg : "ok", len, truncated,
           (unsigned long long)(now_mono_ms() - t0));
    if (rc == 0)
        ASSERT(truncated && len <= 64u * 1024 * 1024); /* bounded, and says there is more */
    else
        ASSERT(h.err.msg[0] != '\0');
    free(data);
    /* The end of the file is still reachable by offset. */
    uint64_t size = 64ULL << 30;
    ASSERT_EQ(harness_read(&h, sid, "/tmp/huge", size, 16, &data, &len, &truncated), 0);
    ASSERT_EQ(len, 4);
    ASSERT(memcmp(data, "tail", 4) == 0);
    free(data);
}

static void make_host_markers(void)
{
    unsigned char r[16];
    random_bytes(r, sizeof(r));
    char hex[33];
    hex_encode(r, sizeof(r), hex);
    snprintf(secret, sizeof(secret), "HOSTSECRET-%s", hex);
    snprintf(host_dir, sizeof(host_dir), "/tmp/mbx-host-%d", (int)getpid());
    mkdir(host_dir, 0755);
    char path[256];
    snprintf(path, sizeof(path), "%s/secret", host_dir);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%s\n", secret);
        fclose(f);
    }
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
    sid = harness_create(&h, NULL);
    if (sid == NULL) {
        printf("# create: %s\n", h.err.msg);
        harness_close(&h);
        return h.err.code == MCP_ERR_UNSUPPORTED ? 77 : 1;
    }
    make_host_markers();
    RUN(h1_symlinks_to_host_files);
    RUN(h1_host_permissions_apply);
    RUN(h2_writes_stay_inside);
    RUN(h3_rename_race);
    RUN(h4_fifo_and_devices_refused_without_blocking);
    RUN(h4_huge_sparse_file_bounded);
    harness_destroy(&h, sid);
    free(sid);
    harness_close(&h);
    if (rmtree(host_dir) < 0)
        return 1;
    return test_done();
}
