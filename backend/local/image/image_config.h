/* The image config blob: what of it applies to every command (Env, WorkingDir, User). */
#ifndef MCPBOX_IMAGE_CONFIG_H
#define MCPBOX_IMAGE_CONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "lib/base/error.h"

#define IMAGE_USER_MAX 256
#define IMAGE_WORKDIR_MAX 1024

struct image_config {
    json_t *env;                       /* {"PATH": "...", ...}: the config's Env */
    char workdir[IMAGE_WORKDIR_MAX];   /* "" when the image sets none */
    char user[IMAGE_USER_MAX];         /* "", "1000", "1000:1000", "app", "app:staff" */
    size_t n_diff_ids;                 /* rootfs.diff_ids: one per layer, bottom first */
    char (*diff_ids)[72];              /* "sha256:<hex>" each: the layer's uncompressed digest */
    /* A snapshot pushed by mcpbox (its labels org.mcpbox.snapshot.*; push.h): its layer's digest
     * (the top one of diff_ids), the image it is relative to, its id there; "" when none. */
    char snapshot_layer[72];
    char snapshot_base[256];
    char snapshot_id[64];
};

/* -1 with err if the blob is not a config for Linux or has malformed fields (a diff_id that is
 * not a sha256 digest among them). */
int image_config_parse(const char *body, size_t len, struct image_config *cfg,
                       struct mcp_error *err);
void image_config_free(struct image_config *cfg);

/* The config's values as the record keeps them: {"env": {...}, "workdir": "...", "user": "...",
 * "snapshot"?: {"layer", "image", "id"}}. */
json_t *image_config_to_json(const struct image_config *cfg);

#endif
