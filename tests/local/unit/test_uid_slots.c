/* Host-wide uid slots (#18.7) and the identity a sandbox gets (backend/local/identity.c,
 * uid_slots.c).
 *  - leases: distinct slots, a lease of a dead init is reclaimed only once every slot is leased,
 *    a release drops only the releasing sandbox's lease, the sweep only leases of sandboxes that
 *    are gone;
 *  - two state directories (two backends, as two servers would be) never map two live sandboxes
 *    to the same host uid: read from /proc/self/uid_map inside each sandbox;
 *  - as a user: every sandbox shows the server's one mapping (local_identity_detect), never host
 *    root nor (with subordinate ids) the user's own uid. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/identity.h"
#include "lib/base/buf.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_egress.h"
#include "harness.h"
#include "test.h"
#include "lib/base/rmtree.h"

#define PER_DIR 2

static char scratch[128];

static void lease_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", scratch, name);
    mkdir(out, 0700);
}

static pid_t dead_pid(uint64_t *start)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    *start = local_proc_starttime(pid) + 1; /* whatever it was: it will not match */
    waitpid(pid, NULL, 0);
    return pid;
}

TEST(leases_are_distinct_and_released_by_owner)
{
    char dir[256];
    struct mcp_error err;
    uint32_t a, b, c;
    lease_dir(dir, sizeof dir, "distinct");
    ASSERT_EQ(local_slot_lease(dir, "sbx-a", 8, NULL, &a, &err), 0);
    ASSERT_EQ(local_slot_lease(dir, "sbx-b", 8, NULL, &b, &err), 0);
    ASSERT(a != b);
    local_slot_unlease(dir, a, "sbx-b"); /* not b's lease: stays */
    ASSERT_EQ(local_slot_lease(dir, "sbx-c", 8, NULL, &c, &err), 0);
    ASSERT(c != a && c != b);
    local_slot_unlease(dir, a, "sbx-a");
    ASSERT_EQ(local_slot_lease(dir, "sbx-d", 8, NULL, &c, &err), 0);
    ASSERT_EQ(c, a); /* the lowest free one again */
}

TEST(excluded_slots_are_never_leased)
{
    char dir[256];
    struct mcp_error err;
    uint32_t a, b;
    unsigned char excluded[2] = {0x05, 0}; /* slots 0 and 2 */
    lease_dir(dir, sizeof dir, "excluded");
    ASSERT_EQ(local_slot_lease(dir, "sbx-a", 4, excluded, &a, &err), 0);
    ASSERT_EQ(local_slot_lease(dir, "sbx-b", 4, excluded, &b, &err), 0);
    ASSERT_EQ(a, 1);
    ASSERT_EQ(b, 3);
    ASSERT_EQ(local_slot_lease(dir, "sbx-c", 4, excluded, &b, &err), -1);
}

/* Debian's useradd gives the first user 100000:65536, exactly root mode's slot 0. */
TEST(subordinate_ranges_exclude_their_slices)
{
    unsigned char bits[LOCAL_MAX_SLOTS / 8 + 1] = {0};
    local_slots_excluded(bits, LOCAL_MAX_SLOTS);
    FILE *f = fopen("/etc/subuid", "re");
    char line[512];
    int ranges = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long start, count;
        if (sscanf(line, "%*[^:]:%lu:%lu", &start, &count) != 2 || start < LOCAL_UID_BASE)
            continue;
        unsigned long k = (start - LOCAL_UID_BASE) / LOCAL_UID_RANGE;
        if (k < LOCAL_MAX_SLOTS)
            ASSERT(bits[k / 8] & (1u << (k % 8)));
        ranges++;
    }
    if (f)
        fclose(f);
    printf("# %d subordinate uid range(s) checked\n", ranges);
}

TEST(stale_lease_reclaimed_when_full)
{
    char dir[256];
    struct mcp_error err;
    uint32_t a, b, c;
    lease_dir(dir, sizeof dir, "stale");
    ASSERT_EQ(local_slot_lease(dir, "sbx-live", 2, NULL, &a, &err), 0);
    ASSERT_EQ(local_slot_lease(dir, "sbx-dead", 2, NULL, &b, &err), 0);
    local_slot_note_init(dir, a, "sbx-live", getpid(), local_proc_starttime(getpid()));
    uint64_t start;
    pid_t gone = dead_pid(&start);
    local_slot_note_init(dir, b, "sbx-dead", gone, start);
    ASSERT_EQ(local_slot_lease(dir, "sbx-new", 2, NULL, &c, &err), 0);
    ASSERT_EQ(c, b); /* the dead init's slot, never the live one's */
    ASSERT_EQ(local_slot_lease(dir, "sbx-more", 2, NULL, &c, &err), -1);
    ASSERT_EQ(err.code, MCP_ERR_LIMIT);
    ASSERT_CONTAINS(err.msg, "in use");
}

/* A server killed with its sandboxes, its state directory removed: nothing releases their
 * leases but the sweep, which keeps every lease whose init or creator still runs. */
