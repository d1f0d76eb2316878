/* SHA-256 of layer bytes (the blob as it downloads, the uncompressed stream as it unpacks):
 * libnettle's when it is in the process, else the project's own (lib/base/util.h). libarchive
 * links libnettle, so once oci_archive_load() has run it is there, with the CPU's SHA
 * instructions where they exist (about 860 MB/s against 230 on the project's machine). */
#ifndef MCPBOX_IMAGE_LAYER_HASH_H
#define MCPBOX_IMAGE_LAYER_HASH_H

#include <stddef.h>

#include "lib/base/util.h"

struct layer_hash {
    union {
        struct sha256_ctx own;
        _Alignas(16) unsigned char nettle[256]; /* struct sha256_ctx of nettle: 112 bytes */
    } u;
    int nettle_in_use;
};

/* Looks for libnettle among the loaded libraries (called by oci_archive_load). */
void layer_hash_setup(void);

void layer_hash_init(struct layer_hash *h);
void layer_hash_update(struct layer_hash *h, const void *data, size_t len);
/* "sha256:<64 hex>" into out. */
void layer_hash_final(struct layer_hash *h, char out[72]);

#endif
