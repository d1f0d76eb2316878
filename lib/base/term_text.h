/* What a terminal program printed, as text a model can read: escape sequences removed, carriage
 * returns and backspaces applied to the line as a terminal would show it. */
#ifndef MCPBOX_BASE_TERM_TEXT_H
#define MCPBOX_BASE_TERM_TEXT_H

#include <stddef.h>

/* Cleans data[0..len): drops CSI, OSC, DCS/SOS/PM/APC strings and other ESC sequences (also a
 * sequence cut off at the end; one that moves the cursor to a row or clears the screen ends a
 * line that has text), turns CR LF into LF, applies a lone CR (back to the start of the line,
 * later bytes overwrite) and BS (one back), and drops the other C0 controls but TAB and LF, and
 * DEL. Returns a malloc'd NUL-terminated string of *out_len bytes; *out_len <= len always. */
char *term_text_clean(const char *data, size_t len, size_t *out_len);

#endif
