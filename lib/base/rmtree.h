/* Removing a directory tree: a sandbox's directories (which the sandbox's root may have filled
 * with symlinks and unreadable directories), a test's scratch tree. */
#ifndef MCPBOX_BASE_RMTREE_H
#define MCPBOX_BASE_RMTREE_H

/* Removes dir and everything below it, depth first. Follows no symlink (one in the tree is
 * removed itself), makes directories of ours that may not be read readable to empty them, and
 * goes on past what it cannot remove. 0 if dir is gone afterwards, else -1. */
int rmtree(const char *dir);

#endif
