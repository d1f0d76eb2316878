/* The composition root of the backends: the one place that names each backend this executable
 * has, makes it from the server's configuration and puts it into the table (backend_set). */
#ifndef MCPBOX_CLI_BACKENDS_H
#define MCPBOX_CLI_BACKENDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct backend_set;
struct mcp_config;
struct store;

/* server_backends_fn (mcp/server.h): local first (create_sandbox's default), then OpenSandbox. */
void backends_start(struct backend_set *set, uv_loop_t *loop, struct store *store,
                    const struct mcp_config *cfg);
/* "local,opensandbox": what --version prints. */
const char *backends_names(void);

/* A backend's helper process, which it starts by running mcpbox again with argv[1] naming it
 * (the local backend's image layer unpacker, its review/apply helper in a sandbox's user
 * namespace): runs it and returns true with its exit status; false when argv names none. */
bool backends_helper(int argc, char **argv, int *status);
/* What a backend needs of the serving process before it starts: the local backend moves a
 * rootless user's server into a delegated cgroup scope on systemd (it may re-exec). */
void backends_before_serve(int argc, char **argv);

struct backend;
struct mcp_error;
/* The backend `name` for one command a person runs (`mcpbox sandbox`): its defaults, no pool, no
 * host directory until backends_allow_dir. Freed through its ops (be->ops->free). NULL with err
 * when it cannot start here or has no such use. */
struct backend *backends_open(const char *name, uv_loop_t *loop, struct store *store,
                              struct mcp_error *err);
/* Lets be's sandboxes mount the host directory dir (the person named it with --mount). -1 with
 * err if dir is not a directory or be mounts none. */
int backends_allow_dir(struct backend *be, const char *dir, struct mcp_error *err);

/* `mcpbox doctor`: can this host run local sandboxes? The local backend's host checks and its
 * own probe, as {ok, checks:[{name, ok, required, detail, fix|null}]}. Blocks (forks probes). */
json_t *backends_doctor(const char *state_dir);

/* `mcpbox image`: the local backend's OCI image store (docs/images.md), opened over the state
 * store st (its sandboxes' layers are kept by prune), unpacking as a server of this user would
 * (rootless: in its user namespace). One per process. NULL with err. */
struct backends_images;
typedef void backends_pull_progress_fn(void *arg, uint64_t done, uint64_t total, const char *what);
/* Exactly one of image/err is set; both borrowed. */
typedef void backends_pull_done_fn(void *arg, json_t *image, const struct mcp_error *err);
struct backends_images *backends_images_open(uv_loop_t *loop, const char *state_dir,
                                             struct store *st, struct mcp_error *err);
/* Cancels pulls; the store goes once the loop has run them out. NULL-safe. */
void backends_images_close(struct backends_images *im);
/* Pulls ref again (done is called later, from the loop); -1 with err when ref does not parse. */
int backends_images_pull(struct backends_images *im, const char *ref,
                         backends_pull_progress_fn *progress, backends_pull_done_fn *done,
                         void *arg, struct mcp_error *err);
/* {images:[...], store, store_bytes, cap_bytes} (new reference). */
json_t *backends_images_list(struct backends_images *im);
int backends_images_remove(struct backends_images *im, const char *ref, struct mcp_error *err);
/* {removed, freed_bytes, store_bytes} (new reference), or NULL with err. */
json_t *backends_images_prune(struct backends_images *im, struct mcp_error *err);

#endif
