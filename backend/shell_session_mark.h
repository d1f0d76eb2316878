/* The end marker of a command in a shell session on the proc primitive
 * (backend/shell_session_proc.h; docs/tools-design.md, "Shell sessions").
 *
 * When a command ends, the session's shell prints "\n<nonce> <status> <cwd> <nonce>\n" on both
 * its stdout and its stderr, where the nonce is fresh per command (128 random bits, never in the
 * shell's variables or environment while the command runs) and status is the exit status or a
 * word (gone, limit, error, nobash; start for the marker a command after an attach begins with). The leading "\n" is the marker's own, so output without a trailing
 * newline comes back byte-exact. One splitter per stream passes everything before the marker on
 * and holds back only what could still be the marker's start (at most its 34 bytes); it keeps at
 * most SHELL_MARK_MAX bytes of the marker itself, so a flood costs nothing but its own session.
 */
#ifndef MCPBOX_SHELL_SESSION_MARK_H
#define MCPBOX_SHELL_SESSION_MARK_H

#include <stdbool.h>
#include <stddef.h>

#define SHELL_MARK_NONCE_HEX 32
#define SHELL_MARK_CWD_MAX 4096
#define SHELL_MARK_MAX (SHELL_MARK_CWD_MAX + SHELL_MARK_NONCE_HEX + 64)

typedef void shell_mark_emit_fn(void *arg, const char *data, size_t len);

struct shell_mark {
    char start[SHELL_MARK_NONCE_HEX + 3]; /* "\n<nonce> " */
    char end[SHELL_MARK_NONCE_HEX + 3];   /* " <nonce>\n" */
    size_t held;                          /* bytes of start matched at the end of the output */
    bool inside, done, overflow;
    char body[SHELL_MARK_MAX]; /* after start: "<status> <cwd> <nonce>\n" as far as it came */
    size_t body_len;
};

/* What a finished marker said. */
struct shell_mark_result {
    int status;                       /* exit status, or -1 for a word or a malformed status */
    char word[8];                     /* "gone", "limit", "error", "nobash", "start" or "" */
    char cwd[SHELL_MARK_CWD_MAX + 1]; /* the shell's $PWD ("" when it did not fit) */
};

void shell_mark_init(struct shell_mark *m, const char *nonce);
/* Passes output on to emit until the marker; returns how many bytes of data it took (all of
 * them, or up to the marker's last byte: the rest is output after the command). */
size_t shell_mark_feed(struct shell_mark *m, const char *data, size_t len, shell_mark_emit_fn *emit,
                       void *arg);
/* True once the marker has been read whole; res then says what it held. */
bool shell_mark_result(const struct shell_mark *m, struct shell_mark_result *res);

#endif
