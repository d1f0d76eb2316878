/* Battery: the process's privileges (capabilities, no_new_privs, seccomp, uid mapping) and its
 * pid namespace. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "battery.h"

/* A fresh pid namespace numbers from 1; the battery runs early in a sandbox's life. */
#define BATTERY_SMALL_PID 1000
#define BATTERY_PF_KTHREAD 0x00200000u
#define BATTERY_ANCESTRY_MAX 16

static void check_caps_empty(struct battery_probe *p)
{
    static const char *const sets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        char v[64] = "";
        if (battery_status_field(sets[i], v, sizeof(v)) < 0) {
            battery_fail(p, 0, "%s missing from /proc/self/status", sets[i]);
            return;
        }
        if (strtoull(v, NULL, 16) != 0) {
            battery_fail(p, 0, "%s=%s", sets[i], v);
            return;
        }
    }
    battery_pass(p, 0, "every capability set is empty");
}

static void check_field(struct battery_probe *p, const char *key, const char *want)
{
    char v[64] = "";
    if (battery_status_field(key, v, sizeof(v)) < 0)
        battery_fail(p, 0, "%s missing from /proc/self/status", key);
    else if (strcmp(v, want) != 0)
        battery_fail(p, 0, "%s=%s", key, v);
    else
        battery_pass(p, 0, "%s=%s", key, v);
}

static void check_nnp(struct battery_probe *p)
{
    check_field(p, "NoNewPrivs", "1");
}

static void check_seccomp(struct battery_probe *p)
{
    check_field(p, "Seccomp", "2");
}

/* The uid_map line covering our uid must not map it to host uid 0. */
static void check_uid_map(struct battery_probe *p)
{
    FILE *f = fopen("/proc/self/uid_map", "re");
    if (f == NULL) {
        battery_fail(p, errno, "cannot read /proc/self/uid_map");
        return;
    }
    unsigned long inside, outside, count, me = getuid();
    bool found = false;
    while (!found && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3)
        found = me >= inside && me - inside < count;
    fclose(f);
    if (!found)
        battery_fail(p, 0, "uid %lu not in uid_map", me);
    else if (outside + (me - inside) == 0)
        battery_fail(p, 0, "uid %lu is host uid 0 (map %lu %lu %lu)", me, inside, outside, count);
    else
        battery_pass(p, 0, "uid %lu is host uid %lu (map %lu %lu %lu)", me,
                     outside + (me - inside), inside, outside, count);
}

static bool proc_is_kthread(const char *pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%s/stat", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    bool k = false;
    if (fgets(line, sizeof(line), f) != NULL) {
        const char *end = strrchr(line, ')'); /* comm may hold spaces */
        unsigned flags = 0;
        if (end != NULL && sscanf(end + 2, "%*c %*d %*d %*d %*d %*d %u", &flags) == 1)
            k = (flags & BATTERY_PF_KTHREAD) != 0;
    }
    fclose(f);
    return k;
}

/* No kernel thread is visible: a pid namespace hides every host process, kthreadd included. */
static void check_pidns_hidden(struct battery_probe *p)
{
    DIR *d = opendir("/proc");
    if (d == NULL) {
        battery_fail(p, errno, "cannot list /proc");
        return;
    }
    int total = 0, kthreads = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        total++;
        kthreads += proc_is_kthread(e->d_name);
    }
    closedir(d);
    if (kthreads > 0)
        battery_fail(p, 0, "%d processes visible, %d of them kernel threads (host pid ns)", total,
                     kthreads);
    else
        battery_pass(p, 0, "%d processes visible, no kernel threads", total);
}

static pid_t parent_of(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    int ppid = -1;
    if (fgets(line, sizeof(line), f) != NULL) {
        const char *end = strrchr(line, ')');
        if (end == NULL || sscanf(end + 2, "%*c %d", &ppid) != 1)
            ppid = -1;
    }
    fclose(f);
    return ppid;
}

/* Our pid is small and pid 1 (the sandbox's init) is a near ancestor. */
static void check_pidns_small(struct battery_probe *p)
{
    pid_t me = getpid(), cur = me;
    int hops = 0;
    while (cur > 1 && hops < BATTERY_ANCESTRY_MAX) {
        cur = parent_of(cur);
        hops++;
    }
    if (me >= BATTERY_SMALL_PID || cur != 1)
        battery_fail(p, 0, "pid %d, %d hops from pid 1", (int)me, hops);
    else
        battery_pass(p, 0, "pid %d, %d hops from pid 1", (int)me, hops);
}

const struct battery_check battery_checks_priv[] = {
    {1, "caps_empty", check_caps_empty, "CapInh/Prm/Eff/Bnd/Amb all 0"},
    {2, "no_new_privs", check_nnp, "NoNewPrivs 1"},
    {3, "seccomp_filter", check_seccomp, "Seccomp 2"},
    {4, "uid_not_host_root", check_uid_map, "sandbox uid is not host uid 0"},
    {27, "pidns_hidden", check_pidns_hidden, "no host process visible"},
    {28, "pidns_small_pid", check_pidns_small, "own pid namespace"},
    {0},
};
