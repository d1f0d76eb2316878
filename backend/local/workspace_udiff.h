/* A line diff (Myers' O(ND) algorithm, linear space) and its rendering as a unified diff, for
 * reviewing the text files a sandbox changed in a copy-on-write mount (workspace_review.h). */
#ifndef MCPBOX_WORKSPACE_UDIFF_H
#define MCPBOX_WORKSPACE_UDIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/buf.h"

#define UDIFF_CONTEXT 3
/* Snake steps one diff may take before the rest of a region is shown as replaced whole: keeps a
 * pathological pair of files (thousands of scattered edits) from taking seconds. */
#define UDIFF_WORK_MAX 20000000ull

/* Appends the hunks ("@@ -a,b +c,d @@" and their lines) that turn old into new to out, with
 * UDIFF_CONTEXT lines of context and "\ No newline at end of file" where a side lacks its last
 * newline. Appends nothing when the two are equal. Returns the number of lines added and
 * removed in *added / *removed (either may be NULL). */
void udiff_hunks(const char *old, size_t old_len, const char *new_text, size_t new_len,
                 struct buf *out, uint64_t *added, uint64_t *removed);
/* udiff_hunks, and true when UDIFF_WORK_MAX was reached (a region shown replaced whole, though
 * it may have lines in common). */
bool udiff_hunks_capped(const char *old, size_t old_len, const char *new_text, size_t new_len,
                        struct buf *out, uint64_t *added, uint64_t *removed);

#endif
