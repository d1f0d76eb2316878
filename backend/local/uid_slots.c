/* Host-wide uid/gid slot leases (root mode: each sandbox maps to its own 65536-id slice).
 *
 * The uids are a host-wide resource: two state directories (two HTTP servers of two people, a
 * test run beside a server) must never hand out the same slice. So a slot is taken as a lease
 * file <slots dir>/<slot>, created with O_EXCL under an flock of <slots dir>/lock, in a
 * directory shared by every mcpbox of this euid whatever its state directory (on the runtime
 * tmpfs: leases, like sandboxes, do not outlive a reboot). A lease names its sandbox, its
 * creator (pid + start time) and, once spawned, the sandbox's init (pid + start time): a lease
 * whose init (or, before the spawn, whose creator) is gone is stale and may be taken over. The
 * store's slots table mirrors the leases of its own sandboxes (store_slot_claim).
 *
 * Slots whose slice overlaps any user's subordinate ids (/etc/subuid, /etc/subgid: Debian's
 * useradd hands out 100000:65536 to the first user, exactly slot 0) are never leased: a rootless
 * mcpbox, podman or unshare --map-auto of that user runs as those uids.
 *
 * Allocation takes the lowest slot without a lease file (a directory listing, no reads); stale
 * leases are only examined once every slot has one, so a create costs one readdir and one
 * O_EXCL create however many sandboxes run. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/local_limits.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_egress.h"
#include "backend/local/runtime_dir.h"

#define SLOT_LOCK_FILE "lock"
#define SLOT_TEXT_MAX 160

int local_slots_dir(char *out, size_t size, struct mcp_error *err)
{
    char root[LOCAL_PATH_MAX];
    const char *env = getenv("MCPBOX_LOCAL_SLOTS_DIR"); /* tests: a private lease directory */
    if (env && env[0]) {
        snprintf(out, size, "%s", env);
        return local_private_dir(out, err);
    }
    if (!local_run_root(root, sizeof root))
        snprintf(root, sizeof root, "/tmp/mcpbox-%u", (unsigned)geteuid());
    if (local_private_dir(root, err) < 0)
        return -1;
    snprintf(out, size, "%s/slots", root);
    return local_private_dir(out, err);
}

static int lock_dir(const char *dir, struct mcp_error *err)
{
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/" SLOT_LOCK_FILE, dir);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "uid slot lock %s", path);
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            return mcp_error_set(err, MCP_ERR_IO, e, "flock %s", path);
        }
    return fd;
}

static void unlock_dir(int fd)
{
    close(fd); /* drops the flock */
}

struct lease {
    char id[LOCAL_ID_LEN];
    long creator, init;
    unsigned long long creator_start, init_start;
};

static int read_lease(int dirfd, const char *name, struct lease *l)
{
    char text[SLOT_TEXT_MAX];
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0)
        close(fd);
    memset(l, 0, sizeof *l);
    text[n > 0 ? n : 0] = '\0';
    return n > 0 && sscanf(text, "%20s %ld %llu %ld %llu", l->id, &l->creator, &l->creator_start,
                           &l->init, &l->init_start) == 5
               ? 0
               : -1;
}

/* Stale: the init it names is gone, or (not spawned yet) its creator is. */
static bool lease_stale(int dirfd, const char *name)
{
    struct lease l;
    if (read_lease(dirfd, name, &l) < 0)
        return true; /* written whole under the lock, or renamed in: unreadable means garbage */
    if (l.init > 0)
        return local_proc_starttime((pid_t)l.init) != l.init_start;
    return local_proc_starttime((pid_t)l.creator) != l.creator_start;
}

static int write_lease(int dirfd, const char *name, const char *id, pid_t init,
                       unsigned long long init_start, int flags)
{
    char text[SLOT_TEXT_MAX];
    int n = snprintf(text, sizeof text, "%s %d %llu %d %llu\n", id, (int)getpid(),
                     (unsigned long long)local_self_starttime(), (int)init, init_start);
    int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
    if (fd < 0)
        return -1;
    int rc = write(fd, text, (size_t)n) == n ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* The slots that have a lease file (one bit each). */
static void leased(int dirfd, unsigned char *bits, uint32_t max)
{
    DIR *d = fdopendir(dup(dirfd));
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char *end;
        unsigned long k = strtoul(e->d_name, &end, 10);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && *end == '\0' && k < max)
            bits[k / 8] |= (unsigned char)(1u << (k % 8));
    }
    if (d)
        closedir(d);
}

static int take(int dirfd, uint32_t k, const char *id)
{
    char name[16];
    snprintf(name, sizeof name, "%u", (unsigned)k);
    return write_lease(dirfd, name, id, 0, 0, O_CREAT | O_EXCL);
}

