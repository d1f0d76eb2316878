/* Root templates (backend/local/root_template.c): a template holds every entry of a host-mode
 * root with exact modes whatever the maker's umask, is made once however many makers race for
 * it, leaves nothing half-made behind (nor, once another template is made, what a maker killed
 * mid-build left), and a failure says what failed. No sandbox is made; no root needed (the
 * templates belong to the test's own ids). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/rmtree.h"
#include "backend/local/local_limits.h"
#include "backend/local/root_template.h"
#include "test.h"

#define RACERS 8

static char base[64];

static int entries_in(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* type 'd', 'f' or 'l'; mode checked for 'd' and 'f'; target for 'l'. */
static void expect(const char *root, const char *path, char type, mode_t mode, const char *target)
{
    char full[512];
    struct stat st;
    snprintf(full, sizeof full, "%s/%s", root, path);
    if (lstat(full, &st) < 0)
        TEST_FAIL("%s: %s", full, strerror(errno));
    char got = S_ISDIR(st.st_mode)   ? 'd'
               : S_ISREG(st.st_mode) ? 'f'
               : S_ISLNK(st.st_mode) ? 'l'
                                     : '?';
    if (got != type)
        TEST_FAIL("%s is '%c', not '%c'", path, got, type);
    if (type != 'l' && (st.st_mode & 07777) != mode)
        TEST_FAIL("%s has mode %o, not %o", path, (unsigned)(st.st_mode & 07777), (unsigned)mode);
    if (st.st_uid != getuid() || st.st_gid != getgid())
        TEST_FAIL("%s belongs to %u:%u", path, (unsigned)st.st_uid, (unsigned)st.st_gid);
    if (type == 'l') {
        char t[256];
        ssize_t n = readlink(full, t, sizeof t - 1);
        ASSERT(n > 0);
        t[n] = '\0';
        ASSERT_STR_EQ(t, target);
    }
}

