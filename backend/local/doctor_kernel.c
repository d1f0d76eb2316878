/* Doctor checks: kernel features (seccomp, openat2, overlayfs), user-mode network helpers, host
 * hardening sysctls and the state directory. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backend/local/doctor.h"
#include "backend/local/egress_rules.h"
#include "backend/local/pasta_path.h"
#include "backend/local/runtime_dir.h"

/* The errno the seccomp probe's filter returns for getpgid: one getpgid never returns. */
#define DOCTOR_SECCOMP_PROBE_ERRNO EXFULL
#define DOCTOR_LIBSECCOMP_MIN_MINOR 5 /* 2.5: SCMP_ACT_KILL_PROCESS, notify, newer syscalls */
/* "<state_dir>" + this must fit in sockaddr_un.sun_path (108 bytes with the NUL). */
#define DOCTOR_SOCKET_SUFFIX "/sandboxes/sbx-0123456789abcdef/agent.sock"
#define DOCTOR_SUN_PATH_MAX 108

static void check_kernel_version(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "kernel", true);
    struct utsname u;
    uname(&u);
    int major = 0, minor = 0;
    sscanf(u.release, "%d.%d", &major, &minor);
    if (major < 5 || (major == 5 && minor < 6)) {
        doctor_fail(c, "upgrade the kernel to Linux 5.6 or later (Debian 12 ships 6.1)",
                    "Linux %s on %s: mcpbox needs 5.6+ (openat2, pidfd, clone3)", u.release,
                    u.machine);
        return;
    }
    doctor_pass(c, "Linux %s on %s", u.release, u.machine);
}

static int probe_seccomp(void *arg)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL)
        return ENOMEM;
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(DOCTOR_SECCOMP_PROBE_ERRNO),
                              SCMP_SYS(getpgid), 0);
    if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        rc = -errno;
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc < 0)
        return -rc;
    errno = 0;
    long r = syscall(SYS_getpgid, 0);
    return r == -1 && errno == DOCTOR_SECCOMP_PROBE_ERRNO ? 0 : EPROTO;
}

static void check_seccomp(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "seccomp", true);
    char actions[256] = "";
    const struct scmp_version *v = seccomp_version();
    if (doctor_read_line("/proc/sys/kernel/seccomp/actions_avail", actions, sizeof(actions)) <
            0 ||
        strstr(actions, "errno") == NULL || strstr(actions, "kill_process") == NULL) {
        doctor_fail(c, "rebuild the kernel with CONFIG_SECCOMP_FILTER=y (Linux 4.14+)",
                    "seccomp filters with kill_process/errno actions are not available "
                    "(actions_avail: '%s')",
                    actions);
        return;
    }
    if (v == NULL || v->major < 2 || (v->major == 2 && v->minor < DOCTOR_LIBSECCOMP_MIN_MINOR)) {
        doctor_fail(c, "sudo apt-get install libseccomp2 (2.5 or later), then rebuild mcpbox",
                    "libseccomp %u.%u.%u is too old: mcpbox needs 2.5+", v ? v->major : 0,
                    v ? v->minor : 0, v ? v->micro : 0);
        return;
    }
    int rc = doctor_in_child(probe_seccomp, NULL);
    if (rc != 0) {
        doctor_fail(c, "inside a container, run it with --security-opt seccomp=unconfined",
                    "loading a seccomp filter failed: %s",
                    rc < 0 ? "the probe crashed" : strerror(rc));
        return;
    }
    doctor_pass(c, "libseccomp %u.%u.%u; a test filter loads and works; actions: %s", v->major,
                v->minor, v->micro, actions);
}

static void check_openat2(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "openat2", true);
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
    if (fd < 0) {
        doctor_fail(c, "upgrade to Linux 5.6 or later; inside a container, allow openat2 in "
                       "its seccomp profile",
                    "openat2(RESOLVE_IN_ROOT) failed: %s (the file API needs it to keep "
                    "sandbox symlinks from reaching host files)",
                    strerror(errno));
        return;
    }
    close((int)fd);
    doctor_pass(c, "openat2 with RESOLVE_IN_ROOT works");
}

