/* libFuzzer target: CreateSandboxRequest.volumes as a client of mcpbox's OpenSandbox API sends
 * them (osapi/osapi_volumes.c, issue 36). Whatever comes in, either a reason is given or every
 * mount made is {target, mode, and exactly one of source and volume}: an absolute target, mode
 * "ro" or "rw", a source that is absolute with no "." or ".." component added by subPath, a
 * volume that is a DNS label. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "osapi/osapi-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool dns_label(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static void check_mount(json_t *m, json_t *volumes)
{
    const char *target = json_string_value(json_object_get(m, "target"));
    const char *mode = json_string_value(json_object_get(m, "mode"));
    const char *source = json_string_value(json_object_get(m, "source"));
    const char *volume = json_string_value(json_object_get(m, "volume"));
    if (target == NULL || target[0] != '/' || mode == NULL ||
        (strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0) || !source == !volume)
        abort();
    if (volume && !dns_label(volume))
        abort();
    if (source && (source[0] != '/' || json_array_size(volumes) == 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *volumes = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    json_t *mounts = NULL;
    (void)osapi_volumes_unsupported(volumes);
    const char *bad = osapi_volumes_mounts(volumes, &mounts);
    if (bad != NULL && mounts != NULL)
        abort();
    if (bad == NULL && mounts != NULL) {
        if (json_array_size(mounts) != json_array_size(volumes))
            abort();
        size_t i;
        json_t *m;
        json_array_foreach(mounts, i, m) check_mount(m, volumes);
    }
    json_decref(mounts);
    json_decref(volumes);
    return 0;
}
