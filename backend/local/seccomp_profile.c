/* The sandbox seccomp filter, built once per backend with libseccomp and exported as raw BPF.
 *
 * Reference: Docker's default profile (allowlist, default EPERM) for a container without
 * capabilities, with its argument filters (clone namespace flags, personality, socket families),
 * plus: AF_VSOCK and AF_ALG denied, ptrace and process_vm_* denied, native x86_64 only (i386 and
 * x32 entry points kill the process), syscalls libseccomp 2.5 cannot name added by number, and
 * ENOSYS (not EPERM) for numbers above the highest one this profile knows, so newer libcs fall
 * back cleanly. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/local/local_internal.h"
#include "mcp/base/xalloc.h"

#define SECCOMP_HIGHEST_KNOWN 469 /* file_setattr (Linux 6.17) */
#define X32_SYSCALL_BIT 0x40000000u
#define CLONE_NS_FLAGS 0x7E020000u /* NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */
#define AF_ALG_NR 38
#define AF_VSOCK_NR 40

static const char *const allowed[] = {
    "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk", "capget", "capset",
    "chdir", "chown", "clock_adjtime", "clock_getres", "clock_gettime",
    "clock_nanosleep", "close", "close_range", "connect", "copy_file_range", "creat", "dup",
    "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
    "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat",
    "exit", "exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate", "fanotify_mark",
    "fchdir", "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr",
    "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync",
    "ftruncate", "futex", "futex_waitv", "futimesat", "getcpu", "getcwd", "getdents",
    "getdents64", "getegid", "geteuid", "getgid", "getgroups", "getitimer", "getpeername",
    "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom", "getresgid",
    "getresuid", "getrlimit", "get_robust_list", "getrusage", "getsid", "getsockname",
    "getsockopt", "get_thread_area", "gettid", "gettimeofday", "getuid", "getxattr",
    "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
    "ioctl", "io_destroy", "io_getevents", "io_pgetevents", "ioprio_get", "ioprio_set",
    "io_setup", "io_submit", "kill", "landlock_add_rule", "landlock_create_ruleset",
    "landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen", "listxattr",
    "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "membarrier",
    "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock",
    "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
    "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv",
    "msgsnd", "msync", "munlock", "munlockall", "munmap", "name_to_handle_at", "nanosleep",
    "newfstatat", "open", "openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal",
    "pipe", "pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl",
    "pread64", "preadv", "preadv2", "prlimit64", "process_mrelease", "pselect6", "pwrite64",
    "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recvfrom",
    "recvmmsg", "recvmsg", "remap_file_pages", "removexattr", "rename", "renameat", "renameat2",
    "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
    "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
    "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_get_priority_max",
    "sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval",
    "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield",
    "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg",
    "sendmsg", "sendto", "setfsgid", "setfsuid", "setgid", "setgroups", "setitimer", "setpgid",
    "setpriority", "setregid", "setresgid", "setresuid", "setreuid", "setrlimit",
    "set_robust_list", "setsid", "setsockopt", "set_thread_area", "set_tid_address", "setuid",
    "setxattr", "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd",
    "signalfd4", "socketpair", "splice", "stat", "statfs", "statx", "symlink", "symlinkat",
    "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create",
    "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create",
    "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask", "uname",
    "unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4", "waitid",
    "write", "writev", "arch_prctl", "modify_ldt",
};

/* Newer than libseccomp 2.5.4 knows: x86_64 numbers. */
static const struct {
    const char *name;
    int nr;
} allowed_by_number[] = {
    {"uretprobe", 335},  {"cachestat", 451},       {"map_shadow_stack", 453},
    {"futex_wake", 454}, {"futex_wait", 455},      {"futex_requeue", 456}, {"statmount", 457},
    {"listmount", 458},  {"mseal", 462},           {"setxattrat", 463},  {"getxattrat", 464},
    {"listxattrat", 465}, {"removexattrat", 466},  {"file_getattr", 468}, {"file_setattr", 469},
};

static struct scmp_arg_cmp arg0(enum scmp_compare op, uint64_t a, uint64_t b)
{
    struct scmp_arg_cmp c = {.arg = 0, .op = op, .datum_a = a, .datum_b = b};
    return c;
}

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR)
        return 0;
    return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

/* chmod without the setuid and setgid bits. A sandbox's root owns the files of a host directory
 * mounted rw (as the directory's owner on the host, through the idmapped mount): a setuid file
 * it made there would run as that owner for anyone on the host. Inside, no_new_privs makes the
 * bits useless anyway. Creating a file with them (open, mknod) is harmless: the kernel clears
 * them on the first write by a process without CAP_FSETID. */
