/* OCI images for the local backend: the one entry point create and the CLI use.
 *
 * image_service_resolve() turns a reference into an image record
 *   {"reference", "digest", "manifest_digest", "config": {"env", "workdir", "user"},
 *    "layers": ["sha256:...", ...] (bottom first), "layer_dirs": [...], "size", "pulled_at_ms"}
 * from the store if that reference was pulled before, else by pulling it (progress reported
 * as bytes done of total). Everything runs on the loop (downloads) or in worker threads
 * (unpacks); nothing blocks the server. */
#ifndef MCPBOX_IMAGE_H
#define MCPBOX_IMAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "lib/base/error.h"

struct image_service;

/* bytes done of total (compressed layer bytes still to fetch); what names the step. */
typedef void image_progress_fn(void *arg, uint64_t done, uint64_t total, const char *what);
/* Exactly one of image/err is set; both borrowed. */
typedef void image_done_fn(void *arg, json_t *image, const struct mcp_error *err);
/* Digests of layers in use (live sandboxes): a new JSON array, owned by the caller; NULL with err
 * set when it cannot tell (the state store cannot be read), and then nothing is evicted or pruned. */
typedef json_t *image_in_use_fn(void *arg, struct mcp_error *err);

struct unpack_userns;
/* ns: NULL for a root server (layers keep the image's ids); rootless, how to map a user
 * namespace to the sandboxes' shared mapping (unpack.h). */
struct image_service *image_service_new(uv_loop_t *loop, const char *state_dir,
                                        const struct unpack_userns *ns, image_in_use_fn *in_use,
                                        void *in_use_arg, struct mcp_error *err);
/* Cancels pulls (their done gets an error) and frees the service once nothing runs. */
void image_service_free(struct image_service *s);

/* force: pull even if the reference is in the store (`mcpbox image pull`). 0 if started (done
 * is called later, never from inside); -1 with err for a reference that does not parse. */
int image_service_resolve(struct image_service *s, const char *reference, bool force,
                          image_progress_fn *progress, image_done_fn *done, void *arg,
                          struct mcp_error *err);

/* The same without force, with the registry's credentials given ("user:password", copied;
 * NULL: the credential files): a create's image.auth. A stored image is used as it is. */
int image_service_resolve_auth(struct image_service *s, const char *reference, const char *creds,
                               image_progress_fn *progress, image_done_fn *done, void *arg,
                               struct mcp_error *err);

/* The store's images ([{reference, digest, size, layers, pulled_at_ms}]) and usage. */
json_t *image_service_list(struct image_service *s);
/* Forgets a reference; its layers go with the next prune or eviction. */
int image_service_remove(struct image_service *s, const char *reference, struct mcp_error *err);
/* Removes layers no image record and no live sandbox uses; {removed, freed_bytes}. */
json_t *image_service_prune(struct image_service *s, struct mcp_error *err);

/* A registered root filesystem directory whose filesystem cannot be mounted idmapped, as a
 * one-layer image (import.c): copied into the store once per state of its metadata, owners
 * shifted by shift_uid/shift_gid (the shared mapping's base). done gets a record like a pulled
 * image's ({"reference": name, "digest", "layers", "layer_dirs", "config", "imported_from"}). */
int image_service_import_dir(struct image_service *s, const char *name, const char *dir,
                             uint32_t shift_uid, uint32_t shift_gid, image_done_fn *done,
                             void *arg, struct mcp_error *err);

/* For import.c: the service's store and loop; hold(+1/-1) counts work under way, which
 * image_service_free waits for. */
struct layer_store;
struct layer_store *image_service_store(struct image_service *s);
uv_loop_t *image_service_loop(struct image_service *s);
/* Work on the service's loop outside its pulls (an import) holds it (+1) until it ends (-1);
 * a service closed meanwhile is freed by the last release. */
void image_service_hold(struct image_service *s, int delta);

/* The service's HTTP engine, made on first use (a push's; push.h). NULL with err if libcurl
 * cannot be loaded. */
struct httpc;
struct httpc *image_service_http(struct image_service *s, struct mcp_error *err);

/* True if text parses as a reference (create uses it to tell a typo from a pull). */
bool image_reference_valid(const char *text);

#endif
