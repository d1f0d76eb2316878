/* The escape and hardening battery (docs/internals/isolation-facts.md §8): probes run inside a
 * sandbox, each
 * printing PASS (the sandbox stopped it) or FAIL (it got through), with the errno it saw.
 *
 * Every probe is harmless if it unexpectedly succeeds (§8, the safety rule): it only mounts on,
 * creates in or
 * chroots to a private scratch directory, undoes what it did at once, writes nothing to /proc or
 * /sys (it only opens for writing, or asks access(2)), re-sets values to what they already were,
 * and runs risky calls (unshare, chroot, personality, ptrace, foreign-ABI syscalls) in a forked
 * child that exits right away. */
#ifndef MCPBOX_BATTERY_H
#define MCPBOX_BATTERY_H

#include <stdbool.h>
#include <stddef.h>

#define BATTERY_DETAIL_MAX 200

enum battery_status { BATTERY_PASS, BATTERY_FAIL, BATTERY_SKIP };

struct battery_probe {
    enum battery_status status;
    int err; /* errno observed (0 if the call succeeded or none applies) */
    char detail[BATTERY_DETAIL_MAX];
};

typedef void battery_fn(struct battery_probe *p);

struct battery_check {
    int num;        /* the row in docs/internals/isolation-facts.md §8 (52+ are extra checks) */
    const char *id;
    battery_fn *fn;
    const char *expect; /* what a sandbox should do, for the output */
};

/* The scratch directory every mount/create probe targets (mkdtemp'd by main). */
extern const char *battery_scratch;

void battery_pass(struct battery_probe *p, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void battery_fail(struct battery_probe *p, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void battery_skip(struct battery_probe *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* rc < 0 with errno one of the allowed (0-terminated list): PASS; anything else: FAIL. */
void battery_expect_errno(struct battery_probe *p, long rc, int err, const int *allowed);
/* Runs fn in a forked child; returns its wait status (or -1). The child's exit code should be
 * 0 when the probed call succeeded, else the errno. */
int battery_in_child(int (*fn)(void *), void *arg);
/* Interprets a battery_in_child status for "the call must fail with one of allowed". */
void battery_expect_child(struct battery_probe *p, int status, const int *allowed);
/* First line starting with key in /proc/self/status, value part; -1 if absent. */
int battery_status_field(const char *key, char *out, size_t size);

/* The check tables, one per area; each ends with {0}. */
extern const struct battery_check battery_checks_priv[];
extern const struct battery_check battery_checks_sys[];
extern const struct battery_check battery_checks_fs[];
extern const struct battery_check battery_checks_net[];

#endif
