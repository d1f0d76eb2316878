/* Battery: system calls a sandbox must not be able to use (mount, namespaces, keyrings, bpf,
 * perf, modules, clocks, foreign ABIs, ptrace of the agent...). */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "battery.h"

#define BATTERY_KEY_SPEC_PROCESS_KEYRING (-2)
#define BATTERY_SYSLOG_ACTION_READ_ALL 3
#define BATTERY_I386_NR_GETPID 20
#define BATTERY_X32_BIT 0x40000000L

static const int only_eperm[] = {EPERM, 0};

static void check_mount(struct battery_probe *p)
{
    long rc = mount("battery", battery_scratch, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k");
    int e = errno;
    if (rc == 0)
        umount2(battery_scratch, MNT_DETACH);
    battery_expect_errno(p, rc, e, only_eperm);
}

/* The scratch dir is not a mount point: EINVAL would mean the kernel looked at it. */
static void check_umount(struct battery_probe *p)
{
    long rc = umount2(battery_scratch, 0);
    battery_expect_errno(p, rc, errno, only_eperm);
}

static int child_unshare_user(void *arg)
{
    return unshare(CLONE_NEWUSER) == 0 ? 0 : errno;
}

static void check_unshare_user(struct battery_probe *p)
{
    static const int allowed[] = {EPERM, ENOSPC, 0};
    battery_expect_child(p, battery_in_child(child_unshare_user, NULL), allowed);
}

/* The new process (if any) exits at once; the probe child reaps it. */
static int fork_like_result(long r)
{
    if (r == 0)
        _exit(0);
    if (r < 0)
        return errno;
    waitpid((pid_t)r, NULL, 0);
    return 0;
}

static int child_clone_newns(void *arg)
{
    return fork_like_result(syscall(SYS_clone, (long)(CLONE_NEWNS | SIGCHLD), 0L, 0L, 0L, 0L));
}

static void check_clone_newns(struct battery_probe *p)
{
    battery_expect_child(p, battery_in_child(child_clone_newns, NULL), only_eperm);
}

static int child_clone3(void *arg)
{
    struct clone_args args;
    memset(&args, 0, sizeof(args));
    args.exit_signal = SIGCHLD;
    return fork_like_result(syscall(SYS_clone3, &args, sizeof(args)));
}

/* ENOSYS (not EPERM) is what lets glibc fall back to clone. */
static void check_clone3(struct battery_probe *p)
{
    static const int allowed[] = {ENOSYS, 0};
    battery_expect_child(p, battery_in_child(child_clone3, NULL), allowed);
}

static int child_setns(void *arg)
{
    int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    return setns(fd, CLONE_NEWUTS) == 0 ? 0 : errno; /* re-joining our own: harmless */
}

static void check_setns(struct battery_probe *p)
{
    battery_expect_child(p, battery_in_child(child_setns, NULL), only_eperm);
}

/* In a child, so a key that does get added dies with its process keyring. */
static int child_add_key(void *arg)
{
    long r = syscall(SYS_add_key, "user", "battery-probe", "x", 1,
                     BATTERY_KEY_SPEC_PROCESS_KEYRING);
    return r >= 0 ? 0 : errno;
}

static void check_keyring(struct battery_probe *p)
{
    battery_expect_child(p, battery_in_child(child_add_key, NULL), only_eperm);
}

/* For calls that return an fd on success: close it, then judge. */
static void expect_fd_denied(struct battery_probe *p, long fd, int e, const int *allowed)
{
    if (fd >= 0)
        close((int)fd);
    battery_expect_errno(p, fd, e, allowed);
}

static void check_bpf(struct battery_probe *p)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
    expect_fd_denied(p, fd, errno, only_eperm);
}

static void check_perf(struct battery_probe *p)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof(a);
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    expect_fd_denied(p, fd, errno, only_eperm);
}

static void check_userfaultfd(struct battery_probe *p)
{
    long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
    expect_fd_denied(p, fd, errno, only_eperm);
}

static void check_io_uring(struct battery_probe *p)
{
    struct io_uring_params prm;
    memset(&prm, 0, sizeof(prm));
    long fd = syscall(SYS_io_uring_setup, 1, &prm);
    expect_fd_denied(p, fd, errno, only_eperm);
}

/* "shocker": a made-up handle; without the filter the kernel answers ESTALE or EINVAL. */
static void check_open_by_handle(struct battery_probe *p)
{
    struct {
        struct file_handle fh;
        unsigned char bytes[8];
    } h;
    memset(&h, 0, sizeof(h));
    h.fh.handle_bytes = 8;
    h.fh.handle_type = 1;
    int mfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long fd = syscall(SYS_open_by_handle_at, mfd, &h.fh, O_RDONLY | O_CLOEXEC);
    int e = errno;
    if (mfd >= 0)
        close(mfd);
    expect_fd_denied(p, fd, e, only_eperm);
}

static void check_module(struct battery_probe *p)
{
    long rc = syscall(SYS_finit_module, -1, "", 0); /* fd -1: EBADF if it got through */
    battery_expect_errno(p, rc, errno, only_eperm);
}

static void check_syslog(struct battery_probe *p)
{
    char buf[64];
    long rc = syscall(SYS_syslog, BATTERY_SYSLOG_ACTION_READ_ALL, buf, (int)sizeof(buf));
    battery_expect_errno(p, rc, errno, only_eperm);
}

