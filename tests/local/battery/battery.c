/* The battery's driver: safety gate, scratch directory, running and reporting the checks.
 *
 * Usage: battery [--list] [ID...]      (no ID: every check)
 * Output: one line per check, "PASS|FAIL|SKIP <num> <id> <errno name> <detail>", then a summary.
 * Exit status: 0 no FAIL, 1 some FAIL, 2 refused or bad usage.
 *
 * Safety gate: a process that holds any capability is unconfined; the battery refuses to run
 * then unless BATTERY_ALLOW_UNCONFINED=1 is set AND it runs in mount and UTS namespaces of its
 * own (for example under `unshare --mount --uts`), so that even the mount and sethostname probes
 * cannot touch the host (checked: our parent must be in different mount and UTS namespaces). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "battery.h"

#define BATTERY_CHECKS_MAX 128

const char *battery_scratch;

static void battery_set(struct battery_probe *p, enum battery_status st, int err,
                        const char *fmt, va_list ap)
{
    p->status = st;
    p->err = err;
    vsnprintf(p->detail, sizeof(p->detail), fmt, ap);
}

void battery_pass(struct battery_probe *p, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    battery_set(p, BATTERY_PASS, err, fmt, ap);
    va_end(ap);
}

void battery_fail(struct battery_probe *p, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    battery_set(p, BATTERY_FAIL, err, fmt, ap);
    va_end(ap);
}

void battery_skip(struct battery_probe *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    battery_set(p, BATTERY_SKIP, 0, fmt, ap);
    va_end(ap);
}

static bool errno_allowed(int err, const int *allowed)
{
    for (; *allowed != 0; allowed++)
        if (*allowed == err)
            return true;
    return false;
}

void battery_expect_errno(struct battery_probe *p, long rc, int err, const int *allowed)
{
    if (rc >= 0)
        battery_fail(p, 0, "the call succeeded");
    else if (errno_allowed(err, allowed))
        battery_pass(p, err, "refused");
    else
        battery_fail(p, err, "failed with an unexpected errno (the call reached the kernel)");
}

int battery_in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(fn(arg) & 0xff);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

void battery_expect_child(struct battery_probe *p, int status, const int *allowed)
{
    if (status == -1)
        battery_fail(p, errno, "could not fork the probe child");
    else if (WIFSIGNALED(status))
        battery_fail(p, 0, "the probe child died of signal %d", WTERMSIG(status));
    else if (WEXITSTATUS(status) == 0)
        battery_fail(p, 0, "the call succeeded (in a throw-away child)");
    else if (errno_allowed(WEXITSTATUS(status), allowed))
        battery_pass(p, WEXITSTATUS(status), "refused");
    else
        battery_fail(p, WEXITSTATUS(status), "failed with an unexpected errno");
}

int battery_status_field(const char *key, char *out, size_t size)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (f == NULL)
        return -1;
    char line[256];
    size_t klen = strlen(key);
    int rc = -1;
    while (rc < 0 && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, klen) != 0 || line[klen] != ':')
            continue;
        const char *v = line + klen + 1;
        v += strspn(v, " \t");
        snprintf(out, size, "%.*s", (int)strcspn(v, "\n"), v);
        rc = 0;
    }
    fclose(f);
    return rc;
}

/* ---- safety gate ---------------------------------------------------------------------------- */

/* True unless pid's namespace of this type is provably different from ours (fail closed:
 * an unreadable link counts as "the same"). */
static bool same_ns_as(pid_t pid, const char *ns)
{
    char self[64], other[64], a[128], b[128];
    snprintf(self, sizeof(self), "/proc/self/ns/%s", ns);
    snprintf(other, sizeof(other), "/proc/%d/ns/%s", (int)pid, ns);
    ssize_t n1 = readlink(self, a, sizeof(a) - 1), n2 = readlink(other, b, sizeof(b) - 1);
    if (n1 < 0 || n2 < 0)
        return true;
    a[n1] = b[n2] = '\0';
    return strcmp(a, b) == 0;
}

