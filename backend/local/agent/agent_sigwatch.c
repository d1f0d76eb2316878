/* Signals to a command's process group, and the case where the shell loses them.
 *
 * dash (/bin/sh on Debian) starts each command with vfork. Until the child execs, it runs with
 * the shell's signal handlers, and SIGINT is caught in a shell run with -c: a SIGINT delivered
 * to the child then only sets a flag that the exec discards. The parent shell, which got the
 * signal too, waits for its foreground child to end before acting on it. So a Ctrl-C forwarded
 * just as the shell starts a command was lost: the command ran to its end (seen in the
 * local_cli test about one time in ten). The same happens when the signal reaches the shell
 * while it waits in vfork with every signal blocked: the child, already there, takes its copy
 * into the inherited handler. The kernel says nothing of a signal taken by a handler, so the
 * agent looks: when it signals a group, each process that is at that moment such a child (it
 * still runs its parent's program and catches the signal, or its parent waits in vfork) is
 * followed for a short while. If it becomes another program that runs with the signal at its
 * default action, not blocked and not pending, the signal never reached that program, and it
 * is sent again to that process alone. Processes that start after the signal (a trap's
 * cleanup, say) are never resent anything. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/agent/agent.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define SIGWATCH_MAX_PROCS 8     /* processes followed per signal (a shell has one child) */
#define SIGWATCH_STEP_MS 5       /* how often they are looked at */
#define SIGWATCH_SPAN_MS 3000    /* how long: an exec takes far less, even on a loaded host */
#define PROC_STAT_MAX 1024
#define PROC_STATUS_MAX 4096
#define PROC_STAT_START_FIELD 19 /* starttime, counted from the state field (0) */

/* What /proc says of one process. */
struct proc_img {
    pid_t pid, ppid, pgrp;
    char state;
    unsigned long long start; /* clock ticks since boot: tells a process from a later one */
    char comm[32], exe[256];  /* the program it runs: either changes at exec */
    uint64_t pending, blocked, ignored, caught;
};

/* A process that was between vfork and exec when the signal was sent. */
struct sigwatch_proc {
    pid_t pid;
    unsigned long long start;
    char comm[32], exe[256]; /* its parent's program, which it runs until it execs */
};

struct sigwatch {
    int sig;
    uint64_t next_ms, until_ms;
    size_t n;
    struct sigwatch_proc procs[SIGWATCH_MAX_PROCS];
};

/* One look at the group, before the kill (after == false) or just after it. */
struct group_scan {
    pid_t pgrp;
    int sig;
    bool after;
    unsigned long long kill_tick;
    struct proc_img vforking[SIGWATCH_MAX_PROCS]; /* members in D, catching sig, before */
    size_t nv;
};

void agent_sigwatch_free(struct sigwatch **w)
{
    free(*w);
    *w = NULL;
}

static ssize_t read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/* /proc/PID/stat: comm, state, ppid, pgrp and start time. */
static int proc_stat(pid_t pid, struct proc_img *p)
{
    char path[64], buf[PROC_STAT_MAX];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
    if (open_paren == NULL || close_paren == NULL || close_paren[1] != ' ')
        return -1;
    snprintf(p->comm, sizeof p->comm, "%.*s", (int)(close_paren - open_paren - 1), open_paren + 1);
    char *f = close_paren + 2, *end;
    p->pid = pid;
    p->state = *f;
    for (int i = 0; i < PROC_STAT_START_FIELD && f; i++) {
        if (i == 1 || i == 2)
            *(i == 1 ? &p->ppid : &p->pgrp) = (pid_t)strtol(f, NULL, 10);
        f = strchr(f, ' ');
        f = f ? f + 1 : NULL;
    }
    if (f == NULL)
        return -1;
    p->start = strtoull(f, &end, 10);
    return end == f ? -1 : 0;
}

/* The signal masks of /proc/PID/status and the program of /proc/PID/exe ("" if unreadable). */
static int proc_sigs(struct proc_img *p)
{
    char path[64], buf[PROC_STATUS_MAX];
    static const char *const keys[] = {"SigPnd:", "ShdPnd:", "SigBlk:", "SigIgn:", "SigCgt:"};
    uint64_t v[5] = {0};
    snprintf(path, sizeof path, "/proc/%d/status", (int)p->pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        const char *at = strstr(buf, keys[i]);
        if (at == NULL)
            return -1;
        v[i] = strtoull(at + strlen(keys[i]), NULL, 16);
    }
    p->pending = v[0] | v[1], p->blocked = v[2], p->ignored = v[3], p->caught = v[4];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)p->pid);
    ssize_t n = readlink(path, p->exe, sizeof p->exe - 1);
    p->exe[n > 0 ? n : 0] = '\0';
    return 0;
}

static int proc_read(pid_t pid, struct proc_img *p)
{
    memset(p, 0, sizeof *p);
    return proc_stat(pid, p) < 0 || proc_sigs(p) < 0 ? -1 : 0;
}

static bool same_program(const struct proc_img *a, const struct proc_img *b)
{
    return strcmp(a->comm, b->comm) == 0 && strcmp(a->exe, b->exe) == 0;
}