static bool file_has_word(const char *path, const char *word)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        const char *last = strrchr(line, '\t');
        found = strcmp(last ? last + 1 : line, word) == 0;
    }
    fclose(f);
    return found;
}

static void check_overlay(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "overlayfs", false);
    if (file_has_word("/proc/filesystems", "overlay"))
        doctor_pass(c, "overlay is in /proc/filesystems (images can be mounted)");
    else
        doctor_fail(c,
                    "sudo modprobe overlay && echo overlay | sudo tee "
                    "/etc/modules-load.d/mcpbox-overlay.conf",
                    "overlayfs is not loaded: only the 'host' image works, registered rootfs "
                    "images cannot be mounted");
}

/* The first executable called name in $PATH or the usual system directories. */
static bool find_program(const char *name, char *out, size_t size)
{
    const char *env = getenv("PATH");
    char dirs[2048];
    snprintf(dirs, sizeof(dirs), "%s:/usr/bin:/usr/sbin:/bin:/sbin", env ? env : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
        snprintf(out, size, "%s/%s", d, name);
        if (*d != '\0' && access(out, X_OK) == 0)
            return true;
    }
    return false;
}

static void check_netstack(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "user_mode_network", false);
    const char *pasta = local_pasta_path(); /* the same lookup as a network=true create */
    char slirp[512];
    if (pasta == NULL) {
        doctor_fail(c, "sudo apt-get install passt",
                    "pasta is not installed: sandboxes created with network=true cannot reach "
                    "the internet (the loopback-only default works)%s",
                    find_program("slirp4netns", slirp, sizeof(slirp))
                        ? "; slirp4netns is installed, but mcpbox runs only pasta"
                        : "");
        return;
    }
    doctor_pass(c, "%s", pasta);
}

/* In a throw-away child: a user and network namespace of its own (as a sandbox has), mapped to
 * this process's ids, and nft writing the sandbox rules there. Exits with nft's status. */
static int probe_nft(void *arg)
{
    static const char rules[] = LOCAL_EGRESS_NFT_RULES;
    const char *nft = arg;
    char map[64];
    unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
    int p[2];
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0 || pipe(p) < 0)
        return 125;
    int fd = open("/proc/self/setgroups", O_WRONLY);
    if (fd >= 0) {
        ssize_t w = write(fd, "deny", 4);
        (void)w;
        close(fd);
    }
    const char *files[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
    unsigned ids[] = {uid, gid};
    for (int i = 0; i < 2; i++) {
        int n = snprintf(map, sizeof map, "0 %u 1", ids[i]);
        fd = open(files[i], O_WRONLY);
        if (fd < 0 || write(fd, map, (size_t)n) != n)
            return 125;
        close(fd);
    }
    if (write(p[1], rules, sizeof rules - 1) != (ssize_t)(sizeof rules - 1))
        return 125;
    close(p[1]);
    int null = open("/dev/null", O_WRONLY);
    if (dup2(p[0], 0) < 0 || null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
        return 125;
    execl(nft, "nft", "-f", "-", (char *)NULL);
    return 126;
}

/* Sandboxes with a network_policy: the host's nft writes their rules (egress_netns.c). */
static void check_nft(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "egress_policy", false);
    const char *nft = local_nft_path(); /* the same lookup as a create with network_policy */
    if (nft == NULL) {
        doctor_fail(c, "sudo apt-get install nftables",
                    "nft is not installed: sandboxes created with a network_policy are refused "
                    "(network=true and the loopback-only default work)");
        return;
    }
    int rc = doctor_in_child(probe_nft, (void *)nft);
    if (rc == 125) {
        doctor_fail(c, "see the user_namespaces and namespaces_probe checks",
                    "no user and network namespace to try %s in", nft);
        return;
    }
    if (rc != 0) {
        doctor_fail(c, "sudo modprobe -a nf_tables nft_nat nft_redir nft_reject_inet",
                    "%s could not write a sandbox's egress rules in a new network namespace "
                    "(exit status %d): the kernel's nf_tables NAT, redirect or reject support "
                    "is missing, so sandboxes created with a network_policy fail", nft, rc);
        return;
    }
    doctor_pass(c, "%s writes the egress rules in a sandbox's namespace", nft);
}

