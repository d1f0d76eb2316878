/* A registry's credentials, from the files users already have (docs/images.md, Credentials):
 * $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json,
 * ~/.docker/config.json, the first that names the registry. In each file, as Docker reads it:
 * credHelpers.<host> first, then auths.<host>.auth (base64 "user:password"), then credsStore.
 * A helper is the program docker-credential-<name>, run as `docker-credential-<name> get` with
 * the registry's address on stdin; it answers {"Username", "Secret"} on stdout. It runs on the
 * loop (uv_spawn), with a time limit, so a slow keychain cannot block the server. */
#ifndef MCPBOX_IMAGE_CREDENTIALS_H
#define MCPBOX_IMAGE_CREDENTIALS_H

#include <stddef.h>
#include <uv.h>

#include "lib/base/error.h"

#define CRED_HELPER_TIMEOUT_ENV "MCPBOX_CREDENTIAL_HELPER_TIMEOUT"
#define CRED_HELPER_TIMEOUT_S 10
#define CRED_HELPER_NAME_MAX 128
#define CRED_FILE_MAX 1024
/* Credentials that start so carry an identity token (an OAuth2 refresh token), not a password:
 * a helper's Username "<token>", or auths.<host>.identitytoken in a file. */
#define CRED_IDENTITY_PREFIX "<token>:"

struct cred_source {
    char *creds;                          /* "user:password" (or "<token>:...") inline, or NULL */
    char helper[CRED_HELPER_NAME_MAX];    /* else the helper to ask ("" if none) */
    const char *helper_key;               /* "credHelpers" or "credsStore" */
    char file[CRED_FILE_MAX];             /* the file that said so */
};

/* What the files say for registry (a reference's registry, "docker.io" for Docker Hub). Free
 * out->creds. */
void cred_find(const char *registry, struct cred_source *out);

/* creds: "user:password" (malloc'd, the callee's to free) or NULL if the helper has none for
 * this registry; err: the helper could not be run or failed (then creds is NULL). */
typedef void cred_done_fn(void *arg, char *creds, const struct mcp_error *err);

struct cred_helper_run;

/* Runs docker-credential-<src->helper> get for registry. done is called exactly once, never
 * from inside this call. */
struct cred_helper_run *cred_helper_start(uv_loop_t *loop, const struct cred_source *src,
                                          const char *registry, cred_done_fn *done, void *arg);
/* Kills the helper if it still runs; done then gets an error. The run frees itself once its
 * handles are closed, after done. */
void cred_helper_cancel(struct cred_helper_run *run);

/* The address a helper is asked about: Docker Hub's is https://index.docker.io/v1/, as the
 * docker CLI stores it; others are host[:port]. */
void cred_server_address(const char *registry, char *out, size_t size);

/* Parses a helper's answer into "user:secret" (malloc'd; "<token>:secret" for an identity
 * token); NULL with err if it is not one. */
char *cred_parse_helper_output(const char *out, size_t len, const char *helper,
                               struct mcp_error *err);

#endif
