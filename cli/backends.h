/* The composition root of the backends: the one place that names each backend this executable
 * has, makes it from the server's configuration and puts it into the table (backend_set). */
#ifndef MCPBOX_CLI_BACKENDS_H
#define MCPBOX_CLI_BACKENDS_H

#include <stdbool.h>
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

#endif
