/* Fuzz target for the mountinfo line parser the volume watcher uses on a sandbox's
 * /proc/PID/mountinfo (backend/local/mountinfo.h), whose mount points the sandbox names. Input:
 * a line as it is (parsed for crashes and overruns), and the same bytes taken as a mount point
 * escaped the way the kernel escapes one (space, tab, newline, backslash as \ooo) into an
 * otherwise well-formed line: the parser must give that mount point back exactly. Any
 * disagreement aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/local/mountinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The kernel's escaping of a mount point (fs/proc_namespace.c: mangle(), " \t\n\\"). */
static size_t escape(const char *in, char *out)
{
    size_t n = 0;
    for (; *in; in++) {
        if (strchr(" \t\n\\", *in))
            n += (size_t)sprintf(out + n, "\\%03o", (unsigned char)*in);
        else
            out[n++] = *in;
    }
    out[n] = '\0';
    return n;
}

static void round_trip(const char *point, size_t len)
{
    static struct local_mountinfo m;
    char *esc = malloc(4 * len + 1), *line = malloc(4 * len + 64);
    escape(point, esc);
    snprintf(line, 4 * len + 64, "123 45 8:17 / %s ro,nosuid - ext4 /dev/x rw", esc);
    int rc = local_mountinfo_parse(line, &m);
    if (len == 0 || len >= LOCAL_MOUNTINFO_PATH_MAX) {
        if (rc == 0)
            abort(); /* empty or too long: refused */
    } else if (rc != 0 || strcmp(m.point, point) != 0 || m.id != 123 || m.maj != 8 || m.min != 17 ||
               !m.ro)
        abort();
    free(esc), free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct local_mountinfo m;
    if (size > 16384)
        return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    if (local_mountinfo_parse(text, &m) == 0 && strlen(m.point) >= LOCAL_MOUNTINFO_PATH_MAX)
        abort();
    round_trip(text, strlen(text));
    free(text);
    return 0;
}
