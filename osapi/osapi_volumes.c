/* OpenSandbox's `volumes` on create (issue 36) as the backend's mounts: `host` is a host
 * directory the person allowed (--allow-dir, checked by the backend exactly as create_sandbox's
 * mounts), `pvc` a named volume of the caller's (claimName), created when missing unless
 * createIfNotExists is false (the spec's default is to create it). docs/opensandbox-api.md. */
#include <stdio.h>
#include <string.h>

#include "osapi/osapi-internal.h"

/* A DNS label: what the spec asks of a volume's name and a claimName. */
static bool dns_label(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

const char *osapi_volumes_unsupported(json_t *volumes)
{
    size_t i;
    json_t *v;
    json_array_foreach(volumes, i, v)
    {
        json_t *pvc = json_object_get(v, "pvc");
        if (json_object_get(v, "ossfs"))
            return "volumes[].ossfs (local sandboxes mount host directories (host) and named "
                   "volumes (pvc) only)";
        if (json_is_true(json_object_get(pvc, "deleteOnSandboxTermination")))
            return "volumes[].pvc.deleteOnSandboxTermination (a named volume outlives its "
                   "sandboxes; delete it with `mcpbox volume rm NAME` or the volume tool)";
        if (pvc && json_object_get(v, "subPath"))
            return "volumes[].subPath on a pvc (mount the whole volume, or give the "
                   "directory a volume of its own)";
    }
    return NULL;
}

/* subPath: relative, no empty, "." or ".." components. */
static bool sub_path_ok(const char *s)
{
    if (s == NULL || s[0] == '/' || s[0] == '\0')
        return false;
    char copy[1024];
    if (strlen(s) >= sizeof copy)
        return false;
    snprintf(copy, sizeof copy, "%s", s);
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save))
        if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
            return false;
    return strstr(s, "//") == NULL;
}

/* One pvc: {volume, create_if_missing, size_bytes?} on m. */
static const char *pvc_mount(json_t *pvc, json_t *m)
{
    const char *claim = json_string_value(json_object_get(pvc, "claimName"));
    json_t *create = json_object_get(pvc, "createIfNotExists");
    const char *storage = json_string_value(json_object_get(pvc, "storage"));
    uint64_t size = 0;
    if (!dns_label(claim, 63))
        return "volumes[].pvc.claimName must be a DNS label of at most 63 characters "
               "(lowercase letters, digits and '-', e.g. \"pip-cache\")";
    if (create && !json_is_boolean(create))
        return "volumes[].pvc.createIfNotExists must be true or false";
    if (storage && osapi_parse_quantity(storage, &size) < 0)
        return "volumes[].pvc.storage must be a quantity like \"1Gi\"";
    json_object_set_new(m, "volume", json_string(claim));
    json_object_set_new(m, "create_if_missing", json_boolean(!json_is_false(create)));
    if (size > 0)
        json_object_set_new(m, "size_bytes", json_integer((json_int_t)size));
    return NULL;
}

/* One host: {source} on m (path, and subPath below it). */
static const char *host_mount(json_t *host, const char *sub, json_t *m)
{
    const char *path = json_string_value(json_object_get(host, "path"));
    char src[4096];
    if (path == NULL || path[0] != '/')
        return "volumes[].host.path must be an absolute host path under a directory the server "
               "allows (mcpbox serve --allow-dir)";
    if (sub && !sub_path_ok(sub))
        return "volumes[].subPath must be a relative path without \".\" or \"..\" components";
    snprintf(src, sizeof src, "%s%s%s", path, sub ? "/" : "", sub ? sub : "");
    json_object_set_new(m, "source", json_string(src));
    return NULL;
}

static const char *one_volume(json_t *v, json_t *mounts)
{
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *target = json_string_value(json_object_get(v, "mountPath"));
    json_t *ro = json_object_get(v, "readOnly"), *host = json_object_get(v, "host");
    json_t *pvc = json_object_get(v, "pvc");
    if (!json_is_object(v) || !dns_label(name, 63))
        return "each volume needs a name: a DNS label (lowercase letters, digits and '-')";
    if (target == NULL || target[0] != '/')
        return "volumes[].mountPath must be an absolute path (under /workspace, /mnt, /srv, "
               "/opt, /home or /data)";
    if (ro && !json_is_boolean(ro))
        return "volumes[].readOnly must be true or false";
    if (!json_is_object(host) == !json_is_object(pvc))
        return "each volume needs exactly one backend: host {path} or pvc {claimName}";
    json_t *m = json_pack("{s:s, s:s}", "target", target, "mode", json_is_true(ro) ? "ro" : "rw");
    const char *bad = host ? host_mount(host, json_string_value(json_object_get(v, "subPath")), m)
                           : pvc_mount(pvc, m);
    if (bad == NULL)
        json_array_append(mounts, m);
    json_decref(m);
    return bad;
}

const char *osapi_volumes_mounts(json_t *volumes, json_t **out)
{
    *out = NULL;
    if (volumes == NULL || json_is_null(volumes))
        return NULL;
    if (!json_is_array(volumes))
        return "volumes must be an array of {name, mountPath, host|pvc, readOnly?, subPath?}";
    json_t *mounts = json_array(), *v;
    size_t i;
    const char *bad = NULL;
    json_array_foreach(volumes, i, v)
    {
        for (size_t k = 0; k < i && !bad; k++)
            if (json_equal(json_object_get(v, "name"),
                           json_object_get(json_array_get(volumes, k), "name")))
                bad = "volumes[].name must be unique within the sandbox";
        if (bad || (bad = one_volume(v, mounts)) != NULL)
            break;
    }
    if (bad)
        json_decref(mounts);
    else
        *out = mounts;
    return bad;
}