void local_slots_excluded(unsigned char *bits, uint32_t max)
{
    static const char *const files[] = {"/etc/subuid", "/etc/subgid"};
    for (size_t i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "re");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            unsigned long start, count;
            if (sscanf(line, "%*[^:]:%lu:%lu", &start, &count) != 2 || count == 0 ||
                start + count <= LOCAL_UID_BASE)
                continue;
            unsigned long first = start < LOCAL_UID_BASE ? 0 : (start - LOCAL_UID_BASE) / LOCAL_UID_RANGE;
            unsigned long last = (start + count - 1 - LOCAL_UID_BASE) / LOCAL_UID_RANGE;
            for (unsigned long k = first; k <= last && k < max; k++)
                bits[k / 8] |= (unsigned char)(1u << (k % 8));
        }
        if (f)
            fclose(f);
    }
}

static int lease_locked(int dirfd, const char *id, uint32_t max, const unsigned char *excluded,
                        uint32_t *slot)
{
    unsigned char *bits = calloc(max / 8 + 1, 1);
    if (bits == NULL)
        return -1;
    leased(dirfd, bits, max);
    for (uint32_t i = 0; excluded && i <= max / 8; i++)
        bits[i] |= excluded[i];
    int rc = -1;
    for (uint32_t k = 0; rc < 0 && k < max; k++)
        if (!(bits[k / 8] & (1u << (k % 8))) && take(dirfd, k, id) == 0)
            rc = 0, *slot = k;
    for (uint32_t k = 0; rc < 0 && k < max; k++) { /* every slot leased: reclaim a stale one */
        char name[16];
        if (excluded && (excluded[k / 8] & (1u << (k % 8))))
            continue;
        snprintf(name, sizeof name, "%u", (unsigned)k);
        if (lease_stale(dirfd, name) && unlinkat(dirfd, name, 0) == 0 && take(dirfd, k, id) == 0)
            rc = 0, *slot = k;
    }
    free(bits);
    return rc;
}

int local_slot_lease(const char *dir, const char *id, uint32_t max,
                     const unsigned char *excluded, uint32_t *slot, struct mcp_error *err)
{
    int lock = lock_dir(dir, err);
    if (lock < 0)
        return -1;
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = dirfd >= 0 ? lease_locked(dirfd, id, max, excluded, slot) : -1;
    int e = errno;
    if (dirfd >= 0)
        close(dirfd);
    unlock_dir(lock);
    if (rc < 0 && dirfd < 0)
        return mcp_error_set(err, MCP_ERR_IO, e, "uid slot directory %s", dir);
    if (rc < 0)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "all %u sandbox uid/gid slots of this host are in use (leases in "
                             "%s); destroy a sandbox (mcpbox sandbox rm ID) and retry",
                             (unsigned)max, dir);
    return 0;
}

/* The lease now names the init: from here on it is stale only once the init is gone. Written
 * beside and renamed over, so a reader never sees half a lease. */
void local_slot_note_init(const char *dir, uint32_t slot, const char *id, pid_t init,
                          uint64_t start)
{
    char name[16], tmp[48];
    snprintf(name, sizeof name, "%u", (unsigned)slot);
    snprintf(tmp, sizeof tmp, ".%u.%d", (unsigned)slot, (int)getpid());
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return;
    struct lease l;
    if (read_lease(dirfd, name, &l) == 0 && strcmp(l.id, id) == 0 &&
        write_lease(dirfd, tmp, id, init, (unsigned long long)start, O_CREAT | O_TRUNC) == 0 &&
        renameat(dirfd, tmp, dirfd, name) < 0)
        unlinkat(dirfd, tmp, 0);
    close(dirfd);
}

/* Leases whose sandbox is gone (a server killed with its sandboxes, whose state directory was
 * then removed: no reconcile ever releases them) are otherwise reclaimed only once every slot
 * is leased, and every lease in between makes each create's listing longer (a test machine had
 * 99 of them after a day). Runs once per server, off the loop (spawner.c). */
int local_slots_sweep(const char *dir)
{
    struct mcp_error err;
    int lock = lock_dir(dir, &err);
    if (lock < 0)
        return -1;
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dirfd >= 0 ? fdopendir(dup(dirfd)) : NULL;
    struct dirent *e;
    int removed = 0;
    while (d && (e = readdir(d)) != NULL) {
        char *end;
        (void)strtoul(e->d_name, &end, 10);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && *end == '\0' &&
            lease_stale(dirfd, e->d_name) && unlinkat(dirfd, e->d_name, 0) == 0)
            removed++;
    }
    if (d)
        closedir(d);
    if (dirfd >= 0)
        close(dirfd);
    unlock_dir(lock);
    return removed;
}

/* Drops the lease if it still names this sandbox (a stale one may have been taken over). */
void local_slot_unlease(const char *dir, uint32_t slot, const char *id)
{
    struct mcp_error err;
    char name[16];
    snprintf(name, sizeof name, "%u", (unsigned)slot);
    int lock = lock_dir(dir, &err);
    if (lock < 0)
        return;
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct lease l;
    if (dirfd >= 0 && read_lease(dirfd, name, &l) == 0 && strcmp(l.id, id) == 0)
        unlinkat(dirfd, name, 0);
    if (dirfd >= 0)
        close(dirfd);
    unlock_dir(lock);
}
