/* Review and apply of copy-on-write mounts (issue 13; the workflow is in docs/tools-design.md).
 *
 * A copy-on-write mount is an overlay whose lower layer is the host directory and whose upper
 * layer holds what the sandbox changed. Overlay keeps no copy of a lower file as it was, so the
 * changes are read off the upper layer against the host as it is now:
 *  - a regular file, symlink or special file in upper: added (nothing in lower), modified
 *    (contents, symlink target or type differ), mode (only the permission bits differ), or
 *    nothing (copied up but equal, e.g. touched, or already applied);
 *  - a whiteout (a 0/0 character device): the lower entry is deleted (a directory: each entry
 *    below it, deepest first, then the directory);
 *  - an opaque directory (<prefix>opaque = "y"): lower entries it does not hold are deleted.
 * Paths are relative to the mount; the sandbox sees them below the mount's target.
 *
 * Conflicts ("changed on the host since the sandbox saw it"): the host entry's ctime is at or
 * after since_ns (less WS_CLOCK_SLACK_NS), unless the mount's journal recorded it after an
 * apply, in which case any difference from the recorded inode and ctime is a conflict.
 *
 * The engine reads the upper layer and the host with the caller's credentials (the helper,
 * workspace_helper.c, joins the sandbox's user namespace first where the upper layer is owned
 * by subordinate ids) and never follows a symlink on either side: every path is walked from
 * the mount's directories with openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH), and the host
 * directory itself is the descriptor the caller verified (ws_mount.source_fd), never a path. */
#ifndef MCPBOX_WORKSPACE_REVIEW_H
#define MCPBOX_WORKSPACE_REVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lib/base/error.h"
#include "lib/base/util.h"

#define WS_CLOCK_SLACK_NS 20000000ll /* file times come from a coarse clock (a tick) */
/* What one file may cost a review (issue 32, item 5): a side larger than WS_DIFF_SIDE_MAX bytes
 * or longer than WS_DIFF_LINES_MAX lines is not diffed line by line ("diff_cut" says why), and
 * the line diff's work is capped (UDIFF_WORK_MAX: past it a region is shown replaced whole). */
#define WS_DIFF_SIDE_MAX (1u << 20)
#define WS_DIFF_LINES_MAX 50000
#define WS_CHANGES_MAX 200000        /* entries one scan takes (an apply beyond: in parts) */
/* Entries one review or apply result lists (the rest are counted): a result must stay far below
 * the 10 MiB message the official SDK's stdio client accepts. */
#define WS_LISTED_MAX 500
/* ... and at most this many bytes of them as JSON: a wide change (60,000 new files) must not
 * flood an agent's context with a 100 KB list; the rest are counted, and paths narrows. */
#define WS_LISTED_BYTES (16u * 1024u)
#define WS_DIFF_DEFAULT (16u * 1024u) /* diff bytes one review returns by default */
#define WS_DIFF_MAX (1u << 20)
#define WS_JOURNAL_NAME "applied.json"
/* Reviews recorded per sandbox (<workspace dir>/reviews/<token>): older ones are removed. */
#define WS_REVIEWS_KEPT 8
#define WS_REVIEW_TOKEN_LEN 20 /* "rv-" and 16 hex digits, and its NUL */
/* Data bytes one apply writes at most unless the person raises it (holes are not written, so a
 * sparse file counts for its data only): a sandbox must not fill the host's disk through an apply
 * (docs/security.md, "Applying a sandbox's changes to the host"). */
#define WS_APPLY_BYTES_DEFAULT (1ull << 30)

struct ws_mount {
    /* The host directory, the overlay's lower layer: an O_PATH descriptor of the directory the
     * create checked (local_source_open), the only way the engine reaches it; source is its
     * path, for messages and the paths shown to the person. */
    int source_fd;
    const char *source;
    const char *target;  /* where the sandbox sees it ("/workspace/proj") */
    const char *upper;   /* the overlay's upper directory */
    const char *journal; /* host state of the paths applied so far (NULL: none kept) */
    /* Whose files these are: what apply writes is chown'ed to them (-1: the writer's own ids
     * stay; a server run by the person passes -1, root passes the directory's owner). */
    int64_t owner_uid, owner_gid;
};

struct ws_options {
    int64_t since_ns;         /* wall time from which the sandbox saw the host tree */
    const char *xattr_prefix; /* "user.overlay." (mounted with userxattr) or "trusted.overlay." */
    json_t *paths;            /* the scan keeps only these (ws_selected); NULL: everything */
    /* Where reviews are recorded (<workspace dir>/reviews): a review writes its record there,
     * an apply given review reads it. NULL: no record (a review returns no token). */
    const char *reviews_dir;
    /* The apply's review token: each entry is written only if it is what that review read.
     * NULL: unchecked, for a person who opted in (serve --apply-unreviewed). */
    const char *review;
    /* The person's choices for an apply, never the agent's (the tool cannot pass them): */
    uint64_t apply_max_bytes; /* data bytes one apply may write (0: WS_APPLY_BYTES_DEFAULT) */
    bool group_write;         /* files may gain group/other write bits the host entry lacked */
};

