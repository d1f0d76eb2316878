/* The sandbox's seccomp program (backend/local/seccomp_profile.c), run by a small cBPF
 * interpreter next to a reference: the program libseccomp builds from the same tables (what
 * mcpbox loaded before it compiled its own). Both must give the same answer for every syscall
 * number, foreign ABI and argument value with a zero high word; with a non-zero high word ours
 * must answer by the low word, as the kernel reads it (libseccomp's let AF_VSOCK | 1 << 32
 * through). Finally the kernel itself loads ours in a child and enforces it. No root needed. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/local_seccomp.h"
#include "test.h"

#define RET_EPERM (SECCOMP_RET_ERRNO | EPERM)
#define RET_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)
#define MAX_NR 1024
#define AUDIT_ARCH_UNKNOWN 0x12345678u

struct prog {
    struct sock_filter *f;
    size_t n;
};

static struct prog ours, ref;

/* ---- a cBPF interpreter over struct seccomp_data ---- */

static uint32_t load_word(const struct seccomp_data *d, uint32_t k)
{
    if (k % 4 != 0 || k + 4 > sizeof *d) {
        fprintf(stderr, "bpf: load at offset %u\n", k);
        abort();
    }
    uint32_t w;
    memcpy(&w, (const char *)d + k, sizeof w);
    return w;
}

static uint32_t slot(uint32_t k)
{
    if (k >= BPF_MEMWORDS) {
        fprintf(stderr, "bpf: scratch word %u\n", k);
        abort();
    }
    return k;
}

static int jump_taken(const struct sock_filter *in, uint32_t a, uint32_t x)
{
    uint32_t v = BPF_SRC(in->code) == BPF_X ? x : in->k;
    switch (BPF_OP(in->code)) {
    case BPF_JEQ:
        return a == v;
    case BPF_JGT:
        return a > v;
    case BPF_JGE:
        return a >= v;
    case BPF_JSET:
        return (a & v) != 0;
    }
    fprintf(stderr, "bpf: unknown jump 0x%x\n", in->code);
    abort();
}

static uint32_t run(const struct prog *p, const struct seccomp_data *d)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    for (size_t pc = 0; pc < p->n; pc++) {
        const struct sock_filter *in = &p->f[pc];
        switch (in->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            a = load_word(d, in->k);
            break;
        case BPF_LD | BPF_IMM:
            a = in->k;
            break;
        case BPF_LD | BPF_MEM:
            a = mem[slot(in->k)];
            break;
        case BPF_LDX | BPF_W | BPF_IMM:
            x = in->k;
            break;
        case BPF_LDX | BPF_W | BPF_MEM:
            x = mem[slot(in->k)];
            break;
        case BPF_ST:
            mem[slot(in->k)] = a;
            break;
        case BPF_STX:
            mem[slot(in->k)] = x;
            break;
        case BPF_ALU | BPF_AND | BPF_K:
            a &= in->k;
            break;
        case BPF_ALU | BPF_AND | BPF_X:
            a &= x;
            break;
        case BPF_ALU | BPF_OR | BPF_K:
            a |= in->k;
            break;
        case BPF_ALU | BPF_OR | BPF_X:
            a |= x;
            break;
        case BPF_JMP | BPF_JA:
            pc += in->k;
            break;
        case BPF_RET | BPF_K:
            return in->k;
        case BPF_RET | BPF_A:
            return a;
        default:
            if (BPF_CLASS(in->code) != BPF_JMP) {
                fprintf(stderr, "bpf: unknown opcode 0x%x at %zu\n", in->code, pc);
                abort();
            }
            pc += jump_taken(in, a, x) ? in->jt : in->jf;
        }
    }
    fprintf(stderr, "bpf: ran off the end of the program\n");
    abort();
}

static uint32_t verdict(const struct prog *p, uint32_t arch, uint32_t nr, const uint64_t *args)
{
    struct seccomp_data d = {.nr = (int)nr, .arch = arch};
    if (args != NULL)
        memcpy(d.args, args, sizeof d.args);
    return run(p, &d);
}

/* ---- the reference: libseccomp's program from the same tables, with the ENOSYS prologue ---- */

static struct scmp_arg_cmp cmp(unsigned arg, enum scmp_compare op, uint64_t a, uint64_t b)
{
    struct scmp_arg_cmp c = {.arg = arg, .op = op, .datum_a = a, .datum_b = b};
    return c;
}

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, int fallback, unsigned n,
                const struct scmp_arg_cmp *c)
{
    int nr = local_seccomp_nr(name, fallback);
    return nr < 0 ? 0 : seccomp_rule_add_array(ctx, action, nr, n, c);
}

