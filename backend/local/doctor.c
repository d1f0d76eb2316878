/* The doctor's report: adding checks, running them, JSON. The checks are in doctor_*.c. */
#include "backend/local/doctor.h"

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/xalloc.h"

struct doctor_check *doctor_add(struct doctor_report *r, const char *name, bool required)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->checks = xrealloc(r->checks, r->cap * sizeof(*r->checks));
    }
    struct doctor_check *c = &r->checks[r->n++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->required = required;
    return c;
}

void doctor_pass(struct doctor_check *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
    va_end(ap);
    c->ok = true;
    c->fix[0] = '\0';
}

void doctor_fail(struct doctor_check *c, const char *fix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
    va_end(ap);
    c->ok = false;
    snprintf(c->fix, sizeof(c->fix), "%s", fix != NULL ? fix : "");
}

const char *doctor_user_name(char *buf, size_t size)
{
    struct passwd pw, *found = NULL;
    char tmp[4096];
    getpwuid_r(geteuid(), &pw, tmp, sizeof tmp, &found);
    snprintf(buf, size, "%s", found ? found->pw_name : "NAME");
    return buf;
}

int doctor_read_line(const char *path, char *out, size_t size)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char *got = fgets(out, (int)size, f);
    fclose(f);
    if (got == NULL)
        return -1;
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

int doctor_in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(fn(arg) & 0xff);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void doctor_run(const char *state_dir, struct doctor_report *out)
{
    memset(out, 0, sizeof(*out));
    doctor_check_kernel(out);
    doctor_check_userns(out);
    doctor_check_cgroups(out);
    doctor_check_state_dir(out, state_dir);
    doctor_check_runtime_dir(out, state_dir);
}

void doctor_report_release(struct doctor_report *r)
{
    free(r->checks);
    memset(r, 0, sizeof(*r));
}

bool doctor_report_ok(const struct doctor_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->checks[i].required && !r->checks[i].ok)
            return false;
    }
    return true;
}

const struct doctor_check *doctor_report_find(const struct doctor_report *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->checks[i].name, name) == 0)
            return &r->checks[i];
    }
    return NULL;
}

json_t *doctor_report_json(const struct doctor_report *r)
{
    json_t *checks = json_array();
    for (size_t i = 0; i < r->n; i++) {
        const struct doctor_check *c = &r->checks[i];
        json_array_append_new(checks,
                              json_pack("{s:s, s:b, s:b, s:s, s:o}", "name", c->name, "ok", c->ok,
                                        "required", c->required, "detail", c->detail, "fix",
                                        c->fix[0] ? json_string(c->fix) : json_null()));
    }
    return json_pack("{s:b, s:o}", "ok", doctor_report_ok(r), "checks", checks);
}

json_t *doctor_host_check(const char *state_dir)
{
    struct doctor_report report = {0};
    doctor_run(state_dir, &report);
    json_t *out = doctor_report_json(&report);
    if (!doctor_report_ok(&report))
        json_object_set_new(out, "note", json_string("local sandboxes cannot run on this host "
                                                     "until the failing required checks are "
                                                     "fixed: run each check's fix"));
    doctor_report_release(&report);
    return out;
}
