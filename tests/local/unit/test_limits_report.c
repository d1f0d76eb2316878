/* Which limits hold, and get_sandbox saying exactly that (issue #11: "a limit that is not
 * enforced is never shown as one"). Runs as root, as a user prepared by `mcpbox setup`, and as a
 * user with no setup at all (the rootless ctest runs, tests/local/rootless):
 *  - the identity get_sandbox reports is the uid_map the sandbox sees (never host root; never
 *    the user's own uid unless the report says "single uid");
 *  - memory and cpu are in "limits" only where this user has a delegated cgroup for them, and
 *    named in isolation.limits_not_enforced otherwise; a memory hog is OOM-killed only then;
 *  - pids always hold (the cgroup, or RLIMIT_NPROC without one): a fork loop stops near the
 *    limit; disk always holds (tmpfs size);
 *  - pause works with a freezer and otherwise fails saying why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

#define PIDS 40

static struct harness h;

/* Pure v2: the server's own cgroup (or its parent, from mcpbox's leaf) is the user's. */
static bool v2_delegated(void)
{
    char line[512] = "", dir[600];
    struct stat st;
    FILE *f = fopen("/proc/self/cgroup", "re");
    while (f && fgets(line, sizeof line, f) && strncmp(line, "0::", 3) != 0)
        line[0] = '\0';
    if (f)
        fclose(f);
    line[strcspn(line, "\n")] = '\0';
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", line[0] ? line + 3 : "/");
    char *leaf = strrchr(dir, '/');
    if (leaf && strcmp(leaf, "/mcpbox-leaf") == 0)
        *leaf = '\0';
    return stat(dir, &st) == 0 && st.st_uid == geteuid();
}

static bool delegated(const char *ctrl)
{
    char dir[128];
    struct stat st;
    if (geteuid() == 0)
        return true;
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) /* pure v2 */
        return v2_delegated();
    snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s/mcpbox-u%u", ctrl, (unsigned)geteuid());
    return stat(dir, &st) == 0 && st.st_uid == geteuid();
}

static bool in_array(json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (strcmp(json_string_value(v), s) == 0) return true;
    return false;
}

static json_t *get_info(const char *id)
{
    harness_reset(&h);
    struct mcp_error e;
    if (h.be->ops->get(h.be, id, harness_cb, &h, &e) < 0 || harness_wait(&h) < 0)
        return NULL;
    return json_incref(h.result);
}

static char *out_of(const char *id, const char *cmd)
{
    struct harness_exec x;
    char *s = NULL;
    if (harness_exec(&h, id, cmd, &x) == 0)
        s = strdup(buf_cstr(&x.out));
    harness_exec_release(&x);
    return s;
}

TEST(report_matches_what_holds)
{
    struct sandbox_spec spec = {.owner = "t", .memory_bytes = 96u << 20, .disk_bytes = 8u << 20,
                                .pids = PIDS};
    char *id = harness_create(&h, &spec);
    ASSERT(id != NULL);
    json_t *info = get_info(id);
    ASSERT(info != NULL);
    char *dump = json_dumps(info, JSON_COMPACT);
    printf("# get_sandbox: %s\n", dump);
    free(dump);
    json_t *limits = json_object_get(info, "limits");
    json_t *iso = json_object_get(info, "isolation");
    json_t *off = json_object_get(iso, "limits_not_enforced");
    ASSERT(json_is_array(off));
    bool mem = delegated("memory"), cpu = delegated("cpu");
    ASSERT_EQ(json_object_get(limits, "memory_bytes") != NULL, mem);
    ASSERT_EQ(in_array(off, "memory"), !mem);
    ASSERT_EQ(json_object_get(limits, "cpu") != NULL, cpu);
    ASSERT_EQ(in_array(off, "cpu"), !cpu);
    ASSERT(json_object_get(limits, "pids") != NULL);
    ASSERT(json_object_get(limits, "disk_bytes") != NULL);
    const char *by = json_string_value(json_object_get(json_object_get(iso, "limits_enforced_by"),
                                                       "pids"));
    ASSERT_STR_EQ(by, delegated("pids") ? "cgroup" : "RLIMIT_NPROC");

    /* The identity reported is the one the sandbox has. */
    json_t *ident = json_object_get(iso, "identity");
    char *map = out_of(id, "cat /proc/self/uid_map");
    unsigned in = 1, outside = 0, count = 0;
    ASSERT(map && sscanf(map, "%u %u %u", &in, &outside, &count) == 3);
    char want[64];
    snprintf(want, sizeof want, "0 %u %u", outside, count);
    ASSERT_STR_EQ(json_string_value(json_object_get(ident, "uid_map")), want);
    ASSERT(outside != 0);
    if (outside == (unsigned)geteuid())
        ASSERT_STR_EQ(json_string_value(json_object_get(ident, "mode")), "single uid");
    free(map);

    /* pids hold either way: the 40th process or so cannot be made. */
    /* (dash exits when fork fails: the loop runs in an inner shell, and the count is made with
     * builtins only, since nothing more can be forked then) */
    char *forks = out_of(id, "sh -c 'for i in $(seq 100); do sleep 5 & done' 2>/dev/null; "
                             "set -- /proc/[0-9]*; echo $#");
    int made = forks ? atoi(forks) : -1;
    printf("# processes in the sandbox after 100 background sleeps, pids=%d: %d\n", PIDS, made);
    ASSERT(made > 10 && made <= PIDS);
    free(forks);

    /* memory: a 200 MiB hog in 96 MiB is killed only where the cgroup exists. */
    char *hog = out_of(id, "python3 -c 'b = bytearray(200 << 20); print(len(b))' 2>/dev/null; "
                           "echo rc=$?");
    printf("# memory hog: %s", hog ? hog : "(none)\n");
    ASSERT(hog != NULL);
    ASSERT(strstr(hog, mem ? "rc=137" : "rc=0") != NULL);
    free(hog);

    /* pause: with a freezer it works; without, a precise error. */
    harness_reset(&h);
    struct mcp_error e;
    int rc = h.be->ops->pause(h.be, id, harness_cb, &h, &e);
    if (rc == 0)
        rc = harness_wait(&h);
    else
        h.err = e;
    bool freezer = delegated("freezer");
    ASSERT_EQ(rc == 0, freezer);
    if (!freezer)
        ASSERT_CONTAINS(h.err.msg, "freezer");
    if (freezer) {
        harness_reset(&h);
        ASSERT_EQ(h.be->ops->resume(h.be, id, harness_cb, &h, &e), 0);
        ASSERT_EQ(harness_wait(&h), 0);
    }
    json_decref(info);
    ASSERT_EQ(harness_destroy(&h, id), 0);
    free(id);
}

int main(void)
{
    int rc = harness_open(&h);
    if (rc == 77)
        return 77;
    if (rc != 0)
        return 1;
    RUN(report_matches_what_holds);
    harness_close(&h);
    return test_done();
}
