/* Spawner threads: the v1 cgroup attach, off the critical path (hybrid hosts only).
 *
 * Moving a process into a v1 cgroup write-locks cgroup_threadgroup_rwsem, and that waits out an
 * RCU grace period (docs/internals/isolation-facts.md §3): milliseconds, tens under load, and
 * it was the longest part of create. A child, though, starts in the cgroups of the thread that
 * clones it, with no migration at all. So each spawner thread prepares the next sandbox ahead
 * of time: it picks the sandbox id, creates its cgroups and moves itself (v1 "tasks": this
 * thread only) into the v1 ones, paying the grace period while nobody waits. create then hands
 * it the spawn request; the clone3 it makes lands in the sandbox's v1 cgroups at once, and in
 * the v2 one through CLONE_INTO_CGROUP. The thread then moves on to the next sandbox's cgroups,
 * which also takes it out of the used ones.
 *
 * The thread's memory is mcpbox's (charged to mcpbox's memcg); while it sits in a prepared set
 * it only counts as one task there. A prepared set that is never used is removed at shutdown,
 * or after a kill -9 by the next start, from its marker (spawner_marker.c). create falls back to cloning on the
 * loop and attaching in a worker when no spawner is ready. */
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "lib/base/rmtree.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "backend/local/root_template.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

enum spawner_state {
    SP_PREPARING, /* the thread is making the next cgroup set */
    SP_READY,     /* a set is ready: take() may reserve it */
    SP_TAKEN,     /* reserved by a create on the loop */
    SP_REQUEST,   /* a spawn request (or a give-back) is waiting for the thread */
    SP_DONE,      /* the thread has answered the request */
    SP_BROKEN,    /* preparing failed: this thread stays out of the way */
};

struct spawner_slot {
    const struct cg_host *host;
    const struct local_spawner *spawner;
    const char *run_dir; /* where prepared sets are marked */
    const char *logs_base; /* <state>/sandboxes: where the prepared logs directory goes */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum spawner_state state;
    bool stop, started;
    bool netns_ready; /* this thread sits in a fresh netns (lo up) for the next clone */
    bool netns_broken; /* unshare refused once: clone3 makes the netns */
    bool answered;  /* the loop had its answer at the child's release (answer_early) */
    bool hurry;     /* no set is ready for the next create: no pause before making one */
    bool nudged;    /* a create has begun: its request follows (local_spawner_nudge) */
    atomic_bool posted; /* state is SP_REQUEST: what await_request watches without sl->mu */
    int record;     /* the create's record: 0 not yet written, 1 written, -1 failed */
    char id[LOCAL_ID_LEN];
    struct cg_sandbox cg;
    uint32_t uid_slot; /* its uid slot, leased ahead (root mode), or LOCAL_NO_SLOT */
    struct spawn_fds fds; /* its agent's listener, the child's sync socket and error pipe */
    const struct spawn_request *req; /* NULL: give the set back unused */
    struct spawn_result *res;
    struct mcp_error err;
    int rc;
};

struct local_spawner {
    struct cg_host host;
    char run_dir[LOCAL_PATH_MAX];
    char logs_base[LOCAL_PATH_MAX];
    char slots_dir[LOCAL_PATH_MAX]; /* "": no uid slots to lease (rootless) */
    const unsigned char *slots_excluded;
    const struct local_identity *ident;
    char root_templates[LOCAL_PATH_MAX]; /* "": no root's tree made ahead */
    struct spawner_slot slots[LOCAL_SPAWNERS];
};

/* Back to mcpbox's own v1 cgroups (the parents of our "mcpbox" ones), so that a thread that
 * cannot prepare a new set does not stay in the last sandbox's. */
static void leave(const struct cg_host *h)
{
    struct cg_sandbox own;
    memset(&own, 0, sizeof own);
    const char *bases[] = {h->mem_base, h->pids_base, h->cpu_base, h->freezer_base};
    char *dirs[] = {own.mem, own.pids, own.cpu, own.freezer};
    for (size_t i = 0; i < 4; i++) {
        snprintf(dirs[i], LOCAL_PATH_MAX, "%s", bases[i]);
        char *slash = strrchr(dirs[i], '/');
        /* Rootless: the parents are not ours; the delegated subtree itself is (v1 has no
         * internal-process rule). */
        if (slash != NULL && geteuid() == 0)
            *slash = '\0';
    }
    struct mcp_error err;
    if (cg_join_v1_thread(&own, (pid_t)gettid(), &err) < 0)
        log_warn("spawner: %s", err.msg);
}

