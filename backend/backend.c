#include "backend/backend.h"

#include <string.h>

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

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

struct backend *backend_for_sandbox_id(const struct backend_set *set, const char *sandbox_id,
                                       struct mcp_error *err)
{
    struct backend *all[] = {set->local, set->opensandbox};
    static const char *const prefixes[] = {"sbx-", "osb-"};
    static const char *const names[] = {"local", "opensandbox"};
    for (size_t i = 0; i < 2; i++) {
        if (!has_prefix(sandbox_id, prefixes[i]))
            continue;
        if (all[i] == NULL) {
            mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                          "sandbox %s belongs to the %s backend, which is not enabled in this "
                          "mcpbox server; see docs/configuration.md",
                          sandbox_id, names[i]);
            return NULL;
        }
        return all[i];
    }
    mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                  "no sandbox %s: sandbox ids start with \"sbx-\" (local) or \"osb-\" "
                  "(opensandbox); call list_sandboxes to see yours",
                  sandbox_id);
    return NULL;
}

struct backend *backend_by_name(const struct backend_set *set, const char *name,
                                struct mcp_error *err)
{
    if (strcmp(name, "local") == 0 && set->local != NULL)
        return set->local;
    if (strcmp(name, "opensandbox") == 0 && set->opensandbox != NULL)
        return set->opensandbox;
    if (strcmp(name, "local") == 0 || strcmp(name, "opensandbox") == 0) {
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                      "the %s backend is not enabled in this mcpbox server%s", name,
                      strcmp(name, "opensandbox") == 0
                          ? ": set OPEN_SANDBOX_DOMAIN (and OPEN_SANDBOX_API_KEY) and "
                            "restart mcpbox"
                          : ": run the doctor tool to see why");
        return NULL;
    }
    mcp_error_set(err, MCP_ERR_INVALID, 0,
                  "unknown backend \"%s\": use \"local\" or \"opensandbox\"", name);
    return NULL;
}
