#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

static const char *const state_names[] = {
    [SANDBOX_CREATING] = "creating", [SANDBOX_RUNNING] = "running",
    [SANDBOX_PAUSED] = "paused",     [SANDBOX_STOPPED] = "stopped",
    [SANDBOX_EXPIRED] = "expired",   [SANDBOX_FAILED] = "failed",
    [SANDBOX_DESTROYED] = "destroyed",
};

const char *sandbox_state_name(enum sandbox_state state)
{
    if ((unsigned)state < sizeof(state_names) / sizeof(state_names[0]))
        return state_names[state];
    return "unknown";
}

int sandbox_state_parse(const char *name, enum sandbox_state *out)
{
    for (size_t i = 0; i < sizeof(state_names) / sizeof(state_names[0]); i++) {
        if (strcmp(name, state_names[i]) == 0) {
            *out = (enum sandbox_state)i;
            return 0;
        }
    }
    return -1;
}

int backend_check_env(const json_t *env, const char *what, struct mcp_error *err)
{
    const char *k;
    json_t *v;
    size_t total = 0;
    json_object_foreach((json_t *)env, k, v) {
        size_t n = strlen(k) + 1 + json_string_length(v); /* NAME=value */
        if (n > BACKEND_ENV_VAR_MAX)
            return mcp_error_set(err, MCP_ERR_INVALID, 0,
                                 "%s.%s is %zu bytes as NAME=value; Linux passes at most %d "
                                 "bytes per variable (MAX_ARG_STRLEN), so every command would fail "
                                 "with \"Argument list too long\": write the value to a file "
                                 "(write_file) and read it from there",
                                 what, k, n, BACKEND_ENV_VAR_MAX);
        total += n + 1 + sizeof(char *); /* the NUL and the envp pointer count against ARG_MAX */
    }
    if (total > BACKEND_ENV_TOTAL_MAX)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s adds up to %zu bytes; at most %d bytes (half of Linux's usual "
                             "2 MiB ARG_MAX, the rest is left for each command) or every command "
                             "would fail with \"Argument list too long\": write large values to "
                             "files (write_file) and read them from there",
                             what, total, BACKEND_ENV_TOTAL_MAX);
    return 0;
}

/* ---- default slots ------------------------------------------------------------------------- */

static int unsupported(const struct backend *be, const char *what, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "the %s backend has no %s", be->ops->name,
                         what);
}

int backend_def_session_run(struct backend *be, const char *sandbox_id,
                            const struct shell_session_request *req,
                            const struct exec_observer *obs, struct shell_session_result *res,
                            struct exec_handle **out, struct mcp_error *err)
{
    return unsupported(be, "sessions of its own (mcpbox runs them in the sandbox's shell)", err);
}

int backend_def_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                         backend_cb *cb, void *arg, struct mcp_error *err)
{
    return unsupported(be, "snapshots", err);
}

int backend_def_volume(struct backend *be, const char *owner, const char *action, json_t *args,
                       backend_cb *cb, void *arg, struct mcp_error *err)
{
    return unsupported(be, "named volumes", err);
}

int backend_def_workspace(struct backend *be, const char *sandbox_id, const char *action,
                          json_t *args, backend_cb *cb, void *arg, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                         "the %s backend has no copy-on-write mounts to review or apply; copy "
                         "results out with read_file (or an archive made with run_command, read "
                         "in ranges), or work on host files in a local sandbox (create_sandbox "
                         "backend \"local\" with mounts, then review_changes and apply_changes)",
                         be->ops->name);
}

int backend_def_set_network_policy(struct backend *be, const char *sandbox_id,
                                   const struct egress_policy *policy, backend_cb *cb, void *arg,
                                   struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                         "the %s backend has no egress policies; create a sandbox with network "
                         "true or false instead",
                         be->ops->name);
}

int backend_def_bind_secrets(struct backend *be, const char *sandbox_id, json_t *names,
                             backend_cb *cb, void *arg, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                         "the %s backend cannot inject secrets; bind them to a sandbox on the "
                         "local backend (create_sandbox backend \"local\" with secrets)",
                         be->ops->name);
}

int backend_def_credential_vault(struct backend *be, const char *sandbox_id, const char *action,
                                 json_t *body, backend_cb *cb, void *arg, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                         "the %s backend has no credential vault; use a local sandbox created "
                         "with credentialProxy enabled",
                         be->ops->name);
}

