/* Host directories mounted into local sandboxes: the allowlist, the checks of a create's
 * `mounts`, and the on-disk record of them (workspace.h describes the layout).
 *
 * A source is reachable only through a directory the person allowed when starting the server
 * (--allow-dir, MCPBOX_ALLOW_DIRS; real paths resolved at start). At create it is opened with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from that directory, so neither ".." nor a
 * symlink can lead out of it; the child repeats that walk itself when it opens the tree. */
#include "backend/local/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/local/local.h"
#include "lib/base/rmtree.h"
#include "backend/local/local_mounts.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_volume.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

/* Where a mount may appear inside a sandbox: its own writable space, or conventional places
 * for data. Never over the system directories the sandbox's isolation is built from. */
static const char *const target_roots[] = {"/workspace", "/mnt", "/srv", "/opt", "/home", "/data"};

int local_mount_mode_parse(const char *s)
{
    if (s == NULL || strcmp(s, "copy-on-write") == 0)
        return LOCAL_MOUNT_COW;
    if (strcmp(s, "ro") == 0)
        return LOCAL_MOUNT_RO;
    if (strcmp(s, "rw") == 0)
        return LOCAL_MOUNT_RW;
    return -1;
}

const char *local_mount_mode_name(enum local_mount_mode m)
{
    return m == LOCAL_MOUNT_RO ? "ro" : m == LOCAL_MOUNT_RW ? "rw" : "copy-on-write";
}

void local_workspace_dir(const char *state_dir, const char *sandbox_id, char *out)
{
    snprintf(out, LOCAL_WS_PATH_MAX, "%s/" LOCAL_WS_DIR "/%s", state_dir, sandbox_id);
}

/* ---- the allowlist --------------------------------------------------------------------------- */

void local_allow_free(struct local_allow *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->dirs[i]);
    free(a->dirs);
    free(a->owners);
    a->dirs = NULL;
    a->owners = NULL;
    a->n = 0;
}

static int allow_add(struct local_allow *a, const char *dir, uid_t owner, const char *from,
                     struct mcp_error *err)
{
    char *real = realpath(dir, NULL);
    struct stat st;
    if (real == NULL || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
        int e = real ? ENOTDIR : errno;
        free(real);
        return mcp_error_set(err, MCP_ERR_INVALID, e,
                             "%s names %s, which is not a directory this server can resolve: "
                             "give an existing directory", from, dir);
    }
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->dirs[i], real) == 0 && a->owners[i] == owner) {
            free(real);
            return 0;
        }
    a->dirs = xrealloc(a->dirs, (a->n + 1) * sizeof *a->dirs);
    a->owners = xrealloc(a->owners, (a->n + 1) * sizeof *a->owners);
    a->owners[a->n] = owner;
    a->dirs[a->n++] = real;
    return 0;
}

int local_backend_allow(struct backend *be, const char *dir, struct mcp_error *err)
{
    return allow_add(&((struct local_backend *)be)->allow, dir, geteuid(), "--mount", err);
}

/* One entry, [USER=]DIR: USER is whoever's directory it is (a name or a uid; without it, the
 * server's user). A '=' after a '/' is part of the path ("./a=b" for a directory named so). */
static int allow_entry(struct local_allow *a, const char *entry, struct mcp_error *err)
{
    static const char from[] = "--allow-dir / MCPBOX_ALLOW_DIRS";
    const char *eq = strchr(entry, '=');
    const char *slash = strchr(entry, '/');
    uid_t owner = geteuid();
    if (eq == NULL || (slash && slash < eq))
        return allow_add(a, entry, owner, from, err);
    char user[256];
    snprintf(user, sizeof user, "%.*s", (int)(eq - entry), entry);
    if (user[0] == '\0' || local_user_parse(user, &owner) < 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s entry %s: \"%s\" is not a user on this host; write USER=DIR "
                             "with an existing user name or uid, or just DIR for the server's "
                             "own user",
                             from, entry, user);
    if (owner != geteuid() && geteuid() != 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "%s entry %s: only a server running as root can let another user "
                             "(%s) mount a directory; that user can start an mcpbox of their own "
                             "with --allow-dir %s",
                             from, entry, user, eq + 1);
    return allow_add(a, eq + 1, owner, from, err);
}

