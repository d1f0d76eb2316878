/* The tools' side of approvals (issue 38): what each crossing asks (tools-internal.h, "approvals";
 * the asking itself is mcp/approval.c). A gate holds up to two questions, asked one after the
 * other; the first refusal ends it. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <stdlib.h>
#include <string.h>

#include "backend/secrets.h"
#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "mcp/approval.h"
#include "server/config.h"
#include "server/context.h"

#define GATE_QUESTIONS 4             /* egress, rw mounts, room for secrets and volumes */
#define GATE_LIST_MAX 12             /* names listed on the form; the rest counted */
#define GATE_REVIEW_BYTES (1u << 20) /* the diff read to count changed lines */

struct gate {
    struct tool_job *job;
    tools_gate_fn *then;
    void *arg;
    struct approval_question q[GATE_QUESTIONS];
    char *what[GATE_QUESTIONS], *details[GATE_QUESTIONS];
    json_t *subjects[GATE_QUESTIONS];
    int n, step;
    bool running, waiting, refused;
    bool answered;                /* the call was answered already (an InputRequiredResult) */
    struct egress_policy *policy; /* update_sandbox's new policy, until its question is made */
    json_t *secrets;              /* update_sandbox's secrets, until their question is made */
    struct mcp_error err;
};

static struct gate *gate_new(struct tool_job *job, tools_gate_fn *then, void *arg)
{
    struct gate *g = xcalloc(1, sizeof *g);
    g->job = job, g->then = then, g->arg = arg;
    return g;
}

static void gate_free(struct gate *g)
{
    for (int i = 0; i < GATE_QUESTIONS; i++) {
        free(g->what[i]), free(g->details[i]);
        json_decref(g->subjects[i]);
    }
    egress_policy_unref(g->policy);
    json_decref(g->secrets);
    free(g);
}

/* Adds a question (what, details taken; subjects stolen, may be NULL). */
static void gate_add(struct gate *g, enum approval_kind kind, char *what, char *details,
                     json_t *subjects)
{
    int i = g->n++;
    g->what[i] = what, g->details[i] = details, g->subjects[i] = subjects;
    g->q[i] = (struct approval_question){.kind = kind,
                                         .sandbox_id = g->job->sandbox_id,
                                         .what = what,
                                         .details = details,
                                         .subjects = subjects};
}

static void gate_finish(struct gate *g)
{
    tools_gate_fn *then = g->then;
    void *arg = g->arg;
    struct mcp_error err = g->err;
    bool allowed = !g->refused && !g->answered, answered = g->answered;
    gate_free(g);
    then(arg, allowed, allowed || answered ? NULL : &err);
}

static void gate_next(struct gate *g);

static void gate_answered(void *arg, bool allowed, const struct mcp_error *refusal)
{
    struct gate *g = arg;
    g->waiting = false;
    if (!allowed)
        g->refused = true, g->err = *refusal;
    if (!g->running) /* answered later, on the loop: go on from here */
        gate_next(g);
}

/* Asks the questions left; settled ones (settings, remembered, 2026-07-28 answers) answer at
 * once, inside approval_ask. */
static void gate_next(struct gate *g)
{
    g->running = true;
    while (!g->refused && g->step < g->n) {
        g->waiting = true;
        if (approval_ask(g->job->call, &g->q[g->step++], gate_answered, g) == 1) {
            g->answered = true;
            break;
        }
        if (g->waiting) {
            g->running = false;
            return;
        }
    }
    g->running = false;
    gate_finish(g);
}

/* "a, b, c and 4 more" of an array of strings. */
static char *list_text(json_t *names)
{
    struct buf b;
    size_t i;
    json_t *n;
    buf_init(&b, SIZE_MAX);
    json_array_foreach(names, i, n)
    {
        if (i == GATE_LIST_MAX) {
            buf_printf(&b, "\n  ... and %zu more", json_array_size(names) - i);
            break;
        }
        cleanup_free char *safe = approval_safe_text(json_string_value(n));
        buf_printf(&b, "\n  %s", safe);
    }
    char *out = xstrdup(buf_cstr(&b));
    buf_release(&b);
    return out;
}

