/* Differential fuzz target for the request fast path: whenever json_in_parse accepts a text, it
 * must build exactly the tree jansson builds for it (json_loadb with the same flags); when it
 * declines, nothing is lost because the caller falls back to jansson. Any disagreement aborts. */
#include <stdint.h>
#include <stdlib.h>

#include "lib/base/json_in.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *fast = json_in_parse((const char *)data, size);
    if (fast == NULL)
        return 0;
    json_error_t jerr;
    json_t *slow =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (slow == NULL || !json_equal(fast, slow))
        abort();
    json_decref(fast);
    json_decref(slow);
    return 0;
}