int local_allow_init(struct local_allow *a, const char *dirs, struct mcp_error *err)
{
    memset(a, 0, sizeof *a);
    if (dirs == NULL)
        return 0;
    char *copy = xstrdup(dirs), *save = NULL;
    int rc = 0;
    for (char *d = strtok_r(copy, ":", &save); d && rc == 0; d = strtok_r(NULL, ":", &save))
        rc = allow_entry(a, d, err);
    free(copy);
    if (rc < 0)
        local_allow_free(a);
    return rc;
}

/* ---- checking one mount ---------------------------------------------------------------------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* True if the directory `fd` is `st` or lies below it (walks up through ".."). */
static bool fd_within(int fd, const struct stat *st)
{
    int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    bool found = false;
    for (int depth = 0; cur >= 0 && depth < 4096 && !found; depth++) {
        struct stat here, up;
        if (fstat(cur, &here) < 0)
            break;
        found = same_file(&here, st);
        int parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = parent;
        if (cur < 0 || fstat(cur, &up) < 0 || same_file(&up, &here))
            break; /* the root: ".." is itself */
    }
    if (cur >= 0)
        close(cur);
    return found;
}

/* The state directory (or the runtime one) inside the source, or the source inside it. */
static const char *holds_private_dir(int src, const char *const dirs[], size_t n)
{
    struct stat s;
    if (fstat(src, &s) < 0)
        return dirs[0];
    for (size_t i = 0; i < n; i++) {
        int d = open(dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat ds;
        bool bad = d >= 0 && fstat(d, &ds) == 0 && (fd_within(d, &s) || fd_within(src, &ds));
        if (d >= 0)
            close(d);
        if (bad)
            return dirs[i];
    }
    return NULL;
}

/* A target: absolute, no "."/".." or empty components, under one of target_roots. */
static int check_target(const char *t, unsigned i, struct mcp_error *err)
{
    size_t n = t ? strlen(t) : 0;
    bool ok = n > 1 && n < 256 && t[0] == '/' && t[n - 1] != '/' && strstr(t, "//") == NULL &&
              strstr(t, "/./") == NULL && strstr(t, "/../") == NULL &&
              !(n >= 2 && strcmp(t + n - 2, "/.") == 0) &&
              !(n >= 3 && strcmp(t + n - 3, "/..") == 0);
    bool under = false;
    for (size_t r = 0; ok && r < sizeof target_roots / sizeof target_roots[0]; r++) {
        size_t rn = strlen(target_roots[r]);
        under |= strncmp(t, target_roots[r], rn) == 0 && (t[rn] == '\0' || t[rn] == '/');
    }
    for (size_t k = 0; ok && k < n; k++)
        ok = (unsigned char)t[k] >= 0x20 && t[k] != ':' && t[k] != ',' && t[k] != '\\';
    if (ok && under)
        return 0;
    return mcp_error_set(err, MCP_ERR_INVALID, 0,
                         "mounts[%u].target \"%s\" must be an absolute path without \".\", \"..\", "
                         "\"//\", ':' or ',' under /workspace, /mnt, /srv, /opt, /home or /data "
                         "(e.g. /workspace/project)", i, t ? t : "");
}

/* The allowed directory the source lies under (lexically), and the rest of the path: one of
 * the caller's if there is one, else the first (whose owner the refusal then names). */
static const char *allowed_under(const struct local_allow *a, const char *src, uid_t caller,
                                 size_t *idx, const char **rel)
{
    const char *found = NULL;
    for (size_t i = 0; i < a->n; i++) {
        size_t dn = strlen(a->dirs[i]);
        bool root = strcmp(a->dirs[i], "/") == 0;
        if (!root && (strncmp(src, a->dirs[i], dn) != 0 || (src[dn] != '\0' && src[dn] != '/')))
            continue;
        if (found && a->owners[*idx] == caller)
            continue;
        const char *r = root ? src : src + dn;
        while (*r == '/')
            r++;
        *rel = *r ? r : ".";
        *idx = i;
        found = a->dirs[i];
    }
    return found;
}

/* The directories this caller may mount (another user's are none of their business). */
static void allow_list_text(const struct local_allow *a, const struct local_ws_caller *who,
                            char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < a->n && used < size; i++)
        if (who->known && a->owners[i] == who->uid)
            used += (size_t)snprintf(out + used, size - used, "%s%s", used ? ", " : "", a->dirs[i]);
    if (used == 0)
        snprintf(out, size, "none for you");
}

