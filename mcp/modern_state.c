/* Sealed requestState for InputRequiredResult (MRTR): the server keeps nothing between rounds,
 * so whatever it needs in the next round travels through the client as
 *     base64(json) "." hex(HMAC-SHA256(key, base64(json)))
 * under a random per-process key. A state that was altered, or sealed by an earlier process,
 * fails to open (the client then starts the request again without inputResponses). */
#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "mcp/modern-internal.h"

#define STATE_KEY_BYTES 32
#define SHA256_BLOCK 64
#define SHA256_BYTES 32
/* A sealed state longer than this is refused before any decoding. */
#define STATE_MAX_LEN (64u * 1024u)

static unsigned char state_key[STATE_KEY_BYTES];
static bool state_key_ready;

static void hmac_sha256(const void *msg, size_t len, unsigned char out[SHA256_BYTES])
{
    unsigned char pad[SHA256_BLOCK], inner[SHA256_BYTES];
    struct sha256_ctx c;

    if (!state_key_ready) {
        random_bytes(state_key, sizeof(state_key));
        state_key_ready = true;
    }
    memset(pad, 0x36, sizeof(pad));
    for (size_t i = 0; i < STATE_KEY_BYTES; i++)
        pad[i] ^= state_key[i];
    sha256_init(&c);
    sha256_update(&c, pad, sizeof(pad));
    sha256_update(&c, msg, len);
    sha256_final(&c, inner);
    memset(pad, 0x5c, sizeof(pad));
    for (size_t i = 0; i < STATE_KEY_BYTES; i++)
        pad[i] ^= state_key[i];
    sha256_init(&c);
    sha256_update(&c, pad, sizeof(pad));
    sha256_update(&c, inner, sizeof(inner));
    sha256_final(&c, out);
}

char *modern_state_seal(const json_t *state)
{
    cleanup_free char *text = json_dumps(state, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t len = strlen(text), b64 = base64_encoded_len(len);
    unsigned char mac[SHA256_BYTES];
    char *out = xmalloc(b64 + 1 + 2 * SHA256_BYTES + 1);

    base64_encode(text, len, out);
    hmac_sha256(out, b64, mac);
    out[b64] = '.';
    hex_encode(mac, sizeof(mac), out + b64 + 1);
    return out;
}

/* Constant-time comparison: the time taken must not reveal how much of a forged MAC matched. */
static bool mac_equal(const char *a, const char *b, size_t len)
{
    unsigned char diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

json_t *modern_state_open(const char *sealed)
{
    const char *dot = sealed ? strrchr(sealed, '.') : NULL;
    unsigned char mac[SHA256_BYTES];
    char want[2 * SHA256_BYTES + 1];

    if (!dot || strnlen(sealed, STATE_MAX_LEN + 1) > STATE_MAX_LEN ||
        strlen(dot + 1) != 2 * SHA256_BYTES)
        return NULL;
    size_t b64 = (size_t)(dot - sealed);
    hmac_sha256(sealed, b64, mac);
    hex_encode(mac, sizeof(mac), want);
    if (!mac_equal(want, dot + 1, 2 * SHA256_BYTES))
        return NULL;
    cleanup_free unsigned char *raw = xmalloc(base64_decoded_max(b64) + 1);
    size_t n;
    if (base64_decode(sealed, b64, raw, &n) < 0)
        return NULL;
    return json_loadb((const char *)raw, n, JSON_DECODE_ANY, NULL);
}
