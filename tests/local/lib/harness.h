/* A synchronous harness over the local backend for tests: its own loop, store and backend in a
 * private state directory, and blocking wrappers around the asynchronous vtable calls. */
#ifndef MCPBOX_TESTS_LOCAL_HARNESS_H
#define MCPBOX_TESTS_LOCAL_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "backend/backend.h"
#include "lib/base/buf.h"
#include "lib/base/error.h"

struct store;

struct harness {
    uv_loop_t loop;
    struct store *store;
    struct backend *be;
    char state_dir[128];
    /* the last operation */
    bool done, failed;
    json_t *result;
    struct mcp_error err;
};

/* Opens everything in a fresh state directory; returns 77 (skip, reason printed) if this host
 * cannot run local sandboxes, -1 on another failure, 0 on success. */
int harness_open(struct harness *h);
/* The same on an existing state directory (NULL: a fresh one), with this pool size. */
int harness_open_dir(struct harness *h, const char *dir, int pool);
void harness_close(struct harness *h); /* destroys nothing; removes the state dir if empty */
/* Entries left in the places the backend may keep this state directory's runtime files
 * (backend/local/runtime_dir.c: /run/mcpbox-<euid>/<hash>, /dev/shm/mcpbox-<euid>/<hash>,
 * <state>/run);
 * each one is printed as a TAP comment. */
int harness_runtime_left(const struct harness *h);
/* The runtime directory in use (the first of those places that exists); -1 if none. */
int harness_runtime_dir(const struct harness *h, char *out, size_t size);
/* The backend freed (which destroys its untaken pooled sandboxes) and opened again on the same
 * store, as a restarted mcpbox would (reconcile runs); pool = its pool size. */
int harness_reopen_backend(struct harness *h, int pool);
int harness_pool_size(void); /* MCPBOX_LOCAL_POOL, else the server's default */

/* Creates a sandbox (spec may be NULL for defaults); returns its id (malloc'd) or NULL. */
char *harness_create(struct harness *h, const struct sandbox_spec *spec);
int harness_destroy(struct harness *h, const char *id);

struct harness_exec {
    json_t *status;  /* the final status object (owned), NULL if it could not start */
    struct buf out;  /* stdout */
    struct buf err;  /* stderr */
    int exit_code;   /* -1 unless status is "exited" */
    const char *state; /* status field: "exited", "killed", "oom_killed", ... */
};
/* Runs a shell command to completion. */
int harness_exec(struct harness *h, const char *id, const char *command, struct harness_exec *x);
void harness_exec_release(struct harness_exec *x);

/* file_read into *data (malloc'd); -1 with h->err on error. */
int harness_read(struct harness *h, const char *id, const char *path, uint64_t offset,
                 uint64_t length, char **data, size_t *len, bool *truncated);
int harness_write(struct harness *h, const char *id, const char *path, const char *data,
                  size_t len);

/* Runs the loop until h->done (set by the wrappers' callbacks); -1 with h->err on failure. */
int harness_wait(struct harness *h);
void harness_reset(struct harness *h);
void harness_cb(void *arg, json_t *result, const struct mcp_error *err);

#endif
