/* The local backend's side of OCI images (backend/local/image/image.h): a create whose image is
 * a reference waits for the image service, then goes on with the image's layers as its root and
 * the image config's Env, WorkingDir and User applied to every command. */
#define LOG_MODULE "local"
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/image/image.h"
#include "backend/local/image/unpack.h"
#include "backend/local/local.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

struct pending_create {
    struct local_backend *lb;
    struct sandbox_spec spec; /* a copy: the caller's is gone when the pull ends */
    local_image_ready_fn *ready;
    backend_cb *cb;
    void *arg;
};

bool local_image_reference_ok(const char *name)
{
    return image_reference_valid(name);
}

json_t *local_image_layers_in_use(struct store *st, struct mcp_error *err)
{
    struct store_sandbox *list = NULL;
    size_t n = 0;
    if (store_sandbox_list(st, "local", NULL, &list, &n, err) < 0)
        return NULL;
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *d;
        size_t k;
        /* A destroyed sandbox is being killed, its record reaped later: not a user. */
        if (list[i].state && strcmp(list[i].state, LOCAL_DESTROYED_STATE) == 0)
            continue;
        json_array_foreach(json_object_get(list[i].record, "image_layers"), k, d)
            json_array_append(out, d);
    }
    store_sandbox_list_free(list, n);
    return out;
}

/* image_in_use_fn: the store is shared by every mcpbox process on this state directory. */
static json_t *layers_in_use(void *arg, struct mcp_error *err)
{
    struct local_backend *lb = arg;
    return local_image_layers_in_use(lb->base.store, err);
}

int local_image_write_maps(void *ident, int pid, struct mcp_error *err)
{
    return local_identity_write_maps(ident, 0, pid, err);
}

/* The fixed mapping of root-mode sandboxes whose image store cannot be idmapped: the slice just
 * past the last per-sandbox slot, so it is nobody else's. */
static const struct local_identity fallback_mapping = {
    .mode = LOCAL_ID_SLICES,
    .uid_base = LOCAL_UID_BASE + LOCAL_UID_RANGE * LOCAL_MAX_SLOTS,
    .uid_count = LOCAL_UID_RANGE,
    .gid_base = LOCAL_UID_BASE + LOCAL_UID_RANGE * LOCAL_MAX_SLOTS,
    .gid_count = LOCAL_UID_RANGE,
};

const struct local_identity *local_image_shared_identity(void)
{
    return &fallback_mapping;
}

/* In a forked child: a user namespace to idmap through; the parent maps it, then kills it. */
static pid_t probe_child(int ready_w, int go_r, int ready_r, int go_w)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* else go_r never sees the parent's close; nor another thread's pipe its own */
    local_close_except(ready_w, go_r);
    char b = 'r';
    if (unshare(CLONE_NEWUSER) == 0 && write(ready_w, &b, 1) == 1)
        (void)!read(go_r, &b, 1);
    _exit(0);
}

/* Can the filesystem of dir be mounted idmapped (root mode)? overlayfs (as in a container), NFS
 * and older ZFS cannot. MCPBOX_IMAGE_SHARED_MAPPING=1 forces "no" (to test the fallback). */
