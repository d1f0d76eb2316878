/* Whose host directories a caller may mount (docs/security.md, "Host directories").
 *
 * Each allowed directory belongs to one user (--allow-dir [USER=]DIR; by default the server's
 * own). A create's caller is known by the sandbox owner the protocol layer gives it: a local
 * user (`local:uid:N`, from stdio or the kernel's answer for a loopback connection) is that uid;
 * a bearer token's holder acts as the server's user (the person gave them the token); anyone else
 * (`session:...`, the kernel could not tell) is no one and mounts nothing. A caller mounts only
 * directories allowed for their own uid, only if they could open the source themselves, and the
 * mount maps only their uid: never the rights of the server or of another owner. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/buf.h"
#include "backend/local/local_mounts.h"

#define OWNER_LOCAL_UID "local:uid:"
#define OWNER_TOKEN "token:"
#define NOBODY_GID 65534u

int local_user_parse(const char *name, uid_t *uid)
{
    char *end = NULL;
    errno = 0;
    unsigned long n = name[0] >= '0' && name[0] <= '9' ? strtoul(name, &end, 10) : 0;
    if (end && *end == '\0' && errno == 0 && n < (uid_t)-1) {
        *uid = (uid_t)n;
        return 0;
    }
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwnam_r(name, &pw, buf, sizeof buf, &found) != 0 || found == NULL)
        return -1;
    *uid = pw.pw_uid;
    return 0;
}

void local_user_name(uid_t uid, char *out, size_t size)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != NULL)
        snprintf(out, size, "%s (uid %u)", pw.pw_name, (unsigned)uid);
    else
        snprintf(out, size, "uid %u", (unsigned)uid);
}

int local_ws_caller(const char *owner, struct local_ws_caller *out)
{
    memset(out, 0, sizeof *out);
    if (owner && strncmp(owner, OWNER_TOKEN, strlen(OWNER_TOKEN)) == 0) {
        out->uid = geteuid();
        out->by_token = true;
    } else if (owner && strncmp(owner, OWNER_LOCAL_UID, strlen(OWNER_LOCAL_UID)) == 0) {
        const char *digits = owner + strlen(OWNER_LOCAL_UID);
        char *end = NULL;
        errno = 0;
        unsigned long n = strtoul(digits, &end, 10);
        if (digits[0] < '0' || digits[0] > '9' || *end != '\0' || errno || n >= (uid_t)-1)
            return -1;
        out->uid = (uid_t)n;
    } else {
        return -1;
    }
    struct passwd pw, *found = NULL;
    char buf[4096];
    out->gid = NOBODY_GID; /* a uid without an account: no group of anyone else */
    out->ngroups = 0;
    if (getpwuid_r(out->uid, &pw, buf, sizeof buf, &found) == 0 && found != NULL) {
        out->gid = pw.pw_gid;
        int n = LOCAL_WS_CALLER_GROUPS;
        if (getgrouplist(pw.pw_name, pw.pw_gid, out->groups, &n) >= 0)
            out->ngroups = n;
    }
    if (out->ngroups == 0)
        out->groups[out->ngroups++] = out->gid;
    out->known = true;
    return 0;
}

/* In a child with the caller's uid, gids and no capabilities: open path as a directory without
 * following symlinks and report what it found. Only system calls after the fork (the server is
 * threaded). Exit status: 0 and the stat written, or the errno. */
static void probe_child(const struct local_ws_caller *who, const char *path, int out)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct none[2] = {{0}};
    if (syscall(SYS_setgroups, (size_t)who->ngroups, who->groups) < 0 ||
        syscall(SYS_setresgid, who->gid, who->gid, who->gid) < 0 ||
        syscall(SYS_setresuid, who->uid, who->uid, who->uid) < 0 ||
        syscall(SYS_capset, &hdr, none) < 0) /* none kept, whatever the securebits say */
        _exit(EPERM);
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        _exit(errno ? errno : EIO);
    _exit(write(out, &st, sizeof st) == (ssize_t)sizeof st ? 0 : EIO);
}

int local_ws_caller_opens(const struct local_ws_caller *who, int fd, const char *path)
{
    if (who->uid == geteuid())
        return 0; /* the server's own open was the caller's */
    struct stat want, got;
    int pipefd[2];
    if (fstat(fd, &want) < 0 || pipe2(pipefd, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0); /* no atfork handlers */
    if (pid == 0) {
        close(pipefd[0]);
        probe_child(who, path, pipefd[1]);
    }
    close(pipefd[1]);
    int e = pid < 0 ? errno : 0, status = 0;
    ssize_t n = pid < 0 ? -1 : read(pipefd[0], &got, sizeof got);
    close(pipefd[0]);
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0) {
        errno = e;
        return -1;
    }
    if (n != (ssize_t)sizeof got) {
        errno = WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : EACCES;
        return -1;
    }
    /* The same directory the server checked, not one put there since. */
    if (got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
        errno = ESTALE;
        return -1;
    }
    return 0;
}

void local_ws_caller_ids(const struct local_ws_caller *who, const struct stat *st, uint32_t *uid,
                         uint32_t *gid)
{
    if (geteuid() != 0) { /* the server's user, the only caller such a server lets mount */
        *uid = geteuid(), *gid = getegid();
        return;
    }
    if (who->uid == 0) { /* root may act as anyone: the directory's owner, as before */
        *uid = st->st_uid, *gid = st->st_gid;
        return;
    }
    /* Another user: only their uid is mapped, so others' files keep "other" rights only; the
     * directory's group only if they are in it. */
    *uid = who->uid, *gid = who->gid;
    for (int i = 0; i < who->ngroups; i++)
        if (who->groups[i] == st->st_gid)
            *gid = st->st_gid;
}