int backend_def_metrics(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                        struct mcp_error *err)
{
    return unsupported(be, "live metrics", err);
}

int backend_def_code_context(struct backend *be, const char *sandbox_id, const char *action,
                             json_t *args, backend_cb *cb, void *arg, struct mcp_error *err)
{
    return unsupported(be, "code interpreter contexts", err);
}

int backend_def_code_run(struct backend *be, const char *sandbox_id,
                         const struct code_request *req, const struct exec_observer *obs,
                         struct mcp_error *err)
{
    return unsupported(be, "code interpreter contexts", err);
}

int backend_def_command_input(struct backend *be, const char *sandbox_id, const char *command_id,
                              const void *data, size_t len, bool eof, backend_cb *cb, void *arg,
                              struct mcp_error *err)
{
    return unsupported(be, "interactive commands (input to a running command)", err);
}

int backend_def_command_resize(struct backend *be, const char *sandbox_id, const char *command_id,
                               unsigned rows, unsigned cols, backend_cb *cb, void *arg,
                               struct mcp_error *err)
{
    return unsupported(be, "terminals (pty commands) to resize", err);
}

int backend_def_command_attach(struct backend *be, const char *sandbox_id, const char *command_id,
                               uint64_t offset, const struct exec_observer *obs,
                               struct exec_handle **out, struct mcp_error *err)
{
    return unsupported(be, "attaching to a command another process started", err);
}

int backend_def_command_find(struct backend *be, const char *sandbox_id, const char *label,
                             backend_cb *cb, void *arg, struct mcp_error *err)
{
    return unsupported(be, "commands found by label", err);
}

json_t *backend_def_host_check(const char *state_dir)
{
    return NULL;
}

bool backend_has(const struct backend_ops *ops, enum backend_optional what)
{
    switch (what) {
    case BACKEND_SNAPSHOTS:
        return ops->snapshot != backend_def_snapshot;
    case BACKEND_METRICS:
        return ops->metrics != backend_def_metrics;
    case BACKEND_CODE:
        return ops->code_run != backend_def_code_run;
    }
    return false;
}

/* ---- backend_defer ----------------------------------------------------------------------------- */

struct deferred {
    uv_timer_t timer;
    backend_cb *cb;
    void *arg;
    json_t *result; /* own reference */
    struct mcp_error err;
    bool failed;
};

static void deferred_closed(uv_handle_t *h)
{
    struct deferred *d = h->data;
    json_decref(d->result);
    free(d);
}

static void deferred_fire(uv_timer_t *t)
{
    struct deferred *d = t->data;
    d->cb(d->arg, d->failed ? NULL : d->result, d->failed ? &d->err : NULL);
    uv_close((uv_handle_t *)&d->timer, deferred_closed);
}

void backend_defer(struct backend *be, backend_cb *cb, void *arg, json_t *result,
                   const struct mcp_error *err)
{
    struct deferred *d = xcalloc(1, sizeof(*d));
    d->cb = cb;
    d->arg = arg;
    d->result = json_incref(result);
    d->failed = err != NULL;
    if (err != NULL)
        mcp_error_copy(&d->err, err);
    uv_timer_init(be->loop, &d->timer);
    d->timer.data = d;
    uv_timer_start(&d->timer, deferred_fire, 0, 0);
}

/* ---- the set --------------------------------------------------------------------------------- */

/* Every slot filled: what lets callers call any operation without a test. */
static bool ops_complete(const struct backend_ops *o)
{
    return o->name && o->id_prefix && o->enable_hint && o->shutdown && o->free && o->create &&
           o->destroy && o->list && o->get && o->renew && o->pause && o->resume && o->exec &&
           o->exec_detach && o->command_get && o->command_kill && o->file_read && o->file_write &&
           o->file_op && o->endpoint && o->diagnose && o->snapshot && o->metrics &&
           o->code_context && o->code_run && o->host_check && o->workspace &&
           o->set_network_policy && o->command_input && o->command_resize && o->volume &&
           o->bind_secrets && o->credential_vault && o->command_attach && o->command_find &&
           o->session_run;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int backend_set_add(struct backend_set *set, const struct backend_ops *ops, struct backend *be,
                    struct mcp_error *err)
{
    if (set->n == BACKEND_SET_MAX)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0, "more than %d backends", BACKEND_SET_MAX);
    if (!ops_complete(ops))
        return mcp_error_set(err, MCP_ERR_INTERNAL, 0,
                             "the %s backend leaves an operation empty: give it the default "
                             "slot (backend_def_*)", ops->name ? ops->name : "unnamed");
    for (size_t i = 0; i < set->n; i++) {
        const struct backend_ops *o = set->slots[i].ops;
        if (strcmp(o->name, ops->name) == 0 || has_prefix(o->id_prefix, ops->id_prefix) ||
            has_prefix(ops->id_prefix, o->id_prefix))
            return mcp_error_set(err, MCP_ERR_INTERNAL, 0,
                                 "backends %s and %s share a name or an id prefix", o->name,
                                 ops->name);
    }
    set->slots[set->n++] = (struct backend_slot){ops, be};
    return 0;
}

