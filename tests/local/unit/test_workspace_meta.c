/* The contract of backend/local/workspace.h without a sandbox: a create's mounts checked against
 * the allowlist, mounts.json written by local_ws_prepare and read back by local_workspace_load
 * (what the review side reads after a restart), local_workspace_find on nested targets, the
 * state directory refused however its path is spelled, and the allowlist's own errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/local_mounts.h"
#include "backend/local/workspace.h"
#include "test.h"
#include "lib/base/rmtree.h"

static char base[64];

static void path_of(char *out, size_t n, const char *rel)
{
    snprintf(out, n, "%s/%s", base, rel);
}

static void make_tree(void)
{
    snprintf(base, sizeof base, "/tmp/mbx-wsmeta-XXXXXX");
    ASSERT(mkdtemp(base) != NULL);
    const char *dirs[] = {"allow", "allow/proj", "allow/proj/sub", "allow/state", "out"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[256];
        path_of(p, sizeof p, dirs[i]);
        ASSERT_EQ(mkdir(p, 0755), 0);
    }
    char link[256], alias[256];
    path_of(link, sizeof link, "allow/out-link");
    ASSERT_EQ(symlink("../out", link), 0);
    path_of(alias, sizeof alias, "alias");
    ASSERT_EQ(symlink("allow", alias), 0); /* another spelling of the allowed directory */
    path_of(link, sizeof link, "allow/here");
    ASSERT_EQ(symlink(".", link), 0); /* a symlink that stays inside */
}

static int check(const char *allow_rel, json_t *mounts, struct local_ws *ws, struct mcp_error *err)
{
    char allow[256], state[256];
    path_of(allow, sizeof allow, allow_rel);
    path_of(state, sizeof state, "allow/state");
    struct local_allow a;
    ASSERT_EQ(local_allow_init(&a, allow, err), 0);
    char caller[64]; /* the server's own user, as over stdio */
    snprintf(caller, sizeof caller, "local:uid:%u", (unsigned)geteuid());
    struct local_ws_check c = {.allow = &a, .caller = caller, .state_dir = state};
    int rc = local_ws_check(&c, mounts, ws, err);
    local_allow_free(&a);
    return rc;
}

TEST(prepare_then_load_round_trip)
{
    char state[256], proj[256];
    path_of(state, sizeof state, "allow/state");
    path_of(proj, sizeof proj, "allow/proj");
    json_t *mounts = json_pack("[{s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}]",
                               "source", "proj", "target", "/workspace/app",
                               "source", "proj/sub", "target", "/workspace/app/sub", "mode", "ro",
                               "source", proj, "target", "/mnt", "mode", "rw");
    struct local_ws ws;
    struct mcp_error err;
    ASSERT_EQ(check("allow", mounts, &ws, &err), 0);
    json_decref(mounts);
    ASSERT_EQ(ws.n, 3u);
    /* shorter targets first, each keeping its index */
    ASSERT_STR_EQ(ws.m[0].m.target, "/mnt");
    ASSERT_EQ(ws.m[0].m.index, 2u);
    ASSERT_STR_EQ(ws.m[1].m.target, "/workspace/app");
    ASSERT_EQ(ws.m[1].m.mode, LOCAL_MOUNT_COW);
    ASSERT_EQ(local_ws_prepare(state, "sbx-test", &ws, geteuid(), getegid(), &err), 0);
    struct local_mount *m = NULL;
    size_t n = 0;
    ASSERT_EQ(local_workspace_load(state, "sbx-test", &m, &n, &err), 0);
    ASSERT_EQ(n, 3u);
    const struct local_mount *cow = NULL;
    for (size_t i = 0; i < n; i++)
        if (m[i].mode == LOCAL_MOUNT_COW)
            cow = &m[i];
    ASSERT(cow != NULL);
    ASSERT_STR_EQ(cow->source, proj);
    ASSERT_EQ(cow->owner_uid, (uint32_t)geteuid());
    char upper[512];
    snprintf(upper, sizeof upper, "%s/" LOCAL_WS_DIR "/sbx-test/0/upper", state);
    ASSERT_STR_EQ(cow->upper, upper);
    struct stat st;
    ASSERT_EQ(stat(cow->upper, &st), 0);
    ASSERT_EQ(stat(cow->work, &st), 0);
    /* the ro mount at /workspace/app/sub is not copy-on-write: paths there belong to no layer */
    const char *rel = NULL;
    ASSERT(local_workspace_find(m, n, "/workspace/app/src/x.c", &rel) == cow);
    ASSERT_STR_EQ(rel, "src/x.c");
    ASSERT(local_workspace_find(m, n, "/workspace/app", &rel) == cow);
    ASSERT_STR_EQ(rel, "");
    ASSERT(local_workspace_find(m, n, "/workspace/apple", &rel) == NULL);
    ASSERT(local_workspace_find(m, n, "/mnt/x", &rel) == NULL);
    free(m);
    local_ws_free(&ws);
    local_ws_remove(state, "sbx-test", NULL);
    char dir[LOCAL_WS_PATH_MAX];
    local_workspace_dir(state, "sbx-test", dir);
    ASSERT(access(dir, F_OK) < 0);
    /* a sandbox without mounts has no file: nothing, no error */
    ASSERT_EQ(local_workspace_load(state, "sbx-none", &m, &n, &err), 0);
    ASSERT_EQ(n, 0u);
    ASSERT(m == NULL);
}

