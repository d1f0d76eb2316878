/* test_rmtree(dir): removes a test's scratch tree as `rm -rf` would, without a shell (no path to
 * quote, no process). Follows no symlink (FTW_PHYS); goes on past what it cannot remove, and
 * returns -1 if the tree is still there. */
#ifndef MCPBOX_TEST_RMTREE_H
#define MCPBOX_TEST_RMTREE_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static inline int test_rmtree_entry(const char *path, const struct stat *st, int type,
                                    struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    (void)remove(path); /* a directory's entries come first (FTW_DEPTH) */
    return 0;
}

static inline int test_rmtree(const char *dir)
{
    (void)nftw(dir, test_rmtree_entry, 16, FTW_DEPTH | FTW_PHYS);
    struct stat st;
    return lstat(dir, &st) < 0 && errno == ENOENT ? 0 : -1;
}

#endif
