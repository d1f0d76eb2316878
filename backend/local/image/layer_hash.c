/* Layer hashing (layer_hash.h). */
#include "backend/local/image/layer_hash.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct nettle_sha256 {
    void (*init)(void *ctx);
    void (*update)(void *ctx, size_t length, const uint8_t *data);
    void (*digest)(void *ctx, size_t length, uint8_t *digest);
};

static struct nettle_sha256 nettle; /* set once on the loop, before any worker hashes */

void layer_hash_setup(void)
{
    if (nettle.digest)
        return;
    /* Only if already loaded (by libarchive): never a library of its own. */
    void *lib = dlopen("libnettle.so.8", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        return;
    struct nettle_sha256 n;
    *(void **)&n.init = dlsym(lib, "nettle_sha256_init");
    *(void **)&n.update = dlsym(lib, "nettle_sha256_update");
    *(void **)&n.digest = dlsym(lib, "nettle_sha256_digest");
    if (n.init && n.update && n.digest)
        nettle = n;
    dlclose(lib); /* libarchive keeps it loaded */
}

void layer_hash_init(struct layer_hash *h)
{
    h->nettle_in_use = nettle.digest != NULL;
    if (h->nettle_in_use)
        nettle.init(h->u.nettle);
    else
        sha256_init(&h->u.own);
}

void layer_hash_update(struct layer_hash *h, const void *data, size_t len)
{
    if (h->nettle_in_use)
        nettle.update(h->u.nettle, len, data);
    else
        sha256_update(&h->u.own, data, len);
}

void layer_hash_final(struct layer_hash *h, char out[72])
{
    unsigned char d[32];
    if (h->nettle_in_use)
        nettle.digest(h->u.nettle, sizeof d, d);
    else
        sha256_final(&h->u.own, d);
    memcpy(out, "sha256:", 7);
    for (int i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}
