/* UTF-8 validation, sanitizing and page cuts (see utf8.h). */
#include "lib/base/utf8.h"

#include <stdint.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/xalloc.h"

size_t utf8_char_len(const char *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    unsigned char c = p[0];
    size_t n;
    uint32_t cp;
    if (len == 0 || c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        n = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n > len)
        return 0;
    for (size_t k = 1; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[k] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

bool utf8_is_text(const char *data, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_char_len(data + i, len - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

size_t utf8_complete_prefix(const char *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char c = p[len - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation: keep looking for the lead byte */
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? len - back : len;
    }
    return len;
}

size_t utf8_page_end(const char *data, size_t len)
{
    size_t whole = utf8_complete_prefix(data, len);
    return whole > 0 ? whole : len;
}

size_t utf8_skip_continuation(const char *data, size_t len)
{
    size_t i = 0;
    while (i < len && i < 3 && ((unsigned char)data[i] & 0xC0) == 0x80)
        i++;
    return i;
}

size_t utf8_sanitize_append(struct buf *b, const char *data, size_t len, size_t max)
{
    size_t i = 0, written = 0;
    while (i < len) {
        size_t n = utf8_char_len(data + i, len - i);
        size_t out_n = n ? n : sizeof(UTF8_REPLACEMENT) - 1;
        if (written + out_n > max)
            break;
        if (buf_append(b, n ? data + i : UTF8_REPLACEMENT, out_n) < 0)
            break;
        written += out_n;
        i += n ? n : 1;
    }
    return i;
}

json_t *utf8_json_text(const char *data, size_t len)
{
    struct buf b;
    buf_init(&b, SIZE_MAX);
    utf8_sanitize_append(&b, data, len, SIZE_MAX);
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    buf_release(&b);
    return s;
}

/* True for a character a terminal shows as itself: cl (its length, 0: not UTF-8) bytes at p,
 * not a C0 or C1 control, DEL, a quote, a backslash, or a bidirectional override or isolate
 * (which reorder what a person reads). */
static bool shown_as_is(const unsigned char *p, size_t cl)
{
    if (cl == 0 || p[0] < 0x20 || p[0] == 0x7f || p[0] == '"' || p[0] == '\\')
        return false;
    if (cl == 2 && p[0] == 0xC2 && p[1] < 0xA0)
        return false; /* U+0080..U+009F */
    if (cl == 3 && p[0] == 0xE2 &&
        ((p[1] == 0x80 && p[2] >= 0xAA && p[2] <= 0xAE) ||
         (p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9)))
        return false; /* U+202A..U+202E, U+2066..U+2069 */
    return true;
}

char *utf8_c_quote(const char *p)
{
    size_t n = strlen(p), i = 0, cl;
    while (i < n && shown_as_is((const unsigned char *)p + i, cl = utf8_char_len(p + i, n - i)))
        i += cl;
    if (i == n)
        return xstrdup(p);
    struct buf b;
    buf_init(&b, SIZE_MAX);
    buf_append_str(&b, "\"");
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        static const char esc[] = "\a\b\t\n\v\f\r", name[] = "abtnvfr";
        const char *e = ch ? strchr(esc, ch) : NULL;
        cl = utf8_char_len(p + i, n - i);
        if (ch == '"' || ch == '\\')
            buf_printf(&b, "\\%c", ch);
        else if (e)
            buf_printf(&b, "\\%c", name[e - esc]);
        else if (shown_as_is((const unsigned char *)p + i, cl)) {
            buf_append(&b, p + i, cl);
            i += cl - 1;
        } else { /* each byte of what a terminal must not see */
            size_t len = cl ? cl : 1;
            for (size_t k = 0; k < len; k++)
                buf_printf(&b, "\\%03o", (unsigned char)p[i + k]);
            i += len - 1;
        }
    }
    buf_append_str(&b, "\"");
    return buf_steal(&b, NULL);
}
