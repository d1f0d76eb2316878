/* Pushes an image to an OCI registry (the distribution spec's push): each blob is asked for
 * with HEAD and skipped if the registry has it, else mounted from another repository of the same
 * registry or uploaded (POST, then PUT with its digest); the manifest goes last, and is read back
 * (HEAD) so that a registry that answers 201 without keeping it is caught. Nothing is reported
 * as pushed before the manifest is there (docs/images.md, "Pushing snapshots"). */
#ifndef MCPBOX_IMAGE_PUSH_H
#define MCPBOX_IMAGE_PUSH_H

#include <jansson.h>
#include <uv.h>

#include "lib/base/error.h"
#include "lib/httpc/httpc.h"

/* result: {reference, digest (the manifest's), blobs_uploaded, blobs_present, bytes_uploaded}.
 * Exactly one of result/err is set; both borrowed. */
typedef void image_push_done_fn(void *arg, json_t *result, const struct mcp_error *err);

/* A base image (a snapshot of an OCI-image sandbox): its layers, from its manifest, go first,
 * mounted from ref's repository, which must be on the registry pushed to. */
struct image_ref;
struct image_push_base {
    const struct image_ref *ref;
    const char *manifest_digest;
};

/* blobs: [{digest, size, media_type, path}] (layers bottom first; path the file holding it);
 * config: the image config (serialized here, its digest taken); base: NULL for none; all
 * borrowed. 0 if started
 * (done later, never from inside); -1 with err for a reference that does not parse, one without
 * a tag, or a registry the person did not allow (registry.h). */
int image_push_start(uv_loop_t *loop, struct httpc *http, const char *reference, json_t *blobs,
                     json_t *config, const struct image_push_base *base, image_push_done_fn *done,
                     void *arg, struct mcp_error *err);

/* The manifest for config_digest/config_size and blobs (as above): a new string. */
char *image_push_manifest(json_t *blobs, const char *config_digest, size_t config_size);

#endif
