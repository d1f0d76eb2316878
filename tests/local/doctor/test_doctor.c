/* The doctor's host checks (backend/local/doctor.h): every check is present, the report agrees
 * with facts read independently here, failures carry a fix, and the JSON has the tool's shape. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/doctor.h"
#include "backend/local/runtime_dir.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "test.h"

static const char *const expected_checks[] = {
    "kernel",          "seccomp",           "openat2",          "overlayfs",
    "user_mode_network", "host_hardening",  "user_namespaces",  "unprivileged_userns_clone",
    "apparmor_userns", "namespaces_probe",  "uid_mapping",      "cgroup_layout",
    "cgroup_kill",     "cgroup_attach_speed", "state_dir",         "runtime_dir",
    "egress_policy",
};

static char scratch[128];

static const struct doctor_check *must_find(const struct doctor_report *r, const char *name)
{
    const struct doctor_check *c = doctor_report_find(r, name);
    if (c == NULL)
        TEST_FAIL("check %s missing", name);
    return c;
}

TEST(every_check_present_and_failures_have_fixes)
{
    struct doctor_report r;
    doctor_run(scratch, &r);
    for (size_t i = 0; i < ARRAY_SIZE(expected_checks); i++)
        must_find(&r, expected_checks[i]);
    bool all_required_ok = true;
    for (size_t i = 0; i < r.n; i++) {
        const struct doctor_check *c = &r.checks[i];
        ASSERT(c->detail[0] != '\0');
        if (!c->ok)
            ASSERT(c->fix[0] != '\0'); /* every failure says what to do */
        else
            ASSERT(c->fix[0] == '\0');
        if (c->required && !c->ok)
            all_required_ok = false;
    }
    ASSERT_EQ(doctor_report_ok(&r), all_required_ok);
    doctor_report_release(&r);
}

static int try_unshare(void *arg)
{
    int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET;
    return unshare(flags) == 0 ? 0 : 1;
}

/* In a private mount namespace: pasta hidden (each path covered by /dev/null, which is not
 * executable) and a slirp4netns first on PATH. 0 if the doctor then fails the network check
 * and says to install passt. */
static int network_without_pasta(void *arg)
{
    const char *bin = arg;
    static const char *const pasta[] = {"/usr/bin/pasta", "/usr/local/bin/pasta", "/bin/pasta"};
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return 2;
    for (size_t i = 0; i < ARRAY_SIZE(pasta); i++)
        if (access(pasta[i], F_OK) == 0 && mount("/dev/null", pasta[i], NULL, MS_BIND, NULL) < 0)
            return 3;
    char path[256];
    snprintf(path, sizeof path, "%s:/usr/bin:/bin", bin);
    setenv("PATH", path, 1);
    struct doctor_report r;
    doctor_run(scratch, &r);
    const struct doctor_check *c = doctor_report_find(&r, "user_mode_network");
    int rc = c != NULL && !c->ok && strstr(c->fix, "passt") != NULL ? 0 : 4;
    doctor_report_release(&r);
    return rc;
}

/* In a private mount namespace with every nft the network-policy code looks for hidden: 0 if
 * the doctor then fails the egress_policy check and says to install nftables. */
static int policy_without_nft(void *arg)
{
    (void)arg;
    static const char *const nft[] = {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft",
                                      "/usr/local/sbin/nft"};
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return 2;
    for (size_t i = 0; i < ARRAY_SIZE(nft); i++)
        if (access(nft[i], F_OK) == 0 && mount("/dev/null", nft[i], NULL, MS_BIND, NULL) < 0)
            return 3;
    struct doctor_report r;
    doctor_run(scratch, &r);
    const struct doctor_check *c = doctor_report_find(&r, "egress_policy");
    int rc = c != NULL && !c->ok && strstr(c->fix, "nftables") != NULL ? 0 : 4;
    doctor_report_release(&r);
    return rc;
}

