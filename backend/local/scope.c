/* A rootless server on a pure cgroup v2 host with a user systemd (Debian 12, Ubuntu 24.04,
 * Fedora desktops) starts in a leaf it may not use (a terminal's or an app's scope): moving a
 * process there needs write access to the common ancestor's cgroup.procs. The usual answer is a
 * transient scope with Delegate=yes from the user's systemd; `mcpbox serve` re-executes itself
 * through `systemd-run --user --scope -p Delegate=yes` when that is so, after checking with a
 * throw-away `systemd-run ... true` that the user's systemd answers (a failed exec would end the
 * server). MCPBOX_SYSTEMD_SCOPE=0 turns it off; MCPBOX_IN_SCOPE marks the re-executed process;
 * MCPBOX_SYSTEMD_RUN names another systemd-run (tests: tests/vm/guest_tests.sh). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/local.h"

#define SCOPE_MARK "MCPBOX_IN_SCOPE"

static const char *systemd_run(void)
{
    const char *test = getenv("MCPBOX_SYSTEMD_RUN"); /* tests: a stand-in */
    if (test && test[0])
        return access(test, X_OK) == 0 ? test : NULL;
    static const char *const paths[] = {"/usr/bin/systemd-run", "/bin/systemd-run"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

/* Our cgroup v2 directory belongs to us: already delegated (or not pure v2 at all). */
static bool own_cgroup_delegated(void)
{
    char line[1024] = "", dir[1100];
    struct stat st;
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) < 0)
        return true; /* not pure v2: nothing to do here (hybrid: mcpbox setup) */
    FILE *f = fopen("/proc/self/cgroup", "re");
    while (f && fgets(line, sizeof line, f) && strncmp(line, "0::", 3) != 0)
        line[0] = '\0';
    if (f)
        fclose(f);
    line[strcspn(line, "\n")] = '\0';
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", line[0] ? line + 3 : "/");
    return stat(dir, &st) == 0 && st.st_uid == geteuid();
}

static bool probe_scope(const char *run)
{
    char *argv[] = {(char *)run, (char *)"--user", (char *)"--scope", (char *)"-p",
                    (char *)"Delegate=yes", (char *)"--quiet", (char *)"--", (char *)"/bin/true",
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    extern char **environ;
    int rc = posix_spawn(&pid, run, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    while (rc == 0 && waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return false;
    return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void local_enter_delegated_scope(int argc, char **argv)
{
    const char *off = getenv("MCPBOX_SYSTEMD_SCOPE");
    const char *run = systemd_run();
    if (geteuid() == 0 || getenv(SCOPE_MARK) || (off && strcmp(off, "0") == 0) || run == NULL ||
        own_cgroup_delegated() || !probe_scope(run))
        return;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char **args = calloc((size_t)argc + 9, sizeof *args);
    if (args == NULL)
        return;
    const char *head[] = {run, "--user", "--scope", "-p", "Delegate=yes", "--quiet", "--", exe};
    size_t k = 0;
    for (; k < sizeof head / sizeof head[0]; k++)
        args[k] = (char *)head[k];
    for (int i = 0; i < argc; i++)
        args[k++] = argv[i];
    setenv(SCOPE_MARK, "1", 1);
    execv(run, args);
    unsetenv(SCOPE_MARK); /* the exec failed: go on where we are (limits reported as such) */
    free(args);
}