/* The first allowed directory of this caller: where a relative source is looked up. */
static const char *first_of(const struct local_allow *a, const struct local_ws_caller *who)
{
    for (size_t i = 0; i < a->n; i++)
        if (who->known && a->owners[i] == who->uid)
            return a->dirs[i];
    return NULL;
}

/* Refuses a caller the allowed directory `idx` is not for: it is someone else's, and mounting
 * it would lend the caller that person's rights. */
static int caller_refused(const struct local_allow *a, const struct local_ws_caller *who,
                          size_t idx, const char *src, unsigned i, struct mcp_error *err)
{
    char owner[300], caller[300];
    local_user_name(a->owners[idx], owner, sizeof owner);
    if (!who->known)
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "mounts[%u].source %s: this server cannot tell which local user you "
                             "are, and host directories are mounted only for the user they "
                             "belong to; connect over stdio or loopback HTTP (where the kernel "
                             "names you), or with the server's --token",
                             i, src);
    if (a->owners[idx] == who->uid)
        return 0;
    local_user_name(who->uid, caller, sizeof caller);
    if (geteuid() != 0) /* it cannot lend anyone else's rights: their own server can */
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "mounts[%u].source %s is under %s, which this server (run by %s) "
                             "shares only with its own user, and you are %s: start an mcpbox "
                             "of your own for your directories (mcpbox serve --allow-dir DIR)",
                             i, src, a->dirs[idx], owner, caller);
    return mcp_error_set(err, MCP_ERR_DENIED, 0,
                         "mounts[%u].source %s is under %s, which this server shares only with "
                         "%s, and you are %s%s: mount a directory allowed for you, or ask the "
                         "person running mcpbox to add --allow-dir %u=DIR for a directory of "
                         "yours (you must be able to open it yourself)",
                         i, src, a->dirs[idx], owner, caller,
                         who->by_token ? " (the token acts as the server's user)" : "",
                         (unsigned)who->uid);
}

/* Refuses a source the caller could not open with their own rights (a directory of theirs
 * below one they cannot search, or one not theirs to read). */
static int caller_cannot_open(const struct local_ws_caller *who, int fd, const char *real,
                              const char *src, unsigned i, struct mcp_error *err)
{
    if (local_ws_caller_opens(who, fd, real) == 0)
        return 0;
    char caller[300];
    local_user_name(who->uid, caller, sizeof caller);
    return mcp_error_set(err, MCP_ERR_DENIED, errno,
                         "mounts[%u].source %s: you, %s, cannot open it yourself, and a mount "
                         "never gives more than your own rights; change its permissions on the "
                         "host, or mount a directory you can read",
                         i, src, caller);
}

/* Whether real path `path` is one of the client's roots or below one (NULL roots: no narrowing).
 * Each root is resolved to its real path; one that does not resolve allows nothing. */
static bool within_roots(json_t *roots, const char *path)
{
    if (roots == NULL)
        return true;
    size_t i;
    json_t *r;
    json_array_foreach(roots, i, r) {
        char *real = json_is_string(r) ? realpath(json_string_value(r), NULL) : NULL;
        size_t n = real ? strlen(real) : 0;
        bool in = real && (strcmp(real, "/") == 0 ||
                           (strncmp(path, real, n) == 0 && (path[n] == '\0' || path[n] == '/')));
        free(real);
        if (in)
            return true;
    }
    return false;
}