static const struct approval_settings *settings(const struct tool_job *job)
{
    return approval_settings_of(job->call);
}

/* ---- egress: create_sandbox's network / network_policy, update_sandbox's network_policy --- */

/* Whether in_force (a sandbox's network_policy in egress_policy_to_json's form, or NULL) already
 * lets the sandbox reach target: then allowing it again widens nothing. */
static bool in_force_allows(json_t *in_force, const char *target)
{
    const char *def = json_string_value(json_object_get(in_force, "default_action"));
    size_t i;
    json_t *r;
    if (def && strcmp(def, "allow") == 0)
        return true;
    json_array_foreach(json_object_get(in_force, "egress"), i, r)
    {
        const char *action = json_string_value(json_object_get(r, "action"));
        const char *t = json_string_value(json_object_get(r, "target"));
        if (action && t && strcmp(action, "allow") == 0 && strcmp(t, target) == 0 &&
            json_object_get(r, "ports") == NULL)
            return true;
    }
    return false;
}

static void gate_add_egress(struct gate *g, const struct egress_policy *p, bool network,
                            json_t *in_force)
{
    json_t *beyond = approval_egress_beyond(settings(g->job), p, network);
    for (size_t i = json_array_size(beyond); i-- > 0;)
        if (in_force_allows(in_force, json_string_value(json_array_get(beyond, i))))
            json_array_remove(beyond, i);
    if (json_array_size(beyond) == 0) {
        json_decref(beyond);
        return;
    }
    bool all = strcmp(json_string_value(json_array_get(beyond, 0)), "*") == 0;
    cleanup_free char *list = list_text(beyond);
    char *what = all ? xstrdup("reach any address on the internet")
                     : xasprintf("reach %zu name%s you have not allowed", json_array_size(beyond),
                                 json_array_size(beyond) == 1 ? "" : "s");
    char *details =
        xasprintf("%s:%s", all ? "Egress" : "Names beyond your allowed list",
                  all ? "\n  everything (network: true, or default_action allow)" : list);
    gate_add(g, APPROVAL_EGRESS, what, details, beyond);
}

/* ---- rw mounts ------------------------------------------------------------------------------ */

static void gate_add_rw(struct gate *g, json_t *mounts)
{
    json_t *sources = json_array(), *lines = json_array(), *m;
    size_t i;
    json_array_foreach(mounts, i, m)
    {
        const char *mode = json_string_value(json_object_get(m, "mode"));
        const char *src = json_string_value(json_object_get(m, "source"));
        if (mode == NULL || strcmp(mode, "rw") != 0 || src == NULL)
            continue;
        json_array_append_new(sources, json_string(src));
        json_array_append_new(
            lines, json_sprintf("%s -> %s", src, json_string_value(json_object_get(m, "target"))));
    }
    if (json_array_size(sources) == 0) {
        json_decref(sources), json_decref(lines);
        return;
    }
    cleanup_free char *list = list_text(lines);
    json_decref(lines);
    gate_add(g, APPROVAL_RW_MOUNT,
             xasprintf("write %zu host director%s directly (rw mount)", json_array_size(sources),
                       json_array_size(sources) == 1 ? "y" : "ies"),
             xasprintf("Host paths the sandbox may change:%s", list), sources);
}

/* ---- secrets: a credential bound to a sandbox is sent where its definition says --------- */

/* "\n  NAME -> host, host" per name, from the person's definitions; NULL when a name is not
 * defined (nothing to ask: the backend refuses it, listing the names there are). */
