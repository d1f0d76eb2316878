/* Battery: the filesystem a sandbox sees (read-only system dirs, masked /proc entries, device
 * nodes, leaked descriptors, host paths). Writes are only attempted in the scratch directory;
 * elsewhere the probes ask access(2) or open for writing and close without writing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "battery.h"

#define BATTERY_TMP_MAX_BYTES (1024ULL * 1024 * 1024)
#define BATTERY_LOOP_MAJOR 7

static const char *const runtime_sockets[] = {
    "/var/run/docker.sock",          "/run/docker.sock",       "/run/containerd/containerd.sock",
    "/run/crio/crio.sock",           "/run/podman/podman.sock", "/var/run/docker/containerd.sock",
    "/run/user/0/podman/podman.sock", NULL,
};

static const char *const host_devices[] = {
    "/dev/vda", "/dev/sda",  "/dev/nvme0n1", "/dev/mem", "/dev/kmem",
    "/dev/port", "/dev/kmsg", "/dev/vsock",   "/dev/kvm", "/dev/fuse", NULL,
};

static void expect_absent(struct battery_probe *p, const char *const *paths)
{
    struct stat sb;
    for (; *paths != NULL; paths++)
        if (lstat(*paths, &sb) == 0) {
            battery_fail(p, 0, "%s is present", *paths);
            return;
        }
    battery_pass(p, 0, "none present");
}

static void check_runtime_socket(struct battery_probe *p)
{
    expect_absent(p, runtime_sockets);
}

static void check_host_devices(struct battery_probe *p)
{
    expect_absent(p, host_devices);
}

/* BATTERY_HOST_PATHS=a:b:c — host paths (the state directory, agent sockets) that the runner
 * knows exist on the host and that must not be visible here. */
static void check_host_paths(struct battery_probe *p)
{
    const char *env = getenv("BATTERY_HOST_PATHS");
    if (env == NULL || *env == '\0') {
        battery_skip(p, "BATTERY_HOST_PATHS not set");
        return;
    }
    char list[4096];
    snprintf(list, sizeof(list), "%s", env);
    struct stat sb;
    for (char *save = NULL, *s = strtok_r(list, ":", &save); s; s = strtok_r(NULL, ":", &save))
        if (lstat(s, &sb) == 0) {
            battery_fail(p, 0, "host path %s is visible", s);
            return;
        }
    battery_pass(p, ENOENT, "no host path visible");
}

/* A read-only mount (statvfs reports mount flags), and no write access either way. access(2)
 * alone is not enough: it reports EACCES before EROFS when permissions already refuse. */
static void expect_readonly_dir(struct battery_probe *p, const char *dir)
{
    struct statvfs sv;
    if (statvfs(dir, &sv) < 0) {
        battery_pass(p, errno, "%s is absent", dir);
        return;
    }
    int rc = access(dir, W_OK);
    int e = errno;
    if (!(sv.f_flag & ST_RDONLY))
        battery_fail(p, rc < 0 ? e : 0, "%s is a writable mount", dir);
    else if (rc == 0)
        battery_fail(p, 0, "%s is read-only but access(W_OK) succeeded", dir);
    else
        battery_pass(p, e, "%s is a read-only mount", dir);
}

static void check_usr_ro(struct battery_probe *p)
{
    expect_readonly_dir(p, "/usr");
}

static void check_etc_ro(struct battery_probe *p)
{
    expect_readonly_dir(p, "/etc");
}

/* Opens (and closes at once, reading or writing nothing); PASS when the open fails. */
static void expect_open_fails(struct battery_probe *p, const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    int e = errno;
    if (fd >= 0) {
        close(fd);
        battery_fail(p, 0, "%s opened", path);
    } else {
        battery_pass(p, e, "%s refused", path);
    }
}

static void check_shadow(struct battery_probe *p)
{
    expect_open_fails(p, "/etc/shadow", O_RDONLY);
}

static void check_proc_exe(struct battery_probe *p)
{
    expect_open_fails(p, "/proc/self/exe", O_WRONLY);
}

static void check_proc1_exe(struct battery_probe *p)
{
    expect_open_fails(p, "/proc/1/exe", O_WRONLY);
}

