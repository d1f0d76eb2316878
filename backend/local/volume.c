/* Named volumes of the local backend: the volume op (create, list, inspect, delete) and a
 * create's mounts of them. Layout and the files in local_volume.h and volume_fs.c; records in
 * the store (lib/store/store_volumes.h), where only the owner's own are ever looked up. */
#include "backend/local/local_volume.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/local_sandbox.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "lib/base/util.h"
#include "lib/store/store.h"
#include "lib/store/store_volumes.h"

int local_volume_name_check(const char *name, struct mcp_error *err)
{
    size_t n = name ? strlen(name) : 0;
    bool ok = n >= 1 && n <= 63 && strstr(name, "..") == NULL &&
              ((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
               (name[0] >= '0' && name[0] <= '9'));
    for (size_t i = 0; ok && i < n; i++)
        ok = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", name[i]) !=
             NULL;
    if (ok)
        return 0;
    return mcp_error_set(err, MCP_ERR_INVALID, 0,
                         "\"%.80s\" is not a volume name: use 1 to 63 letters, digits, '-', '_' "
                         "or '.', starting with a letter or digit, without \"..\" or '/' "
                         "(e.g. pip-cache)",
                         name ? name : "");
}

static void volume_dir(const char *state_dir, const char *id, char *out, size_t size)
{
    snprintf(out, size, "%s/" LOCAL_VOLUME_DIR "/%s", state_dir, id);
}

static const char *owner_or_empty(const char *owner)
{
    return owner ? owner : "";
}

/* The owner's volume `name`, or MCP_ERR_NOT_FOUND (also for another owner's). */
static int find_volume(struct store *st, const char *owner, const char *name,
                       struct store_volume *v, struct mcp_error *err)
{
    if (local_volume_name_check(name, err) < 0)
        return -1;
    int rc = store_volume_get(st, owner_or_empty(owner), name, v, err);
    if (rc == 0)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "you have no volume called %s: list yours with the volume tool "
                             "(action list), or create it (action create; CLI: mcpbox volume "
                             "create %s)",
                             name, name);
    return rc < 0 ? -1 : 0;
}

static json_t *volume_info(const struct store_volume *v)
{
    char when[32];
    format_rfc3339_ms(v->created_at_ms, when);
    json_t *o = json_pack("{s:s, s:I, s:s, s:s}", "name", v->name, "size_limit_bytes",
                          (json_int_t)v->size_limit, "created_at", when, "limit_enforced_by",
                          local_volume_enforcement());
    if (geteuid() != 0)
        json_object_set_new(o, "limit_note", json_string(LOCAL_VOLUME_WATCHER_NOTE));
    return o;
}

/* The ids of owner's sandboxes on record that mount volume `name` (stopped and expired ones
 * too: destroying them is the caller's decision). */
static json_t *volume_users(struct store *st, const char *owner, const char *name,
                            struct mcp_error *err)
{
    struct store_sandbox *list = NULL;
    size_t n = 0;
    if (store_sandbox_list(st, "local", owner_or_empty(owner), &list, &n, err) < 0)
        return NULL;
    json_t *users = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t k;
        if (strcmp(list[i].state, LOCAL_DESTROYED_STATE) == 0)
            continue; /* answered destroyed, being released: it no longer holds the volume */
        json_t *m;
        json_array_foreach(json_object_get(list[i].record, "mounts"), k, m)
        {
            const char *vol = json_string_value(json_object_get(m, "volume"));
            if (vol && strcmp(vol, name) == 0) {
                json_array_append_new(users, json_string(list[i].id));
                break;
            }
        }
    }
    store_sandbox_list_free(list, n);
    return users;
}

/* Whose files the volume's root is: the owner's, where the server can tell (as root). */
static void owner_ids(const char *owner, uid_t *uid, gid_t *gid)
{
    struct local_ws_caller who;
    *uid = geteuid(), *gid = getegid();
    if (geteuid() == 0 && local_ws_caller(owner, &who) == 0 && who.known)
        *uid = who.uid, *gid = who.gid;
}

