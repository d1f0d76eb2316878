/* Line diff after E. Myers, "An O(ND) Difference Algorithm and Its Variations" (1986): lines
 * become integers (equal lines, equal numbers), the common head and tail are set aside, and the
 * rest is split at a "middle snake" found by searching from both ends at once, recursively, so
 * memory stays linear. The result marks each line of either side changed or not; the unified
 * rendering groups the changes into hunks with context. */
#include "backend/local/workspace_udiff.h"

#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

struct line {
    const char *s;
    size_t len; /* with its '\n', if it has one */
};

struct side {
    struct line *lines;
    int *ids; /* equivalence class of each line */
    bool *changed;
    size_t n;
};

struct lcs {
    const int *a, *b;
    bool *ca, *cb;
    long *fv, *bv; /* furthest-reaching x per diagonal, offset by vmid */
    long vmid;
    uint64_t work;
};

static void split_lines(const char *text, size_t len, struct side *s)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (text[i] == '\n')
            n++;
    if (len > 0 && text[len - 1] != '\n')
        n++;
    s->lines = xcalloc(n + 1, sizeof *s->lines);
    s->ids = xcalloc(n + 1, sizeof *s->ids);
    s->changed = xcalloc(n + 1, sizeof *s->changed);
    s->n = n;
    size_t k = 0, start = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n') {
            s->lines[k++] = (struct line){text + start, i + 1 - start};
            start = i + 1;
        }
    }
    if (start < len)
        s->lines[k] = (struct line){text + start, len - start};
}

static uint64_t line_hash(const struct line *l)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < l->len; i++)
        h = (h ^ (unsigned char)l->s[i]) * 1099511628211ull;
    return h;
}

/* Gives equal lines (of both sides) the same id through an open-addressing table. */
static void number_lines(struct side *a, struct side *b)
{
    size_t cap = 16;
    while (cap < 2 * (a->n + b->n) + 2)
        cap *= 2;
    struct slot {
        uint64_t hash;
        const struct line *line;
        int id;
    } *tab = xcalloc(cap, sizeof *tab);
    int next = 1;
    struct side *sides[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < sides[s]->n; i++) {
            const struct line *l = &sides[s]->lines[i];
            uint64_t h = line_hash(l);
            size_t p = (size_t)h & (cap - 1);
            while (tab[p].line && !(tab[p].hash == h && tab[p].line->len == l->len &&
                                    memcmp(tab[p].line->s, l->s, l->len) == 0))
                p = (p + 1) & (cap - 1);
            if (!tab[p].line)
                tab[p] = (struct slot){h, l, next++};
            sides[s]->ids[i] = tab[p].id;
        }
    }
    free(tab);
}

struct split {
    long x, y;
    bool found;
};

#define UNREACHED LONG_MAX

/* The first diagonal of a round: from, or the region's lowest diagonal (-m) when from lies
 * below it, with the parity of the round's diagonals (that of parity_of). */
static long first_diagonal(long from, long lowest, long parity_of)
{
    if (from >= lowest)
        return from;
    return ((lowest - parity_of) & 1) ? lowest + 1 : lowest;
}

/* Forward round d over diagonals k = x - y in [-d, d] of the n x m region at (x0, y0): the
 * furthest x each reaches with d edits (-1: none stays inside the region). With an odd delta it
 * stops where it meets the backward search of round d - 1. */
static struct split forward_step(struct lcs *c, long x0, long y0, long n, long m, long d,
                                 long delta)
{
    long *v = c->fv + c->vmid;
    const long *bv = c->bv + c->vmid;
    long kmax = d < n ? d : n;
    for (long k = first_diagonal(-d, -m, d); k <= kmax; k += 2) {
        long x = 0;
        if (d > 0) { /* neighbours outside last round's range (or the region) reach nothing */
            long lo = k - 1 >= -(d - 1) && k - 1 >= -m ? v[k - 1] : -1;
            long hi = k + 1 <= d - 1 && k + 1 <= n ? v[k + 1] : -1;
            long right = lo >= 0 && lo + 1 <= n ? lo + 1 : -1; /* from k - 1, one removal */
            long down = hi >= 0 && hi - k <= m ? hi : -1;      /* from k + 1, one addition */
            x = right > down ? right : down;
        }
        if (x < 0) {
            v[k] = -1;
            continue;
        }
        long y = x - k;
        while (x < n && y < m && c->a[x0 + x] == c->b[y0 + y])
            x++, y++, c->work++;
        c->work++;
        v[k] = x;
        if ((delta & 1) && k >= delta - (d - 1) && k <= delta + (d - 1) && bv[k] != UNREACHED &&
            bv[k] <= x)
            return (struct split){x, y, true};
    }
    return (struct split){0, 0, false};
}