static void expect_complete(const char *root, bool network)
{
    const struct root_layout *l = local_root_layout();
    expect(root, ".", 'd', 0755, NULL);
    static const char *const dirs[] = {"etc", "etc/ssl", "usr", "dev", "dev/pts", "dev/shm",
                                       "workspace", "tmp", "root", "run", "var"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        expect(root, dirs[i], 'd', 0755, NULL);
    expect(root, "proc", 'd', 0555, NULL);
    static const char *const files[] = {"etc/passwd", "etc/group", "etc/hosts",
                                        "etc/nsswitch.conf", "etc/hostname", "etc/resolv.conf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        expect(root, files[i], 'f', 0644, NULL);
    for (size_t i = 0; i < ROOT_DEV_NODES; i++) {
        char p[32];
        snprintf(p, sizeof p, "dev/%s", root_dev_nodes[i]);
        expect(root, p, 'f', 0644, NULL);
    }
    for (size_t i = 0; i < ROOT_ETC_BINDS; i++) {
        mode_t m = l->etc_kind[i] == 'd' ? 0755 : 0644;
        if (l->etc_kind[i])
            expect(root, root_etc_binds[i], l->etc_kind[i], m, NULL);
    }
    expect(root, "dev/ptmx", 'l', 0, "pts/ptmx");
    expect(root, "var/tmp", 'l', 0, "/tmp");
    char resolv[512], text[256] = "";
    snprintf(resolv, sizeof resolv, "%s/etc/resolv.conf", root);
    FILE *f = fopen(resolv, "r");
    ASSERT(f != NULL);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    ASSERT_STR_EQ(text, root_resolv_conf(network));
}

TEST(a_template_has_every_entry_with_exact_modes_whatever_the_umask)
{
    char dir[128], path[512];
    snprintf(dir, sizeof dir, "%s/umask", base);
    struct mcp_error err;
    mode_t old = umask(077);
    int rc = local_root_template(dir, false, getuid(), getgid(), path, sizeof path, &err);
    umask(old);
    ASSERT_EQ(rc, 0);
    expect_complete(path, false);
    ASSERT_EQ(entries_in(dir, ""), 1);
}

TEST(network_and_no_network_are_two_templates)
{
    char dir[128], with[512], without[512];
    snprintf(dir, sizeof dir, "%s/net", base);
    struct mcp_error err;
    ASSERT_EQ(local_root_template(dir, true, getuid(), getgid(), with, sizeof with, &err), 0);
    ASSERT_EQ(local_root_template(dir, false, getuid(), getgid(), without, sizeof without, &err), 0);
    ASSERT(strcmp(with, without) != 0);
    expect_complete(with, true);
    expect_complete(without, false);
}

TEST(an_existing_template_is_used_as_it_is)
{
    char dir[128], first[512], again[512];
    snprintf(dir, sizeof dir, "%s/reuse", base);
    struct mcp_error err;
    ASSERT_EQ(local_root_template(dir, false, getuid(), getgid(), first, sizeof first, &err), 0);
    struct stat a, b;
    ASSERT_EQ(stat(first, &a), 0);
    ASSERT_EQ(local_root_template(dir, false, getuid(), getgid(), again, sizeof again, &err), 0);
    ASSERT_STR_EQ(first, again);
    ASSERT_EQ(stat(again, &b), 0);
    ASSERT_EQ(a.st_ino, b.st_ino);
}

struct racer {
    const char *dir;
    pthread_barrier_t *start;
    char path[512];
    int rc;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    struct mcp_error err;
    pthread_barrier_wait(r->start);
    r->rc = local_root_template(r->dir, false, getuid(), getgid(), r->path, sizeof r->path, &err);
    return NULL;
}

TEST(racing_makers_all_get_one_complete_template_and_leave_no_half_made_one)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/race", base);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACERS);
    struct racer r[RACERS];
    pthread_t t[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){.dir = dir, .start = &start};
        ASSERT_EQ(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < RACERS; i++) {
        ASSERT_EQ(r[i].rc, 0);
        ASSERT_STR_EQ(r[i].path, r[0].path);
    }
    expect_complete(r[0].path, false);
    ASSERT_EQ(entries_in(dir, ""), 1);
    ASSERT_EQ(entries_in(dir, ".new-"), 0);
}

static void make_dir_aged(const char *path, time_t age_s)
{
    ASSERT_EQ(mkdir(path, 0700), 0);
    char inside[600];
    snprintf(inside, sizeof inside, "%s/etc", path); /* half-made: not empty */
    ASSERT_EQ(mkdir(inside, 0700), 0);
    struct timespec t[2] = {{.tv_sec = time(NULL) - age_s}, {.tv_sec = time(NULL) - age_s}};
    ASSERT_EQ(utimensat(AT_FDCWD, path, t, 0), 0);
}

TEST(a_copy_a_dead_maker_left_goes_when_a_template_is_made_and_a_fresh_one_stays)
{
    char dir[128], stale[160], fresh[160], path[512];
    snprintf(dir, sizeof dir, "%s/leftovers", base);
    snprintf(stale, sizeof stale, "%s/.new-Stale1", dir);
    snprintf(fresh, sizeof fresh, "%s/.new-Fresh1", dir);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    make_dir_aged(stale, 3600);
    make_dir_aged(fresh, 0); /* another maker at work now */
    struct mcp_error err;
    ASSERT_EQ(local_root_template(dir, true, getuid(), getgid(), path, sizeof path, &err), 0);
    struct stat st;
    ASSERT_EQ(lstat(stale, &st), -1);
    ASSERT_EQ(lstat(fresh, &st), 0);
    ASSERT_EQ(entries_in(dir, ".new-"), 1);
    expect_complete(path, true);
}

TEST(a_template_that_cannot_be_made_says_where)
{
    char file[128], dir[160], path[512];
    snprintf(file, sizeof file, "%s/plain-file", base);
    int fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    ASSERT(fd >= 0);
    close(fd);
    snprintf(dir, sizeof dir, "%s/below", file); /* under a regular file: ENOTDIR */
    struct mcp_error err;
    ASSERT_EQ(local_root_template(dir, false, getuid(), getgid(), path, sizeof path, &err), -1);
    ASSERT_CONTAINS(err.msg, dir);
}

TEST(entries_refuse_a_directory_that_is_not_empty)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/busy", base);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    char etc[160];
    snprintf(etc, sizeof etc, "%s/etc", dir);
    ASSERT_EQ(mkdir(etc, 0700), 0);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT(fd >= 0);
    const char *failed = NULL;
    ASSERT_EQ(local_root_entries(fd, local_root_layout(), false, NULL, &failed), -1);
    ASSERT_EQ(errno, EEXIST);
    ASSERT_STR_EQ(failed, "etc");
    close(fd);
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/test_root_template.XXXXXX");
    if (mkdtemp(base) == NULL)
        return 1;
    RUN(a_template_has_every_entry_with_exact_modes_whatever_the_umask);
    RUN(network_and_no_network_are_two_templates);
    RUN(an_existing_template_is_used_as_it_is);
    RUN(racing_makers_all_get_one_complete_template_and_leave_no_half_made_one);
    RUN(a_copy_a_dead_maker_left_goes_when_a_template_is_made_and_a_fresh_one_stays);
    RUN(a_template_that_cannot_be_made_says_where);
    RUN(entries_refuse_a_directory_that_is_not_empty);
    rmtree(base);
    return test_done();
}
