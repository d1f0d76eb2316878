/* A client of the OCI distribution API for one repository, on the loop through the project's
 * libcurl-on-libuv engine (lib/httpc/httpc.h): GETs of manifests and blobs with the
 * auth handshake (anonymous or credentialed bearer tokens from WWW-Authenticate, or Basic),
 * credentials from the files users already have, and errors that say what to do. */
#ifndef MCPBOX_IMAGE_REGISTRY_H
#define MCPBOX_IMAGE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/local/image/reference.h"
#include "lib/httpc/httpc.h"
#include "lib/base/error.h"

#define REGISTRY_INSECURE_ENV "MCPBOX_INSECURE_REGISTRIES"
/* Registries the person allows on this machine or its private networks (docs/images.md). */
#define REGISTRY_LOCAL_ENV "MCPBOX_REGISTRIES"

struct registry_client;

/* resp is NULL when err is set; both borrowed. */
typedef void registry_done_fn(void *arg, struct httpc_response *resp, const struct mcp_error *err);

/* A pull may reach an address that is not the public internet (loopback, private, link-local,
 * reserved: addr_blocked.h) only for a registry the person named in MCPBOX_REGISTRIES or
 * MCPBOX_INSECURE_REGISTRIES: else an image reference would let an agent send GETs to any port
 * of the host or its networks. registry_check_reference refuses such a host given as an address
 * (or localhost) at once; every connection is checked too (a name resolving inside, a redirect,
 * a token realm), except through a proxy from the environment, which then decides. */
int registry_check_reference(const struct image_ref *ref, struct mcp_error *err);

/* Plain HTTP only for loopback registries and those in MCPBOX_INSECURE_REGISTRIES; else
 * HTTPS. Credentials are looked up once, at the registry's first challenge (credentials.h); a
 * credential helper runs on loop. */
struct registry_client *registry_client_new(uv_loop_t *loop, struct httpc *http,
                                            const struct image_ref *ref);
void registry_client_free(struct registry_client *c);
/* Credentials given by the caller ("user:password", copied): sent at the first challenge
 * instead of any the files have. */
void registry_client_set_credentials(struct registry_client *c, const char *creds);

/* GET /v2/<repository>/<path> ("manifests/<tag>", "blobs/<digest>"). With a sink, 2xx bodies
 * go to it and are not buffered. done is called once, never from inside this call; a non-2xx
 * answer or a transport failure arrives as err, worded for the user. An answer that is not a
 * registry's (no distribution API error document or challenge; a manifest that is not one) is
 * opaque: the error says so without its status or any of its body. */
void registry_get(struct registry_client *c, const char *path, const char *accept,
                  size_t body_cap, httpc_sink_fn *sink, registry_done_fn *done, void *arg);

/* A blob's bytes: offset is where data starts in the blob. */
typedef int registry_blob_sink_fn(void *arg, uint64_t offset, const char *data, size_t len);

/* GET /v2/<repository>/blobs/<digest> from byte `from` on (a Range request when from > 0). A
 * registry that answers 206 with the range asked for continues at from; one that ignores the
 * range (200) starts again at 0, and the sink sees offset 0. Other answers fail as above. */
void registry_get_blob(struct registry_client *c, const char *digest, uint64_t from,
                       registry_blob_sink_fn *sink, registry_done_fn *done, void *arg);

/* ---- pushes (push.c) ----
 * A request of a push: method ("HEAD", "POST", "PUT") on target, relative to
 * /v2/<repository>/ ("blobs/<digest>", "blobs/uploads/?mount=...", "manifests/<tag>") or a
 * Location the registry answered (a path, or a URL on the registry's own host; another host is
 * refused). up: the body (borrowed until done), NULL for none. The answer's Location and
 * Docker-Content-Digest are kept (httpc_response_header). A token asked for is for pull,push. */
struct registry_upload {
    const char *content_type; /* NULL: none */
    const char *data;         /* in memory, or */
    size_t len;
    bool from_fd; /* from a file: size bytes of fd from offset 0 */
    int fd;
    uint64_t size;
};
void registry_send(struct registry_client *c, const char *method, const char *target,
                   const struct registry_upload *up, registry_done_fn *done, void *arg);
/* The sentence for a push's refusal (401, 403; push.c): true if it wrote one into err. */
bool registry_push_status_error(const char *registry, const char *repository, const char *method,
                                const char *path, long status, const char *words, bool creds,
                                struct mcp_error *err);

/* Whether the last request's failure may pass if it is tried again: a transport failure
 * (connection refused or cut, a stalled transfer) or HTTP 408, 429, 5xx; not a refusal, a
 * missing blob, a cancel or a sink that stopped. */
bool registry_retryable(const struct registry_client *c);

/* Cancels the request under way, if any (its done gets an error). */
void registry_cancel(struct registry_client *c);

/* Parses a Bearer challenge: realm, service, scope (each "" if absent). 0 if it is one. */
int registry_parse_bearer(const char *challenge, char *realm, size_t realm_size, char *service,
                          size_t service_size, char *scope, size_t scope_size);

#endif