static int add_ref_rules(scmp_filter_ctx ctx)
{
    int rc = 0;
    for (size_t i = 0; i < local_seccomp_n_allowed; i++)
        rc |= rule(ctx, SCMP_ACT_ALLOW, local_seccomp_allowed[i], -1, 0, NULL);
    for (size_t i = 0; i < local_seccomp_n_allowed_by_number; i++)
        rc |= rule(ctx, SCMP_ACT_ALLOW, local_seccomp_allowed_by_number[i].name,
                   local_seccomp_allowed_by_number[i].nr, 0, NULL);
    struct scmp_arg_cmp fam[] = {cmp(0, SCMP_CMP_LT, LOCAL_SECCOMP_AF_ALG, 0),
                                 cmp(0, SCMP_CMP_EQ, 39, 0),
                                 cmp(0, SCMP_CMP_GT, LOCAL_SECCOMP_AF_VSOCK, 0)};
    for (size_t i = 0; i < 3; i++)
        rc |= rule(ctx, SCMP_ACT_ALLOW, "socket", -1, 1, &fam[i]);
    for (size_t i = 0; i < local_seccomp_n_personas; i++) {
        struct scmp_arg_cmp p = cmp(0, SCMP_CMP_EQ, local_seccomp_personas[i], 0);
        rc |= rule(ctx, SCMP_ACT_ALLOW, "personality", -1, 1, &p);
    }
    struct scmp_arg_cmp ns = cmp(0, SCMP_CMP_MASKED_EQ, LOCAL_SECCOMP_CLONE_NS_FLAGS, 0);
    rc |= rule(ctx, SCMP_ACT_ALLOW, "clone", -1, 1, &ns);
    rc |= rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", -1, 0, NULL);
    for (size_t i = 0; i < local_seccomp_n_chmods; i++) {
        const struct local_seccomp_call *m = &local_seccomp_chmods[i];
        struct scmp_arg_cmp plain = cmp(m->arg, SCMP_CMP_MASKED_EQ, LOCAL_SECCOMP_SETID_MODE, 0);
        rc |= rule(ctx, SCMP_ACT_ALLOW, m->name, m->nr, 1, &plain);
    }
    return rc;
}

static struct prog export_ref(scmp_filter_ctx ctx)
{
    static const struct sock_filter pre[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, LOCAL_SECCOMP_X32_BIT, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, LOCAL_SECCOMP_HIGHEST_KNOWN, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, RET_ENOSYS),
    };
    size_t np = sizeof pre / sizeof pre[0];
    int fd = memfd_create("test-seccomp-ref", MFD_CLOEXEC);
    ASSERT(fd >= 0);
    ASSERT_EQ(seccomp_export_bpf(ctx, fd), 0);
    off_t size = lseek(fd, 0, SEEK_END);
    ASSERT(size > 0 && size % (off_t)sizeof(struct sock_filter) == 0);
    struct prog p = {.n = np + (size_t)size / sizeof(struct sock_filter)};
    p.f = calloc(p.n, sizeof *p.f);
    ASSERT(p.f != NULL);
    memcpy(p.f, pre, sizeof pre);
    ASSERT_EQ(pread(fd, p.f + np, (size_t)size, 0), size);
    close(fd);
    return p;
}

TEST(build_both)
{
    struct local_seccomp s;
    struct mcp_error err;
    ASSERT_EQ(local_seccomp_build(&s, &err), 0);
    ours.f = s.filter;
    ours.n = s.len;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    ASSERT(ctx != NULL);
    ASSERT_EQ(seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), 0);
    ASSERT_EQ(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2), 0);
    ASSERT_EQ(add_ref_rules(ctx), 0);
    ref = export_ref(ctx);
    seccomp_release(ctx);
    printf("# program: %zu instructions (libseccomp's reference: %zu)\n", ours.n, ref.n);
    ASSERT(ours.n < 200);
}

/* Argument values with a zero high word: around each family, persona, namespace flag, mode. */
static const uint64_t values[] = {
    0,          1,          17,         37,         38,         39,         40,         41,
    0x8,        0x20000,    0x20008,    0xffffffff, 0x0400000,  0x0400008,  0x00020000, 0x02000000,
    0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x7E020000, 0x003d0f00, 0x80000000,
    0xfffffffe, 04000,      02000,      06000,      06755,      0755,       01777,      0644,
};
#define N_VALUES (sizeof values / sizeof values[0])

static void expect_same(uint32_t arch, uint32_t nr, const uint64_t *ours_args,
                        const uint64_t *ref_args)
{
    uint32_t a = verdict(&ours, arch, nr, ours_args), b = verdict(&ref, arch, nr, ref_args);
    if (a != b)
        TEST_FAIL("arch 0x%x nr %u args %llx,%llx,%llx: ours 0x%x, reference 0x%x", arch, nr,
                  ours_args ? (unsigned long long)ours_args[0] : 0ull,
                  ours_args ? (unsigned long long)ours_args[1] : 0ull,
                  ours_args ? (unsigned long long)ours_args[2] : 0ull, a, b);
}

TEST(same_verdicts_for_every_number)
{
    ASSERT(ours.f != NULL && ref.f != NULL);
    for (uint32_t nr = 0; nr < MAX_NR; nr++)
        expect_same(AUDIT_ARCH_X86_64, nr, NULL, NULL);
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, LOCAL_SECCOMP_HIGHEST_KNOWN + 1, NULL), RET_ENOSYS);
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_read, NULL), SECCOMP_RET_ALLOW);
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_ptrace, NULL), RET_EPERM);
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_clone3, NULL), RET_ENOSYS);
}

