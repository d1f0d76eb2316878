/* rmtree (lib/base/rmtree.c) on a tree whose owner races it. The trees it
 * removes hold directories a sandbox's root owns and may make unreadable (a copy-on-write
 * overlay's work/work is mode 000), which rmtree makes readable first. The owner can swap such a
 * directory's name for a symlink to a directory of its choice at any moment; the chmod must
 * still reach only the directory that was looked at, never the symlink's target.
 *
 * The race is forced, not hoped for: the removal runs in a child without CAP_DAC_OVERRIDE (as
 * uid 65534 when the test runs as root; else as the user running it), traced with ptrace, and the
 * tracer swaps the name at the exact moment: when the open of the unreadable directory has just
 * failed with EACCES, or when the first chmod is about to run. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/rmtree.h"
#include "backend/local/local_limits.h"
#include "test.h"

#define NOBODY 65534

static char base[64];

enum swap_at { SWAP_NEVER, SWAP_AFTER_FAILED_OPEN, SWAP_BEFORE_CHMOD };

static void path_of(char *out, size_t size, const char *rel)
{
    snprintf(out, size, "%s/%s", base, rel);
}

static void own(const char *rel)
{
    char p[256];
    path_of(p, sizeof p, rel);
    if (geteuid() == 0)
        ASSERT_EQ(lchown(p, NOBODY, NOBODY), 0);
}

static void make_dir(const char *rel, mode_t mode)
{
    char p[256];
    path_of(p, sizeof p, rel);
    ASSERT_EQ(mkdir(p, 0700), 0);
    own(rel);
    ASSERT_EQ(chmod(p, mode), 0);
}

static void make_file(const char *rel)
{
    char p[256];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "w");
    ASSERT(f != NULL);
    fputs("x\n", f);
    fclose(f);
    own(rel);
}

/* tree/ (to remove): a file, an open directory, and locked/ (mode 000, not empty);
 * victim/ (mode 000, not empty): what the swapped-in symlink points at; it must stay as it is. */
static void make_trees(void)
{
    char p[256];
    make_dir("tree", 0755);
    make_file("tree/file");
    make_dir("tree/open", 0755);
    make_file("tree/open/f");
    make_dir("tree/locked", 0700);
    make_file("tree/locked/inner");
    path_of(p, sizeof p, "tree/locked");
    ASSERT_EQ(chmod(p, 0), 0);
    make_dir("victim", 0700);
    make_file("victim/keep");
    path_of(p, sizeof p, "victim");
    ASSERT_EQ(chmod(p, 0), 0);
    make_dir("moved", 0755);
}

/* What the directory's owner does in the race: tree/locked moves away, a symlink to victim
 * takes its name. */
static void swap_in_symlink(void)
{
    char from[256], to[256], victim[256];
    path_of(from, sizeof from, "tree/locked");
    path_of(to, sizeof to, "moved/locked");
    path_of(victim, sizeof victim, "victim");
    /* Moving a directory to another parent needs write access to it (its ".."): as a user,
     * the owner lends it that for the move. */
    if (chmod(from, 0700) < 0 || rename(from, to) < 0 || chmod(to, 0) < 0 ||
        symlink(victim, from) < 0) {
        perror("swapping tree/locked for a symlink");
        exit(1);
    }
    own("tree/locked");
}

/* A path argument of the stopped child, up to the end of its page (never past it). */
static void read_child_string(pid_t pid, uint64_t addr, char *out, size_t size)
{
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", (int)pid);
    int fd = open(mem, O_RDONLY | O_CLOEXEC);
    size_t to_page_end = 4096 - (size_t)(addr % 4096);
    size_t n = size - 1 < to_page_end ? size - 1 : to_page_end;
    ssize_t got = fd >= 0 ? pread(fd, out, n, (off_t)addr) : -1;
    out[got > 0 ? (size_t)got : 0] = '\0';
    out[size - 1] = '\0';
    if (fd >= 0)
        close(fd);
}

static bool is_chmod(uint64_t nr)
{
#ifdef SYS_fchmodat2
    if (nr == SYS_fchmodat2)
        return true;
#endif
#ifdef SYS_chmod
    if (nr == SYS_chmod)
        return true;
#endif
    return nr == SYS_fchmodat || nr == SYS_fchmod;
}

