/* The status line a terminal's helper prints last on stderr (backend/shell_terminal.h), which a
 * sandbox can forge (it controls the programs the helper runs): any bytes parse to a bounded
 * result without reading outside them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shell_terminal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any read past them */
    memcpy(copy, data, size);
    struct shell_terminal_status st;
    shell_terminal_parse_status(copy, size, &st);
    if (!st.seen && (st.running || st.gone || st.size || st.offset))
        abort();
    if (st.running && st.gone)
        abort();
    char key[8];
    char name[16] = {0};
    memcpy(name, data, size < sizeof name - 1 ? size : sizeof name - 1);
    if (shell_terminal_key(name, key) > 8)
        abort();
    free(copy);
    return 0;
}