static bool idmap_works(const char *dir)
{
    const char *force = getenv("MCPBOX_IMAGE_SHARED_MAPPING");
    if (force && strcmp(force, "1") == 0)
        return false;
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return true;
    if (pipe2(go, O_CLOEXEC) < 0) {
        close(ready[0]), close(ready[1]);
        return true;
    }
    pid_t pid = probe_child(ready[1], go[0], ready[0], go[1]);
    close(ready[1]), close(go[0]);
    char b;
    struct mcp_error err;
    bool ok = true;
    if (pid > 0 && read(ready[0], &b, 1) == 1 &&
        local_identity_write_maps(&fallback_mapping, 0, pid, &err) == 0) {
        int userns = local_ns_open(pid, "user");
        int tree = (int)syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
        ok = userns >= 0 && tree >= 0 &&
             syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0;
        if (userns >= 0)
            close(userns);
        if (tree >= 0)
            close(tree);
    }
    close(ready[0]), close(go[1]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return ok;
}

struct image_service *local_image_service(struct local_backend *lb, struct mcp_error *err)
{
    if (lb->images != NULL)
        return lb->images;
    /* Rootless: layers are unpacked with the one mapping all sandboxes share (identity.h).
     * Root, on a store that cannot be idmapped: with the fixed shared mapping, which the
     * sandboxes on those layers then get (docs/images.md, "Ownership"). */
    struct unpack_userns ns = {.write_maps = local_image_write_maps, .arg = &lb->ident};
    bool root = lb->ident.mode == LOCAL_ID_SLICES;
    if (root && !idmap_works(lb->state_dir)) {
        lb->image_shared_mapping = true;
        ns.arg = (void *)&fallback_mapping;
        log_info("the state directory's filesystem cannot be mounted idmapped: OCI image "
                 "sandboxes share the fixed mapping 0 -> %u",
                 (unsigned)fallback_mapping.uid_base);
    }
    lb->images = image_service_new(lb->base.loop, lb->state_dir,
                                   root && !lb->image_shared_mapping ? NULL : &ns, layers_in_use,
                                   lb, err);
    return lb->images;
}

static void copy_spec(struct sandbox_spec *dst, const struct sandbox_spec *src)
{
    *dst = *src;
    dst->owner = src->owner ? xstrdup(src->owner) : NULL;
    dst->image = src->image ? xstrdup(src->image) : NULL;
    dst->registry_auth = src->registry_auth ? xstrdup(src->registry_auth) : NULL;
    dst->snapshot_id = src->snapshot_id ? xstrdup(src->snapshot_id) : NULL;
    dst->env = json_incref(src->env);
    dst->metadata = json_incref(src->metadata);
    dst->mounts = json_incref(src->mounts);
    dst->roots = json_incref(src->roots);
    /* borrowed from the caller, whose references end when create returns */
    dst->network_policy =
        src->network_policy ? egress_policy_ref((struct egress_policy *)src->network_policy) : NULL;
    dst->secrets = json_incref(src->secrets);
}

static void free_spec(struct sandbox_spec *s)
{
    free((char *)s->owner);
    free((char *)s->image);
    if (s->registry_auth) /* a password: not left in freed memory */
        explicit_bzero((char *)s->registry_auth, strlen(s->registry_auth));
    free((char *)s->registry_auth);
    free((char *)s->snapshot_id);
    json_decref(s->env);
    json_decref(s->metadata);
    json_decref(s->mounts);
    json_decref(s->roots);
    egress_policy_unref((struct egress_policy *)s->network_policy);
    json_decref(s->secrets);
}

/* What a create that waits for its image keeps until the image is ready: its own copy of the
 * spec, since the caller's is gone by then. */
static struct pending_create *pending_create_new(struct local_backend *lb,
                                                 const struct sandbox_spec *spec,
                                                 local_image_ready_fn *ready, backend_cb *cb,
                                                 void *arg)
{
    struct pending_create *pc = xcalloc(1, sizeof *pc);
    pc->lb = lb, pc->ready = ready, pc->cb = cb, pc->arg = arg;
    copy_spec(&pc->spec, spec);
    return pc;
}

static void pending_create_free(struct pending_create *pc)
{
    free_spec(&pc->spec);
    free(pc);
}

static void on_progress(void *arg, uint64_t done, uint64_t total, const char *what)
{
    struct pending_create *pc = arg;
    if (pc->spec.progress)
        pc->spec.progress(pc->spec.progress_arg, done, total, what);
}

static void on_resolved(void *arg, json_t *image, const struct mcp_error *err)
{
    struct pending_create *pc = arg;
    if (err) {
        struct mcp_error e;
        mcp_error_copy(&e, err);
        pc->cb(pc->arg, NULL, &e);
    } else {
        pc->ready(pc->lb, &pc->spec, image, pc->cb, pc->arg);
    }
    pending_create_free(pc);
}

int local_image_resolve(struct local_backend *lb, const struct sandbox_spec *spec,
                        local_image_ready_fn *ready, backend_cb *cb, void *arg,
                        struct mcp_error *err)
{
    struct image_service *svc = local_image_service(lb, err);
    if (svc == NULL)
        return -1;
    struct pending_create *pc = pending_create_new(lb, spec, ready, cb, arg);
    if (image_service_resolve_auth(svc, spec->image, pc->spec.registry_auth, on_progress,
                                   on_resolved, pc, err) < 0) {
        pending_create_free(pc);
        return -1;
    }
    return 0;
}

bool local_image_dir_idmappable(struct local_backend *lb, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) < 0)
        return true; /* the create reports what is wrong with it */
    for (size_t i = 0; i < lb->n_idmap_seen; i++)
        if (lb->idmap_seen[i].dev == st.st_dev)
            return lb->idmap_seen[i].ok;
    bool ok = idmap_works(dir);
    size_t at = lb->n_idmap_seen < 8 ? lb->n_idmap_seen++ : 7;
    lb->idmap_seen[at].dev = st.st_dev, lb->idmap_seen[at].ok = ok;
    return ok;
}

bool local_image_shared(const struct local_backend *lb, json_t *image)
{
    return lb->image_shared_mapping || json_object_get(image, "imported_from") != NULL;
}

int local_image_import(struct local_backend *lb, const struct sandbox_spec *spec,
                       const char *dir, local_image_ready_fn *ready, backend_cb *cb, void *arg,
                       struct mcp_error *err)
{
    struct image_service *svc = local_image_service(lb, err);
    if (svc == NULL)
        return -1;
    struct pending_create *pc = pending_create_new(lb, spec, ready, cb, arg);
    if (image_service_import_dir(svc, spec->image, dir, fallback_mapping.uid_base,
                                 fallback_mapping.gid_base, on_resolved, pc, err) < 0) {
        pending_create_free(pc);
        return -1;
    }
    return 0;
}

