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

/* The image config: the snapshot's env as Env, /workspace as WorkingDir, and labels naming
 * where it came from (the base image the layer is relative to, and the layer itself). */
static json_t *snapshot_config(json_t *rec)
{
    json_t *env = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(rec, "env"), k, v)
    {
        char *kv = xasprintf("%s=%s", k, json_string_value(v) ? json_string_value(v) : "");
        json_array_append_new(env, json_string(kv));
        free(kv);
    }
    const char *image = json_string_value(json_object_get(rec, "image"));
    const char *layer = json_string_value(json_object_get(rec, "layer"));
    return json_pack(
        "{s:s, s:s, s:O, s:{s:o, s:s, s:{s:O, s:s, s:s}}, s:{s:s, s:[s]}}", "architecture",
        oci_arch(), "os", "linux", "created", json_object_get(rec, "created_at"), "config", "Env",
        env, "WorkingDir", "/workspace", "Labels", "org.mcpbox.snapshot.id",
        json_object_get(rec, "snapshot_id"), "org.mcpbox.snapshot.image", image ? image : "host",
        "org.mcpbox.snapshot.layer", layer, "rootfs", "type", "layers", "diff_ids", layer);
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

/* A snapshot of an OCI-image sandbox holds only its own files: pushed alone it would not run,
 * and its base's layers are kept unpacked, not as the blobs a registry wants. */
static int refuse_image_base(json_t *rec, struct mcp_error *err)
{
    const char *image = json_string_value(json_object_get(rec, "image"));
    if (image == NULL || strcmp(image, "host") == 0)
        return 0;
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                         "snapshot %s is of a sandbox from image %s: pushing it would need that "
                         "image's layers too, which this server does not push yet. Push a "
                         "snapshot of a host-image sandbox",
                         json_string_value(json_object_get(rec, "snapshot_id")), image);
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
    json_t *rec = snap_files_load(f, id, owner, err);
    json_t *blobs = rec && refuse_image_base(rec, err) == 0 ? snapshot_blobs(f, rec, err) : NULL;
    struct image_service *svc = blobs ? local_image_service(lb, err) : NULL;
    struct httpc *http = svc ? image_service_http(svc, err) : NULL;
    int rc = -1;
    if (http) {
        struct push_op *op = xcalloc(1, sizeof *op);
        op->svc = svc, op->cb = cb, op->arg = arg;
        snprintf(op->snapshot_id, sizeof op->snapshot_id, "%s", id);
        json_t *config = snapshot_config(rec);
        image_service_hold(svc, +1);
        rc = image_push_start(lb->base.loop, http, reference, blobs, config, pushed, op, err);
        if (rc < 0)
            image_service_hold(svc, -1), free(op);
        json_decref(config);
    }
    json_decref(blobs);
    json_decref(rec);
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

void local_create_from_pushed(struct local_backend *lb, const struct sandbox_spec *spec,
                              json_t *image, backend_cb *cb, void *arg)
{
    json_t *cfg = json_object_get(image, "config");
    json_t *snap = json_object_get(cfg, "snapshot");
    const char *base = json_string_value(json_object_get(snap, "image"));
    struct mcp_error err;
    if (base == NULL || strcmp(base, "host") != 0) { /* also: no image that names itself */
        mcp_error_set(&err, MCP_ERR_UNSUPPORTED, 0,
                      "image %s is a snapshot pushed by mcpbox from a sandbox of image %s: only "
                      "snapshots of host-image sandboxes can be started from a registry",
                      spec->image, base ? base : "(none)");
        cb(arg, NULL, &err);
        return;
    }
    if (!pushed_layer_kept(lb, json_string_value(json_object_get(snap, "layer")))) {
        mcp_error_set(&err, MCP_ERR_NOT_FOUND, 0,
                      "the snapshot layer of image %s is no longer in the image store (pruned): "
                      "remove the image (`mcpbox image rm %s`) and create again to pull it anew",
                      spec->image, spec->image);
        cb(arg, NULL, &err);
        return;
    }
    const char *id = json_string_value(json_object_get(snap, "id"));
    json_t *rec = json_pack("{s:s, s:s, s:O, s:O}", "snapshot_id", id && id[0] ? id : "pushed",
                            "image", "host", "layer", json_object_get(snap, "layer"), "env",
                            json_object_get(cfg, "env"));
    if (local_restore_record(&lb->base, spec, rec, cb, arg, &err) < 0)
        cb(arg, NULL, &err);
    json_decref(rec);
}