int local_ws_open_beneath(const char *allow_dir, const char *rel)
{
    struct open_how root_how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_NO_SYMLINKS};
    int root = (int)syscall(SYS_openat2, AT_FDCWD, allow_dir, &root_how, sizeof root_how);
    if (root < 0)
        return -1;
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    /* A rename anywhere on the host while the walk crosses a ".." (a symlink like ../x) makes
     * RESOLVE_BENEATH give up with EAGAIN rather than risk a wrong answer: walk again. */
    int fd = -1;
    for (int tries = 0; tries < LOCAL_WS_OPEN_TRIES && fd < 0; tries++)
        if ((fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof how)) < 0 && errno != EAGAIN)
            break;
    int e = errno;
    close(root);
    errno = e;
    return fd;
}

/* The refusal of a source whose walk left its allowed directory, naming what led out (a ".."
 * or a symlink) rather than the errno that stopped the walk. */
static int refuse_way_out(const char *dir, const char *rel, const char *src, unsigned i,
                          struct mcp_error *err)
{
    char why[LOCAL_WS_PATH_MAX + 64];
    cleanup_close int allowed = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    snprintf(why, sizeof why, "the allowed directory itself is a symlink");
    if (allowed >= 0)
        local_source_why_out(allowed, rel, true, why, sizeof why);
    return mcp_error_set(err, MCP_ERR_DENIED, 0,
                         "mounts[%u].source %s leaves the allowed directory %s: %s. Name a path "
                         "inside it, or have the person running mcpbox allow the real location "
                         "with --allow-dir",
                         i, src, dir, why);
}

/* Resolves and checks mount i's source; fills wm->m (source, where and what it is, owner);
 * returns the checked O_PATH fd. */
static int resolve_source(const struct local_ws_check *c, const char *src, unsigned i,
                          struct local_ws_mount *wm, struct mcp_error *err)
{
    char list[1024], abs[LOCAL_WS_PATH_MAX];
    struct local_ws_caller who;
    (void)local_ws_caller(c->caller, &who);
    allow_list_text(c->allow, &who, list, sizeof list);
    if (src == NULL || src[0] == '\0')
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "mounts[%u] needs a source (a host "
                             "directory under %s) or a volume",
                             i, list);
    const char *base = first_of(c->allow, &who);
    if (src[0] != '/' && base) /* relative: to the caller's first allowed directory */
        snprintf(abs, sizeof abs, "%s/%s", base, src);
    else
        snprintf(abs, sizeof abs, "%s", src);
    const char *rel = NULL;
    size_t idx = 0;
    const char *dir = allowed_under(c->allow, abs, who.uid, &idx, &rel);
    if (dir && caller_refused(c->allow, &who, idx, src, i, err) < 0)
        return -1;
    if (dir == NULL)
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "mounts[%u].source %s is outside the host directories this server "
                             "allows (%s): the person running mcpbox can add it with "
                             "--allow-dir %s (or MCPBOX_ALLOW_DIRS)", i, src, list, src);
    int fd = local_ws_open_beneath(dir, rel);
    if (fd < 0 && (errno == EXDEV || errno == ELOOP))
        return refuse_way_out(dir, rel, src, i, err);
    if (fd < 0 && errno == EAGAIN)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "mounts[%u].source %s kept changing while it was opened (something "
                             "renames entries on its path, perhaps a sandbox that can write "
                             "there): nothing was mounted; try again when it is left alone",
                             i, src);
    if (fd < 0 && errno == ENOENT)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "mounts[%u].source %s does not exist under %s; create it on the "
                             "host or name another",
                             i, src, dir);
    if (fd < 0 && errno == ENOTDIR)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "mounts[%u].source %s is not a directory (a mount's source must be "
                             "one): name the directory that holds it",
                             i, src);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_INVALID, errno,
                             "mounts[%u].source %s: cannot open it as a directory under %s; "
                             "create it on the host or name another",
                             i, src, dir);
    const char *priv[] = {c->state_dir, c->run_dir};
    const char *bad = holds_private_dir(fd, priv, c->run_dir ? 2 : 1);
    if (bad) {
        close(fd);
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "mounts[%u].source %s contains or lies inside mcpbox's own state "
                             "(%s), which no sandbox may see: mount a directory outside it, or "
                             "start mcpbox with another --state-dir", i, src, bad);
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || local_source_identify(fd, dir, &wm->m, err) < 0) {
        if (err->code == 0)
            mcp_error_set(err, MCP_ERR_IO, errno, "mounts[%u].source %s: cannot resolve it", i,
                          src);
        close(fd);
        return -1;
    }
    if (caller_cannot_open(&who, fd, wm->m.source, src, i, err) < 0) {
        close(fd);
        return -1;
    }
    if (!within_roots(c->roots, wm->m.source)) {
        close(fd);
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "mounts[%u].source %s is outside the roots the client declared "
                             "(MCP roots/list): a client's roots only narrow what the server "
                             "allows; add the directory to the client's workspace roots, or "
                             "mount one inside them", i, src);
    }
    /* Whose files: the caller's (as root for root, the directory's owner; as a user, that
     * user). */
    local_ws_caller_ids(&who, &st, &wm->m.owner_uid, &wm->m.owner_gid);
    return fd;
}

