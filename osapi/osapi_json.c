/* mcpbox's JSON shapes (the backend vtable's) to OpenSandbox's, and OpenSandbox's resource
 * quantities to mcpbox's numbers. */
#include "osapi/osapi-internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *osapi_state_name(const char *s)
{
    static const struct {
        const char *mcpbox, *osb;
    } map[] = {{"creating", "Pending"},   {"running", "Running"},      {"paused", "Paused"},
               {"stopped", "Terminated"}, {"expired", "Terminated"},   {"failed", "Failed"},
               {"destroyed", "Terminated"}};
    for (size_t i = 0; s && i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(s, map[i].mcpbox) == 0)
            return map[i].osb;
    return "Unknown";
}

/* status.reason and message: why the sandbox is in its state, in OpenSandbox's style. */
static void status_detail(const char *state, const char **reason, const char **message)
{
    *reason = NULL;
    *message = NULL;
    if (!state)
        return;
    if (!strcmp(state, "running"))
        *reason = "SANDBOX_RUNNING", *message = "Local sandbox is running.";
    else if (!strcmp(state, "paused"))
        *reason = "SANDBOX_PAUSED", *message = "Local sandbox is frozen (cgroup freezer).";
    else if (!strcmp(state, "stopped"))
        *reason = "SANDBOX_EXITED", *message = "The sandbox's init process exited.";
    else if (!strcmp(state, "expired"))
        *reason = "ttl_expiry", *message = "The sandbox's timeout or idle timeout passed.";
    else if (!strcmp(state, "failed"))
        *reason = "runtime_error", *message = "The sandbox could not start.";
}

json_t *osapi_sandbox_json(json_t *info, json_t *entrypoint)
{
    const char *state = json_string_value(json_object_get(info, "state"));
    const char *reason, *message;
    status_detail(state, &reason, &message);
    json_t *status = json_pack("{s:s}", "state", osapi_state_name(state));
    if (reason)
        json_object_set_new(status, "reason", json_string(reason));
    if (message)
        json_object_set_new(status, "message", json_string(message));
    const char *image = json_string_value(json_object_get(info, "image"));
    json_t *out = json_pack("{s:O?, s:{s:s}, s:o, s:O?, s:O?}", "id",
                            json_object_get(info, "sandbox_id"), "image", "uri",
                            image ? image : "host", "status", status, "createdAt",
                            json_object_get(info, "created_at"), "metadata",
                            json_object_get(info, "metadata"));
    json_t *exp = json_object_get(info, "expires_at");
    if (json_is_string(exp))
        json_object_set(out, "expiresAt", exp);
    if (!json_object_get(out, "metadata"))
        json_object_set_new(out, "metadata", json_object());
    json_object_set_new(out, "entrypoint",
                        json_is_array(entrypoint)
                            ? json_incref(entrypoint)
                            : json_pack("[s,s,s]", "tail", "-f", "/dev/null"));
    return out;
}

int osapi_parse_cpu(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v <= 0)
        return -1;
    if (*end == 'm')
        v /= 1000, end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

/* Kubernetes quantities: plain bytes, decimal (k, M, G, T) and binary (Ki, Mi, Gi, Ti)
 * suffixes. */
int osapi_parse_quantity(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {{"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0},
                 {"Ti", 1099511627776.0}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9},
                 {"T", 1e12}, {"", 1.0}};
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            double b = v * units[i].mult;
            if (b >= 1.8e19)
                return -1;
            *out = (uint64_t)b;
            return 0;
        }
    }
    return -1;
}

int osapi_mode_to_execd(uint32_t mode)
{
    int v = 0, scale = 1;
    for (mode &= 07777; mode; mode >>= 3, scale *= 10)
        v += (int)(mode & 7) * scale;
    return v;
}

int osapi_mode_from_execd(json_int_t v, uint32_t *out)
{
    uint32_t mode = 0, shift = 0;
    if (v < 0 || v > 7777)
        return -1;
    for (; v; v /= 10, shift += 3) {
        if (v % 10 > 7)
            return -1;
        mode |= (uint32_t)(v % 10) << shift;
    }
    *out = mode;
    return 0;
}

json_t *osapi_file_info(json_t *entry, const char *path)
{
    const char *type = json_string_value(json_object_get(entry, "type"));
    if (!type || (strcmp(type, "file") && strcmp(type, "directory") && strcmp(type, "symlink")))
        type = "other";
    json_t *mtime = json_object_get(entry, "mtime");
    json_int_t mode = json_integer_value(json_object_get(entry, "mode"));
    /* owner and group: the backend's stat does not report them (empty strings); created_at:
     * the modification time (no birth time either). docs/opensandbox-api.md. */
    const char *t = json_is_string(mtime) ? json_string_value(mtime) : "1970-01-01T00:00:00Z";
    const char *p = path ? path : json_string_value(json_object_get(entry, "path"));
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:i}", "path", p ? p : "", "type",
                     type, "size", json_integer_value(json_object_get(entry, "size")),
                     "modified_at", t, "created_at", t, "owner", "", "group", "", "mode",
                     osapi_mode_to_execd((uint32_t)mode));
}