TEST(sweep_removes_only_the_leases_of_sandboxes_that_are_gone)
{
    char dir[256], path[300];
    struct mcp_error err;
    uint32_t live, dead, fresh, orphan;
    uint64_t start;
    lease_dir(dir, sizeof dir, "sweep");
    ASSERT_EQ(local_slot_lease(dir, "sbx-live", 8, NULL, &live, &err), 0);
    ASSERT_EQ(local_slot_lease(dir, "sbx-dead", 8, NULL, &dead, &err), 0);
    ASSERT_EQ(local_slot_lease(dir, "sbx-fresh", 8, NULL, &fresh, &err), 0); /* no init yet */
    local_slot_note_init(dir, live, "sbx-live", getpid(), local_proc_starttime(getpid()));
    pid_t gone = dead_pid(&start);
    local_slot_note_init(dir, dead, "sbx-dead", gone, start);
    /* taken by a creator that died before its init started */
    pid_t creator = fork();
    if (creator == 0) {
        uint32_t s;
        _exit(local_slot_lease(dir, "sbx-orphan", 8, NULL, &s, &err) == 0 ? (int)s : 100);
    }
    int status;
    ASSERT_EQ(waitpid(creator, &status, 0), creator);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) < 8);
    orphan = (uint32_t)WEXITSTATUS(status);
    ASSERT_EQ(local_slots_sweep(dir), 2);
    uint32_t kept[] = {live, fresh}, gone_slots[] = {dead, orphan};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%u", dir, (unsigned)kept[i]);
        ASSERT_EQ(access(path, F_OK), 0);
        snprintf(path, sizeof path, "%s/%u", dir, (unsigned)gone_slots[i]);
        ASSERT_EQ(access(path, F_OK), -1);
    }
    ASSERT_EQ(local_slots_sweep(dir), 0);
}

static unsigned host_root_uid(struct harness *h, const char *id)
{
    struct harness_exec x;
    unsigned inside = 1, outside = 0, count = 0;
    if (harness_exec(h, id, "cat /proc/self/uid_map", &x) == 0)
        sscanf(buf_cstr(&x.out), "%u %u %u", &inside, &outside, &count);
    harness_exec_release(&x);
    return inside == 0 ? outside : 0;
}

TEST(two_state_dirs_never_share_host_uids)
{
    struct harness h[2];
    char *ids[2][PER_DIR];
    unsigned uids[2 * PER_DIR];
    struct local_identity ident;
    local_identity_detect(&ident);
    for (int d = 0; d < 2; d++) {
        int rc = harness_open(&h[d]);
        if (rc == 77)
            SKIP("this host cannot run local sandboxes");
        ASSERT_EQ(rc, 0);
    }
    for (int i = 0; i < PER_DIR; i++) /* interleaved, as two servers would create */
        for (int d = 0; d < 2; d++) {
            ids[d][i] = harness_create(&h[d], NULL);
            ASSERT(ids[d][i] != NULL);
            uids[d * PER_DIR + i] = host_root_uid(&h[d], ids[d][i]);
            printf("# state dir %d sandbox %s: root is host uid %u\n", d, ids[d][i],
                   uids[d * PER_DIR + i]);
            ASSERT(uids[d * PER_DIR + i] != 0);
            ASSERT(uids[d * PER_DIR + i] != (unsigned)getuid() ||
                   ident.mode == LOCAL_ID_SINGLE);
        }
    for (int i = 0; i < 2 * PER_DIR; i++)
        for (int j = i + 1; j < 2 * PER_DIR; j++) {
            if (ident.mode == LOCAL_ID_SLICES) /* slices: 65536 apart, never equal */
                ASSERT(uids[i] != uids[j]);
            else /* one mapping for all of this user's sandboxes */
                ASSERT_EQ(uids[i], local_identity_root_uid(&ident, 0));
        }
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < PER_DIR; i++) {
            ASSERT_EQ(harness_destroy(&h[d], ids[d][i]), 0);
            free(ids[d][i]);
        }
        harness_close(&h[d]);
    }
}

TEST(identity_matches_who_runs_it)
{
    struct local_identity id;
    local_identity_detect(&id);
    printf("# identity: %s, sandbox root -> host uid %u (%u ids)%s%s\n",
           local_identity_name(id.mode), (unsigned)local_identity_root_uid(&id, 0),
           (unsigned)id.uid_count, id.why[0] ? ": " : "", id.why);
    if (geteuid() == 0) {
        ASSERT_EQ(id.mode, LOCAL_ID_SLICES);
        ASSERT_EQ(local_identity_root_uid(&id, 3), 100000u + 3 * 65536u);
        return;
    }
    uint32_t start, count;
    bool subids = local_subid_range("/etc/subuid", getenv("USER"), (uint32_t)geteuid(), &start,
                                    &count) == 0 &&
                  access(LOCAL_NEWUIDMAP, X_OK) == 0;
    ASSERT_EQ(id.mode, subids ? LOCAL_ID_SUBID : LOCAL_ID_SINGLE);
    if (subids) {
        ASSERT_EQ(id.uid_base, start);
        ASSERT_EQ(id.uid_count, count < 65536 ? count : 65536);
    } else {
        ASSERT_EQ(id.uid_base, (uint32_t)geteuid());
        ASSERT(id.why[0] != '\0'); /* says what to install or run */
    }
}

int main(void)
{
    snprintf(scratch, sizeof scratch, "/tmp/mcpbox-test-slots-%d", (int)getpid());
    mkdir(scratch, 0700);
    RUN(leases_are_distinct_and_released_by_owner);
    RUN(excluded_slots_are_never_leased);
    RUN(subordinate_ranges_exclude_their_slices);
    RUN(stale_lease_reclaimed_when_full);
    RUN(sweep_removes_only_the_leases_of_sandboxes_that_are_gone);
    RUN(identity_matches_who_runs_it);
    RUN(two_state_dirs_never_share_host_uids);
    if (rmtree(scratch) < 0)
        printf("# could not remove %s\n", scratch);
    return test_done();
}