/* The removal, in a child without DAC override, stopped for its tracer first. */
static void child_remove(void)
{
    char tree[256];
    path_of(tree, sizeof tree, "tree");
    if (geteuid() == 0 &&
        (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
         setresuid(NOBODY, NOBODY, NOBODY) < 0))
        _exit(2);
    prctl(PR_SET_DUMPABLE, 1); /* a changed uid clears it: the tracer reads our memory */
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
        _exit(3);
    raise(SIGSTOP);
    rmtree(tree);
    _exit(0); /* no atexit: the leak checker cannot stop the world under a tracer */
}

/* Runs the child to its end, swapping the name when `at` says; returns whether it swapped. */
static bool trace_removal(pid_t pid, enum swap_at at)
{
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT(WIFSTOPPED(st));
    ASSERT_EQ(ptrace(PTRACE_SETOPTIONS, pid, NULL,
                     (void *)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)), 0);
    bool swapped = false, opening_locked = false;
    int deliver = 0;
    for (;;) {
        ASSERT_EQ(ptrace(PTRACE_SYSCALL, pid, NULL, (void *)(intptr_t)deliver), 0);
        deliver = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        if (WIFEXITED(st) || WIFSIGNALED(st))
            break;
        if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
            deliver = WSTOPSIG(st);
            continue;
        }
        struct __ptrace_syscall_info info;
        ASSERT(ptrace(PTRACE_GET_SYSCALL_INFO, pid, (void *)sizeof info, &info) > 0);
        if (swapped)
            continue;
        if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
            char name[64];
            opening_locked = false;
            if (info.entry.nr == SYS_openat) {
                read_child_string(pid, info.entry.args[1], name, sizeof name);
                opening_locked = strcmp(name, "locked") == 0;
            }
            if (at == SWAP_BEFORE_CHMOD && is_chmod(info.entry.nr))
                swap_in_symlink(), swapped = true;
        } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && opening_locked &&
                   at == SWAP_AFTER_FAILED_OPEN && info.exit.rval == -EACCES) {
            swap_in_symlink(), swapped = true;
        }
    }
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    return swapped;
}

/* Each case starts from a fresh tree, also after a failed one. */
static void reset(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwX '%s' && rm -rf '%s'/*", base, base);
    ASSERT_EQ(system(cmd), 0);
}

static void remove_traced(enum swap_at at)
{
    reset();
    make_trees();
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0)
        child_remove();
    ASSERT_EQ(trace_removal(pid, at), at != SWAP_NEVER);
}

static void assert_victim_untouched(void)
{
    char p[256];
    struct stat st;
    path_of(p, sizeof p, "victim");
    ASSERT_EQ(stat(p, &st), 0);
    ASSERT_EQ(st.st_mode & 07777, 0); /* the chmod by name reached it through the symlink */
    ASSERT_EQ(chmod(p, 0700), 0);      /* to look inside, as a user too */
    path_of(p, sizeof p, "victim/keep");
    ASSERT_EQ(access(p, F_OK), 0);
}

static void assert_gone(const char *rel)
{
    char p[256];
    struct stat st;
    path_of(p, sizeof p, rel);
    ASSERT(lstat(p, &st) < 0 && errno == ENOENT);
}

/* No race: an unreadable directory with contents is removed with the rest. */
TEST(removes_unreadable_directories)
{
    remove_traced(SWAP_NEVER);
    assert_gone("tree");
    assert_victim_untouched();
}

/* The name turns into a symlink right after the open that failed with EACCES. */
TEST(swap_after_failed_open_chmods_nothing_outside)
{
    remove_traced(SWAP_AFTER_FAILED_OPEN);
    assert_victim_untouched();
    assert_gone("tree"); /* the symlink is removed, not followed */
}

/* The name turns into a symlink just before the chmod: the chmod still reaches the directory
 * that was opened (now at moved/locked), which is emptied, and nothing else. */
TEST(swap_before_chmod_chmods_nothing_outside)
{
    remove_traced(SWAP_BEFORE_CHMOD);
    assert_victim_untouched();
    assert_gone("tree");
    assert_gone("moved/locked/inner");
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/mbx-rmtree-XXXXXX");
    if (mkdtemp(base) == NULL || chmod(base, 0755) < 0)
        return 1;
    if (geteuid() == 0 && chown(base, NOBODY, NOBODY) < 0)
        return 1;
    RUN(removes_unreadable_directories);
    RUN(swap_after_failed_open_chmods_nothing_outside);
    RUN(swap_before_chmod_chmods_nothing_outside);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwX '%s'; rm -rf '%s'", base, base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", base);
    return test_done();
}