static int size_arg(json_t *args, uint64_t *limit, struct mcp_error *err)
{
    json_t *j = json_object_get(args, "size_bytes");
    *limit = LOCAL_VOLUME_DEFAULT_BYTES;
    if (j == NULL || json_is_null(j))
        return 0;
    json_int_t v = json_is_integer(j) ? json_integer_value(j) : -1;
    if (v < (json_int_t)LOCAL_VOLUME_MIN_BYTES || (uint64_t)v > LOCAL_VOLUME_MAX_BYTES)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "size_bytes must be a whole number of bytes from %llu (16 MiB) to "
                             "%llu (1 TiB); leave it out for 1 GiB",
                             (unsigned long long)LOCAL_VOLUME_MIN_BYTES,
                             (unsigned long long)LOCAL_VOLUME_MAX_BYTES);
    *limit = (uint64_t)v;
    return 0;
}

/* One volume operation: the store's part on the loop, the files' part (mkfs and mount, unmount
 * and removal, a size walk: milliseconds to seconds) on a worker thread, so that no other tool
 * call waits for it. */
enum vol_step { VOL_MAKE, VOL_REMOVE, VOL_USAGE };
struct vol_job {
    uv_work_t req;
    struct store *store;
    backend_cb *cb;
    void *arg;
    enum vol_step step;
    struct store_volume v; /* v.owner owned */
    char vdir[LOCAL_PATH_MAX + 64];
    uid_t uid;
    gid_t gid;
    uint64_t used, avail;
    json_t *users; /* inspect: who mounts it */
    int rc;
    struct mcp_error err;
};

static void vol_work(uv_work_t *w)
{
    struct vol_job *j = w->data;
    if (j->step == VOL_MAKE)
        j->rc = local_volume_fs_make(j->vdir, j->v.size_limit, j->uid, j->gid, &j->err);
    else if (j->step == VOL_REMOVE)
        j->rc = local_volume_fs_remove(j->vdir, &j->err);
    else
        j->rc = local_volume_fs_usage(j->vdir, &j->used, &j->avail, &j->err);
}

/* After the files: the record, and the answer (NULL with j->err). */
static json_t *vol_finish(struct vol_job *j)
{
    if (j->rc < 0)
        return NULL;
    if (j->step == VOL_MAKE) {
        if (store_volume_insert(j->store, &j->v, &j->err) == 0)
            return volume_info(&j->v);
        struct mcp_error ignored; /* another process took the name meanwhile */
        (void)local_volume_fs_remove(j->vdir, &ignored);
        return NULL;
    }
    if (j->step == VOL_REMOVE)
        return store_volume_delete(j->store, j->v.id, &j->err) < 0
                   ? NULL
                   : json_pack("{s:s, s:b}", "name", j->v.name, "deleted", 1);
    json_t *o = volume_info(&j->v);
    json_object_set_new(o, "used_bytes", json_integer((json_int_t)j->used));
    json_object_set_new(o, "available_bytes",
                        j->avail == UINT64_MAX ? json_null() : json_integer((json_int_t)j->avail));
    json_object_set(o, "used_by", j->users);
    return o;
}

static void vol_job_free(struct vol_job *j)
{
    json_decref(j->users);
    store_volume_release(&j->v);
    free(j);
}

static void vol_after(uv_work_t *w, int status)
{
    struct vol_job *j = w->data;
    if (status < 0)
        j->rc = mcp_error_set(&j->err, MCP_ERR_INTERNAL, 0, "the volume operation was cancelled");
    json_t *res = vol_finish(j);
    j->cb(j->arg, res, res ? NULL : &j->err);
    json_decref(res);
    vol_job_free(j);
}

static int vol_queue(struct local_backend *lb, struct vol_job *j, backend_cb *cb, void *arg,
                     struct mcp_error *err)
{
    j->cb = cb, j->arg = arg;
    int rc = uv_queue_work(lb->base.loop, &j->req, vol_work, vol_after);
    if (rc == 0)
        return 0;
    vol_job_free(j);
    return mcp_error_set(err, MCP_ERR_IO, 0, "cannot start the volume operation: %s",
                         uv_strerror(rc));
}

