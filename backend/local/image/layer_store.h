/* The layer store: content-addressed under <state_dir>/image-store (docs/images.md).
 *
 *   layers/<hex>/root        a layer unpacked once (hex of its compressed blob's sha256),
 *                            shared read-only by every sandbox that uses it (overlay lowers)
 *   layers/<hex>/meta.json   {"digest", "diff_id", "bytes", "entries"}; the directory's mtime
 *                            is its last use
 *   images/<hex>.json        one pulled reference: manifest digest, config, layer digests
 *   tmp/<hex>.<pid>.<rand>   an unpack under way; renamed into layers/ only once complete and
 *                            verified, so an interrupted pull leaves nothing half-used (and the
 *                            next open removes the leftovers of dead processes)
 *
 * The store is root's (0700) like the rest of the state directory. */
#ifndef MCPBOX_IMAGE_LAYER_STORE_H
#define MCPBOX_IMAGE_LAYER_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/local/image/unpack.h"
#include "lib/base/error.h"

#define LAYER_STORE_PATH_MAX 1024
#define LAYER_STORE_DEFAULT_CAP (16ull << 30)
#define LAYER_STORE_CAP_ENV "MCPBOX_IMAGE_STORE_MAX_BYTES"

struct layer_store {
    char dir[LAYER_STORE_PATH_MAX]; /* <state_dir>/image-store */
    uint64_t cap_bytes;             /* unpacked bytes of all layers together */
    const struct unpack_userns *ns; /* rootless: layers are unpacked and removed in a userns */
};

/* Creates the directories if missing, removes leftovers of dead processes from tmp/, reads the
 * cap from MCPBOX_IMAGE_STORE_MAX_BYTES (bytes; default 16 GiB). */
int layer_store_open(struct layer_store *s, const char *state_dir, const struct unpack_userns *ns,
                     struct mcp_error *err);

/* layers/<hex>/root into out; true if that layer is complete (and then marks it used now). */
bool layer_store_lookup(const struct layer_store *s, const char *digest, char *out, size_t size);

/* The uncompressed digest (rootfs.diff_ids) a stored layer was verified against, into out;
 * false if the layer is absent or was stored before diff_ids were kept. */
bool layer_store_diff_id(const struct layer_store *s, const char *digest, char *out,
                         size_t size);

/* A fresh tmp/<hex>.<pid>.<rand> with an empty root/ in it (its path into tmp_dir). */
int layer_store_begin(const struct layer_store *s, const char *digest, char *tmp_dir,
                      size_t size, struct mcp_error *err);
/* Writes meta.json and renames tmp_dir into layers/<hex>; if another pull finished first, ours
 * is removed and theirs kept. */
int layer_store_commit(const struct layer_store *s, const char *digest, const char *tmp_dir,
                       const struct unpack_result *res, struct mcp_error *err);

/* rm -rf that does not follow symlinks nor cross into other mounts. */
int layer_store_remove_tree(const char *path);
/* The same for a layer directory (or an unpack under way) of the store: rootless, what is below
 * its root/ is removed from inside the user namespace first. */
int layer_store_remove(const struct layer_store *s, const char *path);

/* Unpacked bytes of every layer in the store, and the bytes of its snapshots' layers. */
uint64_t layer_store_usage(const struct layer_store *s);

/* Evicts least-recently-used layers that in_use (a JSON array of "sha256:..." digests; NULL when
 * which layers are in use is unknown, and then none is evicted) does not name until need more
 * bytes fit under the cap; -1 with MCP_ERR_LIMIT (saying
 * how to raise the cap or what to remove) if that is not enough. */
int layer_store_make_room(const struct layer_store *s, uint64_t need, json_t *in_use,
                          struct mcp_error *err);

/* images/<sha256 of the normalized reference>.json */
int layer_store_save_image(const struct layer_store *s, const char *ref_text, json_t *image,
                           struct mcp_error *err);
json_t *layer_store_load_image(const struct layer_store *s, const char *ref_text);
int layer_store_remove_image(const struct layer_store *s, const char *ref_text,
                             struct mcp_error *err);
/* Every saved image record, as an array. */
json_t *layer_store_list_images(const struct layer_store *s);

#endif
