/* Cloning the sandbox's child in mcpbox's own memory (CLONE_VM), like vfork, where it can be.
 *
 * A plain clone copies mcpbox's address space: page tables of a multi-threaded process with
 * SQLite's cache, libuv's and jansson's heaps; write-protecting them flushes the TLBs of every
 * CPU running an mcpbox thread, every page mcpbox then writes faults once (about 110 faults per
 * create), and the child's exec tears the copy down again. With CLONE_VM there is nothing to
 * copy or tear down: a cold create took 0.6-0.7 ms less (docs/benchmarks.md).
 *
 * The price is that the child runs in memory the parent thread shares: it needs a stack of its
 * own (this file keeps one per thread), it must not return into the parent's frames (hence the
 * few instructions below: glibc has no clone3 that calls a function on a new stack), and the
 * parent must leave the child's plan alone until the child has exec'd or died (spawn.c waits
 * for that). The child shares the parent thread's TLS, errno included; the parent only blocks
 * while the child runs. The child's change of uid marks the shared memory non-dumpable (right
 * for that window: no process of the sandbox's uid may ptrace mcpbox), which is undone once it
 * has exec'd; newuidmap, which a user's server runs for each child, refuses a non-dumpable
 * target, so one shared child at a time: the next one's maps are written only after the
 * previous one's window has closed; a copy made meanwhile (fork copies the flag with the memory)
 * sets it back in its own copy. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/local/local_spawn.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#endif
#ifdef UNDER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) /* clone3_call below; elsewhere every child is a copy */
#define CAN_SHARE 1
#endif

static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int dumpable_at_start = -1; /* read by fork()'s children in any thread */

/* In a child that fork() made while a shared child's window was open: its copy of the memory
 * carries the non-dumpable flag, which newuidmap refuses (the image unpacker's children get
 * their maps from it as a user). The copy is its own: give it back the flag. */
static void fork_child(void)
{
    if (dumpable_at_start > 0)
        prctl(PR_SET_DUMPABLE, dumpable_at_start, 0, 0, 0);
}

#ifdef CAN_SHARE
#define CHILD_STACK_SIZE (512 * 1024) /* the child's frames hold a few PATH_MAX buffers */

struct child_start {
    void (*fn)(void *);
    void *arg;
    void *stack;
};

/* AddressSanitizer keeps one record per thread, found through TLS, which the child shares with
 * the parent thread: it is told the child's stack (as for a fiber), or it warns at the child's
 * first noreturn call that the stack is not the thread's; local_clone_shared_done tells it the
 * parent's again. Nothing to do without it. */
static void asan_stack_is(void *bottom, size_t size)
{
#ifdef UNDER_ASAN
    __sanitizer_start_switch_fiber(NULL, bottom, size);
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#else
    (void)bottom, (void)size;
#endif
}

#ifdef UNDER_ASAN
__attribute__((no_sanitize("address")))
#endif
static void child_start(void *arg)
{
    const struct child_start *c = arg;
    asan_stack_is(c->stack, CHILD_STACK_SIZE);
    c->fn(c->arg);
}

/* Parent: returns the child's pid (or -errno). Child: runs fn(arg) on the stack clone3 set, and
 * never comes back here (fn does not return). */
static long clone3_call(struct clone_args *args, void (*fn)(void *), void *arg)
{
    long ret;
    register void (*r12)(void *) __asm__("r12") = fn; /* callee-saved: kept across syscall */
    register void *r13 __asm__("r13") = arg;
    __asm__ volatile("syscall\n\t"
                     "test %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xor %%ebp, %%ebp\n\t" /* the child's outermost frame */
                     "mov %%r13, %%rdi\n\t"
                     "call *%%r12\n\t"
                     "ud2\n\t"
                     "1:\n\t"
                     : "=a"(ret)
                     : "a"((long)SYS_clone3), "D"(args), "S"(sizeof *args), "r"(r12), "r"(r13)
                     : "rcx", "r11", "memory");
    return ret;
}

static pthread_once_t dumpable_once = PTHREAD_ONCE_INIT;

/* Once, before the first shared child: the dumpable flag to restore, in mcpbox and in copies. */
static void read_dumpable(void)
{
    dumpable_at_start = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    pthread_atfork(NULL, NULL, fork_child);
}
#endif /* CAN_SHARE */

bool local_clone_shared_possible(const struct spawn_request *req)
{
#ifdef CAN_SHARE
    const char *off = getenv("MCPBOX_LOCAL_CLONE_VM"); /* "0": off, to compare (benchmarks) */
    /* A held child (network, or a user's v1 attach) waits for its caller after this call
     * returns; the shared one must be done before. */
    return !(off && strcmp(off, "0") == 0) && !req->hold && !req->network && !req->egress;
#else
    (void)req;
    return false;
#endif
}

pid_t local_clone_shared(struct clone_args *args, void (*fn)(void *), void *arg)
{
#ifdef CAN_SHARE
    static _Thread_local void *stack; /* reused: the parent waits until the child is done */
    pthread_once(&dumpable_once, read_dumpable);
    if (stack == NULL) {
        void *s = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (s == MAP_FAILED)
            return -1;
        stack = s;
    }
    pthread_mutex_lock(&one_at_a_time);
    args->flags |= CLONE_VM;
    args->stack = (uint64_t)(uintptr_t)stack;
    args->stack_size = CHILD_STACK_SIZE;
    /* Not on this frame, which is gone when the child reads it: kept, like the stack, until the
     * thread's next clone, after this child is done. */
    static _Thread_local struct child_start start;
    start = (struct child_start){.fn = fn, .arg = arg, .stack = stack};
    long r = clone3_call(args, child_start, &start);
    if (r < 0) {
        pthread_mutex_unlock(&one_at_a_time);
        errno = (int)-r;
        return -1;
    }
    return (pid_t)r;
#else
    (void)args, (void)fn, (void)arg;
    errno = ENOSYS;
    return -1;
#endif
}

/* clone3 for a copy: as fork()'s children above, one made while a shared child's window is
 * open gets the flag back before anything looks at it (its maps come after). */
pid_t local_clone_copy(struct clone_args *args)
{
    pid_t pid = (pid_t)syscall(SYS_clone3, args, sizeof *args);
    if (pid == 0)
        fork_child();
    return pid;
}

void local_close_except(int keep_a, int keep_b)
{
    int lo = keep_a < keep_b ? keep_a : keep_b, hi = keep_a < keep_b ? keep_b : keep_a;
    if (lo > 0)
        syscall(SYS_close_range, 0u, (unsigned)lo - 1, 0);
    if (lo >= 0 && hi > lo + 1)
        syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0);
    syscall(SYS_close_range, (unsigned)hi + 1, ~0u, 0);
}

void local_clone_shared_done(void)
{
    if (dumpable_at_start > 0)
        prctl(PR_SET_DUMPABLE, dumpable_at_start, 0, 0, 0);
#if defined(UNDER_ASAN) && defined(CAN_SHARE)
    pthread_attr_t a;
    void *bottom;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        if (pthread_attr_getstack(&a, &bottom, &size) == 0)
            asan_stack_is(bottom, size);
        pthread_attr_destroy(&a);
    }
#endif
    pthread_mutex_unlock(&one_at_a_time);
}
