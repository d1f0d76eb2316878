/* The runtime directory (backend/local/runtime_dir.c): derived from the state directory's real
 * path, the same for every spelling of it, different for two state directories, private, and a
 * pre-existing path that mcpbox would not have made itself (symlink, other owner, group or other
 * access) is refused with an error naming it. Needs root only for the other-owner case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "backend/local/local_egress.h"
#include "test.h"
#include "lib/base/rmtree.h"

static char base[64];

static void make_state(const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", base, name);
    ASSERT_EQ(mkdir(out, 0700), 0);
}

TEST(same_for_every_spelling_and_private)
{
    char a[128], b[128], link[128], spelled[160], ra[512], rb[512], rl[512];
    struct mcp_error err;
    make_state("a", a, sizeof a);
    make_state("b", b, sizeof b);
    snprintf(link, sizeof link, "%s/link-to-a", base);
    ASSERT_EQ(symlink(a, link), 0);
    snprintf(spelled, sizeof spelled, "%s/./b/../a/", base);
    ASSERT_EQ(local_runtime_dir(a, ra, sizeof ra, &err), 0);
    ASSERT_EQ(local_runtime_dir(b, rb, sizeof rb, &err), 0);
    ASSERT_EQ(local_runtime_dir(link, rl, sizeof rl, &err), 0);
    ASSERT_STR_EQ(rl, ra);
    ASSERT_EQ(local_runtime_dir(spelled, rl, sizeof rl, &err), 0);
    ASSERT_STR_EQ(rl, ra);
    ASSERT(strcmp(ra, rb) != 0);
    struct stat st;
    ASSERT_EQ(lstat(ra, &st), 0);
    ASSERT(S_ISDIR(st.st_mode));
    ASSERT_EQ(st.st_mode & 0777, 0700);
    ASSERT_EQ(st.st_uid, geteuid());
    /* on a tmpfs when /run or /dev/shm is one */
    struct statfs fs;
    bool tmpfs_host = (statfs("/run", &fs) == 0 && fs.f_type == TMPFS_MAGIC) ||
                      (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC);
    ASSERT_EQ(statfs(ra, &fs), 0);
    ASSERT_EQ(fs.f_type == TMPFS_MAGIC, tmpfs_host);
    printf("# runtime directory of %s: %s\n", a, ra);
    ASSERT_EQ(rmdir(ra), 0);
    ASSERT_EQ(rmdir(rb), 0);
}

TEST(refuses_what_it_did_not_make)
{
    char dir[128], target[128];
    struct mcp_error err;
    snprintf(target, sizeof target, "%s/target", base);
    ASSERT_EQ(mkdir(target, 0700), 0);
    snprintf(dir, sizeof dir, "%s/symlink", base);
    ASSERT_EQ(symlink(target, dir), 0);
    ASSERT_EQ(local_private_dir(dir, &err), -1);
    ASSERT_CONTAINS(err.msg, dir);
    ASSERT_CONTAINS(err.msg, "refusing");

    snprintf(dir, sizeof dir, "%s/open", base);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    ASSERT_EQ(chmod(dir, 0755), 0);
    ASSERT_EQ(local_private_dir(dir, &err), -1);
    ASSERT_CONTAINS(err.msg, "mode 755");

    snprintf(dir, sizeof dir, "%s/file", base);
    FILE *f = fopen(dir, "w");
    ASSERT(f != NULL);
    fclose(f);
    ASSERT_EQ(local_private_dir(dir, &err), -1);
    ASSERT_CONTAINS(err.msg, "not a directory");

    snprintf(dir, sizeof dir, "%s/fresh", base);
    ASSERT_EQ(local_private_dir(dir, &err), 0); /* made here: accepted */
    ASSERT_EQ(local_private_dir(dir, &err), 0); /* and again */
    if (geteuid() != 0) {
        printf("# not root: the other-owner case is skipped\n");
        return;
    }
    snprintf(dir, sizeof dir, "%s/theirs", base);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    ASSERT_EQ(chown(dir, 65534, 65534), 0);
    ASSERT_EQ(local_private_dir(dir, &err), -1);
    ASSERT_CONTAINS(err.msg, "belongs to uid 65534");
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/mbx-rt-XXXXXX");
    if (mkdtemp(base) == NULL)
        return 1;
    RUN(same_for_every_spelling_and_private);
    RUN(refuses_what_it_did_not_make);
    if (rmtree(base) < 0)
        fprintf(stderr, "could not remove %s\n", base);
    return test_done();
}
