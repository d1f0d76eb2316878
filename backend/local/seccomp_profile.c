/* The sandbox seccomp filter: a small BPF program that mcpbox compiles itself, once per backend.
 *
 * The policy follows Docker's default profile for a container without capabilities (an allowlist,
 * default EPERM, its argument filters on clone namespace flags, personality and socket families),
 * plus: AF_VSOCK and AF_ALG denied, ptrace and process_vm_* denied, chmod without the setuid and
 * setgid bits, clone3 ENOSYS, native x86_64 only (i386 and x32 entry points kill the process),
 * syscalls libseccomp 2.5 cannot name allowed by number, and ENOSYS (not EPERM) for numbers above
 * the highest one this profile knows, so newer libcs fall back cleanly. libseccomp only resolves
 * syscall names here.
 *
 * The program: a verdict per syscall number, merged into runs of equal verdict (about 80), a
 * balanced binary search over the runs' first numbers, and one shared block per verdict. When it
 * loads a filter the kernel runs it for every (nr, arch) pair (its action cache) and JITs it, so
 * each instruction costs every sandbox create: this is ~110 instructions where libseccomp's
 * program was 440.
 *
 * Arguments are compared on their low 32 bits only, as the kernel reads them (socket's family is
 * an int, personality's an unsigned int, clone uses the low 32 flag bits, a mode is a umode_t).
 * libseccomp compares all 64 bits, so socket(AF_VSOCK | 1 << 32) got past its filter and made a
 * vsock socket. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/local/local_seccomp.h"
#include "lib/base/xalloc.h"

const char *const local_seccomp_allowed[] = {
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

const size_t local_seccomp_n_allowed =
    sizeof local_seccomp_allowed / sizeof local_seccomp_allowed[0];

/* Newer than libseccomp 2.5.4 knows: x86_64 numbers. */
const struct local_seccomp_call local_seccomp_allowed_by_number[] = {
    {"uretprobe", 335, 0},     {"cachestat", 451, 0},    {"map_shadow_stack", 453, 0},
    {"futex_wake", 454, 0},    {"futex_wait", 455, 0},   {"futex_requeue", 456, 0},
    {"statmount", 457, 0},     {"listmount", 458, 0},    {"mseal", 462, 0},
    {"setxattrat", 463, 0},    {"getxattrat", 464, 0},   {"listxattrat", 465, 0},
    {"removexattrat", 466, 0}, {"file_getattr", 468, 0}, {"file_setattr", 469, 0},
};
const size_t local_seccomp_n_allowed_by_number =
    sizeof local_seccomp_allowed_by_number / sizeof local_seccomp_allowed_by_number[0];

/* chmod without the setuid and setgid bits. A sandbox's root owns the files of a host directory
 * mounted rw (as the directory's owner on the host, through the idmapped mount): a setuid file
 * it made there would run as that owner for anyone on the host. Inside, no_new_privs makes the
 * bits useless anyway. Creating a file with them (open, mknod) is harmless: the kernel clears
 * them on the first write by a process without CAP_FSETID. .arg is the mode's argument. */
const struct local_seccomp_call local_seccomp_chmods[] = {
    {"chmod", -1, 1}, {"fchmod", -1, 1}, {"fchmodat", -1, 2}, {"fchmodat2", 452, 2}};
const size_t local_seccomp_n_chmods = sizeof local_seccomp_chmods / sizeof local_seccomp_chmods[0];

/* personality: PER_LINUX and PER_LINUX32, each with or without UNAME26, and the 0xffffffff query
 * (Docker's list); never ADDR_NO_RANDOMIZE. */
const uint32_t local_seccomp_personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
const size_t local_seccomp_n_personas =
    sizeof local_seccomp_personas / sizeof local_seccomp_personas[0];

int local_seccomp_nr(const char *name, int fallback)
{
    int nr = seccomp_syscall_resolve_name(name);
    return nr >= 0 ? nr : fallback;
}

/* What a syscall number gets. The argument checks share one block each; V_KILL is only a block
 * (the bad-arch and x32 answer). */
enum verdict {
    V_EPERM,
    V_ALLOW,
    V_ENOSYS,
    V_SOCKET,
    V_PERSONALITY,
    V_CLONE,
    V_MODE_ARG1,
    V_MODE_ARG2,
    V_KILL,
    V_COUNT
};

#define N_NRS (LOCAL_SECCOMP_HIGHEST_KNOWN + 1)
/* Room for the prologue (6), at most one search node per number and the blocks (< 30). */
#define PROG_CAP (N_NRS + 40)
/* A jump target: >= 0 an instruction index, < 0 a verdict block (resolved once laid out). */
#define TO_BLOCK(v) (-1 - (int)(v))
/* The low 32 bits of argument i, all the kernel reads of the arguments checked (little-endian). */
#define ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8u * (i)))