static int battery_gate(void)
{
    char caps[64] = "";
    battery_status_field("CapEff", caps, sizeof(caps));
    if (strtoull(caps, NULL, 16) == 0)
        return 0;
    const char *allow = getenv("BATTERY_ALLOW_UNCONFINED");
    if (allow == NULL || strcmp(allow, "1") != 0) {
        fprintf(stderr, "battery: refusing to run with capabilities (CapEff=%s): this is not a "
                        "sandbox. Set BATTERY_ALLOW_UNCONFINED=1 and run it under `unshare "
                        "--mount --uts` to see the checks fail.\n",
                caps);
        return -1;
    }
    /* `unshare --mount --uts battery` execs us in new namespaces: our parent (the caller) is
     * still in the old ones. */
    if (same_ns_as(getppid(), "mnt") || same_ns_as(getppid(), "uts")) {
        fprintf(stderr, "battery: unconfined runs need mount and UTS namespaces of their own: "
                        "exec it directly as `unshare --mount --uts battery`\n");
        return -1;
    }
    return 0;
}

/* ---- driver --------------------------------------------------------------------------------- */

static size_t battery_collect(const struct battery_check **out)
{
    const struct battery_check *tables[] = {battery_checks_priv, battery_checks_sys,
                                            battery_checks_fs, battery_checks_net};
    size_t n = 0;
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
        for (const struct battery_check *c = tables[t]; c->id != NULL; c++)
            if (n < BATTERY_CHECKS_MAX)
                out[n++] = c;
    for (size_t i = 1; i < n; i++) /* insertion sort by number */
        for (size_t j = i; j > 0 && out[j - 1]->num > out[j]->num; j--) {
            const struct battery_check *tmp = out[j];
            out[j] = out[j - 1];
            out[j - 1] = tmp;
        }
    return n;
}

static bool battery_selected(const char *id, int argc, char **argv)
{
    if (argc <= 1)
        return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], id) == 0)
            return true;
    return false;
}

static void battery_cleanup_scratch(void)
{
    char cmd[512];
    if (battery_scratch == NULL)
        return;
    snprintf(cmd, sizeof(cmd), "%s", battery_scratch);
    rmdir(cmd); /* the probes leave it empty */
}

static int battery_run(const struct battery_check **checks, size_t n, int argc, char **argv)
{
    int counts[3] = {0};
    for (size_t i = 0; i < n; i++) {
        if (!battery_selected(checks[i]->id, argc, argv))
            continue;
        struct battery_probe p = {.status = BATTERY_FAIL};
        errno = 0;
        checks[i]->fn(&p);
        static const char *const names[] = {"PASS", "FAIL", "SKIP"};
        printf("%s %2d %-20s %-14s %s (expected: %s)\n", names[p.status], checks[i]->num,
               checks[i]->id, p.err ? strerrorname_np(p.err) : "-", p.detail, checks[i]->expect);
        fflush(stdout);
        counts[p.status]++;
    }
    printf("battery: %d pass, %d fail, %d skip\n", counts[BATTERY_PASS], counts[BATTERY_FAIL],
           counts[BATTERY_SKIP]);
    return counts[BATTERY_FAIL] ? 1 : 0;
}

int main(int argc, char **argv)
{
    const struct battery_check *checks[BATTERY_CHECKS_MAX];
    size_t n = battery_collect(checks);
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%2d %-20s %s\n", checks[i]->num, checks[i]->id, checks[i]->expect);
        return 0;
    }
    if (battery_gate() < 0)
        return 2;
    const char *tmp = getenv("TMPDIR");
    static char scratch[256];
    snprintf(scratch, sizeof(scratch), "%s/battery-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL) {
        fprintf(stderr, "battery: mkdtemp %s: %s\n", scratch, strerror(errno));
        return 2;
    }
    battery_scratch = scratch;
    int rc = battery_run(checks, n, argc, argv);
    battery_cleanup_scratch();
    return rc;
}
