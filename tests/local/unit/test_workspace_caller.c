/* Whose allowed directories a caller may mount (backend/local/workspace_caller.c, issue 32 item 2)
 * without a sandbox: --allow-dir [USER=]DIR parsed, the caller behind each kind of sandbox owner,
 * and local_ws_check refusing callers an entry is not for. As root and as a user (rootless twin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/local_mounts.h"
#include "lib/base/rmtree.h"
#include "test.h"

static char base[64];

static int check_as(const char *allow, const char *caller, const char *source,
                    struct mcp_error *err)
{
    struct local_allow a;
    ASSERT_EQ(local_allow_init(&a, allow, err), 0);
    struct local_ws_check c = {.allow = &a, .caller = caller, .state_dir = "/nonexistent-state"};
    json_t *mounts = json_pack("[{s:s, s:s}]", "source", source, "target", "/mnt/p");
    struct local_ws ws;
    int rc = local_ws_check(&c, mounts, &ws, err);
    if (rc == 0)
        local_ws_free(&ws);
    json_decref(mounts);
    local_allow_free(&a);
    return rc;
}

TEST(allow_entries_name_their_user)
{
    struct local_allow a;
    struct mcp_error err;
    char spec[256];
    snprintf(spec, sizeof spec, "%s:%u=%s", base, (unsigned)geteuid(), base);
    ASSERT_EQ(local_allow_init(&a, spec, &err), 0);
    ASSERT_EQ(a.n, 1u); /* the same directory for the same user, twice */
    ASSERT_EQ(a.owners[0], geteuid());
    local_allow_free(&a);

    snprintf(spec, sizeof spec, "nosuchuser-mbx-%d=%s", (int)getpid(), base);
    ASSERT_EQ(local_allow_init(&a, spec, &err), -1);
    ASSERT_CONTAINS(err.msg, "is not a user on this host");

    snprintf(spec, sizeof spec, "65534=%s", base);
    int rc = local_allow_init(&a, spec, &err);
    if (geteuid() == 0) {
        ASSERT_EQ(rc, 0);
        ASSERT_EQ(a.owners[0], 65534u);
        local_allow_free(&a);
    } else {
        ASSERT_EQ(rc, -1);
        ASSERT_CONTAINS(err.msg, "only a server running as root");
    }

    /* '=' after a '/' is the path's: a directory named "a=b" */
    char dir[128];
    snprintf(dir, sizeof dir, "%s/a=b", base);
    ASSERT_EQ(mkdir(dir, 0755), 0);
    snprintf(spec, sizeof spec, "%s", dir);
    ASSERT_EQ(local_allow_init(&a, spec, &err), 0);
    ASSERT_EQ(a.owners[0], geteuid());
    ASSERT_CONTAINS(a.dirs[0], "/a=b");
    local_allow_free(&a);
}

TEST(callers_behind_owners)
{
    struct local_ws_caller who;
    ASSERT_EQ(local_ws_caller("local:uid:65534", &who), 0);
    ASSERT(who.known && !who.by_token && who.uid == 65534);
    ASSERT_EQ(local_ws_caller("token:0123456789abcdef", &who), 0);
    ASSERT(who.known && who.by_token && who.uid == geteuid());
    const char *nobody[] = {"session:abc",          "local:uid:", "local:uid:12x", "local:uid:-1",
                            "local:uid:4294967295", "",           "uid:0"};
    for (size_t i = 0; i < sizeof nobody / sizeof nobody[0]; i++)
        ASSERT_EQ(local_ws_caller(nobody[i], &who), -1);
    ASSERT_EQ(local_ws_caller(NULL, &who), -1);
}

TEST(only_the_entrys_user_mounts_it)
{
    struct mcp_error err;
    char me[64];
    snprintf(me, sizeof me, "local:uid:%u", (unsigned)geteuid());
    ASSERT_EQ(check_as(base, me, base, &err), 0);
    ASSERT_EQ(check_as(base, "token:0123456789abcdef", base, &err), 0); /* the server's user */

    const char *other = geteuid() == 65534 ? "local:uid:65533" : "local:uid:65534";
    ASSERT_EQ(check_as(base, other, base, &err), -1);
    ASSERT_CONTAINS(err.msg, "shares only with");
    ASSERT_CONTAINS(err.msg, geteuid() == 0 ? "--allow-dir 6553" : "an mcpbox of your own");

    ASSERT_EQ(check_as(base, "session:abc", base, &err), -1);
    ASSERT_CONTAINS(err.msg, "cannot tell which local user you are");
    ASSERT_EQ(check_as(base, NULL, base, &err), -1);
    ASSERT_CONTAINS(err.msg, "cannot tell which local user you are");

    /* another user's relative source is not looked up in this user's directory */
    ASSERT_EQ(check_as(base, other, ".", &err), -1);
    ASSERT_CONTAINS(err.msg, "none for you");
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/mbx-wscaller-XXXXXX");
    if (mkdtemp(base) == NULL)
        return 1;
    RUN(allow_entries_name_their_user);
    RUN(callers_behind_owners);
    RUN(only_the_entrys_user_mounts_it);
    if (rmtree(base) < 0)
        fprintf(stderr, "# could not remove %s\n", base);
    return test_done();
}
