/* Host checks: can this machine run local sandboxes, and if not, what exactly to do about it.
 *
 * Used by `mcpbox doctor` and by the diagnose tooling. Every check really probes the kernel
 * (it forks a child to try unshare, seccomp, a uid map, a cgroup mkdir) rather than guessing from
 * version numbers, and gives the exact command that fixes a failure. Checks never change the
 * host: probes run in throw-away children and scratch cgroups that are removed at once. */
#ifndef MCPBOX_LOCAL_DOCTOR_H
#define MCPBOX_LOCAL_DOCTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define DOCTOR_NAME_MAX 40
#define DOCTOR_TEXT_MAX 640

struct doctor_check {
    char name[DOCTOR_NAME_MAX];
    bool ok;
    bool required; /* false: only some features need it (images, egress) or it is about speed */
    char detail[DOCTOR_TEXT_MAX];
    char fix[DOCTOR_TEXT_MAX]; /* the command(s) that fix a failure; empty when ok */
};

struct doctor_report {
    struct doctor_check *checks; /* owned */
    size_t n, cap;
};

/* Runs every check. state_dir is where mcpbox keeps its state (it is created if missing). */
void doctor_run(const char *state_dir, struct doctor_report *out);
void doctor_report_release(struct doctor_report *r);
/* True when every required check passed. */
bool doctor_report_ok(const struct doctor_report *r);
/* {ok, checks:[{name, ok, required, detail, fix|null}]} (new reference). */
json_t *doctor_report_json(const struct doctor_report *r);
/* The local backend's host_check op: every check as {ok, checks, note?} (note when a required
 * check failed). Blocks. */
json_t *doctor_host_check(const char *state_dir);
/* The named check, or NULL. */
const struct doctor_check *doctor_report_find(const struct doctor_report *r, const char *name);

/* "v1", "hybrid", "v2" or "none" for a mountinfo file (/proc/self/mountinfo for this host). */
const char *doctor_cgroup_layout(const char *mountinfo_path);

/* ---- used by the check files (doctor_*.c) ------------------------------------------------- */

struct doctor_check *doctor_add(struct doctor_report *r, const char *name, bool required);
void doctor_pass(struct doctor_check *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void doctor_fail(struct doctor_check *c, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* First line of a /proc or /sys file without the newline; -1 if unreadable. */
int doctor_read_line(const char *path, char *out, size_t size);
/* The name of the user running the checks, for the fixes they print ("NAME" if unknown). */
const char *doctor_user_name(char *buf, size_t size);
/* Runs fn in a forked child; returns its exit status (0..255), or -1 if it died or fork failed.
 * The child reports an errno through its exit status. */
int doctor_in_child(int (*fn)(void *), void *arg);

void doctor_check_userns(struct doctor_report *r);
void doctor_check_cgroups(struct doctor_report *r);
void doctor_check_kernel(struct doctor_report *r);
void doctor_check_state_dir(struct doctor_report *r, const char *state_dir);
/* Where the sandboxes' runtime files go (backend/local/runtime_dir.h); reports, creates nothing. */
void doctor_check_runtime_dir(struct doctor_report *r, const char *state_dir);

#endif
