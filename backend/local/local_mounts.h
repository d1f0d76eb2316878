/* Host directories sandboxes may mount, and who is creating (workspace.c, workspace_caller.c).
 * Internal to the local backend. */
#ifndef MCPBOX_LOCAL_MOUNTS_H
#define MCPBOX_LOCAL_MOUNTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/local/identity.h"
#include "backend/local/workspace.h"
#include "lib/base/error.h"

/* ---- host directories mounted at create (workspace.c; layout in workspace.h) ---- */
/* The directories a person allowed (--allow-dir, MCPBOX_ALLOW_DIRS, or the default), as real
 * paths resolved at start. */
struct local_allow {
    char **dirs;
    uid_t *owners; /* whose each is: only that uid's callers may mount it (workspace_caller.c) */
    size_t n;
};
/* dirs: colon-separated [USER=]DIR entries (NULL: none; no USER: the server's own user). -1 with
 * err naming the bad entry. */
int local_allow_init(struct local_allow *a, const char *dirs, struct mcp_error *err);
void local_allow_free(struct local_allow *a);

/* ---- who is creating (workspace_caller.c) ---- */
struct stat;
struct store;
#define LOCAL_WS_CALLER_GROUPS 256
struct local_ws_caller {
    bool known;    /* false: no local user to tie the caller to; they mount nothing */
    bool by_token; /* a bearer token's holder, acting as the server's user */
    uid_t uid;
    gid_t gid; /* their primary group (65534 without an account) */
    gid_t groups[LOCAL_WS_CALLER_GROUPS];
    int ngroups;
};
/* The caller behind a sandbox owner ("local:uid:N", "token:..."); -1 for any other. */
int local_ws_caller(const char *owner, struct local_ws_caller *out);
/* 0 if the caller can open `path` as a directory with their own rights (uid, groups, no
 * capabilities) and finds the directory fd is; -1 with errno (ESTALE: another one). */
int local_ws_caller_opens(const struct local_ws_caller *who, int fd, const char *path);
/* The host ids a mount of the directory `st` maps into the sandbox for this caller. */
void local_ws_caller_ids(const struct local_ws_caller *who, const struct stat *st, uint32_t *uid,
                         uint32_t *gid);
/* A user name or number as a uid; -1 if there is no such user. */
int local_user_parse(const char *name, uid_t *uid);
/* "alice (uid 1000)", or "uid 1000" without an account. */
void local_user_name(uid_t uid, char *out, size_t size);

struct local_ws_check {
    const struct local_allow *allow;
    const char *caller; /* the sandbox's owner: whose rights the mounts may use (NULL: no one's) */
    json_t *roots;      /* the client's roots (host paths), or NULL: they only narrow allow */
    const char *state_dir, *run_dir; /* never mountable, nor anything holding them */
    struct store *store;             /* where named volumes are recorded (mounts {volume}) */
};
struct local_ws_mount {
    struct local_mount m; /* m.allow_dir, m.rel: where it was found; m.dev, m.ino: what */
    int fd;               /* the checked source (O_PATH), kept until local_ws_free: the tree
                           * the sandbox gets is made from it, never from a path again */
};
struct local_ws {
    struct local_ws_mount *m;
    size_t n;
};
/* Checks a create's `mounts` (JSON list of {source, target, mode}) against the allowlist. */
int local_ws_check(const struct local_ws_check *c, json_t *mounts, struct local_ws *out,
                   struct mcp_error *err);
void local_ws_free(struct local_ws *ws);
bool local_ws_writable(const struct local_ws *ws); /* any rw or copy-on-write mount */
/* The list as JSON (with_layers: upper and work too). */
json_t *local_ws_json(const struct local_ws *ws, bool with_layers);
/* Makes <state>/workspaces/<id>, the copy-on-write layers (owned by layer_uid/gid, as root)
 * and mounts.json; fills each copy-on-write mount's upper and work. */
int local_ws_prepare(const char *state_dir, const char *id, struct local_ws *ws, uid_t layer_uid,
                     gid_t layer_gid, struct mcp_error *err);
void local_ws_remove(const char *state_dir, const char *id, const struct local_identity *ident);
/* openat2(allow_dir, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) as an O_PATH directory fd;
 * the allowed directory itself is opened with RESOLVE_NO_SYMLINKS. -1 with errno. */
int local_ws_open_beneath(const char *allow_dir, const char *rel);
#define LOCAL_WS_OPEN_TRIES 16 /* walks tried while a rename makes openat2 answer EAGAIN */

#endif