static int chmod_rules(scmp_filter_ctx ctx)
{
    static const struct {
        const char *name;
        int nr;
        unsigned mode_arg;
    } calls[] = {{"chmod", -1, 1}, {"fchmod", -1, 1}, {"fchmodat", -1, 2}, {"fchmodat2", 452, 2}};
    int rc = 0;
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        int nr = seccomp_syscall_resolve_name(calls[i].name);
        if (nr == __NR_SCMP_ERROR)
            nr = calls[i].nr;
        if (nr < 0)
            continue;
        struct scmp_arg_cmp plain = {.arg = calls[i].mode_arg, .op = SCMP_CMP_MASKED_EQ,
                                     .datum_a = 06000, .datum_b = 0};
        rc |= seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &plain);
    }
    return rc;
}

static int add_rules(scmp_filter_ctx ctx)
{
    int rc = 0;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        rc |= rule(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL);
    for (size_t i = 0; i < sizeof allowed_by_number / sizeof allowed_by_number[0]; i++) {
        int nr = seccomp_syscall_resolve_name(allowed_by_number[i].name);
        rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr == __NR_SCMP_ERROR ? allowed_by_number[i].nr : nr, 0);
    }
    /* socket: every family but AF_ALG (38) and AF_VSOCK (40). */
    struct scmp_arg_cmp lt = arg0(SCMP_CMP_LT, AF_ALG_NR, 0), eq = arg0(SCMP_CMP_EQ, 39, 0),
                        gt = arg0(SCMP_CMP_GT, AF_VSOCK_NR, 0);
    rc |= rule(ctx, SCMP_ACT_ALLOW, "socket", 1, &lt);
    rc |= rule(ctx, SCMP_ACT_ALLOW, "socket", 1, &eq);
    rc |= rule(ctx, SCMP_ACT_ALLOW, "socket", 1, &gt);
    static const uint64_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
    for (size_t i = 0; i < sizeof personas / sizeof personas[0]; i++) {
        struct scmp_arg_cmp p = arg0(SCMP_CMP_EQ, personas[i], 0);
        rc |= rule(ctx, SCMP_ACT_ALLOW, "personality", 1, &p);
    }
    /* clone without namespace flags (fork, threads); clone3 hides its flags in memory, so it
     * gets ENOSYS and glibc falls back to clone. */
    struct scmp_arg_cmp ns = arg0(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0);
    rc |= rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &ns);
    rc |= rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
    rc |= chmod_rules(ctx);
    return rc;
}

/* A prologue in front of libseccomp's program: native syscalls numbered above the highest one
 * we know return ENOSYS; everything else (other arches, x32) goes on to libseccomp's checks. */
static struct sock_filter *with_prologue(const struct sock_filter *prog, size_t n, size_t *out_n)
{
    const struct sock_filter pre[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, SECCOMP_HIGHEST_KNOWN, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
    };
    size_t np = sizeof pre / sizeof pre[0];
    struct sock_filter *all = xcalloc(np + n, sizeof *all);
    memcpy(all, pre, sizeof pre);
    memcpy(all + np, prog, n * sizeof *prog);
    *out_n = np + n;
    return all;
}

static int export_bpf(scmp_filter_ctx ctx, struct local_seccomp *out, struct mcp_error *err)
{
    int fd = memfd_create("mcpbox-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "memfd_create");
    int rc = seccomp_export_bpf(ctx, fd);
    off_t size = rc == 0 ? lseek(fd, 0, SEEK_END) : -1;
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0) {
        close(fd);
        return mcp_error_set(err, MCP_ERR_BACKEND, -rc, "seccomp_export_bpf failed (%d)", rc);
    }
    struct sock_filter *prog = xmalloc((size_t)size);
    ssize_t got = pread(fd, prog, (size_t)size, 0);
    close(fd);
    if (got != size) {
        free(prog);
        return mcp_error_set(err, MCP_ERR_IO, errno, "reading the exported seccomp filter failed");
    }
    size_t n = (size_t)size / sizeof *prog;
    out->filter = with_prologue(prog, n, &n);
    out->len = (unsigned short)n;
    free(prog);
    return 0;
}

int local_seccomp_build(struct local_seccomp *out, struct mcp_error *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (ctx == NULL)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0, "seccomp_init failed");
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    rc |= seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* the child sets no_new_privs itself */
    /* A binary search over syscall numbers instead of a linear chain: every syscall in every
     * sandbox pays for this filter. */
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    rc |= add_rules(ctx);
    if (rc != 0) {
        seccomp_release(ctx);
        return mcp_error_set(err, MCP_ERR_BACKEND, -rc, "building the seccomp filter failed (%d)",
                             rc);
    }
    rc = export_bpf(ctx, out, err);
    seccomp_release(ctx);
    return rc;
}

void local_seccomp_free(struct local_seccomp *s)
{
    free(s->filter);
    s->filter = NULL;
    s->len = 0;
}
