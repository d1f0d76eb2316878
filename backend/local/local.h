/* The local backend: sandboxes made of Linux namespaces, cgroups, dropped capabilities and a
 * seccomp filter, spawned by mcpbox itself (no daemon) in a few milliseconds.
 *
 * Each sandbox runs an agent as its PID 1 (a static binary embedded in mcpbox, run from a sealed
 * memfd). mcpbox talks to it over <runtime_dir>/<id>/agent.sock (runtime_dir.c), a socket the sandbox
 * cannot see. Sandboxes outlive the mcpbox process that made them: another mcpbox process with
 * the same state directory finds them through the store and reconnects. local_backend_new()
 * reconciles the store with reality: records whose sandbox is gone are cleaned up (cgroups,
 * files, uid slot, record); live sandboxes are adopted.
 *
 * Requirements: user namespaces and seccomp. As root each sandbox gets its own uid range
 * (100000 + 65536*slot) and cgroups; as an ordinary user sandboxes share the user's subordinate
 * ids (newuidmap) or, without them, the user's own uid, and use whatever cgroups were delegated
 * (identity.h, docs/local-backend.md "Running as an ordinary user"). On failure the error says
 * what is missing (MCP_ERR_UNSUPPORTED) and `mcpbox doctor` explains the fix.
 *
 * Everything runs on the given loop; see backend/backend.h for the contract and JSON shapes.
 * docs/local-backend.md describes the design, the agent protocol and the limits. */
#ifndef MCPBOX_LOCAL_H
#define MCPBOX_LOCAL_H

#include <uv.h>

#include "backend/backend.h"
#include "lib/base/error.h"

struct store;

/* What the composition root configures (the rest comes from the host and the store). */
struct local_options {
    /* Pre-created sandboxes for the default spec (serve --local-pool N); 0 = off. */
    int pool;
    /* Host directories sandboxes may mount (create_sandbox mounts), colon-separated; NULL:
     * none. The composition root applies the default (docs/configuration.md). */
    const char *allow_dirs;
    /* apply_changes without a review token (serve --apply-unreviewed): the person's choice,
     * never the agent's. Off: an apply must name the review_changes it applies. */
    bool apply_unreviewed;
    /* Data bytes one apply_changes may write (serve --apply-max-bytes); 0: the default. */
    uint64_t apply_max_bytes;
};

/* Its ops, also for the slot of a server where it could not start (backend_set). */
extern const struct backend_ops local_ops;

/* opts may be NULL (defaults); the state directory is the store's. */
struct backend *local_backend_new(uv_loop_t *loop, struct store *store,
                                  const struct local_options *opts, struct mcp_error *err);
/* Stops watching (closes handles; the loop must run once more to finish closing) and frees.
 * Sandboxes keep running. Pending callbacks are called with an error first. */
void local_backend_free(struct backend *be);

/* Adds a host directory to those this backend's sandboxes may mount (the CLI: the person named
 * it with --mount). -1 with err if it is not a directory. */
int local_backend_allow(struct backend *be, const char *dir, struct mcp_error *err);

/* Checks that this host can run local sandboxes without creating one: returns 0, or -1 with
 * err naming what is missing (used by `mcpbox doctor`). */
int local_backend_probe(struct mcp_error *err);

/* For `mcpbox image` too, which runs an image service of its own over the server's state
 * directory (local_image.c): the layers every local sandbox on record in st uses (a JSON array
 * of digests, which prune and eviction keep; NULL with err if the store cannot be listed), and
 * the unpack_userns.write_maps for a struct local_identity (ident): the maps of its slot 0. */
json_t *local_image_layers_in_use(struct store *st, struct mcp_error *err);
int local_image_write_maps(void *ident, int pid, struct mcp_error *err);

/* `mcpbox serve` as a user on a pure cgroup v2 host whose own cgroup is not delegated: re-execs
 * itself (argv[0] = "serve") in a `systemd-run --user --scope -p Delegate=yes` scope when the
 * user's systemd answers; returns otherwise (scope.c). */
void local_enter_delegated_scope(int argc, char **argv);

#endif
