/* The snapshot helper (snapshot.h): reads or writes a sandbox's writable space as the sandbox's
 * own root. It joins the sandbox's user namespace, which the server made (or, rootless, the
 * user made) and so holds every capability of, and takes the sandbox's root as its own: it sees
 * exactly the files the sandbox's root sees, with the ids the sandbox sees, and can reach
 * nothing of the host that the sandbox cannot. A layer made by one sandbox is hostile input to
 * the next: load takes only plain entries below workspace/, tmp/ and root/, never follows a
 * link on the way (libarchive's SECURE_* checks), and drops setuid and setgid bits. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/unpack.h"
#include "backend/local/snapshot.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"

#define HELPER_PIDFD 3
#define HELPER_ROOT 4
#define HELPER_BLOCK (256u << 10)

/* The sandbox's writable space: the three directories of its data tmpfs (snapshot_files.h). */
static const char *const snap_dirs[] = SNAP_DIRS;

static int helper_fail(const char *what, const char *detail)
{
    fprintf(stderr, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

/* Into the sandbox's user namespace, its root as ours, as its root (uid and gid 0 there). */
static int enter_sandbox(void)
{
    if (setns(HELPER_PIDFD, CLONE_NEWUSER) < 0)
        return helper_fail("cannot enter the sandbox's user namespace (is it still running?)",
                           strerror(errno));
    if (fchdir(HELPER_ROOT) < 0 || chroot(".") < 0 || chdir("/") < 0)
        return helper_fail("cannot take the sandbox's root", strerror(errno));
    close(HELPER_PIDFD), close(HELPER_ROOT);
    (void)setgroups(0, NULL); /* refused where setgroups is denied: there are none then */
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        return helper_fail("cannot become the sandbox's root", strerror(errno));
    umask(0);
    return 0;
}

static int copy_to_tar(struct archive *r, struct archive *w)
{
    const void *block;
    size_t size;
    la_int64_t offset;
    int rc;
    while ((rc = oci_archive.read_data_block(r, &block, &size, &offset)) == ARCHIVE_OK)
        if (oci_archive.write_data(w, block, size) < 0)
            return -1;
    return rc == ARCHIVE_EOF ? 0 : -1;
}

/* One directory tree into the tar: no link followed, no other mount entered (host mounts at
 * targets below /workspace are the host's, not the sandbox's), no xattrs, ACLs or holes. */
static int save_tree(struct archive *w, struct archive_entry_linkresolver *links, const char *dir)
{
    struct archive *r = oci_archive.read_disk_new();
    struct archive_entry *e = oci_archive.entry_new();
    oci_archive.read_disk_set_symlink_physical(r);
    oci_archive.read_disk_set_behavior(
        r, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR |
               ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS | ARCHIVE_READDISK_NO_SPARSE);
    int rc = oci_archive.read_disk_open(r, dir) == ARCHIVE_OK ? 0 : -1;
    int next;
    while (rc == 0 &&
           ((next = oci_archive.read_next_header2(r, e)) == ARCHIVE_OK || next == ARCHIVE_WARN)) {
        oci_archive.read_disk_descend(r);
        if (oci_archive.entry_filetype(e) == AE_IFSOCK)
            continue;
        struct archive_entry *spare = NULL;           /* tar's strategy never hands one back */
        oci_archive.entry_linkify(links, &e, &spare); /* a later hard link: a link, no data */
        bool data = oci_archive.entry_filetype(e) == AE_IFREG && !oci_archive.entry_hardlink(e);
        if (oci_archive.write_header(w, e) < ARCHIVE_WARN || (data && copy_to_tar(r, w) < 0))
            rc = -1;
    }
    if (rc == 0 && next != ARCHIVE_EOF)
        rc = -1;
    if (rc < 0)
        helper_fail("reading the sandbox's files failed", oci_archive.error_string(r));
    oci_archive.entry_free(e);
    oci_archive.read_free(r);
    return rc;
}

static int save(void)
{
    struct archive *w = oci_archive.write_new();
    struct archive_entry_linkresolver *links = oci_archive.entry_linkresolver_new();
    oci_archive.entry_linkresolver_set_strategy(links, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    oci_archive.write_set_format_pax_restricted(w);
    int rc = oci_archive.write_open_fd(w, STDOUT_FILENO) == ARCHIVE_OK ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < ARRAY_SIZE(snap_dirs); i++)
        rc = save_tree(w, links, snap_dirs[i]);
    oci_archive.entry_linkresolver_free(links);
    if (oci_archive.write_close(w) != ARCHIVE_OK && rc == 0)
        rc = helper_fail("writing the snapshot failed", oci_archive.error_string(w));
    oci_archive.write_free(w);
    return rc < 0 ? 1 : rc;
}

static bool entry_allowed(struct archive_entry *e)
{
    return snap_entry_allowed(oci_archive.entry_pathname(e), oci_archive.entry_filetype(e),
                              oci_archive.entry_hardlink(e));
}

static int copy_to_disk(struct archive *r, struct archive *w)
{
    const void *block;
    size_t size;
    la_int64_t offset;
    int rc;
    while ((rc = oci_archive.read_data_block(r, &block, &size, &offset)) == ARCHIVE_OK)
        if (oci_archive.write_data_block(w, block, size, offset) != ARCHIVE_OK)
            return -1; /* a failed write(2), ENOSPC included, is only ARCHIVE_WARN */
    return rc == ARCHIVE_EOF ? 0 : -1;
}

static int load_entries(struct archive *r, struct archive *w)
{
    struct archive_entry *e;
    int rc;
    while ((rc = oci_archive.read_next_header(r, &e)) == ARCHIVE_OK) {
        if (!entry_allowed(e))
            return helper_fail(SNAP_ENTRY_REFUSED, oci_archive.entry_pathname(e));
        oci_archive.entry_set_mode(
            e, snap_entry_mode(oci_archive.entry_filetype(e), oci_archive.entry_mode(e)));
        errno = 0;
        if (oci_archive.write_header(w, e) < ARCHIVE_WARN ||
            (oci_archive.entry_size(e) > 0 && copy_to_disk(r, w) < 0) ||
            oci_archive.write_finish_entry(w) < ARCHIVE_WARN)
            return helper_fail(errno == ENOSPC ? SNAP_NO_ROOM : "restoring the snapshot failed",
                               oci_archive.error_string(w));
    }
    if (rc != ARCHIVE_EOF)
        return helper_fail("the snapshot's layer is damaged; delete the snapshot and take it again",
                           oci_archive.error_string(r));
    return 0;
}

static int load(void)
{
    struct archive *r = oci_archive.read_new();
    struct archive *w = oci_archive.write_disk_new();
    oci_archive.read_support_format_tar(r);
    oci_archive.write_disk_set_options(
        w, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
               ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
               ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
    int rc = oci_archive.read_open_fd(r, STDIN_FILENO, HELPER_BLOCK) == ARCHIVE_OK
                 ? load_entries(r, w)
                 : helper_fail("cannot read the snapshot's layer", oci_archive.error_string(r));
    oci_archive.write_free(w);
    oci_archive.read_free(r);
    return rc;
}

int snap_helper_main(int argc, char **argv)
{
    struct mcp_error err;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (argc < 3 || (strcmp(argv[2], "save") != 0 && strcmp(argv[2], "load") != 0 &&
                     strcmp(argv[2], "wait") != 0))
        return helper_fail("usage: mcpbox " SNAP_HELPER_ARGV1 " save|load|wait", NULL);
    if (oci_archive_load(&err) < 0)
        return helper_fail(err.msg, NULL);
    int job = strcmp(argv[2], "wait") == 0 ? snap_helper_wait_job() : argv[2][0];
    if (job < 0) /* the server went, or dropped this spare */
        _exit(1);
    if (enter_sandbox() != 0)
        return 1;
    int rc = job == 's' ? save() : load();
    /* No exit handlers: in the sandbox's root there is no /proc for a leak checker to read. */
    fflush(stderr);
    if (rc == 0) /* done: the server answers now, not after this process's teardown */
        (void)!write(STDERR_FILENO, SNAP_HELPER_DONE, 1), close(STDERR_FILENO);
    _exit(rc);
}

/* ---- the server's side (a worker thread) ---- */

/* Between fork and exec: async-signal-safe calls only. */
void snap_helper_exec(const int want[5], const char *mode)
{
    int fds[5];
    for (int i = 0; i < 5; i++) /* first out of the way of 0..4, then into place */
        fds[i] = fcntl(want[i], F_DUPFD_CLOEXEC, HELPER_ROOT + 1); /* gone at the exec */
    for (int i = 0; i < 5; i++)
        if (fds[i] < 0 || dup2(fds[i], i) < 0)
            _exit(126);
    /* A descriptor another thread opened without O_CLOEXEC (a library loading a data file) must
     * not reach the helper, which runs in the sandbox's namespaces. */
    syscall(SYS_close_range, HELPER_ROOT + 1, ~0U, CLOSE_RANGE_CLOEXEC);
    char *const argv[] = {(char *)"mcpbox", (char *)SNAP_HELPER_ARGV1, (char *)mode, NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
}

static int open_root(int pid, int pidfd, struct mcp_error *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/root", pid);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* opened while the pidfd's process lives: then the pid was still its own */
    if (fd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, errno,
                         "the sandbox is gone (it ended or was destroyed); list_sandboxes shows "
                         "what runs");
}

int snap_helper_start(int pid, int pidfd, const char *mode, int in_fd, int out_fd,
                      struct snap_helper *h, struct mcp_error *err)
{
    int root = open_root(pid, pidfd, err);
    if (root < 0)
        return -1;
    if (snap_helper_take_spare(mode, strcmp(mode, "load") == 0 ? in_fd : out_fd, pidfd, root, h) ==
        0) {
        close(root);
        return 0;
    }
    cleanup_close int null = in_fd < 0 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
    if (in_fd < 0)
        in_fd = null;
    int errp[2];
    if (pipe2(errp, O_CLOEXEC) < 0) {
        close(root);
        return mcp_error_set(err, MCP_ERR_IO, errno, "pipe");
    }
    int want[5] = {in_fd, out_fd, errp[1], pidfd, root};
    h->pid = fork();
    if (h->pid == 0)
        snap_helper_exec(want, mode);
    int saved = errno;
    close(errp[1]), close(root);
    if (h->pid < 0) {
        close(errp[0]);
        return mcp_error_set(err, MCP_ERR_IO, saved, "fork");
    }
    h->err_fd = errp[0];
    return 0;
}

int snap_helper_finish(struct snap_helper *h, struct mcp_error *err)
{
    char msg[1024];
    size_t len = 0;
    ssize_t r;
    while ((r = read(h->err_fd, msg + len, sizeof msg - 1 - len)) > 0 || (r < 0 && errno == EINTR))
        len += r > 0 ? (size_t)r : 0;
    msg[len] = '\0';
    close(h->err_fd);
    return snap_helper_result(h, msg, len, err);
}

int snap_helper_result(struct snap_helper *h, const char *msg, size_t len, struct mcp_error *err)
{
    /* It said it is done and closed its end before exiting: reaped later (snap_helper_refill),
     * so that the caller does not wait out its exit (its memory's teardown, about 0.5 ms). */
    if (len == 1 && msg[0] == SNAP_HELPER_DONE[0] && snap_helper_reap_later(h->pid) == 0)
        return 0;
    int status = 0;
    while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (len > 0)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0, "%s", msg);
    return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                         "the snapshot helper died (status %d); try again, and if it persists "
                         "diagnose_sandbox",
                         status);
}