static uint64_t sig_bit(int sig)
{
    return 1ull << (sig - 1);
}

/* Now, in clock ticks since boot (the unit of a process's start time in /proc). */
static unsigned long long boot_ticks(void)
{
    struct timespec ts;
    long hz = sysconf(_SC_CLK_TCK);
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
           (unsigned long long)ts.tv_nsec / (1000000000ull / (unsigned long long)hz);
}

static void watch_add(struct sigwatch *w, const struct proc_img *p, const struct proc_img *parent)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->procs[i].pid == p->pid && w->procs[i].start == p->start)
            return;
    if (w->n == SIGWATCH_MAX_PROCS)
        return;
    struct sigwatch_proc *s = &w->procs[w->n++];
    s->pid = p->pid;
    s->start = p->start;
    memcpy(s->comm, parent->comm, sizeof s->comm);
    memcpy(s->exe, parent->exe, sizeof s->exe);
}

/* p runs its parent's program and the parent is about to wait for it (R) or waits in vfork (D). */
static bool vfork_parent(const struct proc_img *p, struct proc_img *parent)
{
    return p->ppid > 1 && proc_read(p->ppid, parent) == 0 &&
           (parent->state == 'D' || parent->state == 'R') && same_program(p, parent);
}

/* Which members to follow: a child not exec'd yet that catches the signal with its parent's
 * handler (after the kill: only while the parent still holds the signal blocked, so not, say,
 * a trap's cleanup it started); and, after the kill, a child (already there at the kill) of a
 * member that was waiting in vfork (D) before it, exec'd or not. */
static void look_at(struct sigwatch *w, struct group_scan *g, const struct proc_img *p)
{
    uint64_t bit = sig_bit(g->sig);
    struct proc_img parent;
    if (!g->after && (p->caught & bit) && p->state == 'D' && g->nv < SIGWATCH_MAX_PROCS)
        g->vforking[g->nv++] = *p;
    if ((p->caught & bit) && vfork_parent(p, &parent) && (!g->after || (parent.pending & bit))) {
        watch_add(w, p, &parent);
        return;
    }
    for (size_t i = 0; g->after && p->start <= g->kill_tick && i < g->nv; i++)
        if (g->vforking[i].pid == p->ppid)
            watch_add(w, p, &g->vforking[i]);
}

static void scan_group(struct sigwatch *w, struct group_scan *g)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        struct proc_img p;
        if (*end == '\0' && pid > 1 && proc_read((pid_t)pid, &p) == 0 && p.pgrp == g->pgrp)
            look_at(w, g, &p);
    }
    if (d != NULL)
        closedir(d);
}

/* Signals whose default action leaves the process running: a live process proves nothing. */
static bool default_keeps_running(int sig)
{
    return sig == SIGCHLD || sig == SIGCONT || sig == SIGURG || sig == SIGWINCH ||
           sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU || sig == SIGKILL;
}

void agent_sigwatch_send(struct sigwatch **w, pid_t pgrp, int sig)
{
    struct group_scan g = {.pgrp = pgrp, .sig = sig};
    bool follow = sig > 0 && sig < 64 && !default_keeps_running(sig);
    agent_sigwatch_free(w);
    struct sigwatch *nw = xcalloc(1, sizeof *nw);
    nw->sig = sig;
    if (follow)
        scan_group(nw, &g);
    if (kill(-pgrp, sig) < 0) /* the whole group: the shell and what it started */
        kill(pgrp, sig);
    g.after = true;
    g.kill_tick = boot_ticks();
    if (follow)
        scan_group(nw, &g);
    if (nw->n == 0) {
        free(nw);
        return;
    }
    nw->next_ms = now_mono_ms() + SIGWATCH_STEP_MS;
    nw->until_ms = nw->next_ms + SIGWATCH_SPAN_MS;
    *w = nw;
}

/* True while p must still be followed; resends the signal when p's new program missed it. */
static bool follow_one(const struct sigwatch_proc *p, int sig)
{
    struct proc_img now;
    if (proc_read(p->pid, &now) < 0 || now.start != p->start || now.state == 'Z')
        return false; /* gone */
    if (strcmp(now.comm, p->comm) == 0 && strcmp(now.exe, p->exe) == 0)
        return true; /* not exec'd yet */
    if (((now.caught | now.ignored | now.blocked | now.pending) & sig_bit(sig)) == 0)
        kill(p->pid, sig);
    return false;
}

void agent_sigwatch_poll(struct sigwatch **w, uint64_t now_ms)
{
    struct sigwatch *sw = *w;
    if (sw == NULL || now_ms < sw->next_ms)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < sw->n; i++)
        if (follow_one(&sw->procs[i], sw->sig))
            sw->procs[kept++] = sw->procs[i];
    sw->n = kept;
    sw->next_ms = now_ms + SIGWATCH_STEP_MS;
    if (sw->n == 0 || now_ms >= sw->until_ms)
        agent_sigwatch_free(w);
}

uint64_t agent_sigwatch_next(const struct sigwatch *w)
{
    return w ? w->next_ms : 0;
}