struct insn {
    uint16_t code;
    uint32_t k;
    int jt, jf;
};

struct compiler {
    unsigned char verdict[N_NRS];
    struct {
        uint32_t first;
        enum verdict v;
    } runs[N_NRS];
    size_t n_runs;
    struct insn prog[PROG_CAP];
    size_t n;
    int block_at[V_COUNT];
    bool used[V_COUNT];
};

static int set_verdict(struct compiler *c, const char *name, int fallback, enum verdict v,
                       struct mcp_error *err)
{
    int nr = local_seccomp_nr(name, fallback);
    if (nr < 0)
        return 0; /* neither libseccomp nor our table knows it: no such x86_64 syscall */
    if (nr >= N_NRS)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "seccomp: %s is syscall %d, above LOCAL_SECCOMP_HIGHEST_KNOWN (%d): "
                             "raise it",
                             name, nr, LOCAL_SECCOMP_HIGHEST_KNOWN);
    c->verdict[nr] = (unsigned char)v;
    return 0;
}

static int fill_verdicts(struct compiler *c, struct mcp_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < local_seccomp_n_allowed && rc == 0; i++)
        rc = set_verdict(c, local_seccomp_allowed[i], -1, V_ALLOW, err);
    for (size_t i = 0; i < local_seccomp_n_allowed_by_number && rc == 0; i++)
        rc = set_verdict(c, local_seccomp_allowed_by_number[i].name,
                         local_seccomp_allowed_by_number[i].nr, V_ALLOW, err);
    for (size_t i = 0; i < local_seccomp_n_chmods && rc == 0; i++) {
        const struct local_seccomp_call *m = &local_seccomp_chmods[i];
        rc = set_verdict(c, m->name, m->nr, m->arg == 1 ? V_MODE_ARG1 : V_MODE_ARG2, err);
    }
    if (rc == 0)
        rc = set_verdict(c, "socket", -1, V_SOCKET, err);
    if (rc == 0)
        rc = set_verdict(c, "personality", -1, V_PERSONALITY, err);
    /* clone without namespace flags (fork, threads); clone3 hides its flags in memory, so it
     * gets ENOSYS and glibc falls back to clone. */
    if (rc == 0)
        rc = set_verdict(c, "clone", -1, V_CLONE, err);
    if (rc == 0)
        rc = set_verdict(c, "clone3", -1, V_ENOSYS, err);
    return rc;
}

static void make_runs(struct compiler *c)
{
    for (uint32_t nr = 0; nr < N_NRS; nr++)
        if (nr == 0 || c->verdict[nr] != c->verdict[nr - 1]) {
            c->runs[c->n_runs].first = nr;
            c->runs[c->n_runs].v = (enum verdict)c->verdict[nr];
            c->n_runs++;
        }
}

static int block(struct compiler *c, enum verdict v)
{
    c->used[v] = true;
    return TO_BLOCK(v);
}

static int emit(struct compiler *c, uint16_t code, uint32_t k, int jt, int jf)
{
    c->prog[c->n] = (struct insn){.code = code, .k = k, .jt = jt, .jf = jf};
    return (int)c->n++;
}

static int next(const struct compiler *c)
{
    return (int)c->n + 1;
}

/* The runs lo..hi, which hold nr. A single run is its verdict's block itself (no instruction);
 * otherwise a node tests nr >= the upper half's first number, falls through to the lower half
 * (laid out right after it) and jumps forward to the upper half. Returns the subtree's target. */
static int emit_search(struct compiler *c, size_t lo, size_t hi)
{
    if (lo == hi)
        return block(c, c->runs[lo].v);
    size_t mid = lo + (hi - lo + 1) / 2;
    int at = emit(c, BPF_JMP | BPF_JGE | BPF_K, c->runs[mid].first, 0, 0);
    int below = emit_search(c, lo, mid - 1);
    int above = emit_search(c, mid, hi);
    c->prog[at].jt = above;
    c->prog[at].jf = below;
    return at;
}

static void emit_prologue(struct compiler *c)
{
    emit(c, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), 0, 0);
    emit(c, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, next(c), block(c, V_KILL));
    emit(c, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), 0, 0);
    emit(c, BPF_JMP | BPF_JGT | BPF_K, LOCAL_SECCOMP_HIGHEST_KNOWN, next(c), (int)c->n + 3);
    emit(c, BPF_JMP | BPF_JGE | BPF_K, LOCAL_SECCOMP_X32_BIT, next(c), block(c, V_ENOSYS));
    /* -1 (what a tracer sets to skip a call) is no x32 call: EPERM, as libseccomp had it. */
    emit(c, BPF_JMP | BPF_JEQ | BPF_K, UINT32_MAX, block(c, V_EPERM), block(c, V_KILL));
}

