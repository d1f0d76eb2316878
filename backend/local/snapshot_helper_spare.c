/* A spare snapshot helper (snapshot.h): one helper exec'd ahead of need, its libraries loaded,
 * waiting on a socket for the job (a sandbox's pidfd and root, and the tar's pipe). A restore
 * then costs a create plus the unpack, not a create plus an exec of mcpbox and a dlopen of
 * libarchive and its libraries (about 4 ms quiet, 10 ms on a loaded host: docs/benchmarks.md).
 * The spare runs as the server, in the server's namespaces, holding nothing until its job
 * comes, exactly as a helper between its exec and its setns does; it dies with the server
 * (PR_SET_PDEATHSIG). One at a time, refilled while the job that took it runs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/snapshot.h"
#include "lib/base/cleanup.h"

#define JOB_FDS 3 /* the tar's pipe end, the sandbox's pidfd, its root */

struct spare {
    int pid; /* 0: none */
    int sock;
    int err_fd;
};

static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spare spare_helper;
/* Helpers that said they are done, not reaped yet (under spare_lock). */
#define REAP_MAX 64
static int to_reap[REAP_MAX];
static int n_to_reap;

/* Under spare_lock. A failure leaves none: the next helper then starts cold. */
static void spawn_spare(void)
{
    int sv[2], errp[2];
    cleanup_close int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return;
    if (pipe2(errp, O_CLOEXEC) < 0) {
        close(sv[0]), close(sv[1]);
        return;
    }
    int want[5] = {sv[1], null, errp[1], null, null};
    int pid = fork();
    if (pid == 0)
        snap_helper_exec(want, "wait");
    close(sv[1]), close(errp[1]);
    if (pid < 0) {
        close(sv[0]), close(errp[0]);
        return;
    }
    spare_helper = (struct spare){.pid = pid, .sock = sv[0], .err_fd = errp[0]};
}

static void drop(struct spare *s)
{
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    close(s->sock), close(s->err_fd);
}

/* The job to the spare: its mode, and fds[JOB_FDS] passed over the socket. */
static int send_job(int sock, char mode, const int fds[JOB_FDS])
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * JOB_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &mode, .iov_len = 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * JOB_FDS);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * JOB_FDS);
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int snap_helper_take_spare(const char *mode, int io, int pidfd, int root, struct snap_helper *h)
{
    pthread_mutex_lock(&spare_lock);
    struct spare s = spare_helper;
    spare_helper.pid = 0;
    pthread_mutex_unlock(&spare_lock);
    if (s.pid == 0)
        return -1;
    int fds[JOB_FDS] = {io, pidfd, root};
    if (send_job(s.sock, mode[0], fds) < 0) { /* it died meanwhile: a cold one */
        drop(&s);
        return -1;
    }
    close(s.sock);
    h->pid = s.pid, h->err_fd = s.err_fd;
    return 0;
}

int snap_helper_reap_later(int pid)
{
    pthread_mutex_lock(&spare_lock);
    int rc = n_to_reap < REAP_MAX ? 0 : -1;
    if (rc == 0)
        to_reap[n_to_reap++] = pid;
    pthread_mutex_unlock(&spare_lock);
    return rc;
}

/* Under spare_lock: each has closed its stderr on its way out, so a wait is short. */
static void reap_done(void)
{
    for (int i = 0; i < n_to_reap; i++)
        while (waitpid(to_reap[i], NULL, 0) < 0 && errno == EINTR) {
        }
    n_to_reap = 0;
}

void snap_helper_refill(void)
{
    pthread_mutex_lock(&spare_lock);
    reap_done();
    if (spare_helper.pid == 0)
        spawn_spare();
    pthread_mutex_unlock(&spare_lock);
}

/* ---- the spare's side ---- */

/* Blocks for the job on fd 0, then puts its fds where a cold helper has them: the tar's pipe on
 * 0 (load) or 1 (save), the pidfd on 3, the root on 4. The mode ('l' or 's'), or -1. */
int snap_helper_wait_job(void)
{
    char mode = 0;
    union {
        char buf[CMSG_SPACE(sizeof(int) * JOB_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &mode, .iov_len = 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c;
    if (recvmsg(0, &msg, MSG_CMSG_CLOEXEC) != 1 || (c = CMSG_FIRSTHDR(&msg)) == NULL ||
        c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int) * JOB_FDS) ||
        (mode != 'l' && mode != 's'))
        return -1;
    int got[JOB_FDS], fds[JOB_FDS];
    memcpy(got, CMSG_DATA(c), sizeof got);
    for (int i = 0; i < JOB_FDS; i++) /* first out of the way of 0..4, then into place */
        fds[i] = fcntl(got[i], F_DUPFD, 5), close(got[i]);
    int where[JOB_FDS] = {mode == 'l' ? 0 : 1, 3, 4};
    for (int i = 0; i < JOB_FDS; i++)
        if (fds[i] < 0 || dup2(fds[i], where[i]) < 0)
            return -1;
    for (int i = 0; i < JOB_FDS; i++)
        close(fds[i]);
    return mode;
}