/* Backward round d over diagonals [delta - d, delta + d]: the smallest x each reaches from
 * (n, m) with d edits (UNREACHED: none). With an even delta it stops where it meets the
 * forward search of the same round. */
static struct split backward_step(struct lcs *c, long x0, long y0, long n, long m, long d,
                                  long delta)
{
    long *v = c->bv + c->vmid;
    const long *fv = c->fv + c->vmid;
    long kmax = delta + d < n ? delta + d : n;
    for (long k = first_diagonal(delta - d, -m, delta + d); k <= kmax; k += 2) {
        long x = n;
        if (d > 0) {
            long lo = k - 1 >= delta - (d - 1) && k - 1 >= -m ? v[k - 1] : UNREACHED;
            long hi = k + 1 <= delta + (d - 1) && k + 1 <= n ? v[k + 1] : UNREACHED;
            long left = hi != UNREACHED && hi - 1 >= 0 ? hi - 1 : UNREACHED; /* from k + 1 */
            long up = lo != UNREACHED && lo - k >= 0 ? lo : UNREACHED;       /* from k - 1 */
            x = left < up ? left : up;
        }
        if (x == UNREACHED) {
            v[k] = UNREACHED;
            continue;
        }
        long y = x - k;
        while (x > 0 && y > 0 && c->a[x0 + x - 1] == c->b[y0 + y - 1])
            x--, y--, c->work++;
        c->work++;
        v[k] = x;
        if (!(delta & 1) && k >= -d && k <= d && fv[k] >= 0 && x <= fv[k])
            return (struct split){x, y, true};
    }
    return (struct split){0, 0, false};
}

/* A point on a shortest edit path of a[x0..x0+n) -> b[y0..y0+m) (both non-empty, first and last
 * lines differing): the end of the middle snake. found=false once the work budget is spent. */
static struct split middle_snake(struct lcs *c, long x0, long y0, long n, long m)
{
    long delta = n - m;
    for (long d = 0; d <= (n + m + 1) / 2 + 1; d++) {
        if (c->work > UDIFF_WORK_MAX)
            break;
        struct split s = forward_step(c, x0, y0, n, m, d, delta);
        if (!s.found)
            s = backward_step(c, x0, y0, n, m, d, delta);
        if (s.found) /* never a corner (the ends differ), which would not split anything */
            return (s.x == 0 && s.y == 0) || (s.x == n && s.y == m) ? (struct split){0, 0, false}
                                                                    : s;
    }
    return (struct split){0, 0, false};
}

static void mark_region(struct lcs *c, long x0, long x1, long y0, long y1)
{
    for (long i = x0; i < x1; i++)
        c->ca[i] = true;
    for (long j = y0; j < y1; j++)
        c->cb[j] = true;
}

static void compare(struct lcs *c, long x0, long x1, long y0, long y1)
{
    while (x0 < x1 && y0 < y1 && c->a[x0] == c->b[y0])
        x0++, y0++;
    while (x1 > x0 && y1 > y0 && c->a[x1 - 1] == c->b[y1 - 1])
        x1--, y1--;
    if (x0 == x1 || y0 == y1 || c->work > UDIFF_WORK_MAX) {
        mark_region(c, x0, x1, y0, y1);
        return;
    }
    struct split s = middle_snake(c, x0, y0, x1 - x0, y1 - y0);
    if (!s.found) { /* budget spent: the rest of this region is one replacement */
        mark_region(c, x0, x1, y0, y1);
        return;
    }
    compare(c, x0, x0 + s.x, y0, y0 + s.y);
    compare(c, x0 + s.x, x1, y0 + s.y, y1);
}

/* Returns true when the work budget ran out (a region was marked replaced whole). */
static bool mark_changes(struct side *a, struct side *b)
{
    long diags = (long)(a->n + b->n) + 3;
    struct lcs c = {.a = a->ids,
                    .b = b->ids,
                    .ca = a->changed,
                    .cb = b->changed,
                    .fv = xcalloc((size_t)(2 * diags + 1), sizeof(long)),
                    .bv = xcalloc((size_t)(2 * diags + 1), sizeof(long)),
                    .vmid = diags};
    compare(&c, 0, (long)a->n, 0, (long)b->n);
    free(c.fv);
    free(c.bv);
    return c.work > UDIFF_WORK_MAX;
}