static void emit_socket(struct compiler *c)
{
    emit(c, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0), 0, 0);
    emit(c, BPF_JMP | BPF_JEQ | BPF_K, LOCAL_SECCOMP_AF_ALG, block(c, V_EPERM), next(c));
    emit(c, BPF_JMP | BPF_JEQ | BPF_K, LOCAL_SECCOMP_AF_VSOCK, block(c, V_EPERM),
         block(c, V_ALLOW));
}

static void emit_personality(struct compiler *c)
{
    emit(c, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0), 0, 0);
    for (size_t i = 0; i < local_seccomp_n_personas; i++) {
        bool last = i + 1 == local_seccomp_n_personas;
        emit(c, BPF_JMP | BPF_JEQ | BPF_K, local_seccomp_personas[i], block(c, V_ALLOW),
             last ? block(c, V_EPERM) : next(c));
    }
}

/* Allowed when none of mask's bits is set in argument arg. */
static void emit_bits_clear(struct compiler *c, unsigned arg, uint32_t mask)
{
    emit(c, BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg), 0, 0);
    emit(c, BPF_JMP | BPF_JSET | BPF_K, mask, block(c, V_EPERM), block(c, V_ALLOW));
}

static void emit_ret(struct compiler *c, enum verdict v, uint32_t action)
{
    if (c->used[v]) {
        c->block_at[v] = (int)c->n;
        emit(c, BPF_RET | BPF_K, action, 0, 0);
    }
}

/* The argument checks first, then the returns: every jump goes forward. */
static void emit_blocks(struct compiler *c)
{
    static const enum verdict checks[] = {V_SOCKET, V_PERSONALITY, V_CLONE, V_MODE_ARG1,
                                          V_MODE_ARG2};
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        enum verdict v = checks[i];
        if (!c->used[v])
            continue;
        c->block_at[v] = (int)c->n;
        if (v == V_SOCKET)
            emit_socket(c);
        else if (v == V_PERSONALITY)
            emit_personality(c);
        else if (v == V_CLONE)
            emit_bits_clear(c, 0, LOCAL_SECCOMP_CLONE_NS_FLAGS);
        else
            emit_bits_clear(c, v == V_MODE_ARG1 ? 1 : 2, LOCAL_SECCOMP_SETID_MODE);
    }
    emit_ret(c, V_ALLOW, SECCOMP_RET_ALLOW);
    emit_ret(c, V_EPERM, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
    emit_ret(c, V_ENOSYS, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
    emit_ret(c, V_KILL, SECCOMP_RET_KILL_PROCESS);
}

static void emit_program(struct compiler *c)
{
    emit_prologue(c);
    int root = emit_search(c, 0, c->n_runs - 1);
    if (root < 0) /* one run only: the search is a single block */
        emit(c, BPF_JMP | BPF_JA, 0, root, 0);
    emit_blocks(c);
}

/* The forward offset from pc to target; cBPF's conditional jumps have 8 bits for it. */
static int offset(const struct compiler *c, size_t pc, int target, long max, struct mcp_error *err)
{
    long to = target < 0 ? c->block_at[-1 - target] : target;
    long off = to - (long)pc - 1;
    if (off < 0 || off > max)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "seccomp: the jump at instruction %zu to %ld does not fit cBPF's "
                             "offsets (the profile outgrew this compiler)",
                             pc, to);
    return (int)off;
}

static int resolve(const struct compiler *c, struct sock_filter *out, struct mcp_error *err)
{
    for (size_t pc = 0; pc < c->n; pc++) {
        const struct insn *in = &c->prog[pc];
        out[pc] = (struct sock_filter){.code = in->code, .k = in->k};
        if (BPF_CLASS(in->code) != BPF_JMP)
            continue;
        if (BPF_OP(in->code) == BPF_JA) {
            int off = offset(c, pc, in->jt, BPF_MAXINSNS, err);
            if (off < 0)
                return -1;
            out[pc].k = (uint32_t)off;
            continue;
        }
        int jt = offset(c, pc, in->jt, UINT8_MAX, err), jf = offset(c, pc, in->jf, UINT8_MAX, err);
        if (jt < 0 || jf < 0)
            return -1;
        out[pc].jt = (uint8_t)jt;
        out[pc].jf = (uint8_t)jf;
    }
    return 0;
}

int local_seccomp_build(struct local_seccomp *out, struct mcp_error *err)
{
    struct compiler *c = xcalloc(1, sizeof *c);
    int rc = fill_verdicts(c, err);
    if (rc == 0) {
        make_runs(c);
        emit_program(c);
        out->filter = xcalloc(c->n, sizeof *out->filter);
        out->len = (unsigned short)c->n;
        rc = resolve(c, out->filter, err);
        if (rc < 0)
            local_seccomp_free(out);
    }
    free(c);
    return rc;
}

void local_seccomp_free(struct local_seccomp *s)
{
    free(s->filter);
    s->filter = NULL;
    s->len = 0;
}
