/* Code contexts that outlive the mcpbox process that made them. Each driver runs with a label,
 * code:<language>:<n> (n < CODE_CONTEXTS_MAX) or code:<language>:default, and a context's id is
 * its driver's command id ("ctx-" and the same hex), so a process that does not know a context
 * finds it (command_get by id, command_find by label), attaches from the start of its log and
 * replays the frames through its own parser: the hello, the execution count and a run in flight
 * (another process's, by its tag) come back as they were, and the driver's stderr stays apart
 * (each replayed byte comes with its stream). docs/local-backend.md, "Code contexts". */
#define LOG_MODULE "code"
#include "backend/code_interp-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/xalloc.h"

struct code_prep {
    struct backend *be;
    char *sandbox_id;
    int pending; /* lookups and replays not settled, plus one while they are being issued */
    int async;   /* lookups and replays issued that answer later: then is called later */
    code_prep_fn *then;
    void *arg;
};

struct lookup {
    struct code_prep *p;
};

/* Drivers this process killed: their commands may still show as running for a moment. */
static char deleted[32][64];
static unsigned ndeleted;

void code_adopt_deleted(const char *cmd_id)
{
    snprintf(deleted[ndeleted++ % 32], sizeof(deleted[0]), "%s", cmd_id);
}

static bool was_deleted(const char *cmd_id)
{
    for (unsigned i = 0; i < 32 && i < ndeleted; i++)
        if (!strcmp(deleted[i], cmd_id))
            return true;
    return false;
}

void code_label(const struct code_lang *lang, int slot, char *out, size_t size)
{
    if (slot < 0)
        snprintf(out, size, "code:%s:default", lang->name);
    else
        snprintf(out, size, "code:%s:%d", lang->name, slot);
}

bool code_cmd_of_ctx(const char *ctx_id, char *out, size_t size)
{
    size_t n = ctx_id && !strncmp(ctx_id, "ctx-", 4) ? strlen(ctx_id + 4) : 0;
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdef", ctx_id[4 + i]))
            return false;
    snprintf(out, size, "cmd-%s", ctx_id + 4);
    return true;
}

void code_ctx_of_cmd(const char *cmd_id, char *out, size_t size)
{
    snprintf(out, size, "ctx-%s", !strncmp(cmd_id, "cmd-", 4) ? cmd_id + 4 : cmd_id);
}

/* code:<language>:<n|default> -> the language and n (-1 for default); false for another label. */
static bool parse_label(const char *label, const struct code_lang **lang, int *slot)
{
    char name[24], which[16];
    struct mcp_error err;
    if (!label || sscanf(label, "code:%23[a-z]:%15[a-z0-9]", name, which) != 2)
        return false;
    if (strcmp(name, "python") && strcmp(name, "bash") && strcmp(name, "javascript"))
        return false;
    *lang = code_lang_find(name, &err);
    char *end;
    long n = strtol(which, &end, 10);
    *slot = !strcmp(which, "default") ? -1 : (int)n;
    return *lang && (*slot == -1 ? true : *end == '\0' && n >= 0 && n < CODE_CONTEXTS_MAX);
}

/* ---- the preparation's count ------------------------------------------------------------------ */

static void hold(struct code_prep *p)
{
    p->pending++;
    p->async++;
}

static void release(struct code_prep *p)
{
    if (--p->pending > 0)
        return;
    p->then(p->arg, p->be, p->sandbox_id);
    free(p->sandbox_id);
    free(p);
}

static void wait_for(struct code_ctx *c, struct code_prep *p)
{
    if (c->nwaiters >= (int)(sizeof(c->waiters) / sizeof(c->waiters[0])))
        return; /* many at once: this one goes on without waiting */
    c->waiters[c->nwaiters++] = p;
    hold(p);
}

void code_adopt_settled(struct code_ctx *c)
{
    struct code_prep *waiting[sizeof(c->waiters) / sizeof(c->waiters[0])];
    int n = c->nwaiters;
    memcpy(waiting, c->waiters, sizeof(waiting));
    c->nwaiters = 0;
    for (int i = 0; i < n; i++)
        release(waiting[i]);
}

/* ---- taking a driver up ----------------------------------------------------------------------- */

/* A context whose driver has ended: listed as dead with why, never a fresh state in silence. */
static void adopt_dead(struct code_ctx *c, json_t *status)
{
    char why[200];
    code_death_reason(status, why, sizeof(why));
    c->state = CODE_DEAD;
    snprintf(c->died, sizeof(c->died), "%s", why);
    c->refs = 1; /* the list's: there is no watch */
    code_ctx_link(c);
}