void backend_set_shutdown(struct backend_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->slots[i].be != NULL)
            set->slots[i].ops->shutdown(set->slots[i].be);
}

void backend_set_free(struct backend_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->slots[i].be != NULL)
            set->slots[i].ops->free(set->slots[i].be);
    *set = (struct backend_set){0};
}

/* The slot's backend, or NULL with err saying how to enable it. */
static struct backend *slot_backend(const struct backend_slot *slot, struct mcp_error *err)
{
    if (slot->be == NULL)
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the %s backend is not enabled in this mcpbox server: %s", slot->ops->name,
                      slot->ops->enable_hint);
    return slot->be;
}

/* "\"sbx-\" (local) or \"osb-\" (opensandbox)" / "\"local\" or \"opensandbox\"" */
static void list_known(const struct backend_set *set, bool prefixes, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < set->n && len < size; i++) {
        const struct backend_ops *o = set->slots[i].ops;
        const char *sep = i == 0 ? "" : i + 1 == set->n ? " or " : ", ";
        int n = prefixes ? snprintf(out + len, size - len, "%s\"%s\" (%s)", sep, o->id_prefix,
                                    o->name)
                         : snprintf(out + len, size - len, "%s\"%s\"", sep, o->name);
        len += n > 0 ? (size_t)n : 0;
    }
}

struct backend *backend_for_sandbox_id(const struct backend_set *set, const char *sandbox_id,
                                       struct mcp_error *err)
{
    for (size_t i = 0; i < set->n; i++) {
        const struct backend_slot *slot = &set->slots[i];
        if (!has_prefix(sandbox_id, slot->ops->id_prefix))
            continue;
        if (slot->be == NULL)
            mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                          "sandbox %s belongs to the %s backend, which is not enabled in this "
                          "mcpbox server; see docs/configuration.md",
                          sandbox_id, slot->ops->name);
        return slot->be;
    }
    char known[160];
    list_known(set, true, known, sizeof known);
    mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                  "no sandbox %s: sandbox ids start with %s; call list_sandboxes to see yours",
                  sandbox_id, known);
    return NULL;
}

struct backend *backend_by_name(const struct backend_set *set, const char *name,
                                struct mcp_error *err)
{
    for (size_t i = 0; i < set->n; i++)
        if (name == NULL || strcmp(name, set->slots[i].ops->name) == 0)
            return slot_backend(&set->slots[i], err);
    char known[160];
    list_known(set, false, known, sizeof known);
    if (set->n == 0)
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "this mcpbox has no backends");
    else
        mcp_error_set(err, MCP_ERR_INVALID, 0, "unknown backend \"%s\": use %s", name, known);
    return NULL;
}

const struct backend_ops *backend_set_having(const struct backend_set *set,
                                             enum backend_optional what)
{
    for (size_t i = 0; i < set->n; i++)
        if (backend_has(set->slots[i].ops, what))
            return set->slots[i].ops;
    return NULL;
}

struct backend *backend_for_volumes(const struct backend_set *set, struct mcp_error *err)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->slots[i].ops->volume != backend_def_volume)
            return slot_backend(&set->slots[i], err);
    mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                  "no backend of this mcpbox keeps named volumes (the local backend does)");
    return NULL;
}

struct backend *backend_for_snapshots(const struct backend_set *set, struct mcp_error *err)
{
    for (size_t i = 0; i < set->n; i++)
        if (backend_has(set->slots[i].ops, BACKEND_SNAPSHOTS))
            return slot_backend(&set->slots[i], err);
    mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "no backend of this mcpbox keeps snapshots");
    return NULL;
}
