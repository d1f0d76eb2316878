/* snapshot_sandbox {action: "push"} on the local backend (snapshot.h; docs/local-backend.md,
 * "Pushing a snapshot"): a snapshot as an OCI image in a registry, its layer uploaded from the
 * image store and its config made from its record. Credentials are the person's (the files a
 * pull reads), never the caller's. */
#define LOG_MODULE "local"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backend/local/image/image.h"
#include "backend/local/image/layer_store.h"
#include "backend/local/image/reference.h"
#include "backend/local/image/push.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/snapshot.h"
#include "lib/base/xalloc.h"

#define SNAP_LAYER_TYPE "application/vnd.oci.image.layer.v1.tar"

struct push_op {
    struct image_service *svc;
    backend_cb *cb;
    void *arg;
    char snapshot_id[64];
};

/* The OCI platform name of this machine's architecture. */
static const char *oci_arch(void)
{
    static struct utsname u;
    if (uname(&u) < 0)
        return "amd64";
    static const char *const map[][2] = {
        {"x86_64", "amd64"},    {"aarch64", "arm64"}, {"i686", "386"},       {"armv7l", "arm"},
        {"ppc64le", "ppc64le"}, {"s390x", "s390x"},   {"riscv64", "riscv64"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(u.machine, map[i][0]) == 0)
            return map[i][1];
    return u.machine;
}

/* The image config: the base's Env under the snapshot's env, its WorkingDir (else /workspace)
 * and User, the base's diff_ids then the snapshot's layer, and labels naming where it came from
 * (the image the layer is relative to, and the layer itself). base: the base image's record, or
 * NULL for the host image. */
static json_t *snapshot_config(json_t *rec, json_t *base, json_t *base_diff_ids)
{
    json_t *bcfg = json_object_get(base, "config");
    json_t *vars = json_is_object(json_object_get(bcfg, "env"))
                       ? json_deep_copy(json_object_get(bcfg, "env"))
                       : json_object();
    json_object_update(vars, json_object_get(rec, "env"));
    json_t *env = json_array(), *v;
    const char *k;
    json_object_foreach(vars, k, v)
    {
        char *kv = xasprintf("%s=%s", k, json_string_value(v) ? json_string_value(v) : "");
        json_array_append_new(env, json_string(kv));
        free(kv);
    }
    json_decref(vars);
    const char *image = json_string_value(json_object_get(rec, "image"));
    const char *layer = json_string_value(json_object_get(rec, "layer"));
    const char *wd = json_string_value(json_object_get(bcfg, "workdir"));
    const char *user = json_string_value(json_object_get(bcfg, "user"));
    json_t *diff_ids = json_deep_copy(base_diff_ids);
    json_array_append_new(diff_ids, json_string(layer));
    return json_pack("{s:s, s:s, s:O, s:{s:o, s:s, s:s, s:{s:O, s:s, s:s}}, s:{s:s, s:o}}",
                     "architecture", oci_arch(), "os", "linux", "created",
                     json_object_get(rec, "created_at"), "config", "Env", env, "WorkingDir",
                     wd && wd[0] ? wd : "/workspace", "User", user ? user : "", "Labels",
                     "org.mcpbox.snapshot.id", json_object_get(rec, "snapshot_id"),
                     "org.mcpbox.snapshot.image", image ? image : "host",
                     "org.mcpbox.snapshot.layer", layer, "rootfs", "type", "layers", "diff_ids",
                     diff_ids);
}

static void pushed(void *arg, json_t *result, const struct mcp_error *err)
{
    struct push_op *op = arg;
    if (result)
        json_object_set_new(result, "snapshot_id", json_string(op->snapshot_id));
    op->cb(op->arg, result, err);
    image_service_hold(op->svc, -1);
    free(op);
}

/* The snapshot's layer as the image's one blob: [{digest, size, media_type, path}]. */
static json_t *snapshot_blobs(const struct snap_files *f, json_t *rec, struct mcp_error *err)
{
    const char *layer = json_string_value(json_object_get(rec, "layer"));
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/blobs/sha256/%s", f->dir,
             layer && strncmp(layer, "sha256:", 7) == 0 ? layer + 7 : "");
    if (layer == NULL || stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
        mcp_error_set(err, MCP_ERR_BACKEND, 0,
                      "the layer of snapshot %s is missing from the image store: it cannot be "
                      "pushed; take a new snapshot",
                      json_string_value(json_object_get(rec, "snapshot_id")));
        return NULL;
    }
    return json_pack("[{s:s, s:I, s:s, s:s}]", "digest", layer, "size", (json_int_t)st.st_size,
                     "media_type", SNAP_LAYER_TYPE, "path", path);
}

/* A snapshot of an OCI-image sandbox holds only its own files: its base image's layers go with
 * it, mounted from the base's repository, so that the image runs on its own. That needs the
 * base's record in the store (its manifest digest, config and diff_ids) and the same registry
 * (the layers are kept unpacked here, not as the blobs a registry takes). */
struct push_base {
    struct image_ref ref;
    json_t *image;    /* the base's record */
    json_t *diff_ids; /* of its layers, bottom first */
};

static int base_diff_ids(struct image_service *svc, struct push_base *b, struct mcp_error *err)
{
    json_t *d;
    size_t i;
    json_array_foreach(json_object_get(b->image, "layers"), i, d) {
        char id[80];
        if (!layer_store_diff_id(image_service_store(svc), json_string_value(d), id, sizeof id))
            return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                                 "a layer of the base image %s is gone from the store: pull it "
                                 "again (`mcpbox image pull %s`) and push again",
                                 b->ref.repository, b->ref.repository);
        json_array_append_new(b->diff_ids, json_string(id));
    }
    return 0;
}