void local_image_record(json_t *record, json_t *image, bool shared_mapping)
{
    if (shared_mapping)
        json_object_set_new(record, "image_mapping",
                            json_string("shared: the image's filesystem cannot be mounted "
                                        "idmapped, so sandboxes on such images share one fixed "
                                        "uid mapping (namespaces keep them apart)"));
    if (json_object_get(image, "imported_from"))
        json_object_set(record, "image_copied_from", json_object_get(image, "imported_from"));
    json_object_set(record, "image_digest", json_object_get(image, "digest"));
    json_object_set(record, "image_reference", json_object_get(image, "reference"));
    json_object_set(record, "image_layers", json_object_get(image, "layers"));
    json_object_set(record, "image_config", json_object_get(image, "config"));
}

/* ---- User: "uid[:gid]" or names looked up in the image's /etc/passwd and /etc/group ---------- */

/* The file as the sandbox sees it: the topmost layer that has it. The layer's symlinks are
 * resolved inside the layer (RESOLVE_IN_ROOT), never on the host: mcpbox reads this file as
 * itself, and an image's /etc/passwd -> /etc/shadow (or a fifo, or /dev/zero) must not make it
 * read a host file (or hang). Only a regular file is read. */
static FILE *open_in_layers(json_t *image, const char *rel)
{
    json_t *dirs = json_object_get(image, "layer_dirs");
    for (size_t i = json_array_size(dirs); i-- > 0;) {
        int dir = open(json_string_value(json_array_get(dirs, i)),
                       O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
                               .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
                                          RESOLVE_NO_XDEV};
        int fd = dir < 0 ? -1 : (int)syscall(SYS_openat2, dir, rel, &how, sizeof how);
        if (dir >= 0)
            close(dir);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
            close(fd);
            fd = -1;
        }
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        if (f)
            return f;
        if (fd >= 0)
            close(fd);
    }
    return NULL;
}

/* Field 3 (and 4) of the line of `name` in an /etc/passwd-style file; -1 if absent. */
static long lookup_id(json_t *image, const char *file, const char *name, long *gid)
{
    FILE *f = open_in_layers(image, file);
    char line[1024];
    long id = -1;
    size_t n = strlen(name);
    size_t seen = 0; /* a passwd file of gigabytes is read no further than 1 MiB */
    while (f && seen < (1u << 20) && fgets(line, sizeof line, f)) {
        seen += strlen(line) + 1;
        if (strncmp(line, name, n) != 0 || line[n] != ':')
            continue;
        char *p = strchr(line + n + 1, ':'); /* past the password field */
        if (p == NULL)
            break;
        id = strtol(p + 1, &p, 10);
        if (gid && *p == ':')
            *gid = strtol(p + 1, NULL, 10);
        break;
    }
    if (f)
        fclose(f);
    return id;
}

static long parse_id(json_t *image, const char *text, const char *file, long *gid)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text && *end == '\0' && v >= 0)
        return v;
    return lookup_id(image, file, text, gid);
}

/* The image's User as ids inside the sandbox; 0/0 when none is set or it cannot be resolved
 * (then logged). */
void local_image_user(json_t *image, uint32_t *uid_out, uint32_t *gid_out)
{
    *uid_out = *gid_out = 0;
    const char *user = json_string_value(json_object_get(json_object_get(image, "config"), "user"));
    if (image == NULL || user == NULL || user[0] == '\0')
        return;
    char name[256], *colon;
    snprintf(name, sizeof name, "%s", user);
    colon = strchr(name, ':');
    if (colon)
        *colon++ = '\0';
    long gid = 0;
    long uid = parse_id(image, name, "etc/passwd", &gid);
    if (colon)
        gid = parse_id(image, colon, "etc/group", NULL);
    if (uid < 0 || gid < 0 || uid > 65535 || gid > 65535) {
        log_warn("image user '%s' not found in the image's /etc/passwd or /etc/group, or outside "
                 "0..65535: commands run as root",
                 user);
        return;
    }
    *uid_out = (uint32_t)uid, *gid_out = (uint32_t)gid;
}

void local_image_agent_config(json_t *cfg, json_t *image, json_t *spec_env)
{
    json_t *ic = json_object_get(image, "config");
    json_t *env = json_deep_copy(json_object_get(ic, "env"));
    if (!json_is_object(env)) {
        json_decref(env);
        env = json_object();
    }
    if (json_is_object(spec_env))
        json_object_update(env, spec_env); /* the caller's env wins over the image's */
    json_object_set_new(cfg, "env", env);
    const char *wd = json_string_value(json_object_get(ic, "workdir"));
    if (wd && wd[0] == '/')
        json_object_set_new(cfg, "workdir", json_string(wd));
}
