/* Image config parsing (image_config.h). */
#include "backend/local/image/image_config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

static int bad_config(struct mcp_error *err, const char *why)
{
    return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                         "the image's config is invalid: %s (the image is broken; rebuild or "
                         "pick another tag)",
                         why);
}

static int parse_env(json_t *arr, json_t *env, struct mcp_error *err)
{
    if (arr == NULL || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return bad_config(err, "Env is not an array");
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        const char *kv = json_string_value(v);
        const char *eq = kv ? strchr(kv, '=') : NULL;
        if (eq == NULL || eq == kv)
            return bad_config(err, "an Env entry is not NAME=value");
        char name[256];
        if ((size_t)(eq - kv) >= sizeof name)
            return bad_config(err, "an Env name is longer than 255 characters");
        snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
        json_object_set_new(env, name, json_string(eq + 1));
    }
    return 0;
}

static int copy_field(json_t *v, char *dst, size_t cap, const char *name, struct mcp_error *err)
{
    dst[0] = '\0';
    if (v == NULL || json_is_null(v))
        return 0;
    const char *s = json_string_value(v);
    if (s == NULL || strlen(s) >= cap)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "the image's config is invalid: %s is not a string of at most %zu "
                             "characters",
                             name, cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* rootfs.diff_ids: each the sha256 of a layer's uncompressed tar, checked as it unpacks. */
static int parse_diff_ids(json_t *arr, struct image_config *cfg, struct mcp_error *err)
{
    if (arr == NULL || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return bad_config(err, "rootfs.diff_ids is not an array");
    cfg->n_diff_ids = json_array_size(arr);
    cfg->diff_ids = xcalloc(cfg->n_diff_ids ? cfg->n_diff_ids : 1, sizeof *cfg->diff_ids);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        const char *d = json_string_value(v);
        if (d == NULL || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71 ||
            strspn(d + 7, "0123456789abcdef") != 64)
            return bad_config(err, "a rootfs.diff_ids entry is not a sha256 digest");
        memcpy(cfg->diff_ids[i], d, 72);
    }
    return 0;
}

/* The labels a pushed snapshot carries (local_snapshot_push.c), kept only when its layer is the
 * image's top layer: anything else is an ordinary image. */
static void parse_snapshot_labels(json_t *labels, struct image_config *cfg)
{
    const char *layer = json_string_value(json_object_get(labels, "org.mcpbox.snapshot.layer"));
    const char *base = json_string_value(json_object_get(labels, "org.mcpbox.snapshot.image"));
    const char *id = json_string_value(json_object_get(labels, "org.mcpbox.snapshot.id"));
    bool top = layer && cfg->n_diff_ids > 0 && strcmp(cfg->diff_ids[cfg->n_diff_ids - 1], layer) == 0;
    if (!top || base == NULL || strlen(base) >= sizeof cfg->snapshot_base)
        return;
    snprintf(cfg->snapshot_layer, sizeof cfg->snapshot_layer, "%s", layer);
    snprintf(cfg->snapshot_base, sizeof cfg->snapshot_base, "%s", base);
    snprintf(cfg->snapshot_id, sizeof cfg->snapshot_id, "%s", id && strlen(id) < 64 ? id : "");
}

int image_config_parse(const char *body, size_t len, struct image_config *cfg,
                       struct mcp_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return bad_config(err, "not a JSON object");
    }
    cfg->env = json_object();
    const char *os = json_string_value(json_object_get(root, "os"));
    json_t *c = json_object_get(root, "config");
    json_t *diff_ids = json_object_get(json_object_get(root, "rootfs"), "diff_ids");
    int rc = 0;
    if (os && strcmp(os, "linux") != 0)
        rc = mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                           "the image is built for '%.40s', not Linux: pick a Linux image", os);
    else if (c != NULL && !json_is_null(c) && !json_is_object(c))
        rc = bad_config(err, "config is not an object");
    if (rc == 0 && json_is_object(c))
        rc = parse_env(json_object_get(c, "Env"), cfg->env, err);
    if (rc == 0 && json_is_object(c))
        rc = copy_field(json_object_get(c, "WorkingDir"), cfg->workdir, sizeof cfg->workdir,
                        "WorkingDir", err);
    if (rc == 0 && json_is_object(c))
        rc = copy_field(json_object_get(c, "User"), cfg->user, sizeof cfg->user, "User", err);
    if (rc == 0 && cfg->workdir[0] && cfg->workdir[0] != '/')
        rc = bad_config(err, "WorkingDir is not an absolute path");
    if (rc == 0)
        rc = parse_diff_ids(diff_ids, cfg, err);
    if (rc == 0 && json_is_object(c))
        parse_snapshot_labels(json_object_get(c, "Labels"), cfg);
    json_decref(root);
    if (rc < 0)
        image_config_free(cfg);
    return rc;
}

void image_config_free(struct image_config *cfg)
{
    json_decref(cfg->env);
    cfg->env = NULL;
    free(cfg->diff_ids);
    cfg->diff_ids = NULL;
    cfg->n_diff_ids = 0;
}

json_t *image_config_to_json(const struct image_config *cfg)
{
    json_t *j =
        json_pack("{s:O, s:s, s:s}", "env", cfg->env, "workdir", cfg->workdir, "user", cfg->user);
    if (cfg->snapshot_layer[0])
        json_object_set_new(j, "snapshot",
                            json_pack("{s:s, s:s, s:s}", "layer", cfg->snapshot_layer, "image",
                                      cfg->snapshot_base, "id", cfg->snapshot_id));
    return j;
}