enum ws_kind { WS_ADDED, WS_MODIFIED, WS_DELETED, WS_MODE };

struct ws_change {
    char *rel;    /* path below the mount, never empty */
    size_t mount; /* index into the mounts */
    enum ws_kind kind;
    mode_t old_mode; /* st_mode in the host (0: absent) */
    mode_t new_mode; /* st_mode in the sandbox (0: deleted) */
    uint64_t old_size, new_size;
    bool binary;   /* a regular file that is not UTF-8 text (or too large to diff) */
    bool conflict; /* the host entry changed since the sandbox saw it */
    /* Set by the review: */
    const char *cut; /* why the diff of this entry was cut (NULL: it was not) */
    char *same_as;   /* the sandbox path of a hard link to the same file, diffed once above */
    bool digested;
    unsigned char digest[32]; /* ws_change_digest of what the review read */
};

struct ws_changes {
    struct ws_change *v;
    size_t n, cap;
    bool truncated; /* more than WS_CHANGES_MAX */
};

/* What apply must find for a change to write it: kind, type and carried mode, and the sha256
 * of the sandbox side's contents (a symlink's target) as they were read (content NULL: none, for
 * directories, deletions, mode changes and special files). */
void ws_change_digest(const struct ws_change *c, const unsigned char content[32],
                      unsigned char out[32]);

/* The digest of a regular file's contents as review and apply read them, extent by extent
 * (ws_copy_sparse): its data, where each run of data lies, and its size. Holes are never read,
 * so a sparse file costs its data, not its size. */
struct ws_content_hash {
    struct sha256_ctx data, layout;
    uint64_t run_start, run_end; /* the run of data being fed */
    bool in_run;
};
void ws_content_hash_init(struct ws_content_hash *h);
void ws_content_hash_chunk(struct ws_content_hash *h, uint64_t at, const void *data, size_t len);
void ws_content_hash_final(struct ws_content_hash *h, uint64_t size, unsigned char out[32]);

/* The record of one review (workspace_record.c): for every change it covered, its digest. */
struct ws_record_entry {
    unsigned char key[16]; /* ws_record_key of the change's mount target and path */
    unsigned char digest[32];
};
struct ws_record {
    struct ws_record_entry *v;
    size_t n;
};
/* Writes the digests of the changes the review read into dir/<token> (made 0700 if missing),
 * removes all but the newest WS_REVIEWS_KEPT, and gives the token. */
int ws_record_save(const char *dir, const struct ws_mount *mounts, const struct ws_changes *ch,
                   char token[WS_REVIEW_TOKEN_LEN], struct mcp_error *err);
int ws_record_load(const char *dir, const char *token, struct ws_record *rec,
                   struct mcp_error *err);
/* The digest the review recorded for rel in mount m, or NULL if it did not cover it. */
const unsigned char *ws_record_find(const struct ws_record *rec, const struct ws_mount *m,
                                    const char *rel);
void ws_record_free(struct ws_record *rec);

/* Lists the changes of every mount, in path order (deletions below a directory before it). */
int ws_scan(const struct ws_mount *mounts, size_t n_mounts, const struct ws_options *o,
            struct ws_changes *out, struct mcp_error *err);
void ws_changes_free(struct ws_changes *c);

/* The review: {changes:[{path, host_path, change, type, old_type?, mode, old_mode, size,
 * old_size, binary?, conflict?, applicable?, diff_cut?, same_as?, diff_offset}], diff,
 * diff_bytes, offset, next_offset|null, truncated, review?}. paths (NULL: all) keeps the
 * changes at or below those sandbox paths; the diff text starts at offset and holds at most
 * max_bytes (cut at a line). Only that page is kept in memory: each change is rendered on its
 * own, its cost bounded (WS_DIFF_SIDE_MAX...), and a hard link seen again is diffed once. With
 * o->reviews_dir, the digests of every change it covered are recorded, and review is the token
 * an apply names to write only what this review read. */
json_t *ws_review(const struct ws_mount *mounts, size_t n_mounts, const struct ws_options *o,
                  json_t *paths, uint64_t offset, uint64_t max_bytes, struct mcp_error *err);