/* Mount i's mode (j: the item): a host directory's defaults to copy-on-write, a named volume's to
 * ro: both defaults leave nothing written that outlives the sandbox unless rw is asked for, in
 * the item, where anything judging a create's writable mounts finds it. A volume has no
 * copy-on-write (nothing to review it against). -1 with err. */
static int mount_mode(json_t *j, unsigned i, struct mcp_error *err)
{
    const char *mode = json_string_value(json_object_get(j, "mode"));
    const char *volume = json_string_value(json_object_get(j, "volume"));
    int md = volume && mode == NULL ? LOCAL_MOUNT_RO : local_mount_mode_parse(mode);
    if (!json_is_object(j))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "mounts[%u] must be an object {source or volume, target, mode}", i);
    if (md < 0)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "mounts[%u].mode must be \"ro\", \"rw\" or \"copy-on-write\" (the "
                             "default; a volume's is ro)",
                             i);
    if (volume && md == LOCAL_MOUNT_COW)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "mounts[%u] mounts volume %s copy-on-write, which volumes do not "
                             "have: use mode \"rw\" or \"ro\" (the default for a volume)",
                             i, volume);
    return md;
}

/* A mount of a named volume (local_volume.h): a {volume} names no host path. */
static int resolve_volume(const struct local_ws_check *c, json_t *j, unsigned i,
                          struct local_ws_mount *wm, struct mcp_error *err)
{
    if (json_object_get(j, "source") != NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "mounts[%u] has both source and volume: give a host directory "
                             "(source) or a named volume (volume), one per mount",
                             i);
    return local_volume_resolve(c, j, wm->m.mode == LOCAL_MOUNT_RW, i, wm, err);
}

int local_ws_check(const struct local_ws_check *c, json_t *mounts, struct local_ws *out,
                   struct mcp_error *err)
{
    memset(out, 0, sizeof *out);
    if (mounts == NULL || json_is_null(mounts))
        return 0;
    if (!json_is_array(mounts) || json_array_size(mounts) > LOCAL_WS_MAX_MOUNTS)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "mounts must be a list of at most %d "
                             "{source, target, mode} objects", LOCAL_WS_MAX_MOUNTS);
    size_t n = json_array_size(mounts);
    out->m = xcalloc(n ? n : 1, sizeof *out->m);
    for (size_t i = 0; i < n; i++) {
        json_t *j = json_array_get(mounts, i);
        struct local_ws_mount *wm = &out->m[i];
        const char *target = json_string_value(json_object_get(j, "target"));
        int md = mount_mode(j, (unsigned)i, err);
        if (md < 0) {
            local_ws_free(out);
            return -1;
        }
        if (check_target(target, (unsigned)i, err) < 0) {
            local_ws_free(out);
            return -1;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(out->m[k].m.target, target) == 0) {
                local_ws_free(out);
                return mcp_error_set(err, MCP_ERR_INVALID, 0, "mounts[%zu].target %s is also "
                                     "mounts[%zu]'s: give each mount its own target", i, target, k);
            }
        wm->m.index = (unsigned)i;
        wm->m.mode = (enum local_mount_mode)md;
        snprintf(wm->m.target, sizeof wm->m.target, "%s", target);
        wm->fd = json_object_get(j, "volume")
                     ? resolve_volume(c, j, (unsigned)i, wm, err)
                     : resolve_source(c, json_string_value(json_object_get(j, "source")),
                                      (unsigned)i, wm, err);
        if (wm->fd < 0) {
            local_ws_free(out);
            return -1;
        }
        out->n++;
    }
    /* A mount whose target lies in another's comes after it (shorter targets first). */
    for (size_t i = 1; i < out->n; i++)
        for (size_t k = i; k > 0 && strlen(out->m[k].m.target) < strlen(out->m[k - 1].m.target);
             k--) {
            struct local_ws_mount t = out->m[k];
            out->m[k] = out->m[k - 1];
            out->m[k - 1] = t;
        }
    return 0;
}