TEST(egress_policy_check_needs_nft)
{
    if (geteuid() != 0)
        TEST_FAIL("needs root (a private mount namespace hides nft)");
    const struct doctor_check *c;
    struct doctor_report r;
    doctor_run(scratch, &r);
    c = must_find(&r, "egress_policy");
    ASSERT(c->ok); /* scripts/install-deps.sh installs nftables */
    doctor_report_release(&r);
    ASSERT_EQ(doctor_in_child(policy_without_nft, NULL), 0);
}

/* mcpbox runs only pasta: slirp4netns alone must not pass the network check. */
TEST(network_check_needs_pasta)
{
    if (geteuid() != 0)
        TEST_FAIL("needs root (a private mount namespace hides pasta)");
    char bin[160], slirp[192];
    snprintf(bin, sizeof bin, "%s/bin", scratch);
    ASSERT_EQ(mkdir(bin, 0755), 0);
    snprintf(slirp, sizeof slirp, "%s/slirp4netns", bin);
    int fd = open(slirp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_EQ(doctor_in_child(network_without_pasta, bin), 0);
}

/* The report must agree with what this test finds out on its own. */
TEST(agrees_with_independent_facts)
{
    struct doctor_report r;
    doctor_run(scratch, &r);
    char v[64] = "0";
    doctor_read_line("/proc/sys/user/max_user_namespaces", v, sizeof(v));
    ASSERT_EQ(must_find(&r, "user_namespaces")->ok, atol(v) > 0);
    int unshare_ok = doctor_in_child(try_unshare, NULL) == 0;
    if (!unshare_ok)
        ASSERT(!must_find(&r, "namespaces_probe")->ok);
    ASSERT_EQ(must_find(&r, "openat2")->ok, 1); /* the build host has Linux >= 5.6 */
    ASSERT(must_find(&r, "state_dir")->ok);
    FILE *f = fopen("/proc/filesystems", "r");
    char line[128];
    bool overlay = false;
    while (f && fgets(line, sizeof(line), f))
        overlay |= strstr(line, "\toverlay\n") != NULL;
    if (f)
        fclose(f);
    ASSERT_EQ(must_find(&r, "overlayfs")->ok, overlay);
    doctor_report_release(&r);
}

TEST(bad_state_dirs_fail_with_fix)
{
    struct doctor_report r;
    char longdir[200];
    memset(longdir, 'x', sizeof(longdir) - 1);
    longdir[0] = '/';
    longdir[sizeof(longdir) - 1] = '\0';
    doctor_run(longdir, &r);
    const struct doctor_check *c = must_find(&r, "state_dir");
    ASSERT(!c->ok && c->required);
    ASSERT_CONTAINS(c->detail, "too long");
    ASSERT_CONTAINS(c->fix, "--state-dir");
    ASSERT(!doctor_report_ok(&r));
    doctor_report_release(&r);

    doctor_run("relative/dir", &r);
    ASSERT(!must_find(&r, "state_dir")->ok);
    doctor_report_release(&r);

    char file[256], under[300];
    snprintf(file, sizeof(file), "%s/plainfile", scratch);
    int fd = open(file, O_CREAT | O_WRONLY, 0600);
    ASSERT(fd >= 0);
    close(fd);
    snprintf(under, sizeof(under), "%s/sub", file);
    doctor_run(under, &r);
    c = must_find(&r, "state_dir");
    ASSERT(!c->ok);
    ASSERT_CONTAINS(c->detail, "Not a directory");
    doctor_report_release(&r);
    unlink(file);
}

TEST(json_shape)
{
    struct doctor_report r;
    doctor_run(scratch, &r);
    json_t *j = doctor_report_json(&r);
    ASSERT(json_is_boolean(json_object_get(j, "ok")));
    ASSERT_EQ(json_is_true(json_object_get(j, "ok")), doctor_report_ok(&r));
    json_t *checks = json_object_get(j, "checks");
    ASSERT_EQ(json_array_size(checks), r.n);
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c) {
        ASSERT(json_is_string(json_object_get(c, "name")));
        ASSERT(json_is_boolean(json_object_get(c, "ok")));
        ASSERT(json_is_string(json_object_get(c, "detail")));
        json_t *fix = json_object_get(c, "fix");
        ASSERT(json_is_true(json_object_get(c, "ok")) ? json_is_null(fix) : json_is_string(fix));
    }
    json_decref(j);
    doctor_report_release(&r);
}

