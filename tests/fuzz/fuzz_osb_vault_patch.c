/* libFuzzer target: the Credential Vault state a remote OpenSandbox server answers (less
 * trusted: any JSON), turned into the PATCH that makes mcpbox's entries what a sandbox binds
 * (backend/opensandbox/vault_patch.c). Whatever the remote says, the PATCH must delete only
 * names with mcpbox's prefix, each once, and add or replace only mcpbox's wanted entries, each
 * exactly once across add and replace: a remote cannot make mcpbox touch the person's own
 * entries or bind a secret twice. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/opensandbox/vault_patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *wanted(const char *what)
{
    return json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", OSB_VAULT_PREFIX "tok", "is", what, "name",
                     OSB_VAULT_PREFIX "key", "is", what);
}

static void check_delete(json_t *del)
{
    size_t i, k;
    json_t *d, *o;
    json_array_foreach(del, i, d)
    {
        const char *n = json_string_value(d);
        if (n == NULL || strncmp(n, OSB_VAULT_PREFIX, strlen(OSB_VAULT_PREFIX)) != 0)
            abort(); /* not ours: never deleted */
        json_array_foreach(del, k, o) if (k != i && json_equal(o, d)) abort();
    }
}

/* Each wanted entry once across add and replace, nothing else. */
static void check_sets(json_t *m, json_t *want)
{
    check_delete(json_object_get(m, "delete"));
    size_t total =
        json_array_size(json_object_get(m, "add")) + json_array_size(json_object_get(m, "replace"));
    if (m != NULL && total != json_array_size(want))
        abort();
    const char *keys[] = {"add", "replace"};
    for (size_t s = 0; s < 2; s++) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(m, keys[s]), i, e)
        {
            if (!json_equal(e, json_array_get(want, 0)) && !json_equal(e, json_array_get(want, 1)))
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *state = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    json_t *creds = wanted("credential"), *binds = wanted("binding");
    json_t *body = osb_vault_patch(state, creds, binds);
    if (body == NULL) { /* nothing to change: only when nothing is wanted */
        if (json_array_size(creds) > 0)
            abort();
    } else {
        check_sets(json_object_get(body, "credentials"), creds);
        check_sets(json_object_get(body, "bindings"), binds);
    }
    json_t *none = json_array();
    json_t *gone = osb_vault_patch(state, none, none); /* unbinding all */
    if (gone != NULL) {
        check_sets(json_object_get(gone, "credentials"), none);
        check_sets(json_object_get(gone, "bindings"), none);
    }
    json_decref(gone);
    json_decref(none);
    json_decref(body);
    json_decref(creds);
    json_decref(binds);
    json_decref(state);
    return 0;
}
