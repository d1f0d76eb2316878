/* The honest floor for the local benchmark: a small process (this one, a few hundred KiB
 * resident) that starts /bin/true and waits for it, on request. The benchmark process itself maps
 * a lot of memory by the time it measures (backends, sandboxes, samples), and fork copies its page
 * tables: its own fork+exec cost three times what a small program pays. An agent's command is
 * started by a small process too (the sandbox's agent).
 *
 * Protocol on stdin/stdout: one byte per request, 'f' (fork + execve + waitpid), 's'
 * (posix_spawn + waitpid) of /bin/true, or 'u' (posix_spawnp + waitpid of the unshare CLI with
 * the namespaces of a sandbox); one reply line "<microseconds> <0|1>" (1 = it exited 0), timed
 * here so that the pipe round trip is not counted. EOF ends it. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int wait_ok(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int run_fork(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    return pid > 0 && wait_ok(pid);
}

static int run_spawn(void)
{
    static char *const argv[] = {(char *)"true", NULL};
    pid_t pid;
    return posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) == 0 && wait_ok(pid);
}

static int run_unshare(void)
{
    static char *const argv[] = {(char *)"unshare", (char *)"--user", (char *)"--map-root-user",
                                 (char *)"--pid", (char *)"--fork", (char *)"--mount",
                                 (char *)"--net", (char *)"--uts", (char *)"--ipc",
                                 (char *)"--cgroup", (char *)"--mount-proc", (char *)"/bin/true",
                                 NULL};
    pid_t pid;
    return posix_spawnp(&pid, "unshare", NULL, NULL, argv, environ) == 0 && wait_ok(pid);
}

int main(void)
{
    char op;
    while (read(0, &op, 1) == 1) {
        double t0 = now_us();
        int ok = op == 's' ? run_spawn() : op == 'u' ? run_unshare() : run_fork();
        char line[64];
        int n = snprintf(line, sizeof line, "%.1f %d\n", now_us() - t0, ok);
        if (write(1, line, (size_t)n) != n)
            return 1;
    }
    return 0;
}