static int snapshot_base(struct image_service *svc, json_t *rec, const char *reference,
                         struct push_base *b, struct mcp_error *err)
{
    const char *image = json_string_value(json_object_get(rec, "image"));
    struct image_ref target;
    char text[IMAGE_REF_TEXT_MAX];
    if (image == NULL || strcmp(image, "host") == 0)
        return 0;
    if (image_ref_parse(image, &b->ref, err) < 0 || image_ref_parse(reference, &target, err) < 0)
        return -1;
    if (strcmp(image_ref_api_host(&b->ref), image_ref_api_host(&target)) != 0)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "snapshot %s is of a sandbox from image %s, whose layers go with it "
                             "mounted from its repository: push it to registry %s",
                             json_string_value(json_object_get(rec, "snapshot_id")), image,
                             b->ref.registry);
    image_ref_format(&b->ref, text, sizeof text);
    b->image = layer_store_load_image(image_service_store(svc), text);
    if (b->image == NULL)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "the snapshot's base image %s is no longer in the store: pull it "
                             "(`mcpbox image pull %s`) and push again",
                             image, image);
    return base_diff_ids(svc, b, err);
}

static int start_push(struct local_backend *lb, struct image_service *svc, json_t *rec,
                      const char *reference, json_t *blobs, const struct push_base *b,
                      backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct httpc *http = image_service_http(svc, err);
    if (http == NULL)
        return -1;
    struct push_op *op = xcalloc(1, sizeof *op);
    op->svc = svc, op->cb = cb, op->arg = arg;
    snprintf(op->snapshot_id, sizeof op->snapshot_id, "%s",
             json_string_value(json_object_get(rec, "snapshot_id")));
    json_t *config = snapshot_config(rec, b->image, b->diff_ids);
    struct image_push_base base = {.ref = &b->ref,
                                   .manifest_digest = json_string_value(
                                       json_object_get(b->image, "manifest_digest"))};
    image_service_hold(svc, +1);
    int rc = image_push_start(lb->base.loop, http, reference, blobs, config,
                              b->image ? &base : NULL, pushed, op, err);
    if (rc < 0)
        image_service_hold(svc, -1), free(op);
    json_decref(config);
    return rc;
}

int local_snapshot_push(struct local_backend *lb, const struct snap_files *f, const char *owner,
                        json_t *args, backend_cb *cb, void *arg, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(args, "snapshot_id"));
    const char *reference = json_string_value(json_object_get(args, "reference"));
    if (id == NULL || reference == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "action \"push\" needs snapshot_id and reference "
                             "(registry/repository:tag)");
    struct push_base b = {.image = NULL, .diff_ids = json_array()};
    json_t *rec = snap_files_load(f, id, owner, err);
    struct image_service *svc = rec ? local_image_service(lb, err) : NULL;
    json_t *blobs = svc && snapshot_base(svc, rec, reference, &b, err) == 0
                        ? snapshot_blobs(f, rec, err)
                        : NULL;
    int rc = blobs ? start_push(lb, svc, rec, reference, blobs, &b, cb, arg, err) : -1;
    json_decref(blobs), json_decref(rec), json_decref(b.image), json_decref(b.diff_ids);
    return rc;
}

/* ---- the other way: a sandbox from a pushed snapshot ---- */

static bool pushed_layer_kept(struct local_backend *lb, const char *layer)
{
    struct snap_files f;
    struct mcp_error err;
    char dir[LOCAL_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/image-store", lb->state_dir);
    snap_files_init(&f, dir);
    int fd = snap_files_open_layer(&f, layer, &err);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* The pushed image without its top layer (the snapshot's): its base, as a record to create on. */
static json_t *base_of_pushed(json_t *image)
{
    json_t *base = json_deep_copy(image);
    json_t *layers = json_object_get(base, "layers"), *dirs = json_object_get(base, "layer_dirs");
    json_array_remove(layers, json_array_size(layers) - 1);
    json_array_remove(dirs, json_array_size(dirs) - 1);
    json_object_del(json_object_get(base, "config"), "snapshot");
    return base;
}

void local_create_from_pushed(struct local_backend *lb, const struct sandbox_spec *spec,
                              json_t *image, backend_cb *cb, void *arg)
{
    json_t *cfg = json_object_get(image, "config");
    json_t *snap = json_object_get(cfg, "snapshot");
    const char *base = json_string_value(json_object_get(snap, "image"));
    bool host = base != NULL && strcmp(base, "host") == 0;
    struct mcp_error err;
    if (!pushed_layer_kept(lb, json_string_value(json_object_get(snap, "layer")))) {
        mcp_error_set(&err, MCP_ERR_NOT_FOUND, 0,
                      "the snapshot layer of image %s is no longer in the image store (pruned): "
                      "remove the image (`mcpbox image rm %s`) and create again to pull it anew",
                      spec->image, spec->image);
        cb(arg, NULL, &err);
        return;
    }
    const char *id = json_string_value(json_object_get(snap, "id"));
    json_t *below = host ? NULL : base_of_pushed(image);
    json_t *rec = json_pack("{s:s, s:s, s:O, s:O}", "snapshot_id", id && id[0] ? id : "pushed",
                            "image", host ? "host" : spec->image, "layer",
                            json_object_get(snap, "layer"), "env", json_object_get(cfg, "env"));
    int rc = !host && json_array_size(json_object_get(below, "layer_dirs")) == 0
                 ? mcp_error_set(&err, MCP_ERR_BACKEND, 0,
                                 "image %s says it is a snapshot of image %s but carries none of "
                                 "its layers",
                                 spec->image, base ? base : "(none)")
                 : local_restore_onto(&lb->base, spec, rec, below, cb, arg, &err);
    if (rc < 0)
        cb(arg, NULL, &err);
    json_decref(rec), json_decref(below);
}
