/* Manifests and indexes of the OCI image spec and Docker's v2 schema 2: parsing, media types,
 * and the choice of the host's platform from an index. Pure functions over JSON text, so the
 * fuzz target reaches all of it. */
#ifndef MCPBOX_IMAGE_MANIFEST_H
#define MCPBOX_IMAGE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "backend/local/image/reference.h"
#include "lib/base/error.h"

#define OCI_MEDIA_TYPE_MAX 128
#define OCI_MAX_LAYERS 128    /* overlayfs stacks at most ~500, Docker builds at most 127 */
#define OCI_MAX_PLATFORMS 256 /* entries of an index */
#define OCI_MANIFEST_MAX (4u << 20) /* the distribution project's own limit on a manifest */
#define OCI_CONFIG_MAX (8u << 20)

/* The Accept header for manifest requests: every type parsed here. */
#define OCI_MANIFEST_ACCEPT                                                                        \
    "application/vnd.oci.image.index.v1+json, "                                                   \
    "application/vnd.docker.distribution.manifest.list.v2+json, "                                 \
    "application/vnd.oci.image.manifest.v1+json, "                                                \
    "application/vnd.docker.distribution.manifest.v2+json"

enum oci_compression { OCI_TAR, OCI_GZIP, OCI_ZSTD };

struct oci_descriptor {
    char media_type[OCI_MEDIA_TYPE_MAX];
    char digest[IMAGE_DIGEST_LEN + 1];
    int64_t size;
    /* index entries only ("" when absent) */
    char os[32], arch[32], variant[32];
    enum oci_compression compression; /* layers only */
};

struct oci_manifest {
    bool is_index;
    char media_type[OCI_MEDIA_TYPE_MAX];
    struct oci_descriptor config;   /* image manifests */
    struct oci_descriptor *entries; /* layers (bottom first) or the index's manifests */
    size_t n_entries;
};

/* Parses a manifest or index. content_type is the response's Content-Type (may be NULL or
 * generic); the body's mediaType decides when it is more specific. -1 with err saying what is
 * wrong (schema 1, an artifact that is not a container image, a bad digest, too many layers).
 * The result is freed with oci_manifest_free. */
int oci_manifest_parse(const char *body, size_t len, const char *content_type,
                       struct oci_manifest *m, struct mcp_error *err);
void oci_manifest_free(struct oci_manifest *m);

/* The host's platform as OCI names it: "linux", "amd64"/"arm64"/..., variant ("v8" on arm64,
 * "" where none applies). */
void oci_host_platform(const char **os, const char **arch, const char **variant);

/* The index entry for os/arch/variant (an entry without a variant matches any variant; an exact
 * variant wins). NULL with err listing the platforms the index offers. */
const struct oci_descriptor *oci_index_choose(const struct oci_manifest *index, const char *os,
                                              const char *arch, const char *variant,
                                              struct mcp_error *err);

/* sha256 of data as "sha256:<hex>". */
void oci_digest_of(const void *data, size_t len, char out[IMAGE_DIGEST_LEN + 1]);

#endif
