/* Parsing one line of /proc/PID/mountinfo (mountinfo.h). Fields, space-separated: mount id,
 * parent id, major:minor, root, mount point, mount options, then optional fields we skip. */
#include "backend/local/mountinfo.h"

#include <stddef.h>

/* A decimal number at *p, up to the byte stop; advances *p past stop. */
static bool number(const char **p, char stop, unsigned long max, unsigned long *out)
{
    const char *s = *p;
    unsigned long v = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max)
            return false;
    }
    if (*s != stop)
        return false;
    *out = v;
    *p = s + 1;
    return true;
}

/* Skips one field and the space after it. */
static bool skip_field(const char **p)
{
    const char *s = *p;
    while (*s && *s != ' ')
        s++;
    if (*s != ' ' || s == *p)
        return false;
    *p = s + 1;
    return true;
}

static bool is_octal(char c)
{
    return c >= '0' && c <= '7';
}

/* Copies the field at *p into out (size bytes), undoing \ooo escapes; advances past the space. */
static bool unescaped_field(const char **p, char *out, size_t size)
{
    const char *s = *p;
    size_t n = 0;
    for (; *s && *s != ' '; n++) {
        if (n + 1 >= size)
            return false;
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && is_octal(s[2]) && is_octal(s[3])) {
            out[n] = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 4;
        } else
            out[n] = *s++;
    }
    out[n] = '\0';
    if (*s != ' ' || n == 0)
        return false;
    *p = s + 1;
    return true;
}

int local_mountinfo_parse(const char *line, struct local_mountinfo *m)
{
    const char *p = line;
    unsigned long id, parent, maj, min;
    if (!number(&p, ' ', 0x7fffffff, &id) || !number(&p, ' ', 0x7fffffff, &parent) ||
        !number(&p, ':', 0xfff, &maj) || !number(&p, ' ', 0xfffff, &min) || !skip_field(&p) ||
        !unescaped_field(&p, m->point, sizeof m->point))
        return -1;
    m->id = (int)id, m->maj = (unsigned)maj, m->min = (unsigned)min;
    m->ro = p[0] == 'r' && p[1] == 'o' && (p[2] == ',' || p[2] == ' ' || p[2] == '\0');
    return 0;
}