static char *secrets_lines(const struct tool_job *job, json_t *names)
{
    const char *dir = job->ctx->store ? store_state_dir(job->ctx->store) : NULL;
    struct mcp_error err;
    json_auto_t *defs = dir ? secrets_load(dir, &err) : NULL;
    json_t *n, *h;
    struct buf b;
    size_t i, j;
    buf_init(&b, SIZE_MAX);
    json_array_foreach(names, i, n)
    {
        json_t *hosts = json_object_get(json_object_get(defs, json_string_value(n)), "hosts");
        if (!json_is_array(hosts)) {
            buf_release(&b);
            return NULL;
        }
        cleanup_free char *name = approval_safe_text(json_string_value(n));
        buf_printf(&b, "\n  %s ->", name);
        json_array_foreach(hosts, j, h)
        {
            cleanup_free char *host = approval_safe_text(json_string_value(h));
            buf_printf(&b, "%s %s", j ? "," : "", host);
        }
    }
    char *out = xstrdup(buf_cstr(&b));
    buf_release(&b);
    return out;
}

/* " A, B and 3 more" of the names, on one line (for the question's what). */
static char *names_inline(json_t *names)
{
    struct buf b;
    size_t i;
    json_t *n;
    buf_init(&b, SIZE_MAX);
    json_array_foreach(names, i, n)
    {
        if (i == GATE_LIST_MAX) {
            buf_printf(&b, " and %zu more", json_array_size(names) - i);
            break;
        }
        cleanup_free char *safe = approval_safe_text(json_string_value(n));
        buf_printf(&b, "%s %s", i ? "," : "", safe);
    }
    char *out = xstrdup(buf_cstr(&b));
    buf_release(&b);
    return out;
}

/* One question for every secret a call binds: their names in what, their hosts in details. */
static void gate_add_secrets(struct gate *g, json_t *names)
{
    if (!json_is_array(names) || json_array_size(names) == 0)
        return;
    char *lines = secrets_lines(g->job, names);
    if (lines == NULL)
        return;
    cleanup_free char *list = names_inline(names);
    size_t n = json_array_size(names);
    gate_add(g, APPROVAL_SECRET,
             xasprintf("send your secret%s%s from this sandbox", n == 1 ? "" : "s", list),
             xasprintf("Secrets (their values stay outside the sandbox), and where they go:%s",
                       lines),
             json_copy(names));
    free(lines);
}

void tools_gate_create(struct tool_job *job, const struct sandbox_spec *spec, tools_gate_fn *then,
                       void *arg)
{
    struct gate *g = gate_new(job, then, arg);
    gate_add_egress(g, spec->network_policy, spec->network, NULL);
    gate_add_rw(g, spec->mounts);
    gate_add_secrets(g, spec->secrets);
    gate_next(g);
}

/* The sandbox as it is: names its policy allows already are not asked again. Without its
 * policy (the backend failed to say) every name beyond the person's list is asked. */
static void egress_in_force(void *arg, json_t *info, const struct mcp_error *err)
{
    struct gate *g = arg;
    json_t *in_force = json_object_get(info, "network_policy");
    if (g->policy)
        gate_add_egress(g, g->policy, false,
                        err == NULL && json_is_object(in_force) ? in_force : NULL);
    gate_add_secrets(g, g->secrets);
    gate_next(g);
}

void tools_gate_update(struct tool_job *job, struct egress_policy *policy, json_t *secrets,
                       tools_gate_fn *then, void *arg)
{
    struct gate *g = gate_new(job, then, arg);
    struct mcp_error err;
    g->policy = policy ? egress_policy_ref(policy) : NULL;
    g->secrets = json_incref(secrets);
    if (policy == NULL || settings(job)->mode[APPROVAL_EGRESS] == APPROVAL_MODE_ALLOW ||
        job->be->ops->get(job->be, job->sandbox_id, egress_in_force, g, &err) < 0)
        egress_in_force(g, NULL, &err);
}

/* ---- apply_changes: the files, the lines, what the host changed meanwhile ----------------- */

