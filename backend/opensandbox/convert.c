/* Mapping between OpenSandbox's lifecycle objects and mcpbox's sandbox info. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

enum sandbox_state osb_state_map(const char *remote)
{
    static const struct {
        const char *remote;
        enum sandbox_state state;
    } map[] = {
        {"Pending", SANDBOX_CREATING}, {"Allocated", SANDBOX_RUNNING},
        {"Running", SANDBOX_RUNNING},  {"Pausing", SANDBOX_PAUSED},
        {"Paused", SANDBOX_PAUSED},    {"Resuming", SANDBOX_CREATING},
        {"Stopping", SANDBOX_STOPPED}, {"Terminated", SANDBOX_STOPPED},
        {"Failed", SANDBOX_FAILED},
    };
    for (size_t i = 0; remote != NULL && i < ARRAY_SIZE(map); i++)
        if (strcasecmp(remote, map[i].remote) == 0)
            return map[i].state;
    return SANDBOX_STOPPED; /* "Unknown" and states from newer servers: not usable */
}

double osb_parse_cpu(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v < 0 || !isfinite(v))
        return -1;
    if (strcmp(end, "m") == 0)
        return v / 1000.0;
    return *end == '\0' ? v : -1;
}

int64_t osb_parse_quantity(const char *s)
{
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {{"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0},
                 {"Ti", 1099511627776.0}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9},
                 {"T", 1e12}, {"", 1.0}};
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v < 0 || !isfinite(v))
        return -1;
    for (size_t i = 0; i < ARRAY_SIZE(units); i++)
        if (strcmp(end, units[i].suffix) == 0)
            return (int64_t)(v * units[i].mult);
    return -1;
}

void osb_owner_label(const char *owner, char out[17])
{
    char hex[65];
    sha256_hex(owner, strlen(owner), hex);
    memcpy(out, hex, 16);
    out[16] = '\0';
}

static json_t *time_or_null(json_t *v)
{
    int64_t ms;
    if (!json_is_string(v) || parse_rfc3339_ms(json_string_value(v), &ms) != 0)
        return json_null();
    char buf[32];
    format_rfc3339_ms(ms, buf);
    return json_string(buf);
}

static json_t *user_metadata(json_t *meta)
{
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (strncmp(k, OSB_META_PREFIX, strlen(OSB_META_PREFIX)) != 0 && json_is_string(v))
            json_object_set(out, k, v);
    }
    return out;
}

static json_t *default_limits(void)
{
    return json_pack("{s:f,s:I,s:I,s:I}", "cpu", 0.0, "memory_bytes", (json_int_t)0, "pids",
                     (json_int_t)0, "disk_bytes", (json_int_t)0);
}

json_t *osb_sandbox_info(struct osb_backend *b, json_t *remote)
{
    const char *rid = json_string_value(json_object_get(remote, "id"));
    cleanup_free char *sid = xasprintf(OSB_ID_PREFIX "%s", rid ? rid : "");
    json_t *status = json_object_get(remote, "status");
    const char *rstate = json_string_value(json_object_get(status, "state"));
    const char *image = json_string_value(json_object_get(json_object_get(remote, "image"), "uri"));
    if (image == NULL)
        image = json_string_value(json_object_get(remote, "snapshotId"));

    cleanup_json json_t *record = NULL;
    struct store_sandbox sb = {0};
    struct mcp_error e;
    if (b->base.store != NULL && store_sandbox_get(b->base.store, sid, &sb, &e) == 0) {
        record = json_incref(sb.record);
        store_sandbox_release(&sb);
    }
    json_t *limits = json_object_get(record, "limits");
    json_t *network = json_object_get(record, "network");
    if (image == NULL)
        image = json_string_value(json_object_get(record, "image"));

    json_t *lim = limits ? json_incref(limits) : default_limits();
    json_t *info = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:I,s:o,s:b,s:o}", "sandbox_id", sid,
                             "backend", "opensandbox", "image", image ? image : "",
                             "state", sandbox_state_name(osb_state_map(rstate)),
                             "created_at", time_or_null(json_object_get(remote, "createdAt")),
                             "expires_at", time_or_null(json_object_get(remote, "expiresAt")),
                             "idle_timeout_seconds", (json_int_t)0,
                             "limits", lim,
                             "network", network ? json_is_true(network) : true,
                             "metadata", user_metadata(json_object_get(remote, "metadata")));
    json_t *policy = json_object_get(record, "network_policy");
    json_object_set_new(info, "network_policy", json_is_object(policy) ? json_deep_copy(policy)
                                                                       : json_null());
    if (rstate != NULL)
        json_object_set_new(info, "remote_state", json_string(rstate));
    const char *reason = json_string_value(json_object_get(status, "reason"));
    const char *message = json_string_value(json_object_get(status, "message"));
    if (reason != NULL || message != NULL)
        json_object_set_new(info, "status_detail",
                            json_sprintf("%s%s%s", reason ? reason : "",
                                         reason && message ? ": " : "", message ? message : ""));
    return info;
}
