/* Image references as Docker and podman read them:
 *
 *   [registry[:port]/]path[/path...][:tag][@sha256:<64 hex>]
 *
 * The first component is a registry if it contains '.' or ':', is "localhost", or has an
 * upper-case letter; otherwise the registry is docker.io, where a single-component name gets
 * "library/". The tag defaults to "latest"; with a digest the tag is kept only for display and
 * the digest decides what is pulled. */
#ifndef MCPBOX_IMAGE_REFERENCE_H
#define MCPBOX_IMAGE_REFERENCE_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/base/error.h"

#define IMAGE_REF_NAME_MAX 255 /* the repository path, as Docker limits it */
#define IMAGE_REF_TAG_MAX 128
#define IMAGE_DIGEST_LEN 71 /* "sha256:" + 64 hex */
#define IMAGE_REF_TEXT_MAX (IMAGE_REF_NAME_MAX * 2 + IMAGE_REF_TAG_MAX + IMAGE_DIGEST_LEN + 8)

struct image_ref {
    char registry[IMAGE_REF_NAME_MAX + 1];   /* "docker.io", "127.0.0.1:5000", "[::1]:5000" */
    char repository[IMAGE_REF_NAME_MAX + 1]; /* "library/python", "test/bb" */
    char tag[IMAGE_REF_TAG_MAX + 1];         /* "latest" when none was given */
    char digest[IMAGE_DIGEST_LEN + 1];       /* "" or "sha256:<hex>" */
};

/* Parses text; -1 with err (MCP_ERR_INVALID, saying which part is wrong) if it is not a valid
 * reference. */
int image_ref_parse(const char *text, struct image_ref *ref, struct mcp_error *err);

/* The normalized form: "docker.io/library/python:3.12-slim", "host:5000/a/b@sha256:...". */
void image_ref_format(const struct image_ref *ref, char *out, size_t size);

/* The host the distribution API lives on ("registry-1.docker.io" for docker.io). */
const char *image_ref_api_host(const struct image_ref *ref);

/* What goes after the manifest endpoint: the digest if there is one, else the tag. */
const char *image_ref_manifest_ref(const struct image_ref *ref);

/* Plain HTTP is allowed for loopback registries (localhost, 127.0.0.0/8, [::1]) and for those
 * named in insecure_list (comma- or space-separated "host[:port]", as in
 * MCPBOX_INSECURE_REGISTRIES; a host without a port matches every port). */
bool image_ref_plain_http_ok(const struct image_ref *ref, const char *insecure_list);

/* Whether the reference's registry is named in list (as for image_ref_plain_http_ok). */
bool image_ref_listed(const struct image_ref *ref, const char *list);

/* The registry's host without port or brackets ("::1" for "[::1]:5000"); snprintf's result. */
size_t image_ref_host(const struct image_ref *ref, char *out, size_t size);

/* True for "sha256:" followed by exactly 64 lower-case hex digits. */
bool image_digest_valid(const char *digest);

#endif
