/* Manifest and index parsing (manifest.h). */
#include "backend/local/image/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_V1 "application/vnd.docker.distribution.manifest.v1"

void oci_digest_of(const void *data, size_t len, char out[IMAGE_DIGEST_LEN + 1])
{
    char hex[65];
    sha256_hex(data, len, hex);
    snprintf(out, IMAGE_DIGEST_LEN + 1, "sha256:%s", hex);
}

static bool is_index_type(const char *t)
{
    return strcmp(t, MT_OCI_INDEX) == 0 || strcmp(t, MT_DOCKER_LIST) == 0;
}

static bool is_manifest_type(const char *t)
{
    return strcmp(t, MT_OCI_MANIFEST) == 0 || strcmp(t, MT_DOCKER_MANIFEST) == 0;
}

/* A Content-Type without its parameters ("; charset=..."). */
static void bare_type(const char *in, char out[OCI_MEDIA_TYPE_MAX])
{
    size_t n = in ? strcspn(in, "; \t") : 0;
    if (n >= OCI_MEDIA_TYPE_MAX)
        n = OCI_MEDIA_TYPE_MAX - 1;
    memcpy(out, in ? in : "", n);
    out[n] = '\0';
}

static int layer_compression(const char *t, enum oci_compression *c)
{
    static const struct {
        const char *type;
        enum oci_compression c;
    } known[] = {
        {"application/vnd.oci.image.layer.v1.tar", OCI_TAR},
        {"application/vnd.oci.image.layer.v1.tar+gzip", OCI_GZIP},
        {"application/vnd.oci.image.layer.v1.tar+zstd", OCI_ZSTD},
        {"application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_TAR},
        {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", OCI_GZIP},
        {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", OCI_ZSTD},
        {"application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_GZIP},
        {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", OCI_GZIP},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(t, known[i].type) == 0) {
            *c = known[i].c;
            return 0;
        }
    return -1;
}

static int copy_str(char *dst, size_t cap, json_t *v)
{
    const char *s = json_string_value(v);
    if (s == NULL) {
        dst[0] = '\0';
        return 0;
    }
    if (strlen(s) >= cap)
        return -1;
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

static int bad(struct mcp_error *err, const char *what, size_t i, const char *why)
{
    return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                         "the registry sent an invalid manifest: %s %zu %s (the image is broken "
                         "or not a container image; check the reference)",
                         what, i, why);
}

static int parse_descriptor(json_t *j, struct oci_descriptor *d, const char *what, size_t i,
                            struct mcp_error *err)
{
    memset(d, 0, sizeof *d);
    if (!json_is_object(j))
        return bad(err, what, i, "is not an object");
    json_t *size = json_object_get(j, "size");
    if (copy_str(d->media_type, sizeof d->media_type, json_object_get(j, "mediaType")) < 0)
        return bad(err, what, i, "has an over-long mediaType");
    if (copy_str(d->digest, sizeof d->digest, json_object_get(j, "digest")) < 0 ||
        !image_digest_valid(d->digest))
        return bad(err, what, i, "has no valid sha256 digest");
    if (!json_is_integer(size) || json_integer_value(size) < 0)
        return bad(err, what, i, "has no valid size");
    d->size = json_integer_value(size);
    json_t *p = json_object_get(j, "platform");
    if (json_is_object(p) &&
        (copy_str(d->os, sizeof d->os, json_object_get(p, "os")) < 0 ||
         copy_str(d->arch, sizeof d->arch, json_object_get(p, "architecture")) < 0 ||
         copy_str(d->variant, sizeof d->variant, json_object_get(p, "variant")) < 0))
        return bad(err, what, i, "has an over-long platform");
    return 0;
}

static int parse_list(json_t *arr, size_t max, const char *what, struct oci_manifest *m,
                      struct mcp_error *err)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "the registry sent a manifest without %ss (not a container image?)",
                             what);
    if (json_array_size(arr) > max)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the image has %zu %ss; at most %zu are supported",
                             json_array_size(arr), what, max);
    m->n_entries = json_array_size(arr);
    m->entries = xcalloc(m->n_entries, sizeof *m->entries);
    for (size_t i = 0; i < m->n_entries; i++)
        if (parse_descriptor(json_array_get(arr, i), &m->entries[i], what, i, err) < 0)
            return -1;
    return 0;
}

static int parse_image_manifest(json_t *root, struct oci_manifest *m, struct mcp_error *err)
{
    if (parse_descriptor(json_object_get(root, "config"), &m->config, "config", 0, err) < 0)
        return -1;
    const char *ct = m->config.media_type;
    if (strcmp(ct, "application/vnd.oci.image.config.v1+json") != 0 &&
        strcmp(ct, "application/vnd.docker.container.image.v1+json") != 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "this is not a container image (its config is '%.100s'): it may be "
                             "an artifact such as a Helm chart or a signature",
                             ct[0] ? ct : "without a media type");
    if (parse_list(json_object_get(root, "layers"), OCI_MAX_LAYERS, "layer", m, err) < 0)
        return -1;
    for (size_t i = 0; i < m->n_entries; i++)
        if (layer_compression(m->entries[i].media_type, &m->entries[i].compression) < 0)
            return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                                 "layer %zu has the media type '%.100s'; supported are tar, "
                                 "tar+gzip and tar+zstd layers",
                                 i, m->entries[i].media_type);
    return 0;
}

/* The body's mediaType, else the Content-Type, else the shape ("manifests" or "layers"). */
static int manifest_type(json_t *root, const char *content_type, struct oci_manifest *m,
                         struct mcp_error *err)
{
    char ct[OCI_MEDIA_TYPE_MAX];
    bare_type(content_type, ct);
    if (copy_str(m->media_type, sizeof m->media_type, json_object_get(root, "mediaType")) < 0)
        return bad(err, "mediaType", 0, "is too long");
    if (m->media_type[0] == '\0' && (is_index_type(ct) || is_manifest_type(ct)))
        memcpy(m->media_type, ct, sizeof ct);
    if (m->media_type[0] == '\0')
        snprintf(m->media_type, sizeof m->media_type, "%s",
                 json_object_get(root, "manifests") ? MT_OCI_INDEX : MT_OCI_MANIFEST);
    if (strncmp(m->media_type, MT_DOCKER_V1, strlen(MT_DOCKER_V1)) == 0 ||
        strncmp(ct, MT_DOCKER_V1, strlen(MT_DOCKER_V1)) == 0 ||
        json_integer_value(json_object_get(root, "schemaVersion")) == 1)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the image uses Docker's old manifest schema 1, which is not "
                             "supported: push it again with a current Docker or skopeo");
    if (!is_index_type(m->media_type) && !is_manifest_type(m->media_type))
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the reference names a '%.100s', not a container image or image "
                             "index",
                             m->media_type);
    m->is_index = is_index_type(m->media_type);
    return 0;
}