static struct vol_job *vol_job_new(struct store *st, enum vol_step step)
{
    struct vol_job *j = xcalloc(1, sizeof *j);
    j->store = st, j->step = step;
    j->req.data = j;
    return j;
}

/* A create's checks and where its files go; NULL with err. */
static struct vol_job *create_job(struct store *st, const char *state_dir, const char *owner,
                                  json_t *args, struct mcp_error *err)
{
    const char *name = json_string_value(json_object_get(args, "name"));
    uint64_t limit;
    struct store_volume old;
    if (local_volume_name_check(name, err) < 0 || size_arg(args, &limit, err) < 0)
        return NULL;
    int had = store_volume_get(st, owner_or_empty(owner), name, &old, err);
    if (had > 0) {
        store_volume_release(&old);
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "you already have a volume called %s: use it, or delete it first", name);
    }
    char top[LOCAL_PATH_MAX];
    snprintf(top, sizeof top, "%s/" LOCAL_VOLUME_DIR, state_dir);
    if (had == 0 && mkdir(top, 0700) < 0 && errno != EEXIST)
        had = mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", top);
    if (had != 0)
        return NULL;
    struct vol_job *j = vol_job_new(st, VOL_MAKE);
    j->v = (struct store_volume){.owner = xstrdup(owner_or_empty(owner)),
                                 .size_limit = limit,
                                 .created_at_ms = now_wall_ms()};
    snprintf(j->v.name, sizeof j->v.name, "%s", name);
    random_id(j->v.id, sizeof j->v.id, "vol-", 8);
    volume_dir(state_dir, j->v.id, j->vdir, sizeof j->vdir);
    owner_ids(owner, &j->uid, &j->gid);
    return j;
}

/* Made at once, on this thread: a create_sandbox that names a missing volume it may make. */
static json_t *volume_create_now(struct store *st, const char *state_dir, const char *owner,
                                 json_t *args, struct mcp_error *err)
{
    struct vol_job *j = create_job(st, state_dir, owner, args, err);
    if (j == NULL)
        return NULL;
    vol_work(&j->req);
    json_t *res = vol_finish(j);
    if (res == NULL)
        mcp_error_copy(err, &j->err);
    vol_job_free(j);
    return res;
}

static json_t *volume_list(struct local_backend *lb, const char *owner, struct mcp_error *err)
{
    struct store_volume *list = NULL;
    size_t n = 0;
    if (store_volume_list(lb->base.store, owner_or_empty(owner), &list, &n, err) < 0)
        return NULL;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, volume_info(&list[i]));
    store_volume_list_free(list, n);
    return json_pack("{s:o}", "volumes", arr);
}

/* inspect and delete: the owner's volume and its users, found on the loop. A delete is refused
 * while a sandbox on record mounts it (named, so the caller can destroy them). */
static struct vol_job *named_job(struct local_backend *lb, const char *owner, const char *name,
                                 enum vol_step step, struct mcp_error *err)
{
    struct vol_job *j = vol_job_new(lb->base.store, step);
    if (find_volume(lb->base.store, owner, name, &j->v, err) < 0 ||
        (j->users = volume_users(lb->base.store, owner, name, err)) == NULL) {
        vol_job_free(j);
        return NULL;
    }
    volume_dir(lb->state_dir, j->v.id, j->vdir, sizeof j->vdir);
    if (step == VOL_REMOVE && json_array_size(j->users) > 0) {
        cleanup_free char *ids = json_dumps(j->users, JSON_COMPACT);
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "volume %s is in use by %s: destroy those sandboxes (destroy_sandbox) "
                      "first; nothing was deleted",
                      name, ids);
        vol_job_free(j);
        return NULL;
    }
    return j;
}

int local_volume(struct backend *be, const char *owner, const char *action, json_t *args,
                 backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    const char *name = json_string_value(json_object_get(args, "name"));
    struct vol_job *j = NULL;
    if (action && strcmp(action, "list") == 0) {
        json_t *res = volume_list(lb, owner, err);
        if (res == NULL)
            return -1;
        backend_defer(be, cb, arg, res, NULL);
        json_decref(res);
        return 0;
    }
    if (action && strcmp(action, "create") == 0)
        j = create_job(be->store, lb->state_dir, owner, args, err);
    else if (action && strcmp(action, "inspect") == 0)
        j = named_job(lb, owner, name, VOL_USAGE, err);
    else if (action && strcmp(action, "delete") == 0)
        j = named_job(lb, owner, name, VOL_REMOVE, err);
    else
        mcp_error_set(err, MCP_ERR_INVALID, 0, "action must be create, list, inspect or delete");
    return j ? vol_queue(lb, j, cb, arg, err) : -1;
}