static void emit_line(struct buf *out, char mark, const struct line *l)
{
    buf_append(out, &mark, 1);
    buf_append(out, l->s, l->len);
    if (l->len == 0 || l->s[l->len - 1] != '\n')
        buf_append_str(out, "\n\\ No newline at end of file\n");
}

/* "@@ -s,l" in unified form: an empty range names the line before it; ",1" is left out. */
static void emit_range(struct buf *out, char sign, size_t start, size_t len)
{
    if (len == 1)
        buf_printf(out, "%c%zu", sign, start + 1);
    else
        buf_printf(out, "%c%zu,%zu", sign, len == 0 ? start : start + 1, len);
}

/* The next run of changes at or after (*i, *j): a[i0..i1) removed, b[j0..j1) added. */
struct block {
    size_t i0, i1, j0, j1;
};

static bool next_block(const struct side *a, const struct side *b, size_t *i, size_t *j,
                       struct block *bl)
{
    while (*i < a->n || *j < b->n) {
        if ((*i < a->n && a->changed[*i]) || (*j < b->n && b->changed[*j])) {
            bl->i0 = *i, bl->j0 = *j;
            while (*i < a->n && a->changed[*i])
                (*i)++;
            while (*j < b->n && b->changed[*j])
                (*j)++;
            bl->i1 = *i, bl->j1 = *j;
            return true;
        }
        (*i)++, (*j)++; /* an unchanged line on both sides */
    }
    return false;
}

static void emit_hunk(struct buf *out, const struct side *a, const struct side *b,
                      const struct block *bl, size_t nb)
{
    size_t ctx = UDIFF_CONTEXT;
    size_t as = bl[0].i0 > ctx ? bl[0].i0 - ctx : 0;
    size_t bs = bl[0].j0 - (bl[0].i0 - as);
    size_t ae = bl[nb - 1].i1 + ctx < a->n ? bl[nb - 1].i1 + ctx : a->n;
    size_t be = bl[nb - 1].j1 + (ae - bl[nb - 1].i1);
    buf_append_str(out, "@@ ");
    emit_range(out, '-', as, ae - as);
    buf_append_str(out, " ");
    emit_range(out, '+', bs, be - bs);
    buf_append_str(out, " @@\n");
    size_t i = as;
    for (size_t k = 0; k < nb; k++) {
        for (; i < bl[k].i0; i++)
            emit_line(out, ' ', &a->lines[i]);
        for (i = bl[k].i0; i < bl[k].i1; i++)
            emit_line(out, '-', &a->lines[i]);
        for (size_t j = bl[k].j0; j < bl[k].j1; j++)
            emit_line(out, '+', &b->lines[j]);
    }
    for (; i < ae; i++)
        emit_line(out, ' ', &a->lines[i]);
}

static void emit_hunks(struct buf *out, const struct side *a, const struct side *b)
{
    size_t cap = 16, nb = 0, i = 0, j = 0;
    struct block *bl = xmalloc(cap * sizeof *bl);
    struct block cur;
    while (next_block(a, b, &i, &j, &cur)) {
        /* Blocks closer than twice the context share a hunk. */
        if (nb > 0 && cur.i0 - bl[nb - 1].i1 > 2 * UDIFF_CONTEXT) {
            emit_hunk(out, a, b, bl, nb);
            nb = 0;
        }
        if (nb == cap)
            bl = xrealloc(bl, (cap *= 2) * sizeof *bl);
        bl[nb++] = cur;
    }
    if (nb > 0)
        emit_hunk(out, a, b, bl, nb);
    free(bl);
}

static void side_free(struct side *s)
{
    free(s->lines);
    free(s->ids);
    free(s->changed);
}

static uint64_t count_changed(const struct side *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->changed[i];
    return n;
}

bool udiff_hunks_capped(const char *old, size_t old_len, const char *new_text, size_t new_len,
                        struct buf *out, uint64_t *added, uint64_t *removed)
{
    struct side a, b;
    split_lines(old, old_len, &a);
    split_lines(new_text, new_len, &b);
    number_lines(&a, &b);
    bool capped = mark_changes(&a, &b);
    emit_hunks(out, &a, &b);
    if (added)
        *added = count_changed(&b);
    if (removed)
        *removed = count_changed(&a);
    side_free(&a);
    side_free(&b);
    return capped;
}

void udiff_hunks(const char *old, size_t old_len, const char *new_text, size_t new_len,
                 struct buf *out, uint64_t *added, uint64_t *removed)
{
    udiff_hunks_capped(old, old_len, new_text, new_len, out, added, removed);
}