static void check_core_pattern(struct battery_probe *p)
{
    expect_open_fails(p, "/proc/sys/kernel/core_pattern", O_WRONLY);
}

static void check_sysrq(struct battery_probe *p)
{
    expect_open_fails(p, "/proc/sysrq-trigger", O_WRONLY);
}

static void check_proc1_mem(struct battery_probe *p)
{
    expect_open_fails(p, "/proc/1/mem", O_RDONLY);
}

static void check_leaked_fds(struct battery_probe *p)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        battery_fail(p, errno, "cannot list /proc/self/fd");
        return;
    }
    char extra[BATTERY_DETAIL_MAX] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
            continue;
        char path[64], target[80] = "?";
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        target[n > 0 ? n : 1] = '\0';
        size_t len = strlen(extra);
        snprintf(extra + len, sizeof(extra) - len, "%s%d->%s", len ? ", " : "", fd, target);
    }
    closedir(d);
    if (extra[0] != '\0')
        battery_fail(p, 0, "inherited: %s", extra);
    else
        battery_pass(p, 0, "only 0, 1, 2");
}

/* CVE-2024-21626: a working directory outside the root shows as "(unreachable)" or fails. */
static void check_cwd(struct battery_probe *p)
{
    char cwd[PATH_MAX];
    struct stat a, b;
    if (getcwd(cwd, sizeof(cwd)) == NULL || cwd[0] != '/') {
        battery_fail(p, errno, "cwd is outside the root");
        return;
    }
    if (stat(cwd, &a) < 0 || stat(".", &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        battery_fail(p, errno, "cwd %s does not resolve to the working directory", cwd);
    else
        battery_pass(p, 0, "cwd %s is inside the root", cwd);
}

static void check_mknod(struct battery_probe *p)
{
    static const int allowed[] = {EPERM, 0};
    char path[300];
    snprintf(path, sizeof(path), "%s/blk", battery_scratch);
    long rc = mknod(path, S_IFBLK | 0600, makedev(BATTERY_LOOP_MAJOR, 0));
    int e = errno;
    if (rc == 0)
        unlink(path); /* never opened */
    battery_expect_errno(p, rc, e, allowed);
}

static void check_release_agent(struct battery_probe *p)
{
    glob_t g;
    memset(&g, 0, sizeof(g));
    glob("/sys/fs/cgroup/release_agent", 0, NULL, &g);
    glob("/sys/fs/cgroup/*/release_agent", GLOB_APPEND, NULL, &g);
    const char *writable = NULL;
    for (size_t i = 0; i < g.gl_pathc && writable == NULL; i++)
        if (access(g.gl_pathv[i], W_OK) == 0)
            writable = g.gl_pathv[i];
    if (writable != NULL)
        battery_fail(p, 0, "%s is writable", writable);
    else
        battery_pass(p, 0, "%zu release_agent files visible, none writable", g.gl_pathc);
    globfree(&g);
}

/* Masked with /dev/null (reads nothing) or not openable at all. */
static void check_kcore(struct battery_probe *p)
{
    int fd = open("/proc/kcore", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        battery_pass(p, errno, "/proc/kcore refused");
        return;
    }
    char c;
    ssize_t n = read(fd, &c, 1);
    close(fd);
    if (n > 0)
        battery_fail(p, 0, "/proc/kcore is readable");
    else
        battery_pass(p, 0, "/proc/kcore reads nothing (masked)");
}

/* Every /proc file Docker masks reads nothing here: not openable (host root's, mode 0400, which
 * no sandbox maps) or covered by /dev/null (a /dev/null bind over /proc/kmsg opens, and reads
 * nothing: it counts as readable here all the same, so kmsg must not open at all). */
static void check_proc_masked(struct battery_probe *p)
{
    static const char *const files[] = {
        "/proc/kcore",      "/proc/keys",       "/proc/timer_list",  "/proc/sched_debug",
        "/proc/kallsyms",   "/proc/latency_stats", "/proc/timer_stats", "/proc/kmsg",
        "/proc/config.gz",  "/proc/vmallocinfo", "/proc/kpagecount", "/proc/kpageflags",
        "/proc/kpagecgroup", "/proc/pagetypeinfo"};
    int present = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int fd = open(files[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            present += errno != ENOENT;
            continue;
        }
        present++;
        /* A read of /proc/kmsg takes the message from the host's log: opening it is enough. */
        char c;
        ssize_t n = strcmp(files[i], "/proc/kmsg") == 0 ? 1 : read(fd, &c, 1);
        close(fd);
        if (n > 0) {
            battery_fail(p, 0, "%s is readable", files[i]);
            return;
        }
    }
    battery_pass(p, 0, "%d of the masked /proc files present, none readable", present);
}

static void check_statvfs_flag(struct battery_probe *p, const char *path, unsigned long flag,
                               const char *name)
{
    struct statvfs sv;
    if (statvfs(path, &sv) < 0)
        battery_pass(p, errno, "%s is absent", path);
    else if (sv.f_flag & flag)
        battery_pass(p, 0, "%s is %s", path, name);
    else
        battery_fail(p, 0, "%s is not %s", path, name);
}

static void check_usr_nosuid(struct battery_probe *p)
{
    check_statvfs_flag(p, "/usr", ST_NOSUID, "nosuid");
}

static void check_proc_sys_ro(struct battery_probe *p)
{
    check_statvfs_flag(p, "/proc/sys", ST_RDONLY, "read-only");
}

/* With a NULL argument TIOCSTI fails EFAULT only after the permission checks passed: no
 * character is ever pushed. */
static void check_tiocsti(struct battery_probe *p)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        battery_pass(p, errno, "no controlling terminal");
        return;
    }
    int rc = ioctl(fd, TIOCSTI, NULL);
    int e = errno;
    close(fd);
    if (rc < 0 && e != EFAULT)
        battery_pass(p, e, "TIOCSTI refused");
    else
        battery_fail(p, e, "a controlling terminal accepts TIOCSTI");
}