/* With these off, staging in shared directories is riskier
 * (docs/internals/isolation-facts.md §7). */
static void check_hardening(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "host_hardening", false);
    char sym[16] = "?", reg[16] = "?";
    doctor_read_line("/proc/sys/fs/protected_symlinks", sym, sizeof(sym));
    doctor_read_line("/proc/sys/fs/protected_regular", reg, sizeof(reg));
    if (strcmp(sym, "0") == 0 || strcmp(reg, "0") == 0)
        doctor_fail(c,
                    "sudo sysctl -w fs.protected_symlinks=1 fs.protected_regular=2 && printf "
                    "'fs.protected_symlinks=1\\nfs.protected_regular=2\\n' | sudo tee -a "
                    "/etc/sysctl.d/90-mcpbox.conf",
                    "fs.protected_symlinks=%s, fs.protected_regular=%s: symlink and file "
                    "planting in world-writable directories is not blocked",
                    sym, reg);
    else
        doctor_pass(c, "fs.protected_symlinks=%s, fs.protected_regular=%s", sym, reg);
}

void doctor_check_kernel(struct doctor_report *r)
{
    check_kernel_version(r);
    check_seccomp(r);
    check_openat2(r);
    check_overlay(r);
    check_netstack(r);
    check_nft(r);
    check_hardening(r);
}

static int state_dir_probe(const char *dir, char *why, size_t size)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s", dir);
    for (char *p = tmp + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(tmp, 0700);
        *p = '/';
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(why, size, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(tmp, sizeof(tmp), "%s/.doctor-%d", dir, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, size, "creating a file in %s: %s", dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

void doctor_check_state_dir(struct doctor_report *r, const char *state_dir)
{
    struct doctor_check *c = doctor_add(r, "state_dir", true);
    char why[4200];
    if (state_dir == NULL || *state_dir != '/') {
        doctor_fail(c, "pass --state-dir /absolute/path or set XDG_STATE_HOME",
                    "no absolute state directory (got '%s')", state_dir ? state_dir : "");
        return;
    }
    size_t sock_len = strlen(state_dir) + strlen(DOCTOR_SOCKET_SUFFIX);
    if (sock_len >= DOCTOR_SUN_PATH_MAX) {
        doctor_fail(c, "pass a shorter --state-dir (for example ~/.mcpbox)",
                    "%s is too long: agent socket paths under it would take %zu bytes, unix "
                    "sockets allow %d",
                    state_dir, sock_len + 1, DOCTOR_SUN_PATH_MAX);
        return;
    }
    if (state_dir_probe(state_dir, why, sizeof(why)) < 0) {
        doctor_fail(c, "pass --state-dir with a directory you can write, or fix its owner "
                       "(sudo chown -R \"$USER\" DIR)",
                    "%s", why);
        return;
    }
    doctor_pass(c, "%s is writable", state_dir);
}

/* The runtime directory is reported, never created here (a doctor run by another user must not
 * make it theirs): where it is, whether on a tmpfs, and whether what is there would be refused. */
void doctor_check_runtime_dir(struct doctor_report *r, const char *state_dir)
{
    struct doctor_check *c = doctor_add(r, "runtime_dir", false);
    char root[512], dir[512];
    int on_tmpfs = state_dir ? local_runtime_path(state_dir, root, sizeof root, dir, sizeof dir) : -1;
    if (on_tmpfs < 0) {
        doctor_fail(c, "fix the state directory first (see state_dir)",
                    "no runtime directory: state directory %s not found", state_dir ? state_dir : "");
        return;
    }
    const char *paths[] = {on_tmpfs ? root : dir, dir};
    for (size_t i = 0; i < 2; i++) {
        struct stat st;
        if (lstat(paths[i], &st) < 0)
            continue; /* made (0700) by the first backend that needs it */
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
            doctor_fail(c, "remove it (mcpbox makes it again, mode 0700)",
                        "%s exists but is not a mode 0700 directory of uid %u: mcpbox would "
                        "refuse it", paths[i], (unsigned)geteuid());
            return;
        }
    }
    doctor_pass(c, "%s (%s)", dir,
                on_tmpfs ? "tmpfs" : "no tmpfs at /run or /dev/shm: on the state directory's disk");
}
