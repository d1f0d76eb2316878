/* Fuzz target for the image reference parser (backend/local/image/reference.h). Whatever it
 * accepts must be a fixed point: formatting the result and parsing that again gives the same
 * registry, repository and digest (and tag, without a digest); every field is NUL-terminated
 * and the digest, if any, is valid. Any disagreement aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/local/image/reference.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[IMAGE_REF_TEXT_MAX + 16];
    if (size >= sizeof text)
        size = sizeof text - 1;
    memcpy(text, data, size);
    text[size] = '\0';
    struct image_ref r, again;
    struct mcp_error err;
    if (image_ref_parse(text, &r, &err) < 0) {
        if (err.msg[0] == '\0')
            abort();
        return 0;
    }
    if (r.digest[0] && !image_digest_valid(r.digest))
        abort();
    char out[IMAGE_REF_TEXT_MAX];
    image_ref_format(&r, out, sizeof out);
    if (image_ref_parse(out, &again, &err) < 0)
        abort();
    if (strcmp(r.registry, again.registry) || strcmp(r.repository, again.repository) ||
        strcmp(r.digest, again.digest) || (!r.digest[0] && strcmp(r.tag, again.tag)))
        abort();
    (void)image_ref_plain_http_ok(&r, "a.b:1, c");
    return 0;
}