/* CLOCK_MONOTONIC cannot be set at all: EINVAL means the call reached the kernel. */
static void check_clock(struct battery_probe *p)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long rc = clock_settime(CLOCK_MONOTONIC, &ts);
    battery_expect_errno(p, rc, errno, only_eperm);
}

static void check_sethostname(struct battery_probe *p)
{
    char name[256] = "";
    gethostname(name, sizeof(name) - 1);
    long rc = sethostname(name, strlen(name)); /* the same name: harmless */
    battery_expect_errno(p, rc, errno, only_eperm);
}

static int child_chroot(void *arg)
{
    return chroot(battery_scratch) == 0 ? 0 : errno;
}

static void check_chroot(struct battery_probe *p)
{
    battery_expect_child(p, battery_in_child(child_chroot, NULL), only_eperm);
}

static int child_personality(void *arg)
{
    return personality(ADDR_NO_RANDOMIZE) != -1 ? 0 : errno;
}

static void check_personality(struct battery_probe *p)
{
    battery_expect_child(p, battery_in_child(child_personality, NULL), only_eperm);
}

#ifdef __x86_64__
static int child_int80(void *arg)
{
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"((long)BATTERY_I386_NR_GETPID) : "memory");
    return 0; /* survived: the 32-bit entry point was reachable */
}

static int child_x32(void *arg)
{
    syscall(BATTERY_X32_BIT | SYS_getpid);
    return 0;
}

static void expect_sigsys(struct battery_probe *p, int status)
{
    if (status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
        battery_pass(p, 0, "the probe child was killed by SIGSYS");
    else if (status != -1 && WIFSIGNALED(status))
        battery_fail(p, 0, "the probe child died of signal %d, not SIGSYS", WTERMSIG(status));
    else
        battery_fail(p, 0, "the probe child survived the call (exit %d)",
                     status == -1 ? -1 : WEXITSTATUS(status));
}

static void check_i386(struct battery_probe *p)
{
    expect_sigsys(p, battery_in_child(child_int80, NULL));
}

static void check_x32(struct battery_probe *p)
{
    expect_sigsys(p, battery_in_child(child_x32, NULL));
}
#else
static void check_i386(struct battery_probe *p)
{
    battery_skip(p, "x86_64 only");
}

static void check_x32(struct battery_probe *p)
{
    battery_skip(p, "x86_64 only");
}
#endif

static void check_cgroup_mount(struct battery_probe *p)
{
    unsigned long fl = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    long rc = mount("cgroup", battery_scratch, "cgroup", fl, "memory");
    int e = errno;
    if (rc == 0)
        umount2(battery_scratch, MNT_DETACH);
    battery_expect_errno(p, rc, e, only_eperm);
}

static void check_sysfs_mount(struct battery_probe *p)
{
    unsigned long fl = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    long rc = mount("sysfs", battery_scratch, "sysfs", fl, NULL);
    int e = errno;
    if (rc == 0)
        umount2(battery_scratch, MNT_DETACH);
    battery_expect_errno(p, rc, e, only_eperm);
}

/* PTRACE_SEIZE does not stop the tracee; the child exits at once, which detaches. */
static int child_ptrace_init(void *arg)
{
    return ptrace(PTRACE_SEIZE, 1, NULL, NULL) == 0 ? 0 : errno;
}

static void check_ptrace_agent(struct battery_probe *p)
{
    static const int allowed[] = {EPERM, EACCES, 0};
    battery_expect_child(p, battery_in_child(child_ptrace_init, NULL), allowed);
}

const struct battery_check battery_checks_sys[] = {
    {5, "mount_denied", check_mount, "mount(tmpfs) EPERM"},
    {6, "umount_denied", check_umount, "umount2 EPERM, not EINVAL"},
    {7, "unshare_userns", check_unshare_user, "unshare(CLONE_NEWUSER) EPERM"},
    {8, "clone_newns", check_clone_newns, "clone(CLONE_NEWNS) EPERM"},
    {9, "clone3_denied", check_clone3, "clone3 ENOSYS"},
    {10, "setns_denied", check_setns, "setns EPERM"},
    {11, "keyring_denied", check_keyring, "add_key EPERM"},
    {12, "bpf_denied", check_bpf, "bpf(MAP_CREATE) EPERM"},
    {13, "perf_denied", check_perf, "perf_event_open EPERM"},
    {14, "userfaultfd_denied", check_userfaultfd, "userfaultfd EPERM"},
    {15, "io_uring_denied", check_io_uring, "io_uring_setup EPERM"},
    {16, "open_by_handle", check_open_by_handle, "open_by_handle_at EPERM"},
    {17, "module_load", check_module, "finit_module EPERM"},
    {18, "syslog_denied", check_syslog, "syslog(READ_ALL) EPERM"},
    {19, "clock_settime", check_clock, "clock_settime EPERM, not EINVAL"},
    {20, "sethostname", check_sethostname, "sethostname EPERM"},
    {21, "chroot_denied", check_chroot, "chroot EPERM"},
    {22, "personality", check_personality, "personality(ADDR_NO_RANDOMIZE) EPERM"},
    {25, "i386_abi_killed", check_i386, "int 0x80 killed by SIGSYS"},
    {26, "x32_abi_killed", check_x32, "x32 syscall killed by SIGSYS"},
    {43, "cgroup_mount", check_cgroup_mount, "mount cgroup EPERM"},
    {48, "sysfs_mount", check_sysfs_mount, "mount sysfs EPERM"},
    {52, "ptrace_agent", check_ptrace_agent, "ptrace of pid 1 (the agent) refused"},
    {0},
};