int oci_manifest_parse(const char *body, size_t len, const char *content_type,
                       struct oci_manifest *m, struct mcp_error *err)
{
    memset(m, 0, sizeof *m);
    if (len > OCI_MANIFEST_MAX)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0, "the manifest is larger than %u bytes",
                             OCI_MANIFEST_MAX);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "the registry sent a manifest that is not a JSON object (at byte "
                             "%d)",
                             jerr.position); /* not jerr.text: it quotes the body */
    }
    int rc = manifest_type(root, content_type, m, err);
    if (rc == 0)
        rc = m->is_index ? parse_list(json_object_get(root, "manifests"), OCI_MAX_PLATFORMS,
                                      "manifest", m, err)
                         : parse_image_manifest(root, m, err);
    json_decref(root);
    if (rc < 0)
        oci_manifest_free(m);
    return rc;
}

void oci_manifest_free(struct oci_manifest *m)
{
    free(m->entries);
    m->entries = NULL;
    m->n_entries = 0;
}

void oci_host_platform(const char **os, const char **arch, const char **variant)
{
    *os = "linux";
#if defined(__x86_64__)
    *arch = "amd64", *variant = "";
#elif defined(__aarch64__)
    *arch = "arm64", *variant = "v8";
#elif defined(__arm__)
    *arch = "arm", *variant = "v7";
#elif defined(__i386__)
    *arch = "386", *variant = "";
#elif defined(__riscv) && __riscv_xlen == 64
    *arch = "riscv64", *variant = "";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    *arch = "ppc64le", *variant = "";
#elif defined(__s390x__)
    *arch = "s390x", *variant = "";
#else
    *arch = "unknown", *variant = "";
#endif
}

const struct oci_descriptor *oci_index_choose(const struct oci_manifest *index, const char *os,
                                              const char *arch, const char *variant,
                                              struct mcp_error *err)
{
    const struct oci_descriptor *loose = NULL;
    for (size_t i = 0; i < index->n_entries; i++) {
        const struct oci_descriptor *d = &index->entries[i];
        if (strcmp(d->os, os) != 0 || strcmp(d->arch, arch) != 0 ||
            !is_manifest_type(d->media_type[0] ? d->media_type : MT_OCI_MANIFEST))
            continue;
        if (strcmp(d->variant, variant) == 0)
            return d;
        if (loose == NULL && (d->variant[0] == '\0' || variant[0] == '\0'))
            loose = d;
    }
    if (loose)
        return loose;
    struct buf offered;
    buf_init(&offered, 300);
    for (size_t i = 0; i < index->n_entries; i++) {
        const struct oci_descriptor *d = &index->entries[i];
        if (d->os[0] && buf_printf(&offered, "%s%s/%s%s%s", offered.len ? ", " : "", d->os,
                                   d->arch, d->variant[0] ? "/" : "", d->variant) < 0)
            break;
    }
    mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                  "the image has no variant for this host's platform %s/%s%s%s (it offers: "
                  "%.300s); use an image built for %s",
                  os, arch, variant[0] ? "/" : "", variant,
                  offered.len ? buf_cstr(&offered) : "none", arch);
    buf_release(&offered);
    return NULL;
}
