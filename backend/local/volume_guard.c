/* The size limit of named volumes as an ordinary user (docs/local-backend.md, "Named volumes"):
 * no filesystem image can be mounted, so the volume is a plain directory, and this watcher holds
 * the limit from outside the sandboxes. Every GUARD_PERIOD_MS the loop lists the rw mounts of
 * volumes in live sandboxes; a thread measures each volume (a walk in a child that joins a
 * sandbox's user namespace, whose capabilities read what the sandbox made unreadable) and, at
 * the limit, makes the volume's mount read-only in each of those sandboxes: a child joins the
 * sandbox's user and mount namespaces and sets MOUNT_ATTR_RDONLY on the mount (found by its
 * mount id, so renaming the directories above it does not hide it). The kernel refuses that
 * while a file is open for writing through the mount: the processes holding one are killed,
 * then, if it is still refused, every process of the sandbox but its init. Once usage falls
 * back under the limit the mount is made writable again.
 *
 * The children are forked from a threaded server and never exec: they run system calls only,
 * and close every descriptor they do not need first (volume_guard_fds), so that none of them
 * holds another thread's pipe (a helper's error pipe) for the length of a walk. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_volume.h"
#include "backend/local/mountinfo.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "lib/store/store_volumes.h"

#define GUARD_PERIOD_MS 500
#define GUARD_TRIES 10      /* read-only attempts per sandbox and measure */
#define GUARD_ESCALATE 3    /* after this many refusals, every process but init is killed */
#define GUARD_RETRY_MS 50   /* between attempts: the killed processes' files are released */
#define GUARD_MAX_ITEMS 256 /* rw volume mounts watched (more are logged and left out) */
#define GUARD_REST_FACTOR 3 /* after a cycle of t ms, 3t ms of rest */
#define GUARD_IDS 8         /* mounts of one volume in one sandbox the guard tracks */

struct guard_item {
    char vdir[LOCAL_PATH_MAX + 64];
    char sandbox[LOCAL_ID_LEN];
    char volume[64];
    uint64_t limit;
    pid_t pid;
    int pidfd; /* the guard's own copy */
};

struct guard_list {
    struct guard_item *v;
    size_t n;
};

/* Mounts of a volume the guard made read-only in one sandbox: only those are made writable
 * again (a mount the sandbox asked ro for stays so). */
struct guard_held {
    char sandbox[LOCAL_ID_LEN];
    char vdir[LOCAL_PATH_MAX + 64];
    int ids[GUARD_IDS];
    int n;
};

struct local_volume_guard {
    struct local_backend *lb;
    uv_timer_t *timer;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, has_pending;
    struct guard_list pending;         /* the loop's latest list, taken by the thread */
    struct guard_list cur;             /* the thread's */
    struct guard_held *held; /* the thread's: the mounts it made read-only */
    size_t n_held;
};

static void list_free(struct guard_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        close(l->v[i].pidfd);
    free(l->v);
    *l = (struct guard_list){0};
}

/* ---- the loop: which sandboxes mount which volume rw ---- */

static void add_item(struct local_backend *lb, const struct store_sandbox *rec, struct lsbx *sb,
                     json_t *m, struct guard_list *l)
{
    const char *name = json_string_value(json_object_get(m, "volume"));
    const char *mode = json_string_value(json_object_get(m, "mode"));
    struct store_volume v;
    struct mcp_error err;
    if (name == NULL || mode == NULL || strcmp(mode, "rw") != 0)
        return;
    if (l->n == GUARD_MAX_ITEMS) {
        log_warn("more than %d rw volume mounts: %s in %s is not watched", GUARD_MAX_ITEMS, name,
                 rec->id);
        return;
    }
    if (store_volume_get(lb->base.store, rec->owner ? rec->owner : "", name, &v, &err) <= 0)
        return; /* deleted meanwhile: a delete is refused while in use, so only after */
    struct guard_item *it = &l->v[l->n];
    int fd = fcntl(sb->pidfd, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0) {
        *it = (struct guard_item){.limit = v.size_limit, .pid = sb->pid, .pidfd = fd};
        snprintf(it->vdir, sizeof it->vdir, "%s/" LOCAL_VOLUME_DIR "/%s", lb->state_dir, v.id);
        snprintf(it->sandbox, sizeof it->sandbox, "%s", rec->id);
        snprintf(it->volume, sizeof it->volume, "%s", name);
        l->n++;
    }
    store_volume_release(&v);
}