void local_ws_free(struct local_ws *ws)
{
    for (size_t i = 0; i < ws->n; i++)
        close(ws->m[i].fd);
    free(ws->m);
    memset(ws, 0, sizeof *ws);
}

bool local_ws_writable(const struct local_ws *ws)
{
    for (size_t i = 0; i < ws->n; i++)
        if (ws->m[i].m.mode != LOCAL_MOUNT_RO)
            return true;
    return false;
}

/* ---- on disk ---------------------------------------------------------------------------------- */

json_t *local_ws_json(const struct local_ws *ws, bool with_layers)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < ws->n; i++) {
        const struct local_mount *m = &ws->m[i].m;
        json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:I, s:I}", "index", (int)m->index, "source",
                              m->source, "target", m->target, "mode",
                              local_mount_mode_name(m->mode), "owner_uid", (json_int_t)m->owner_uid,
                              "owner_gid", (json_int_t)m->owner_gid);
        if (m->volume[0])
            json_object_set_new(o, "volume", json_string(m->volume));
        if (with_layers && m->mode == LOCAL_MOUNT_COW) {
            json_object_set_new(o, "upper", json_string(m->upper));
            json_object_set_new(o, "work", json_string(m->work));
        }
        if (with_layers) /* which directory it is: workspace_source.c */
            json_object_update_new(o,
                                   json_pack("{s:s, s:s, s:s, s:I, s:I}", "allow_dir", m->allow_dir,
                                             "rel", m->rel, "handle", m->handle, "dev",
                                             (json_int_t)m->dev, "ino", (json_int_t)m->ino));
        json_array_append_new(arr, o);
    }
    return arr;
}

static int mkdir_owned(const char *path, mode_t mode, uid_t uid, gid_t gid, struct mcp_error *err)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", path);
    if (geteuid() == 0 && chown(path, uid, gid) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "chown %s", path);
    return 0;
}

int local_ws_prepare(const char *state_dir, const char *id, struct local_ws *ws, uid_t layer_uid,
                     gid_t layer_gid, struct mcp_error *err)
{
    if (ws->n == 0)
        return 0;
    char top[LOCAL_WS_PATH_MAX], dir[LOCAL_WS_PATH_MAX + 16];
    snprintf(top, sizeof top, "%s/" LOCAL_WS_DIR, state_dir);
    if (mkdir_owned(top, 0700, geteuid(), getegid(), err) < 0)
        return -1;
    local_workspace_dir(state_dir, id, top);
    if (mkdir_owned(top, 0700, geteuid(), getegid(), err) < 0)
        return -1;
    for (size_t i = 0; i < ws->n; i++) {
        struct local_mount *m = &ws->m[i].m;
        if (m->mode != LOCAL_MOUNT_COW)
            continue;
        snprintf(dir, sizeof dir, "%s/%u", top, m->index);
        snprintf(m->upper, sizeof m->upper, "%s/upper", dir);
        snprintf(m->work, sizeof m->work, "%s/work", dir);
        /* upper and work belong to the sandbox's root, which mounts the overlay. */
        if (mkdir_owned(dir, 0700, layer_uid, layer_gid, err) < 0 ||
            mkdir_owned(m->upper, 0755, layer_uid, layer_gid, err) < 0 ||
            mkdir_owned(m->work, 0700, layer_uid, layer_gid, err) < 0)
            return -1;
    }
    json_t *doc = json_pack("{s:i, s:o}", "version", 1, "mounts", local_ws_json(ws, true));
    snprintf(dir, sizeof dir, "%s/" LOCAL_WS_META, top);
    int rc = json_dump_file(doc, dir, JSON_INDENT(1));
    json_decref(doc);
    if (rc < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "writing %s", dir);
    return 0;
}