static void check_tmp_bounded(struct battery_probe *p)
{
    struct statvfs sv;
    if (statvfs("/tmp", &sv) < 0) {
        battery_fail(p, errno, "statvfs /tmp");
        return;
    }
    unsigned long long bytes = (unsigned long long)sv.f_blocks * sv.f_frsize;
    if (bytes <= BATTERY_TMP_MAX_BYTES)
        battery_pass(p, 0, "/tmp holds %llu MiB", bytes >> 20);
    else
        battery_fail(p, 0, "/tmp holds %llu MiB", bytes >> 20);
}

const struct battery_check battery_checks_fs[] = {
    {33, "no_runtime_socket", check_runtime_socket, "no docker/containerd/podman socket"},
    {34, "usr_readonly", check_usr_ro, "/usr read-only mount"},
    {35, "etc_readonly", check_etc_ro, "/etc read-only mount"},
    {36, "shadow_unreadable", check_shadow, "/etc/shadow not readable"},
    {37, "proc_exe_write", check_proc_exe, "/proc/self/exe not writable"},
    {38, "proc1_exe_write", check_proc1_exe, "/proc/1/exe not writable"},
    {39, "no_leaked_fds", check_leaked_fds, "only fds 0, 1, 2"},
    {40, "cwd_inside_root", check_cwd, "cwd inside the root"},
    {41, "mknod_denied", check_mknod, "mknod(block) EPERM"},
    {42, "no_host_devices", check_host_devices, "no disk, mem, kmsg, vsock, kvm, fuse"},
    {44, "release_agent", check_release_agent, "no writable release_agent"},
    {45, "core_pattern", check_core_pattern, "core_pattern not writable"},
    {46, "sysrq_trigger", check_sysrq, "sysrq-trigger not writable"},
    {47, "kcore_masked", check_kcore, "/proc/kcore unreadable"},
    {63, "proc_masked", check_proc_masked, "masked /proc files read nothing"},
    {49, "usr_nosuid", check_usr_nosuid, "/usr nosuid"},
    {50, "tiocsti", check_tiocsti, "no TIOCSTI"},
    {51, "tmp_bounded", check_tmp_bounded, "/tmp <= 1 GiB"},
    {53, "proc1_mem", check_proc1_mem, "/proc/1/mem not readable"},
    {54, "proc_sys_readonly", check_proc_sys_ro, "/proc/sys read-only"},
    {55, "host_paths_hidden", check_host_paths, "host state dir and sockets invisible"},
    {0},
};