static void collect(struct local_backend *lb, struct guard_list *l)
{
    struct store_sandbox *recs = NULL;
    size_t n = 0;
    struct mcp_error err;
    if (store_sandbox_list(lb->base.store, "local", NULL, &recs, &n, &err) < 0)
        return;
    l->v = xcalloc(GUARD_MAX_ITEMS, sizeof *l->v);
    for (size_t i = 0; i < n; i++) {
        struct lsbx *sb = lsbx_find(lb, recs[i].id);
        size_t k;
        json_t *m;
        if (sb == NULL || sb->gone || sb->pooled || sb->pidfd < 0)
            continue;
        json_array_foreach(json_object_get(recs[i].record, "mounts"), k, m)
            add_item(lb, &recs[i], sb, m, l);
    }
    store_sandbox_list_free(recs, n);
}

static void on_tick(uv_timer_t *t)
{
    struct local_volume_guard *g = t->data;
    struct guard_list l = {0};
    if (g->lb->sandboxes != NULL) /* none live: nothing to ask the store */
        collect(g->lb, &l);
    pthread_mutex_lock(&g->mu);
    list_free(&g->pending);
    g->pending = l;
    g->has_pending = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* ---- children: system calls only ---- */

/* Moves the n descriptors a child keeps to 3, 4, ... and closes every other one above 2. */
static void volume_guard_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        fds[i] = fcntl(fds[i], F_DUPFD, 64 + i);
    for (int i = 0; i < n; i++) {
        dup2(fds[i], 3 + i);
        fds[i] = 3 + i;
    }
    syscall(SYS_close_range, 3 + n, ~0u, 0);
}

static pid_t raw_fork(void)
{
    return (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0); /* no atfork handlers */
}

static int wait_child(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
}

/* The volume's usage, walked in a child inside the sandbox's user namespace. -1 if the child
 * could not tell (the sandbox ended): the caller walks as the server then. */