void local_ws_remove(const char *state_dir, const char *id, const struct local_identity *ident)
{
    char dir[LOCAL_WS_PATH_MAX];
    local_workspace_dir(state_dir, id, dir);
    (void)ident; /* every mode: what is there is the server's (spawn.c: as_person) */
    if (access(dir, F_OK) == 0)
        rmtree(dir);
}

static const char *jstr(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

int local_workspace_load(const char *state_dir, const char *sandbox_id, struct local_mount **out,
                         size_t *n, struct mcp_error *err)
{
    char path[LOCAL_WS_PATH_MAX + 16];
    *out = NULL;
    *n = 0;
    local_workspace_dir(state_dir, sandbox_id, path);
    strncat(path, "/" LOCAL_WS_META, sizeof path - strlen(path) - 1);
    if (access(path, F_OK) < 0)
        return 0;
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    json_t *arr = json_object_get(doc, "mounts");
    if (!json_is_array(arr)) {
        json_decref(doc);
        return mcp_error_set(err, MCP_ERR_IO, 0, "%s: %s", path,
                             doc ? "no \"mounts\" list" : je.text);
    }
    size_t count = json_array_size(arr), i;
    json_t *j;
    *out = xcalloc(count ? count : 1, sizeof **out);
    json_array_foreach(arr, i, j) {
        struct local_mount *m = &(*out)[i];
        m->index = (unsigned)json_integer_value(json_object_get(j, "index"));
        m->mode = (enum local_mount_mode)local_mount_mode_parse(
            json_string_value(json_object_get(j, "mode")));
        snprintf(m->source, sizeof m->source, "%s",
                 jstr(j, "source"));
        snprintf(m->target, sizeof m->target, "%s",
                 jstr(j, "target"));
        m->owner_uid = (uint32_t)json_integer_value(json_object_get(j, "owner_uid"));
        m->owner_gid = (uint32_t)json_integer_value(json_object_get(j, "owner_gid"));
        snprintf(m->upper, sizeof m->upper, "%s",
                 jstr(j, "upper"));
        snprintf(m->work, sizeof m->work, "%s",
                 jstr(j, "work"));
        snprintf(m->allow_dir, sizeof m->allow_dir, "%s", jstr(j, "allow_dir"));
        snprintf(m->rel, sizeof m->rel, "%s", jstr(j, "rel"));
        snprintf(m->handle, sizeof m->handle, "%s", jstr(j, "handle"));
        m->dev = (uint64_t)json_integer_value(json_object_get(j, "dev"));
        m->ino = (uint64_t)json_integer_value(json_object_get(j, "ino"));
    }
    *n = count;
    json_decref(doc);
    return 0;
}

const struct local_mount *local_workspace_find(const struct local_mount *m, size_t n,
                                               const char *path, const char **rel)
{
    const struct local_mount *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tn = strlen(m[i].target);
        if (m[i].mode != LOCAL_MOUNT_COW || strncmp(path, m[i].target, tn) != 0 ||
            (path[tn] != '\0' && path[tn] != '/') || tn < best_len)
            continue;
        best = &m[i], best_len = tn;
    }
    if (best && rel) {
        const char *r = path + best_len;
        while (*r == '/')
            r++;
        *rel = r;
    }
    return best;
}