/* Writes the selected changes (paths NULL: all) to the host: {results:[{path, change, status:
 * "applied"|"conflict"|"skipped"|"failed"|"refused", reason?, mode?, old_mode?, held_back?}],
 * applied, conflicts, skipped, failed, refused, bytes}. Refused whole (MCP_ERR_LIMIT) when the
 * files' data exceeds o->apply_max_bytes. With o->review, an entry that review did not cover, or
 * that is not what it read (the contents are hashed as they are copied, and compared before the
 * rename), is refused. */
json_t *ws_apply(const struct ws_mount *mounts, size_t n_mounts, const struct ws_options *o,
                 json_t *paths, bool overwrite, struct mcp_error *err);

/* The engine in a helper process inside a sandbox's user namespace (workspace_helper.c): a fresh
 * exec of the mcpbox executable as "mcpbox <WS_HELPER_ARGV1>", which mcpbox's main hands to
 * ws_helper_main first (through backends_helper, cli/backends.c). ws_run_in_userns blocks (call
 * it from a worker thread): action "review" or "apply" with the tool's args, in the user
 * namespace of ns_fd (a pidfd of the sandbox's init, or an open /proc/PID/ns/user). */
#define WS_HELPER_ARGV1 "__workspace-helper"
int ws_helper_main(int argc, char **argv);
json_t *ws_run_in_userns(int ns_fd, const char *action, const struct ws_mount *mounts, size_t n,
                         const struct ws_options *o, json_t *args, struct mcp_error *err);

/* ---- shared by the files of the engine ---- */
char *ws_sandbox_path(const struct ws_mount *m, const char *rel); /* target/rel */
char *ws_host_path(const struct ws_mount *m, const char *rel);    /* source/rel */
/* True if paths (NULL or empty: everything) names rel's sandbox or host path or a directory
 * above it. */
bool ws_selected(json_t *paths, const struct ws_mount *m, const char *rel);
/* Appends entry (taking it) to a result's list while it holds fewer than WS_LISTED_MAX entries
 * and *bytes (the list's JSON so far) stays within WS_LISTED_BYTES; else drops it and marks the
 * list full (*bytes > WS_LISTED_BYTES), so the list is always the first entries in order. */
bool ws_list_add(json_t *list, size_t *bytes, json_t *entry);
/* The mount's host directory, opened again from its descriptor with flags (O_PATH or O_RDONLY;
 * O_DIRECTORY and O_CLOEXEC are added): "." is the only name looked up. */
int ws_source_open(const struct ws_mount *m, int flags);
/* openat2 below dirfd without symlinks or "..": O_PATH|O_DIRECTORY when dir, else flags. */
int ws_open_beneath(int dirfd, const char *rel, int flags, bool dir);
/* ws_open_beneath read-only, for a regular file only (-1 with errno EINVAL for anything else,
 * which a copy must not follow or block on: a fifo, a device); st is filled. */
int ws_open_regular(int dirfd, const char *rel, struct stat *st);
const char *ws_type_name(mode_t m);
/* The permission bits apply carries to the host: no set-id bits (a sandbox must not hand the
 * host a set-id program), the sticky bit on directories only. Modes are compared on these. */
mode_t ws_carried_mode(mode_t m);
/* The permission bits apply gives an entry whose sandbox mode is mode and whose host mode is
 * host (0: a new entry): ws_carried_mode, less the group and other write bits the host entry
 * lacked (a new entry lacked them all), which only files get and only with group_write. */
mode_t ws_applied_mode(mode_t mode, mode_t host, bool group_write);
/* Copies the whole of in to out at the same offsets (pread/pwrite), keeping holes (SEEK_DATA /
 * SEEK_HOLE; out ends at in's size). Each chunk of data goes to chunk (may be NULL) first,
 * which stops the copy by returning -1 with errno set (a limit, or later a digest being fed).
 * -1 with errno on failure. out -1: only reads, for the chunks (the review's digest). */
typedef int ws_chunk_fn(void *ctx, off_t at, const char *data, size_t len);
int ws_copy_sparse(int in, int out, ws_chunk_fn *chunk, void *ctx);
/* The bytes of data (not holes) of a regular file, by SEEK_DATA / SEEK_HOLE. */
uint64_t ws_data_bytes(int fd);
const char *ws_kind_name(enum ws_kind k);
/* The mount's journal: {rel: {ino, ctime_ns} | {absent: true}} (an empty object if none). */
json_t *ws_journal_load(const struct ws_mount *m);
int ws_journal_save(const struct ws_mount *m, json_t *journal, struct mcp_error *err);
/* True if the host entry at rel (stat st, or absent when st is NULL) differs from what the
 * sandbox saw (see the file comment). */
bool ws_host_changed(json_t *journal, const char *rel, const struct stat *st, int64_t since_ns);

#endif
