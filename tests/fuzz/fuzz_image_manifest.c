/* Fuzz target for the manifest/index parser and the image config parser
 * (backend/local/image/manifest.h, image_config.h): the first byte picks the Content-Type the
 * registry claims, the rest is the body. Whatever is accepted must hold only valid digests,
 * non-negative sizes and at most the documented number of entries; a pushed snapshot's labels
 * (org.mcpbox.snapshot.*) name the image's top layer or are dropped. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/local/image/image_config.h"
#include "backend/local/image/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct oci_descriptor *d)
{
    if (!image_digest_valid(d->digest) || d->size < 0)
        abort();
}

/* A pushed snapshot's labels are kept only for the image's top layer (image_config.h). */
static void check_snapshot_labels(const struct image_config *c)
{
    bool listed = c->snapshot_layer[0] == '\0' ||
                  (c->n_diff_ids > 0 && strcmp(c->diff_ids[c->n_diff_ids - 1], c->snapshot_layer) == 0);
    if (!listed || (c->snapshot_layer[0] && !image_digest_valid(c->snapshot_layer)))
        abort();
    json_decref(image_config_to_json(c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const types[] = {NULL, "application/vnd.oci.image.index.v1+json",
                                        "application/vnd.docker.distribution.manifest.v2+json",
                                        "application/vnd.docker.distribution.manifest.v1+json",
                                        "application/json; charset=utf-8"};
    if (size == 0)
        return 0;
    const char *ct = types[data[0] % 5];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    struct oci_manifest m;
    struct mcp_error err;
    if (oci_manifest_parse(body, len, ct, &m, &err) == 0) {
        if (m.n_entries == 0 || m.n_entries > (m.is_index ? OCI_MAX_PLATFORMS : OCI_MAX_LAYERS))
            abort();
        for (size_t i = 0; i < m.n_entries; i++)
            check(&m.entries[i]);
        if (m.is_index) {
            const struct oci_descriptor *d = oci_index_choose(&m, "linux", "amd64", "", &err);
            if (d && (d < m.entries || d >= m.entries + m.n_entries))
                abort();
        } else {
            check(&m.config);
        }
        oci_manifest_free(&m);
    }
    struct image_config c;
    if (image_config_parse(body, len, &c, &err) == 0) {
        if (c.workdir[0] && c.workdir[0] != '/')
            abort();
        check_snapshot_labels(&c);
        image_config_free(&c);
    }
    return 0;
}
