/* Egress by policy, the sandbox's network namespace: the nftables rules that send every outbound
 * TCP connection and every DNS query to the agent's sockets (agent/agent_egress.c), and refuse
 * the rest. The namespace has lo only and a default route to it (local_egress_default_route),
 * so even without these rules nothing would leave: they make traffic reach mcpbox's proxy
 * (egress_proxy.c) instead of failing.
 *
 * The rules are written by the host's nft, run in the sandbox's user and network namespaces
 * before the child is released (no sandbox code runs yet); the sandbox then drops every
 * capability and can never change them. nft runs as the namespace's root (setresuid(0) after
 * setns), because an exec by any other uid would drop the capabilities setns gave. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/egress_rules.h"
#include "backend/local/pasta_path.h"
#include "backend/local/local_spawn.h"

static int rules_memfd(void)
{
    static const char rules[] = LOCAL_EGRESS_NFT_RULES;
    int fd = (int)syscall(SYS_memfd_create, "mcpbox-egress.nft", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (write(fd, rules, sizeof rules - 1) != (ssize_t)(sizeof rules - 1) ||
        lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The forked child: system calls only until the exec (mcpbox is multithreaded). */
__attribute__((noreturn)) static void run_nft(const char *nft, int userns, int netns, int in,
                                              int errw)
{
    char *argv[] = {(char *)"nft", (char *)"-f", (char *)"-", NULL};
    char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    if (dup2(in, 0) < 0 || dup2(errw, 1) < 0 || dup2(errw, 2) < 0 ||
        setns(userns, CLONE_NEWUSER) < 0 || setns(netns, CLONE_NEWNET) < 0 ||
        syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0) {
        char msg[] = "cannot enter the sandbox's namespaces\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(126);
    }
    execve(nft, argv, envp);
    _exit(127);
}

int local_egress_rules(pid_t pid, struct mcp_error *err)
{
    const char *nft = local_nft_path();
    if (nft == NULL)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, ENOENT,
                             "a network policy needs nft, which is not installed (Debian/Ubuntu: "
                             "apt install nftables); or create the sandbox without one");
    int userns = local_ns_open(pid, "user"), netns = local_ns_open(pid, "net"), in = rules_memfd();
    int errp[2] = {-1, -1};
    int rc = -1;
    if (userns < 0 || netns < 0 || in < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        rc = mcp_error_set(err, MCP_ERR_IO, errno, "preparing the sandbox's egress rules");
        goto out;
    }
    pid_t child = fork();
    if (child == 0)
        run_nft(nft, userns, netns, in, errp[1]);
    close(errp[1]);
    errp[1] = -1;
    if (child < 0) {
        rc = mcp_error_set(err, MCP_ERR_IO, errno, "fork for nft");
        goto out;
    }
    char text[512];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof text - 1 &&
           ((n = read(errp[0], text + len, sizeof text - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
        len += n > 0 ? (size_t)n : 0;
    text[len] = '\0';
    int status = -1; /* waitpid failing (not EINTR) leaves it so: not an exit, an error */
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        rc = 0;
    else
        rc = mcp_error_set(err, MCP_ERR_BACKEND, 0,
                           "nft could not write the sandbox's egress rules (exit status %d): %s",
                           WIFEXITED(status) ? WEXITSTATUS(status) : -1, text);
out: {
    int fds[] = {userns, netns, in, errp[0], errp[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}
    return rc;
}