TEST(refusals)
{
    struct local_ws ws;
    struct mcp_error err;
    char out[256], state_alias[256];
    path_of(out, sizeof out, "out");
    path_of(state_alias, sizeof state_alias, "alias/state");
    struct {
        const char *allow, *source, *target, *mode, *expect;
    } cases[] = {
        {"allow", out, "/mnt/o", NULL, "--allow-dir"},
        /* what led out is named, not the errno that stopped the walk (issue 39, item 3) */
        {"allow", "out-link", "/mnt/o", NULL, "\"out-link\" on the way is a symlink"},
        {"allow", "here/out-link", "/mnt/o", NULL, "\"out-link\" on the way is a symlink"},
        {"allow", "proj/../../out", "/mnt/o", NULL, "\"..\" (parent directory)"},
        {"allow", ".", "/mnt/o", NULL, "state"},         /* holds the state directory */
        {"alias", state_alias, "/mnt/o", NULL, "state"}, /* the state dir through a symlink */
        {"allow", "state/..", "/mnt/o", NULL, "state"},
        {"allow", "proj", "/etc/o", NULL, "target"},
        {"allow", "proj", "/mnt/o", "rwx", "copy-on-write"},
        {"allow", "nope", "/mnt/o", NULL, "does not exist"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *mnt = json_pack("[{s:s, s:s}]", "source", cases[i].source, "target",
                                cases[i].target);
        if (cases[i].mode)
            json_object_set_new(json_array_get(mnt, 0), "mode", json_string(cases[i].mode));
        int rc = check(cases[i].allow, mnt, &ws, &err);
        json_decref(mnt);
        if (rc == 0)
            fprintf(stderr, "# case %zu (%s) accepted\n", i, cases[i].source);
        ASSERT_EQ(rc, -1);
        ASSERT_CONTAINS(err.msg, cases[i].expect);
        ASSERT(strstr(err.msg, "cross-device") == NULL &&
               strstr(err.msg, "symbolic links") == NULL);
    }
}

TEST(allowlist_errors)
{
    struct local_allow a;
    struct mcp_error err;
    char missing[256], file[256];
    path_of(missing, sizeof missing, "missing");
    ASSERT_EQ(local_allow_init(&a, missing, &err), -1);
    ASSERT_CONTAINS(err.msg, "--allow-dir");
    path_of(file, sizeof file, "file");
    FILE *f = fopen(file, "w");
    ASSERT(f != NULL);
    fclose(f);
    ASSERT_EQ(local_allow_init(&a, file, &err), -1);
    ASSERT_CONTAINS(err.msg, "not a directory");
    char two[600];
    snprintf(two, sizeof two, "%s/allow:%s/alias:%s/out", base, base, base);
    ASSERT_EQ(local_allow_init(&a, two, &err), 0);
    ASSERT_EQ(a.n, 2u); /* alias is the same real directory as allow */
    local_allow_free(&a);
}

int main(void)
{
    make_tree();
    RUN(prepare_then_load_round_trip);
    RUN(refusals);
    RUN(allowlist_errors);
    if (rmtree(base) < 0)
        fprintf(stderr, "# could not remove %s\n", base);
    return test_done();
}