TEST(same_verdicts_for_foreign_abis)
{
    static const uint32_t odd[] = {0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 0x3fffffff};
    for (uint32_t k = 0; k < MAX_NR; k++) {
        expect_same(AUDIT_ARCH_X86_64, LOCAL_SECCOMP_X32_BIT + k, NULL, NULL);
        expect_same(AUDIT_ARCH_I386, k, NULL, NULL);
        expect_same(AUDIT_ARCH_UNKNOWN, k, NULL, NULL);
        ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, LOCAL_SECCOMP_X32_BIT + k, NULL),
                  SECCOMP_RET_KILL_PROCESS);
        ASSERT_EQ(verdict(&ours, AUDIT_ARCH_I386, k, NULL), SECCOMP_RET_KILL_PROCESS);
    }
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        expect_same(AUDIT_ARCH_X86_64, odd[i], NULL, NULL);
}

TEST(same_verdicts_for_arguments_with_a_zero_high_word)
{
    for (uint32_t nr = 0; nr < MAX_NR; nr++)
        for (unsigned arg = 0; arg < 3; arg++)
            for (size_t i = 0; i < N_VALUES; i++) {
                uint64_t args[6] = {0};
                args[arg] = values[i];
                expect_same(AUDIT_ARCH_X86_64, nr, args, args);
            }
}

/* With any high word, ours answers what the reference answers for the low word alone. */
TEST(arguments_are_read_on_their_low_word)
{
    static const uint64_t highs[] = {1, 0x80000000, 0xffffffff};
    for (uint32_t nr = 0; nr < MAX_NR; nr++)
        for (unsigned arg = 0; arg < 3; arg++)
            for (size_t i = 0; i < N_VALUES; i++)
                for (size_t h = 0; h < sizeof highs / sizeof highs[0]; h++) {
                    uint64_t low[6] = {0}, high[6] = {0};
                    low[arg] = values[i];
                    high[arg] = highs[h] << 32 | values[i];
                    expect_same(AUDIT_ARCH_X86_64, nr, high, low);
                }
}

/* The intended difference from libseccomp's program, case by case. */
TEST(high_word_does_not_bypass)
{
    uint64_t vsock[6] = {0x100000028ull, SOCK_STREAM}, alg[6] = {0x100000026ull, SOCK_SEQPACKET};
    ASSERT_EQ(verdict(&ref, AUDIT_ARCH_X86_64, SYS_socket, vsock), SECCOMP_RET_ALLOW); /* the bug */
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_socket, vsock), RET_EPERM);
    ASSERT_EQ(verdict(&ref, AUDIT_ARCH_X86_64, SYS_socket, alg), SECCOMP_RET_ALLOW);
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_socket, alg), RET_EPERM);
    uint64_t newuser[6] = {0xffffffff00000000ull | 0x10000000 | 17};
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_clone, newuser), RET_EPERM);
    uint64_t no_aslr[6] = {0x100000000ull | 0x0400000};
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_personality, no_aslr), RET_EPERM);
    uint64_t linux32[6] = {0x100000000ull | 0x8};
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_personality, linux32), SECCOMP_RET_ALLOW);
    uint64_t setuid[6] = {3, 0x100000000ull | 04755};
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_fchmod, setuid), RET_EPERM);
    uint64_t setgid_at[6] = {3, 0, 0xffffffff00000000ull | 02755};
    ASSERT_EQ(verdict(&ours, AUDIT_ARCH_X86_64, SYS_fchmodat, setgid_at), RET_EPERM);
}

/* In a child: the kernel accepts the program and enforces it (no root: no_new_privs). Exits
 * with the number of the first expectation that failed. */
static int enforce_in_child(void)
{
    struct sock_fprog fp = {.len = (unsigned short)ours.n, .filter = ours.f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0)
        return 1;
    if (syscall(SYS_socket, 0x100000028L, SOCK_STREAM | SOCK_CLOEXEC, 0) != -1 || errno != EPERM)
        return 2;
    if (syscall(SYS_socket, (long)AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0) != -1 || errno != EPERM)
        return 3;
    if (syscall(LOCAL_SECCOMP_HIGHEST_KNOWN + 1) != -1 || errno != ENOSYS)
        return 4;
    if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
        return 5;
    if (syscall(SYS_getpid) != getpid())
        return 6;
    long fd = syscall(SYS_socket, (long)AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return fd >= 0 ? 0 : 7;
}

TEST(kernel_loads_and_enforces)
{
    ASSERT(ours.f != NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0)
        _exit(enforce_in_child());
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
}

int main(void)
{
    RUN(build_both);
    RUN(same_verdicts_for_every_number);
    RUN(same_verdicts_for_foreign_abis);
    RUN(same_verdicts_for_arguments_with_a_zero_high_word);
    RUN(arguments_are_read_on_their_low_word);
    RUN(high_word_does_not_bypass);
    RUN(kernel_loads_and_enforces);
    free(ours.f);
    free(ref.f);
    return test_done();
}