static int walk_in_sandbox(const struct guard_item *it, struct local_volume_usage *u)
{
    char path[LOCAL_PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/mnt/data", it->vdir);
    cleanup_close int root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int p[2];
    if (root < 0 || pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = raw_fork();
    if (pid == 0) {
        int keep[3] = {it->pidfd, root, p[1]};
        volume_guard_fds(keep, 3);
        struct local_volume_usage got = {0};
        if (setns(keep[0], CLONE_NEWUSER) < 0)
            _exit(1);
        local_volume_walk_fd(keep[1], local_volume_max_entries(it->limit), &got);
        _exit(write(keep[2], &got, sizeof got) == (ssize_t)sizeof got ? 0 : 1);
    }
    close(p[1]);
    ssize_t n = pid > 0 ? read(p[0], u, sizeof *u) : -1;
    close(p[0]);
    int rc = pid > 0 ? wait_child(pid) : -1;
    return n == (ssize_t)sizeof *u && rc == 0 ? 0 : -1;
}

/* ---- finding the volume's mount in a sandbox ---- */

/* One mountinfo line: when it is the mount of the volume's root (want: its dev and ino), an
 * O_PATH fd of it opened inside the sandbox's root, and whether it is read-only now. */
static int line_mount(const char *line, int root, const struct stat *want, bool *ro, int *mnt_id)
{
    static __thread struct local_mountinfo m; /* 4 KiB: off the child's stack */
    if (local_mountinfo_parse(line, &m) < 0 || makedev(m.maj, m.min) != want->st_dev)
        return -1;
    *mnt_id = m.id;
    struct open_how how = {.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
                           .resolve =
                               RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, root, m.point[1] ? m.point + 1 : ".", &how, sizeof how);
    struct statx sx;
    /* the mount id and the root's inode: not a directory the sandbox put at that path since */
    if (fd >= 0 && statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &sx) == 0 &&
        sx.stx_mnt_id == (uint64_t)m.id && sx.stx_ino == want->st_ino &&
        makedev(sx.stx_dev_major, sx.stx_dev_minor) == want->st_dev) {
        *ro = m.ro;
        return fd;
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

/* What a child reports on its pipe. */
struct mode_result {
    int rc;               /* 0, or the errno: EBUSY while a file is open for writing there */
    int busy_id;          /* the mount that was busy */
    int n;                /* ids: the mounts it changed */
    int ids[GUARD_IDS];
};

/* In the child, inside the sandbox's user and mount namespaces (whose capabilities search
 * directories the sandbox made mode 000): every mount of the volume's root in mountinfo (info,
 * read from its start) set read-only, or, to release, those of ids[n] cleared. *found: how many
 * mounts of the volume it saw. */
static void set_mounts(int info, int root, const struct stat *want, bool ro,
                       const int *ids, int n, struct mode_result *r, int *found)
{
    static __thread char text[65536]; /* the guard thread's: its forked children write it */
    ssize_t len = pread(info, text, sizeof text - 1, 0);
    text[len > 0 ? len : 0] = '\0';
    for (char *line = text, *end; line && *line; line = end ? end + 1 : NULL) {
        end = strchr(line, '\n');
        if (end)
            *end = '\0';
        bool is_ro = false, mine = ro;
        int id = -1, fd = line_mount(line, root, want, &is_ro, &id);
        if (fd < 0)
            continue;
        ++*found;
        for (int i = 0; i < n && !mine; i++)
            mine = ids[i] == id;
        struct mount_attr attr = {.attr_set = ro ? MOUNT_ATTR_RDONLY : 0,
                                  .attr_clr = ro ? 0 : MOUNT_ATTR_RDONLY};
        if (mine && is_ro != ro &&
            syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
            r->rc = errno, r->busy_id = id;
        else if (mine && is_ro != ro && r->n < GUARD_IDS)
            r->ids[r->n++] = id;
        close(fd);
    }
}

/* The child: joins the sandbox's user and mount namespaces (mount_setattr acts on the caller's
 * own mounts only) and sets or clears read-only on the volume's mounts. */
__attribute__((noreturn)) static void mode_child(int *keep, const struct stat *want, bool ro,
                                                 const int *ids, int n)
{
    volume_guard_fds(keep, 4); /* pidfd, root, mountinfo, pipe */
    struct mode_result r = {.rc = 0, .busy_id = -1};
    int found = 0;
    if (setns(keep[0], CLONE_NEWUSER) < 0 || setns(keep[0], CLONE_NEWNS) < 0)
        r.rc = errno;
    /* none seen: the sandbox renamed a directory above one between the read and the open */
    for (int i = 0; i < GUARD_TRIES && r.rc == 0 && found == 0; i++)
        set_mounts(keep[2], keep[1], want, ro, ids, n, &r, &found);
    if (r.rc == 0 && found == 0)
        r.rc = ENOENT;
    _exit(write(keep[3], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
}

/* Sets (ro) or clears (of ids[n], those it set) read-only on the volume's mounts in the
 * sandbox. */
static struct mode_result set_ro_in_sandbox(const struct guard_item *it, bool ro, const int *ids,
                                            int n)
{
    struct mode_result r = {.rc = ESRCH, .busy_id = -1};
    char path[LOCAL_PATH_MAX + 80];
    struct stat want;
    snprintf(path, sizeof path, "%s/mnt/data", it->vdir);
    if (stat(path, &want) < 0)
        return r;
    snprintf(path, sizeof path, "/proc/%d/root", (int)it->pid);
    cleanup_close int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)it->pid);
    cleanup_close int info = open(path, O_RDONLY | O_CLOEXEC);
    int p[2];
    /* opened while the pidfd's process lives: then the pid was still the sandbox's */
    if (root < 0 || info < 0 || syscall(SYS_pidfd_send_signal, it->pidfd, 0, NULL, 0) < 0 ||
        pipe2(p, O_CLOEXEC) < 0)
        return r;
    pid_t pid = raw_fork();
    if (pid == 0)
        mode_child((int[4]){it->pidfd, root, info, p[1]}, &want, ro, ids, n);
    close(p[1]);
    if (pid < 0 || read(p[0], &r, sizeof r) != (ssize_t)sizeof r)
        r = (struct mode_result){.rc = EIO, .busy_id = -1};
    close(p[0]);
    if (pid > 0)
        (void)wait_child(pid);
    return r;
}

/* ---- the processes that keep a mount writable ---- */

/* Whether process dir `pid` (of /proc) holds a file open for writing on mount mnt_id. */
static bool holds_for_writing(const char *pid, int mnt_id)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/fdinfo", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    bool found = false;
    while (d && !found && (e = readdir(d)) != NULL) {
        char name[320], text[512];
        snprintf(name, sizeof name, "%s/%s", path, e->d_name);
        cleanup_close int fd = e->d_name[0] == '.' ? -1 : open(name, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
        if (n <= 0)
            continue;
        text[n] = '\0';
        const char *fl = strstr(text, "flags:"), *mi = strstr(text, "mnt_id:");
        unsigned long flags = fl ? strtoul(fl + 6, NULL, 8) : 0;
        found = mi && atoi(mi + 7) == mnt_id && (flags & O_ACCMODE) != O_RDONLY;
    }
    if (d)
        closedir(d);
    return found;
}

/* Kills the sandbox's processes (those in its mount namespace) that hold a file open for
 * writing on the mount, or, with all, every one of them but its init. Returns how many. */
static int kill_writers(const struct guard_item *it, int mnt_id, bool all)
{
    char path[300];
    struct stat ns, st;
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)it->pid);
    DIR *d = stat(path, &ns) == 0 ? opendir("/proc") : NULL;
    struct dirent *e;
    int killed = 0;
    while (d && (e = readdir(d)) != NULL) {
        long p = strtol(e->d_name, NULL, 10);
        snprintf(path, sizeof path, "/proc/%s/ns/mnt", e->d_name);
        if (p <= 0 || p == it->pid || stat(path, &st) < 0 || st.st_ino != ns.st_ino ||
            st.st_dev != ns.st_dev)
            continue;
        if ((all || holds_for_writing(e->d_name, mnt_id)) && kill((pid_t)p, SIGKILL) == 0)
            killed++;
    }
    if (d)
        closedir(d);
    return killed;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The guard's record of item's sandbox and volume, made when make says so; NULL if none. */
static struct guard_held *held_of(struct local_volume_guard *g, const struct guard_item *it,
                                  bool make)
{
    for (size_t i = 0; i < g->n_held; i++)
        if (strcmp(g->held[i].sandbox, it->sandbox) == 0 && strcmp(g->held[i].vdir, it->vdir) == 0)
            return &g->held[i];
    if (!make || g->n_held == GUARD_MAX_ITEMS)
        return NULL;
    struct guard_held *h = &g->held[g->n_held++];
    *h = (struct guard_held){0};
    snprintf(h->sandbox, sizeof h->sandbox, "%s", it->sandbox);
    snprintf(h->vdir, sizeof h->vdir, "%s", it->vdir);
    return h;
}

static void held_drop(struct local_volume_guard *g, struct guard_held *h)
{
    *h = g->held[--g->n_held]; /* the last one takes its place */
}

/* Makes the volume's mounts read-only in one sandbox (ro), or those it made so writable again. */
static void set_mode(struct local_volume_guard *g, const struct guard_item *it, bool ro)
{
    struct guard_held *h = held_of(g, it, ro);
    if (h == NULL) /* releasing where it changed nothing, or (logged) too many to track */
        return;
    struct mode_result r = set_ro_in_sandbox(it, ro, h->ids, h->n);
    for (int i = 0; i < GUARD_TRIES && r.rc == EBUSY; i++) {
        kill_writers(it, r.busy_id, i >= GUARD_ESCALATE);
        sleep_ms(GUARD_RETRY_MS);
        struct mode_result again = set_ro_in_sandbox(it, ro, h->ids, h->n);
        for (int k = 0; k < r.n && again.n < GUARD_IDS; k++) /* set ro by the first try */
            again.ids[again.n++] = r.ids[k];
        r = again;
    }
    for (int k = 0; ro && k < r.n && h->n < GUARD_IDS; k++)
        h->ids[h->n++] = r.ids[k];
    if (!ro && r.rc != EBUSY)
        held_drop(g, h);
    if (r.rc == ENOENT && ro && syscall(SYS_pidfd_send_signal, it->pidfd, 0, NULL, 0) == 0)
        /* alive, but its mount cannot be found (its parents renamed in a tight loop): what
         * writes there goes instead */
        log_warn("volume %s: its mount in sandbox %s cannot be found; stopping the sandbox's "
                 "processes instead (%d)",
                 it->volume, it->sandbox, kill_writers(it, -1, true));
    else if (r.rc != 0 && r.rc != ESRCH)
        log_warn("volume %s: could not make it %s in sandbox %s (%s)", it->volume,
                 ro ? "read-only" : "writable", it->sandbox, strerror(r.rc));
}

/* ---- the thread ---- */

/* Whether the guard made any mount of vdir read-only. */
static bool is_held(const struct local_volume_guard *g, const char *vdir)
{
    for (size_t i = 0; i < g->n_held; i++)
        if (strcmp(g->held[i].vdir, vdir) == 0)
            return true;
    return false;
}

/* Forgets the sandboxes that are gone (no longer in the list). */
static void held_prune(struct local_volume_guard *g)
{
    for (size_t i = 0; i < g->n_held;) {
        bool live = false;
        for (size_t k = 0; k < g->cur.n && !live; k++)
            live = strcmp(g->cur.v[k].sandbox, g->held[i].sandbox) == 0;
        if (live)
            i++;
        else
            held_drop(g, &g->held[i]);
    }
}

/* The usage of item i's volume. A walk in one sandbox's user namespace can miss a directory
 * only the user (a sandbox with the person's id mapped) may read, or the other way round: each
 * sandbox mounting it is tried, then the server itself, until one walk sees everything; if none
 * does, the last (partial: counted as at the limit) is the answer. */
static int measure(struct local_volume_guard *g, size_t i, struct local_volume_usage *u)
{
    const struct guard_item *it = &g->cur.v[i];
    struct mcp_error err;
    bool got = false;
    for (size_t k = i; k < g->cur.n && !(got && !u->partial); k++)
        if (strcmp(g->cur.v[k].vdir, it->vdir) == 0 && walk_in_sandbox(&g->cur.v[k], u) == 0)
            got = true;
    if (got && !u->partial)
        return 0;
    struct local_volume_usage own;
    if (local_volume_fs_walk(it->vdir, local_volume_max_entries(it->limit), &own, &err) < 0)
        return got ? 0 : -1;
    if (!got || !own.partial)
        *u = own;
    return 0;
}

/* Measures the volume of item i (the first of its volume in the list) and sets its mounts. */
static void guard_volume(struct local_volume_guard *g, size_t i)
{
    const struct guard_item *it = &g->cur.v[i];
    struct local_volume_usage u;
    if (measure(g, i, &u) < 0)
        return;
    bool over = local_volume_over(&u, it->limit);
    if (!over && !is_held(g, it->vdir))
        return; /* under its limit, and never made read-only: nothing to do */
    for (size_t k = i; k < g->cur.n; k++)
        if (strcmp(g->cur.v[k].vdir, it->vdir) == 0)
            set_mode(g, &g->cur.v[k], over);
}

static void guard_cycle(struct local_volume_guard *g)
{
    held_prune(g);
    for (size_t i = 0; i < g->cur.n; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = strcmp(g->cur.v[k].vdir, g->cur.v[i].vdir) != 0;
        if (first)
            guard_volume(g, i);
    }
}

/* After a cycle of t ms: GUARD_REST_FACTOR times as long without walking (stop ends it), so
 * that the walks of volumes of many files take at most a quarter of one core. Under mu. */
static void rest(struct local_volume_guard *g, uint64_t t)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + t * GUARD_REST_FACTOR * 1000000ull;
    until.tv_sec += (time_t)(ns / 1000000000ull);
    until.tv_nsec = (long)(ns % 1000000000ull);
    while (!g->stop && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0)
        ;
}

static void *guard_main(void *arg)
{
    struct local_volume_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        while (!g->stop && !g->has_pending)
            pthread_cond_wait(&g->cv, &g->mu);
        if (g->stop)
            break;
        list_free(&g->cur);
        g->cur = g->pending;
        g->pending = (struct guard_list){0};
        g->has_pending = false;
        pthread_mutex_unlock(&g->mu);
        uint64_t t0 = now_mono_ms();
        guard_cycle(g);
        pthread_mutex_lock(&g->mu);
        rest(g, now_mono_ms() - t0);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

struct local_volume_guard *local_volume_guard_start(struct local_backend *lb)
{
    if (geteuid() == 0)
        return NULL;
    struct local_volume_guard *g = xcalloc(1, sizeof *g);
    g->lb = lb;
    g->held = xcalloc(GUARD_MAX_ITEMS, sizeof *g->held);
    pthread_condattr_t ca;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* rest(): not moved by the wall clock */
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
        log_warn("cannot start the volume watcher: volume limits are not held");
        free(g->held);
        free(g);
        return NULL;
    }
    g->timer = xcalloc(1, sizeof *g->timer);
    uv_timer_init(lb->base.loop, g->timer);
    g->timer->data = g;
    uv_timer_start(g->timer, on_tick, GUARD_PERIOD_MS, GUARD_PERIOD_MS);
    uv_unref((uv_handle_t *)g->timer);
    return g;
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void local_volume_guard_stop(struct local_volume_guard *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    uv_timer_stop(g->timer);
    uv_close((uv_handle_t *)g->timer, timer_closed);
    list_free(&g->pending);
    list_free(&g->cur);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->held);
    free(g);
}