/* A writable mount of a volume at its limit where the watcher holds it (as a user): it would be
 * made read-only at once. */
static int over_limit(const char *vdir, const struct store_volume *v, unsigned i,
                      struct mcp_error *err)
{
    struct local_volume_usage u;
    if (geteuid() == 0)
        return 0;
    if (local_volume_fs_walk(vdir, local_volume_max_entries(v->size_limit), &u, err) < 0)
        return -1;
    u.partial = false; /* only the watcher, which reads as the sandboxes do, counts what it
                        * cannot see: here a directory a sandbox made private is no reason */
    if (!local_volume_over(&u, v->size_limit))
        return 0;
    return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                         "mounts[%u].volume %s holds %llu bytes in %llu entries, at or over its "
                         "limit of %llu bytes and %llu entries: mount it ro, or delete files "
                         "from it first",
                         i, v->name, (unsigned long long)u.bytes, (unsigned long long)u.entries,
                         (unsigned long long)v->size_limit,
                         (unsigned long long)local_volume_max_entries(v->size_limit));
}

/* The OpenSandbox API's pvc with createIfNotExists (osapi_volumes.c): a mount item
 * {create_if_missing: true, size_bytes?} makes the volume it names when the owner has none. */
static int create_missing(const struct local_ws_check *c, json_t *item, const char *name,
                          struct store_volume *v, struct mcp_error *err)
{
    if (!json_is_true(json_object_get(item, "create_if_missing")))
        return -1;
    json_t *args =
        json_pack("{s:s, s:O?}", "name", name, "size_bytes", json_object_get(item, "size_bytes"));
    json_t *made = volume_create_now(c->store, c->state_dir, c->caller, args, err);
    json_decref(args);
    if (made == NULL && err->code != MCP_ERR_CONFLICT) /* CONFLICT: made meanwhile */
        return -1;
    json_decref(made);
    return find_volume(c->store, c->caller, name, v, err);
}

int local_volume_resolve(const struct local_ws_check *c, json_t *item, bool writable, unsigned i,
                         struct local_ws_mount *wm, struct mcp_error *err)
{
    const char *name = json_string_value(json_object_get(item, "volume"));
    struct store_volume v;
    char vdir[LOCAL_PATH_MAX + 64], mnt[LOCAL_PATH_MAX + 80];
    if (c->store == NULL)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "mounts[%u]: this server keeps no "
                             "volumes",
                             i);
    if (find_volume(c->store, c->caller, name, &v, err) < 0 &&
        (err->code != MCP_ERR_NOT_FOUND || create_missing(c, item, name, &v, err) < 0))
        return mcp_error_prefix(err, "mounts[%u].volume", i);
    volume_dir(c->state_dir, v.id, vdir, sizeof vdir);
    snprintf(mnt, sizeof mnt, "%s/mnt", vdir);
    int rc = local_volume_fs_ready(vdir, err);
    if (rc == 0 && writable)
        rc = over_limit(vdir, &v, i, err);
    store_volume_release(&v);
    if (rc < 0)
        return -1;
    int fd = local_ws_open_beneath(mnt, "data");
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno,
                             "mounts[%u].volume %s: cannot open its "
                             "root at %s/data",
                             i, name, mnt);
    if (local_source_identify(fd, mnt, &wm->m, err) < 0) {
        close(fd);
        return -1;
    }
    struct local_ws_caller who;
    (void)local_ws_caller(c->caller, &who);
    local_ws_caller_ids(&who, &st, &wm->m.owner_uid, &wm->m.owner_gid);
    snprintf(wm->m.volume, sizeof wm->m.volume, "%s", name);
    return fd;
}