/* The limits a prepared set is made with: those of the default spec. */
static const struct cg_limits defaults = {.memory_bytes = LOCAL_DEFAULT_MEMORY,
                                          .pids = LOCAL_DEFAULT_PIDS, .cpu = LOCAL_DEFAULT_CPU};

bool local_spawner_has_limits(const struct cg_limits *lim)
{
    return lim->memory_bytes == defaults.memory_bytes && lim->pids == defaults.pids &&
           lim->cpu == defaults.cpu;
}

/* The sandbox's directories, which local_spawn would otherwise make on the critical path: the
 * runtime one with its rootfs and data mount points (tmpfs), and the logs one (on the state
 * disk: an ext4 mkdir took 60-75 us). After the marker, so that a kill -9 leaks none of them
 * (local_spawner_reap). True if all four were made, and local_spawn then tries none of them
 * again (its failing mkdirs cost about 40 us); else it makes what is missing. */
static bool make_dirs(const struct spawner_slot *sl, const char *id)
{
    char path[LOCAL_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", sl->run_dir, id);
    bool made = mkdir(path, 0700) == 0;
    if (made) {
        static const char *const sub[] = {"rootfs", "data"};
        for (size_t i = 0; i < 2; i++) {
            char p[LOCAL_PATH_MAX + 80];
            snprintf(p, sizeof p, "%s/%s", path, sub[i]);
            made = mkdir(p, 0700) == 0 && made;
        }
    }
    snprintf(path, sizeof path, "%s/%s", sl->logs_base, id);
    return mkdir(path, 0700) == 0 && made;
}

static void remove_dirs(const struct local_spawner *s, const char *id)
{
    char path[LOCAL_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", s->run_dir, id);
    rmtree(path);
    snprintf(path, sizeof path, "%s/%s", s->logs_base, id);
    rmtree(path);
}

/* The root's tree for a create on the set's uid slot with the default root and spec (host
 * mode, no network, the default disk and memory): the child attaches it in one call
 * (root_tree.c). Root mode only (a slot leased). */
static void make_root_tree(struct spawner_slot *sl)
{
    static atomic_bool refused; /* this kernel cannot build one: tried once per process */
    const struct local_spawner *s = sl->spawner;
    struct root_tree_plan *plan = &sl->fds.root_tree_for;
    if (s->root_templates[0] == '\0' || sl->uid_slot == LOCAL_NO_SLOT || atomic_load(&refused))
        return;
    struct mcp_error err;
    const char *failed;
    plan->uid = local_identity_root_uid(s->ident, sl->uid_slot);
    plan->gid = local_identity_root_gid(s->ident, sl->uid_slot);
    plan->disk_bytes = LOCAL_DEFAULT_DISK;
    plan->shm_bytes = local_shm_bytes(LOCAL_DEFAULT_MEMORY);
    if (local_root_template(s->root_templates, false, plan->uid, plan->gid, plan->template_root,
                            sizeof plan->template_root, &err) < 0) {
        log_debug("spawner: %s (the child makes its root)", err.msg);
        return;
    }
    sl->fds.root_tree = local_root_tree(plan, &failed);
    if (sl->fds.root_tree >= 0)
        return;
    /* EINVAL: a kernel before 6.15 refuses mounts on a detached tree. Anything else (a damaged
     * template) is the child's to report, with its hint, if it fails for the child too. */
    if (errno != EINVAL)
        log_debug("spawner: no root's tree ahead (%s: %s)", failed, strerror(errno));
    else if (!atomic_exchange(&refused, true))
        log_info("spawner: this kernel cannot build a root's mount tree ahead (%s: %s; mounts on "
                 "a detached tree need Linux 6.15): each sandbox mounts its root itself",
                 failed, strerror(errno));
}

/* In the thread: a fresh id, its cgroups (default limits; create sets others) and this thread
 * inside the v1 ones. */
static int prepare(struct spawner_slot *sl)
{
    char id[LOCAL_ID_LEN];
    struct cg_sandbox cg;
    struct mcp_error err;
    random_id(id, sizeof id, "sbx-", 8);
    if (cg_create(sl->host, id, &defaults, &cg, &err) < 0 ||
        cg_join_v1_thread(&cg, (pid_t)gettid(), &err) < 0) {
        log_warn("spawner: %s (creates attach cgroups by pid instead)", err.msg);
        leave(sl->host);
        cg_destroy(&cg);
        return -1;
    }
    memcpy(sl->id, id, sizeof id);
    sl->cg = cg;
    spawner_marker_write(sl->run_dir, id, &cg);
    bool dirs_made = make_dirs(sl, id);
    /* The uid slot too (about 0.1 ms of flock, listing and O_EXCL create on the loop): a kill
     * -9 leaves a lease whose creator is gone, which the next lease or sweep takes back. */
    sl->uid_slot = LOCAL_NO_SLOT;
    const struct local_spawner *s = sl->spawner;
    if (s->slots_dir[0] != '\0' &&
        local_slot_lease(s->slots_dir, id, LOCAL_MAX_SLOTS, s->slots_excluded, &sl->uid_slot,
                         &err) < 0) {
        log_debug("spawner: %s (the create leases one)", err.msg);
        sl->uid_slot = LOCAL_NO_SLOT;
    }
    /* And the sockets and pipe of its spawn (about 70 us) and its v2 cgroup's descriptor: what
     * fails here, local_spawn makes. */
    char dir[LOCAL_PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/%s", sl->run_dir, id);
    local_spawn_fds_make(&sl->fds, dir);
    sl->fds.cgroup_v2 = cg_open_v2(&cg);
    sl->fds.dirs_made = dirs_made;
    make_root_tree(sl);
    return 0;
}

/* The next sandbox's network namespace, made now rather than in its clone3 (where the netns
 * was the largest part, about 0.8 ms): this thread moves into a fresh one and brings lo up. It
 * belongs to the host's user namespace, so the sandbox's root holds no capability over it (it
 * holds none at all after the drop): it cannot reconfigure lo, routes or netfilter, or write the
 * netns's sysctls. One netns per sandbox, as with CLONE_NEWNET: nothing is shared. */
static void prepare_netns(struct spawner_slot *sl)
{
    if (sl->netns_ready || sl->netns_broken)
        return;
    const char *off = getenv("MCPBOX_LOCAL_NETNS_AHEAD"); /* "0": off, to compare (benchmarks) */
    /* Rootless: a network namespace needs a user namespace of its own, which must be the
     * sandbox's: clone3 makes it. */
    if ((off && strcmp(off, "0") == 0) || geteuid() != 0) {
        sl->netns_broken = true;
        return;
    }
    int s = -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    bool ok = unshare(CLONE_NEWNET) == 0 && (s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) >= 0 &&
              ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    ok = ok && ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
    if (s >= 0)
        close(s);
    sl->netns_ready = ok;
    /* A half-made one (lo down) is dropped by the next unshare, or stays unused. */
    sl->netns_broken = !ok;
    if (!ok)
        log_warn("spawner: cannot pre-make a network namespace (%s); clone3 makes it",
                 strerror(errno));
}

/* With sl->mu held: the answer is ready; until the loop has copied it. */
static void answer(struct spawner_slot *sl, int rc)
{
    sl->rc = rc;
    sl->state = SP_DONE;
    pthread_cond_broadcast(&sl->cv);
    while (sl->state == SP_DONE)
        pthread_cond_wait(&sl->cv, &sl->mu);
}

#define SPAWNER_PAUSE_MS 3 /* wait_before_preparing */
#define SPAWNER_SPIN_US 400 /* await_request */

/* A child in mcpbox's memory is released (spawn.c, release_shared). The loop goes on at once:
 * its bookkeeping overlaps the child's setup, and it learns of the exec from the error pipe.
 * This thread still waits for the exec (local_spawn does) before its stack and the
 * shared-clone window are free again. */
static void answer_early(void *arg)
{
    struct spawner_slot *sl = arg;
    spawner_marker_remove(sl->run_dir, sl->id); /* the create's record covers the set now */
    pthread_mutex_lock(&sl->mu);
    sl->answered = true;
    answer(sl, 0);
    pthread_mutex_unlock(&sl->mu);
}

/* Before the child's release: the create's record must be in the store (or the create has
 * failed, and the child is killed instead). */
static int record_written(void *arg)
{
    struct spawner_slot *sl = arg;
    pthread_mutex_lock(&sl->mu);
    while (sl->record == 0 && !sl->stop)
        pthread_cond_wait(&sl->cv, &sl->mu);
    int rc = sl->record > 0 ? 0 : -1;
    pthread_mutex_unlock(&sl->mu);
    return rc;
}

/* local_spawn for a request, in the netns prepared for it unless the sandbox has network (pasta
 * must own a netns of the sandbox's user namespace). Without sl->mu: the loop's
 * local_spawner_take must not wait for a child's exec. */
static int spawn_request(struct spawner_slot *sl, const struct spawn_request *asked)
{
    struct spawn_request req = *asked;
    req.netns_ready = sl->netns_ready && !req.network && !req.egress;
    req.may_release = record_written, req.may_release_arg = sl;
    req.premade = &sl->fds; /* local_spawn takes them */
    /* The early answer needs a child that reads nothing of the loop's that a create frees
     * once answered: image layers and host mounts are described in the loop's memory. */
    if (req.n_image_dirs == 0 && (req.ws == NULL || req.ws->n == 0)) {
        req.ws = NULL;
        req.released = answer_early, req.released_arg = sl;
    }
    int rc = local_spawn(&req, sl->res, &sl->err);
    if (req.netns_ready)
        sl->netns_ready = false; /* used: the next prepare makes another */
    return rc;
}

/* After a spawn, with sl->mu held: the sandbox just made is about to run its first commands
 * (its agent is still starting when the create is answered), and preparing the next set takes
 * about half a millisecond of CPU (cgroup directories, a network namespace) that they would
 * wait for on a small machine: cold create + first run_command took 0.2 ms less with this
 * pause (docs/benchmarks.md). Only while another set is ready for the next create: a take
 * that leaves none cuts it short (local_spawner_take). */
static void wait_before_preparing(struct spawner_slot *sl)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + SPAWNER_PAUSE_MS * 1000000L;
    until.tv_sec += ns / 1000000000L, until.tv_nsec = ns % 1000000000L;
    while (!sl->stop && !sl->hurry && pthread_cond_timedwait(&sl->cv, &sl->mu, &until) == 0)
        ;
    sl->hurry = false;
}

/* Without sl->mu, after a nudge: a create has begun on the loop, and posts its request about
 * 0.1 ms later. The thread watches for it for a bounded time rather than sleeping and being
 * woken by it (a wake-up crosses CPUs, which on a virtual machine may mean waking an idle
 * vCPU); then it sleeps as before. Cold create + first run_command: 1.6-2.1 % less
 * (docs/benchmarks.md, seventh round). */
static void await_request(struct spawner_slot *sl)
{
    uint64_t until = now_mono_us() + SPAWNER_SPIN_US;
    while (!atomic_load_explicit(&sl->posted, memory_order_acquire) && now_mono_us() < until)
        ;
}

static void *spawner_main(void *arg)
{
    struct spawner_slot *sl = arg;
    pthread_mutex_lock(&sl->mu);
    for (;;) {
        pthread_mutex_unlock(&sl->mu);
        int ok = prepare(sl);
        if (ok == 0)
            prepare_netns(sl);
        pthread_mutex_lock(&sl->mu);
        sl->state = ok == 0 ? SP_READY : SP_BROKEN;
        sl->hurry = false;
        while (!sl->stop && sl->state != SP_REQUEST) {
            if (sl->nudged) {
                sl->nudged = false;
                pthread_mutex_unlock(&sl->mu);
                await_request(sl);
                pthread_mutex_lock(&sl->mu);
                continue;
            }
            pthread_cond_wait(&sl->cv, &sl->mu);
        }
        if (sl->stop && sl->state != SP_REQUEST)
            break;
        atomic_store_explicit(&sl->posted, false, memory_order_relaxed);
        const struct spawn_request *req = sl->req;
        sl->answered = false;
        pthread_mutex_unlock(&sl->mu);
        int rc = req != NULL ? spawn_request(sl, req) : 0;
        local_spawn_fds_close(&sl->fds); /* what local_spawn did not take (a set given back, a
                                          * root's tree the create did not want) */
        if (!sl->answered) /* else answer_early did: the record (or the create's undoing) covers
                            * the set from the release on */
            spawner_marker_remove(sl->run_dir, sl->id);
        pthread_mutex_lock(&sl->mu);
        if (!sl->answered)
            answer(sl, rc);
        if (req != NULL)
            wait_before_preparing(sl);
        if (sl->stop)
            break;
    }
    pthread_mutex_unlock(&sl->mu);
    return NULL;
}

struct local_spawner *local_spawner_start(const struct cg_host *host, const char *run_dir,
                                          const char *logs_base, const char *slots_dir,
                                          const unsigned char *slots_excluded,
                                          const struct local_identity *ident,
                                          const char *root_templates)
{
    /* Pure v2 has CLONE_INTO_CGROUP for everything. A rootless server on a hybrid host uses no
     * v2 hierarchy, and needs the spawner all the more: it may not move a child that already
     * runs as the sandbox's root, so without one each create waits for the attach. */
    if (host->layout != CG_HYBRID || (host->v2_base[0] == '\0' && geteuid() == 0))
        return NULL;
    struct local_spawner *s = xcalloc(1, sizeof *s);
    s->host = *host;
    snprintf(s->run_dir, sizeof s->run_dir, "%s", run_dir);
    snprintf(s->logs_base, sizeof s->logs_base, "%s", logs_base);
    snprintf(s->slots_dir, sizeof s->slots_dir, "%s", slots_dir ? slots_dir : "");
    s->slots_excluded = slots_excluded;
    s->ident = ident;
    snprintf(s->root_templates, sizeof s->root_templates, "%s", root_templates ? root_templates : "");
    for (int i = 0; i < LOCAL_SPAWNERS; i++) {
        struct spawner_slot *sl = &s->slots[i];
        sl->host = &s->host;
        sl->spawner = s;
        sl->fds = SPAWN_FDS_NONE;
        sl->run_dir = s->run_dir;
        sl->logs_base = s->logs_base;
        pthread_mutex_init(&sl->mu, NULL);
        pthread_cond_init(&sl->cv, NULL);
        atomic_init(&sl->posted, false);
        sl->state = SP_PREPARING;
        sl->started = pthread_create(&sl->thread, NULL, spawner_main, sl) == 0;
        if (!sl->started)
            sl->state = SP_BROKEN;
    }
    return s;
}

static int take_ready(struct local_spawner *s, char *id, struct cg_sandbox *cg,
                      uint32_t *uid_slot, bool *dirs_made)
{
    for (int i = 0; s != NULL && i < LOCAL_SPAWNERS; i++) {
        struct spawner_slot *sl = &s->slots[i];
        pthread_mutex_lock(&sl->mu);
        bool ready = sl->state == SP_READY;
        if (ready) {
            sl->state = SP_TAKEN;
            memcpy(id, sl->id, LOCAL_ID_LEN);
            *cg = sl->cg;
            *uid_slot = sl->uid_slot;
            *dirs_made = sl->fds.dirs_made;
        }
        pthread_mutex_unlock(&sl->mu);
        if (ready)
            return i;
    }
    return -1;
}

static bool any_ready(struct local_spawner *s)
{
    bool ready = false;
    for (int i = 0; i < LOCAL_SPAWNERS && !ready; i++) {
        pthread_mutex_lock(&s->slots[i].mu);
        ready = s->slots[i].state == SP_READY;
        pthread_mutex_unlock(&s->slots[i].mu);
    }
    return ready;
}

void local_spawner_nudge(struct local_spawner *s)
{
    for (int i = 0; s != NULL && i < LOCAL_SPAWNERS; i++) {
        struct spawner_slot *sl = &s->slots[i];
        pthread_mutex_lock(&sl->mu);
        bool ready = sl->state == SP_READY;
        if (ready) { /* the one local_spawner_take will reserve, unless another becomes ready */
            sl->nudged = true;
            pthread_cond_broadcast(&sl->cv);
        }
        pthread_mutex_unlock(&sl->mu);
        if (ready)
            return;
    }
}

/* On the loop: reserves a prepared set; its id and cgroups become the new sandbox's. */
int local_spawner_take(struct local_spawner *s, char *id, struct cg_sandbox *cg,
                       uint32_t *uid_slot, bool *dirs_made)
{
    *uid_slot = LOCAL_NO_SLOT;
    *dirs_made = false;
    if (s == NULL)
        return -1;
    int slot = take_ready(s, id, cg, uid_slot, dirs_made);
    /* No set left for the next create: no thread pauses before making one (a create that
     * finds none waits for a v1 attach by pid, 3-20 ms). */
    if (any_ready(s))
        return slot;
    for (int i = 0; i < LOCAL_SPAWNERS; i++) {
        struct spawner_slot *sl = &s->slots[i];
        pthread_mutex_lock(&sl->mu);
        sl->hurry = true;
        pthread_cond_broadcast(&sl->cv);
        pthread_mutex_unlock(&sl->mu);
    }
    return slot;
}

/* On the loop: the reserved thread starts local_spawn (req NULL: the set is given back). */
void local_spawner_post(struct local_spawner *s, int slot, const struct spawn_request *req,
                        struct spawn_result *res)
{
    struct spawner_slot *sl = &s->slots[slot];
    pthread_mutex_lock(&sl->mu);
    sl->req = req, sl->res = res, sl->rc = 0, sl->record = 0;
    memset(&sl->err, 0, sizeof sl->err);
    sl->state = SP_REQUEST;
    atomic_store_explicit(&sl->posted, true, memory_order_release);
    pthread_cond_broadcast(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
}

void local_spawner_record_done(struct local_spawner *s, int slot, bool written)
{
    struct spawner_slot *sl = &s->slots[slot];
    pthread_mutex_lock(&sl->mu);
    sl->record = written ? 1 : -1;
    pthread_cond_broadcast(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
}

/* Blocks as long as local_spawn up to the child's release would; then the thread moves on (to
 * the child's exec, then to the next set). */
int local_spawner_wait(struct local_spawner *s, int slot, struct mcp_error *err)
{
    struct spawner_slot *sl = &s->slots[slot];
    pthread_mutex_lock(&sl->mu);
    while (sl->state != SP_DONE)
        pthread_cond_wait(&sl->cv, &sl->mu);
    int rc = sl->rc;
    if (rc < 0)
        mcp_error_copy(err, &sl->err);
    sl->state = SP_PREPARING;
    pthread_cond_broadcast(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
    return rc;
}

void local_spawner_give_back(struct local_spawner *s, int slot)
{
    struct mcp_error err;
    local_spawner_post(s, slot, NULL, NULL);
    local_spawner_wait(s, slot, &err);
}

void local_spawner_stop(struct local_spawner *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < LOCAL_SPAWNERS; i++) {
        struct spawner_slot *sl = &s->slots[i];
        if (!sl->started)
            continue;
        pthread_mutex_lock(&sl->mu);
        sl->stop = true;
        pthread_cond_broadcast(&sl->cv);
        pthread_mutex_unlock(&sl->mu);
        pthread_join(sl->thread, NULL);
        if (sl->state == SP_READY) { /* prepared, never used: empty once the thread is gone */
            cg_destroy(&sl->cg);
            remove_dirs(s, sl->id);
            if (sl->uid_slot != LOCAL_NO_SLOT)
                local_slot_unlease(s->slots_dir, sl->uid_slot, sl->id);
            local_spawn_fds_close(&sl->fds);
            spawner_marker_remove(s->run_dir, sl->id);
        }
        pthread_mutex_destroy(&sl->mu);
        pthread_cond_destroy(&sl->cv);
    }
    free(s);
}
