/* The PATCH of a remote Credential Vault (vault_patch.h): mcpbox's entries, found by their
 * prefix, become exactly what the sandbox binds; the vault's other entries are not touched. */
#include "backend/opensandbox/vault_patch.h"

#include <stdbool.h>
#include <string.h>

static bool ours(const json_t *entry)
{
    const char *n = json_string_value(json_object_get(entry, "name"));
    return n != NULL && strncmp(n, OSB_VAULT_PREFIX, strlen(OSB_VAULT_PREFIX)) == 0;
}

static bool named_in(const json_t *list, const json_t *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        if (json_equal(json_object_get(e, "name"), name))
            return true;
    }
    return false;
}

static bool has_string(const json_t *list, const json_t *s)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        if (json_equal(e, s))
            return true;
    }
    return false;
}

static void set_nonempty(json_t *m, const char *key, json_t *list)
{
    if (json_array_size(list) > 0)
        json_object_set(m, key, list);
    json_decref(list);
}

/* {add?, replace?, delete?} turning the entries of ours in now into want (empty: no change). */
static json_t *mutation(const json_t *now, json_t *want)
{
    json_t *add = json_array(), *replace = json_array(), *del = json_array();
    size_t i;
    json_t *e;
    if (!json_is_array(now))
        now = NULL;
    json_array_foreach(want, i, e)
        json_array_append(named_in(now, json_object_get(e, "name")) ? replace : add, e);
    json_array_foreach(now, i, e)
    {
        json_t *name = json_object_get(e, "name");
        if (ours(e) && !named_in(want, name) && !has_string(del, name))
            json_array_append(del, name); /* each once, however often the remote lists it */
    }
    json_t *m = json_object();
    set_nonempty(m, "add", add);
    set_nonempty(m, "replace", replace);
    set_nonempty(m, "delete", del);
    return m;
}

json_t *osb_vault_patch(const json_t *state, json_t *creds, json_t *binds)
{
    json_t *c = mutation(json_object_get(state, "credentials"), creds);
    json_t *b = mutation(json_object_get(state, "bindings"), binds);
    if (json_object_size(c) == 0 && json_object_size(b) == 0) {
        json_decref(c);
        json_decref(b);
        return NULL;
    }
    json_t *body = json_pack("{s:o, s:o}", "credentials", c, "bindings", b);
    json_t *rev = json_object_get(state, "revision");
    if (json_is_integer(rev))
        json_object_set(body, "expectedRevision", rev);
    return body;
}