/* Attaches to the driver from the start of its log; p waits until the replay has caught up. */
static void adopt_live(struct code_ctx *c, json_t *status, struct code_prep *p)
{
    struct mcp_error err;
    c->adopt_left = (uint64_t)json_integer_value(json_object_get(status, "total_bytes"));
    c->adopting = c->adopt_left > 0; /* nothing logged yet: the hello is still to come */
    c->state = CODE_STARTING;
    struct exec_observer obs = code_ctx_observer(c);
    if (c->be->ops->command_attach(c->be, c->sandbox_id, c->cmd_id, 0, &obs, &c->h, &err) < 0) {
        c->adopting = false;
        c->state = CODE_DEAD;
        snprintf(c->died, sizeof(c->died), "could not be taken up (%s)", err.msg);
        c->refs = 1;
    }
    code_ctx_link(c);
    if (c->adopting)
        wait_for(c, p);
}

/* status: command_get's or command_find's object for a command that may be a driver. */
static void adopt_status(struct code_prep *p, json_t *status)
{
    const struct code_lang *lang;
    int slot;
    const char *cmd_id = json_string_value(json_object_get(status, "command_id"));
    if (!cmd_id || !parse_label(json_string_value(json_object_get(status, "label")), &lang, &slot))
        return;
    const char *st = json_string_value(json_object_get(status, "status"));
    /* killed by mcpbox (deleted, or killed after an interrupt it ignored): that process said
     * so; to any other the context is simply not there */
    if (was_deleted(cmd_id) || (st && !strcmp(st, "killed")))
        return;
    struct code_ctx *known = code_ctx_by_cmd(p->be, p->sandbox_id, cmd_id);
    if (known) {
        if (known->adopting)
            wait_for(known, p);
        return;
    }
    struct code_ctx *c = code_ctx_new(p->be, p->sandbox_id, lang, slot);
    snprintf(c->cmd_id, sizeof(c->cmd_id), "%s", cmd_id);
    code_ctx_of_cmd(cmd_id, c->id, sizeof(c->id));
    if (st && !strcmp(st, "running"))
        adopt_live(c, status, p);
    else
        adopt_dead(c, status);
}

static void on_lookup(void *arg, json_t *result, const struct mcp_error *err)
{
    struct lookup *l = arg;
    if (err == NULL)
        adopt_status(l->p, result);
    else if (err->code != MCP_ERR_NOT_FOUND)
        log_info("looking for code contexts: %s", err->msg);
    release(l->p);
    free(l);
}

/* ---- what to look for ------------------------------------------------------------------------- */

static void look_by_id(struct code_prep *p, const char *id)
{
    struct code_ctx *c = code_ctx_by_id(p->be, p->sandbox_id, id);
    char cmd[64];
    struct mcp_error err;
    if (c) {
        if (c->adopting)
            wait_for(c, p);
        return;
    }
    if (!code_cmd_of_ctx(id, cmd, sizeof(cmd)))
        return; /* not an id a context can have: the operation says none is found */
    struct lookup *l = xcalloc(1, sizeof(*l));
    l->p = p;
    hold(p);
    if (p->be->ops->command_get(p->be, p->sandbox_id, cmd, 0, 1, on_lookup, l, &err) < 0) {
        p->pending--, p->async--; /* failed at once (no such sandbox): the operation says so */
        free(l);
    }
}

static void look_label(struct code_prep *p, const struct code_lang *lang, int slot)
{
    struct code_ctx *dead,
        *c = slot < 0 ? code_ctx_default(p->be, p->sandbox_id, lang, &dead) : NULL;
    char label[BACKEND_LABEL_MAX + 1];
    struct mcp_error err;
    if (c || (slot < 0 && dead)) { /* known here (a dead one says so once, then starts afresh) */
        if (c && c->adopting)
            wait_for(c, p);
        return;
    }
    code_label(lang, slot, label, sizeof(label));
    struct lookup *l = xcalloc(1, sizeof(*l));
    l->p = p;
    hold(p);
    if (p->be->ops->command_find(p->be, p->sandbox_id, label, on_lookup, l, &err) < 0) {
        p->pending--, p->async--; /* failed at once (no such sandbox): the operation says so */
        free(l);
    }
}

static void look_all(struct code_prep *p, const struct code_lang *only)
{
    static const char *const names[] = {"python", "bash", "javascript"};
    struct mcp_error err;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct code_lang *lang = code_lang_find(names[i], &err);
        if (only && lang != only)
            continue;
        look_label(p, lang, -1);
        for (int s = 0; s < CODE_CONTEXTS_MAX; s++)
            look_label(p, lang, s);
    }
}

bool code_prep(struct backend *be, const char *sandbox_id, const char *context_id,
               const struct code_lang *lang, bool all, code_prep_fn *then, void *arg)
{
    struct code_prep *p = xcalloc(1, sizeof(*p));
    p->be = be, p->then = then, p->arg = arg, p->pending = 1;
    p->sandbox_id = xstrdup(sandbox_id);
    if (context_id)
        look_by_id(p, context_id);
    else if (all)
        look_all(p, lang);
    else if (lang)
        look_label(p, lang, -1);
    if (p->async == 0) {
        free(p->sandbox_id);
        free(p);
        return false;
    }
    release(p); /* the issuing's own count: then comes when the rest settle */
    return true;
}