/* Lines added and removed in a unified diff (headers not counted). */
static void count_lines(const char *diff, long *added, long *removed)
{
    for (const char *l = diff; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "+++ ", 4) == 0 || strncmp(l, "--- ", 4) == 0)
            continue;
        *added += l[0] == '+';
        *removed += l[0] == '-';
    }
}

/* Whether every change lands below the person's --approve-apply-dir. */
static bool all_in_apply_dir(const struct tool_job *job, json_t *changes)
{
    size_t i;
    json_t *c;
    json_array_foreach(changes, i, c)
    {
        if (!approval_apply_dir_covers(settings(job),
                                       json_string_value(json_object_get(c, "host_path"))))
            return false;
    }
    return json_array_size(changes) > 0;
}

static void gate_add_apply(struct gate *g, json_t *review)
{
    json_t *changes = json_object_get(review, "changes"), *c;
    json_t *files = json_array(), *conflicts = json_array();
    size_t i;
    long added = 0, removed = 0;
    json_array_foreach(changes, i, c)
    {
        json_t *hp = json_object_get(c, "host_path");
        json_array_append_new(files, json_sprintf("%s (%s)", json_string_value(hp),
                                                  json_string_value(json_object_get(c, "change"))));
        if (json_is_true(json_object_get(c, "conflict")))
            json_array_append(conflicts, hp);
    }
    count_lines(json_string_value(json_object_get(review, "diff")), &added, &removed);
    cleanup_free char *flist = list_text(files), *clist = list_text(conflicts);
    json_int_t total = json_integer_value(json_object_get(review, "changes_total"));
    gate_add(g, APPROVAL_APPLY,
             xasprintf("write %lld change%s into your files (+%ld -%ld lines%s)", (long long)total,
                       total == 1 ? "" : "s", added, removed,
                       json_is_true(json_object_get(review, "truncated")) ? " or more" : ""),
             xasprintf("Files:%s%s%s", flist,
                       json_array_size(conflicts) ? "\nChanged on the host meanwhile (kept "
                                                    "unless overwrite):"
                                                  : "",
                       json_array_size(conflicts) ? clist : ""),
             NULL);
    json_decref(files), json_decref(conflicts);
}

/* The review came: nothing to write, or all within the person's apply directory, goes on
 * without a question. An apply without a token (--apply-unreviewed) takes the review the
 * person saw, so it writes nothing they were not shown. */
static void apply_reviewed(void *arg, json_t *result, const struct mcp_error *err)
{
    struct gate *g = arg;
    struct tool_job *job = g->job;
    json_t *changes = json_object_get(result, "changes");
    if (err != NULL || json_array_size(changes) == 0 || all_in_apply_dir(job, changes)) {
        gate_next(g); /* nothing to ask: the apply reports its own errors */
        return;
    }
    const char *token = json_string_value(json_object_get(result, "review"));
    if (json_object_get(job->args, "review") == NULL && token)
        json_object_set_new(job->args, "review", json_string(token));
    gate_add_apply(g, result);
    gate_next(g);
}

void tools_gate_apply(struct tool_job *job, json_t *paths, tools_gate_fn *then, void *arg)
{
    struct gate *g = gate_new(job, then, arg);
    struct mcp_error err;
    bool tokenless = json_object_get(job->args, "review") == NULL;
    /* Allowed by the settings, or an apply that will be refused for want of a review token:
     * no question. */
    if (settings(job)->mode[APPROVAL_APPLY] == APPROVAL_MODE_ALLOW ||
        (tokenless && !(job->ctx->config && job->ctx->config->apply_unreviewed))) {
        gate_next(g);
        return;
    }
    json_t *rargs = json_pack("{s:I}", "max_bytes", (json_int_t)GATE_REVIEW_BYTES);
    if (paths)
        json_object_set(rargs, "paths", paths);
    int rc =
        job->be->ops->workspace(job->be, job->sandbox_id, "review", rargs, apply_reviewed, g, &err);
    json_decref(rargs);
    if (rc < 0)
        gate_next(g); /* no review here: the apply itself will say why */
}