static const char *layout_of(const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/mountinfo", scratch);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return "(io error)";
    fputs(text, f);
    fclose(f);
    return doctor_cgroup_layout(path);
}

#define MI_TMPFS "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
#define MI_V1(n, ctl) #n " 31 0:" #n " / /sys/fs/cgroup/" ctl " rw - cgroup cgroup rw," ctl "\n"
#define MI_SYSTEMD "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"

/* The three layouts as their mount tables show them (this host is hybrid; users' are v2). */
TEST(cgroup_layouts_from_mountinfo)
{
    ASSERT_STR_EQ(layout_of("30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"),
                  "v2");
    ASSERT_STR_EQ(layout_of(MI_TMPFS MI_V1(35, "memory") MI_V1(39, "pids") MI_SYSTEMD
                  "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"),
                  "hybrid");
    ASSERT_STR_EQ(layout_of(MI_TMPFS MI_V1(35, "memory") MI_V1(32, "cpu,cpuacct")), "v1");
    /* systemd's named v1 hierarchy beside a full cgroup2 is still v2 for our purposes. */
    ASSERT_STR_EQ(layout_of(MI_SYSTEMD "30 23 0:26 / /sys/fs/cgroup/unified rw - cgroup2 "
                            "cgroup2 rw\n"),
                  "v2");
    ASSERT_STR_EQ(layout_of("22 1 0:20 / /proc rw - proc proc rw\n"), "none");
    char path[256];
    snprintf(path, sizeof(path), "%s/mountinfo", scratch);
    unlink(path);
    const char *here = doctor_cgroup_layout("/proc/self/mountinfo");
    ASSERT(strcmp(here, "none") != 0);
}

/* Reported where backend/local/runtime_dir.c puts it, created by nobody here; one mcpbox would
 * refuse (mode 755) makes the check fail with a fix. */
TEST(runtime_dir_reported_and_a_bad_one_refused)
{
    char root[512], dir[512];
    int on_tmpfs = local_runtime_path(scratch, root, sizeof(root), dir, sizeof(dir));
    ASSERT(on_tmpfs >= 0);
    struct doctor_report r;
    doctor_run(scratch, &r);
    const struct doctor_check *c = must_find(&r, "runtime_dir");
    ASSERT(c->ok);
    ASSERT_CONTAINS(c->detail, dir);
    ASSERT_CONTAINS(c->detail, on_tmpfs ? "(tmpfs)" : "no tmpfs");
    doctor_report_release(&r);
    ASSERT_EQ(access(dir, F_OK), -1); /* the doctor made nothing */
    bool made_root = on_tmpfs && mkdir(root, 0700) == 0;
    ASSERT_EQ(mkdir(dir, 0700), 0);
    ASSERT_EQ(chmod(dir, 0755), 0);
    doctor_run(scratch, &r);
    c = must_find(&r, "runtime_dir");
    ASSERT(!c->ok);
    ASSERT_CONTAINS(c->detail, dir);
    ASSERT(c->fix[0] != '\0');
    doctor_report_release(&r);
    rmdir(dir);
    if (made_root)
        rmdir(root);
}

int main(void)
{
    xalloc_install();
    snprintf(scratch, sizeof(scratch), "/tmp/mcpbox-doctor-XXXXXX");
    if (mkdtemp(scratch) == NULL)
        return 1;
    RUN(every_check_present_and_failures_have_fixes);
    RUN(agrees_with_independent_facts);
    RUN(network_check_needs_pasta);
    RUN(egress_policy_check_needs_nft);
    RUN(bad_state_dirs_fail_with_fix);
    RUN(json_shape);
    RUN(cgroup_layouts_from_mountinfo);
    RUN(runtime_dir_reported_and_a_bad_one_refused);
    rmdir(scratch);
    return test_done();
}
