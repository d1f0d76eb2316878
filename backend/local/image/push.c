/* An image's push to a registry (push.h). One request at a time, on the loop; layer files are
 * read by the engine as it sends them (httpc's upload_fd), never held in memory whole. */
#define LOG_MODULE "image"
#include "backend/local/image/push.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/local/image/layer_hash.h"
#include "backend/local/image/manifest.h"
#include "backend/local/image/registry.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

#define OCI_MANIFEST_TYPE "application/vnd.oci.image.manifest.v1+json"
#define OCI_CONFIG_TYPE "application/vnd.oci.image.config.v1+json"

enum push_step { STEP_BASE, STEP_HEAD, STEP_MOUNT, STEP_POST, STEP_PUT, STEP_MANIFEST, STEP_CHECK };

struct push {
    struct registry_client *client;
    struct image_ref ref;
    json_t *blobs; /* the layers, then the config (with its bytes in "data") */
    size_t i;      /* the blob under way */
    enum push_step step;
    char *config, *manifest;
    char manifest_digest[72];
    struct registry_upload up;
    int fd;
    uint64_t uploaded_bytes;
    int uploaded, present;
    image_push_done_fn *done;
    void *arg;
    /* a base image whose layers go first, mounted from its repository (same registry) */
    struct registry_client *base_client;
    char base_repo[IMAGE_REF_NAME_MAX];
    char config_digest[72];
};

static void push_next(struct push *p);

char *image_push_manifest(json_t *blobs, const char *config_digest, size_t config_size)
{
    json_t *layers = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(blobs, i, b) json_array_append_new(
        layers,
        json_pack("{s:O, s:O, s:O}", "mediaType", json_object_get(b, "media_type"), "digest",
                  json_object_get(b, "digest"), "size", json_object_get(b, "size")));
    json_t *m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
                          OCI_MANIFEST_TYPE, "config", "mediaType", OCI_CONFIG_TYPE, "digest",
                          config_digest, "size", (json_int_t)config_size, "layers", layers);
    char *text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(m);
    return text;
}

static void sha256_of(const char *data, size_t len, char out[72])
{
    struct layer_hash h;
    layer_hash_init(&h);
    layer_hash_update(&h, data, len);
    layer_hash_final(&h, out);
}

static void push_end(struct push *p, json_t *result, const struct mcp_error *err)
{
    if (p->fd >= 0)
        close(p->fd);
    p->done(p->arg, result, err);
    json_decref(result);
    registry_client_free(p->client);
    registry_client_free(p->base_client);
    json_decref(p->blobs);
    free(p->config), free(p->manifest);
    free(p);
}

static void push_fail(struct push *p, enum mcp_error_code code, const char *fmt, const char *a,
                      const char *b)
{
    struct mcp_error err;
    mcp_error_set(&err, code, 0, fmt, a, b);
    push_end(p, NULL, &err);
}

static const char *blob_str(const struct push *p, const char *key)
{
    return json_string_value(json_object_get(json_array_get(p->blobs, p->i), key));
}

/* The registry's Docker-Content-Digest, when it sends one, must be the digest sent: else it
 * stored something else (or lies), and the push stops. */
static bool digest_agrees(const struct httpc_response *resp, const char *want)
{
    const char *got = httpc_response_header(resp, "docker-content-digest");
    return got[0] == '\0' || strcmp(got, want) == 0;
}

static void on_answer(void *arg, struct httpc_response *resp, const struct mcp_error *err);

static void send_blob(struct push *p, const char *location)
{
    const char *digest = blob_str(p, "digest"), *path = blob_str(p, "path");
    char target[HTTPC_HDR_VALUE_MAX + 100];
    snprintf(target, sizeof target, "%s%sdigest=%s", location, strchr(location, '?') ? "&" : "?",
             digest);
    p->up = (struct registry_upload){.content_type = "application/octet-stream"};
    if (path == NULL) { /* the config, in memory */
        p->up.data = p->config, p->up.len = strlen(p->config);
    } else {
        p->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (p->fd < 0) {
            push_fail(p, MCP_ERR_BACKEND,
                      "the layer %s is missing from the image store (%s): "
                      "the snapshot cannot be pushed; take a new one",
                      digest, path);
            return;
        }
        p->up.from_fd = true, p->up.fd = p->fd;
        p->up.size =
            (uint64_t)json_integer_value(json_object_get(json_array_get(p->blobs, p->i), "size"));
    }
    p->step = STEP_PUT;
    registry_send(p->client, "PUT", target, &p->up, on_answer, p);
}

static void after_post(struct push *p, const struct httpc_response *resp)
{
    const char *loc = httpc_response_header(resp, "location");
    if (resp->status != 202 || loc[0] == '\0' || strlen(loc) >= HTTPC_HDR_VALUE_MAX - 1) {
        push_fail(p, MCP_ERR_BACKEND,
                  "registry %s did not start an upload as the distribution "
                  "API does (202 with a Location of at most 510 bytes) for %s: nothing was pushed "
                  "under the tag; check that it is an OCI registry",
                  p->ref.registry, blob_str(p, "digest"));
        return;
    }
    send_blob(p, loc);
}

static void after_put(struct push *p, const struct httpc_response *resp)
{
    if (p->fd >= 0)
        close(p->fd), p->fd = -1;
    if (resp->status != 201 || !digest_agrees(resp, blob_str(p, "digest"))) {
        push_fail(p, MCP_ERR_BACKEND,
                  "registry %s did not keep the blob %s as sent (no 201, or "
                  "another digest): the push stopped and the tag was not written; retry, or check "
                  "the registry",
                  p->ref.registry, blob_str(p, "digest"));
        return;
    }
    p->uploaded++;
    p->uploaded_bytes += p->up.from_fd ? p->up.size : p->up.len;
    p->i++;
    push_next(p);
}

static void after_manifest(struct push *p, const struct httpc_response *resp)
{
    char target[300];
    if (p->step == STEP_MANIFEST &&
        (resp->status != 201 || !digest_agrees(resp, p->manifest_digest))) {
        push_fail(p, MCP_ERR_BACKEND,
                  "registry %s did not keep the manifest as sent (no 201, or "
                  "another digest: %s): the tag may not name this image; retry",
                  p->ref.registry, p->manifest_digest);
        return;
    }
    if (p->step == STEP_MANIFEST) { /* read it back: a registry that lies is caught here */
        p->step = STEP_CHECK;
        snprintf(target, sizeof target, "manifests/%s", p->manifest_digest);
        registry_send(p->client, "HEAD", target, NULL, on_answer, p);
        return;
    }
    if (resp->status != 200) {
        push_fail(p, MCP_ERR_BACKEND,
                  "registry %s accepted the manifest %s but does not have it "
                  "when asked: the push is not done; retry, or check the registry",
                  p->ref.registry, p->manifest_digest);
        return;
    }
    char ref[IMAGE_REF_TEXT_MAX];
    image_ref_format(&p->ref, ref, sizeof ref);
    json_t *res = json_pack("{s:s, s:s, s:i, s:i, s:I}", "reference", ref, "digest",
                            p->manifest_digest, "blobs_uploaded", p->uploaded, "blobs_present",
                            p->present, "bytes_uploaded", (json_int_t)p->uploaded_bytes);
    push_end(p, res, NULL);
}

/* A layer the repository lacks but the base's repository has: mounted, not sent. */
static void mount_blob(struct push *p)
{
    char target[600]; /* a repository name needs no escaping (reference.c allows [a-z0-9._/-]) */
    snprintf(target, sizeof target, "blobs/uploads/?mount=%s&from=%s", blob_str(p, "digest"),
             blob_str(p, "mount_from"));
    p->step = STEP_MOUNT;
    registry_send(p->client, "POST", target, NULL, on_answer, p);
}

static void after_mount(struct push *p, const struct httpc_response *resp)
{
    if (resp->status != 201) {
        push_fail(p, MCP_ERR_BACKEND, "registry %s did not mount the base image's layer %s "
                  "from its repository (it wants the bytes sent): push to the registry and "
                  "repository of the base image",
                  p->ref.registry, blob_str(p, "digest"));
        return;
    }
    p->present++, p->i++;
    push_next(p);
}

static void build_manifest(struct push *p)
{
    json_t *layers = json_array();
    for (size_t i = 0; i + 1 < json_array_size(p->blobs); i++) /* the config is last */
        json_array_append(layers, json_array_get(p->blobs, i));
    p->manifest = image_push_manifest(layers, p->config_digest, strlen(p->config));
    sha256_of(p->manifest, strlen(p->manifest), p->manifest_digest);
    json_decref(layers);
}

/* The base image's manifest: its layers go first, each to be mounted from its repository. */
static void after_base(struct push *p, const struct httpc_response *resp)
{
    struct oci_manifest m;
    struct mcp_error err;
    memset(&m, 0, sizeof m);
    int rc = oci_manifest_parse(resp->body.data, resp->body.len, resp->content_type, &m, &err);
    if (rc == 0 && m.is_index) {
        oci_manifest_free(&m);
        rc = mcp_error_set(&err, MCP_ERR_BACKEND, 0, "an index where a manifest was asked for");
    }
    if (rc < 0) {
        push_fail(p, MCP_ERR_BACKEND, "the base image's manifest could not be read again from "
                  "%s (%s): the push stopped",
                  p->base_repo, err.msg);
        return;
    }
    for (size_t i = 0; i < m.n_entries; i++)
        json_array_insert_new(p->blobs, i, json_pack("{s:s, s:I, s:s, s:s}", "digest",
                                                     m.entries[i].digest, "size",
                                                     (json_int_t)m.entries[i].size, "media_type",
                                                     m.entries[i].media_type, "mount_from",
                                                     p->base_repo));
    oci_manifest_free(&m);
    build_manifest(p);
    push_next(p);
}

static void on_answer(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct push *p = arg;
    if (err) {
        struct mcp_error e = *err;
        size_t n = strlen(e.msg);
        snprintf(e.msg + n, sizeof e.msg - n, " (the push stopped; the tag was not written)");
        push_end(p, NULL, &e);
        return;
    }
    switch (p->step) {
    case STEP_HEAD:
        if (resp->status == 200) {
            p->present++, p->i++;
            push_next(p);
            return;
        }
        if (blob_str(p, "mount_from")) {
            mount_blob(p);
            return;
        }
        p->step = STEP_POST;
        registry_send(p->client, "POST", "blobs/uploads/", NULL, on_answer, p);
        return;
    case STEP_BASE:
        after_base(p, resp);
        return;
    case STEP_MOUNT:
        after_mount(p, resp);
        return;
    case STEP_POST:
        after_post(p, resp);
        return;
    case STEP_PUT:
        after_put(p, resp);
        return;
    default:
        after_manifest(p, resp);
    }
}

/* The next blob's HEAD, or the manifest once every blob is there. */
static void push_next(struct push *p)
{
    char target[300];
    if (p->i < json_array_size(p->blobs)) {
        p->step = STEP_HEAD;
        snprintf(target, sizeof target, "blobs/%s", blob_str(p, "digest"));
        registry_send(p->client, "HEAD", target, NULL, on_answer, p);
        return;
    }
    p->step = STEP_MANIFEST;
    p->up = (struct registry_upload){
        .content_type = OCI_MANIFEST_TYPE, .data = p->manifest, .len = strlen(p->manifest)};
    snprintf(target, sizeof target, "manifests/%s", p->ref.tag);
    registry_send(p->client, "PUT", target, &p->up, on_answer, p);
}

int image_push_start(uv_loop_t *loop, struct httpc *http, const char *reference, json_t *blobs,
                     json_t *config, const struct image_push_base *base, image_push_done_fn *done,
                     void *arg, struct mcp_error *err)
{
    struct image_ref ref;
    if (image_ref_parse(reference, &ref, err) < 0 || registry_check_reference(&ref, err) < 0)
        return -1;
    if (ref.digest[0] || ref.tag[0] == '\0')
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "push to a tag (registry/repository:tag), not to a digest: %s",
                             reference);
    struct push *p = xcalloc(1, sizeof *p);
    p->ref = ref, p->fd = -1, p->done = done, p->arg = arg;
    p->config = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS);
    sha256_of(p->config, strlen(p->config), p->config_digest);
    p->blobs = json_deep_copy(blobs);
    json_array_append_new(p->blobs, json_pack("{s:s, s:I}", "digest", p->config_digest, "size",
                                              (json_int_t)strlen(p->config)));
    p->client = registry_client_new(loop, http, &ref);
    if (base == NULL) {
        build_manifest(p);
        push_next(p);
        return 0;
    }
    char path[300];
    snprintf(p->base_repo, sizeof p->base_repo, "%s", base->ref->repository);
    p->base_client = registry_client_new(loop, http, base->ref);
    p->step = STEP_BASE;
    snprintf(path, sizeof path, "manifests/%s", base->manifest_digest);
    registry_get(p->base_client, path, OCI_MANIFEST_ACCEPT, OCI_MANIFEST_MAX, NULL, on_answer, p);
    return 0;
}

bool registry_push_status_error(const char *registry, const char *repository, const char *method,
                                const char *path, long status, const char *words, bool creds,
                                struct mcp_error *err)
{
    if (strcmp(method, "GET") == 0 || (status != 401 && status != 403))
        return false;
    mcp_error_set(err, MCP_ERR_DENIED, 0,
                  "registry %s refused a push to %s (HTTP %ld to %s %.100s)%s: %s. mcpbox reads "
                  "the person's credentials ($REGISTRY_AUTH_FILE, containers' auth.json, "
                  "~/.docker/config.json and the credential helpers they name), never an agent's",
                  registry, repository, status, method, path, words,
                  creds ? "the stored credentials were refused, or they may not push there"
                        : "no credentials found for it; the person logs in with `docker login "
                          "REGISTRY` or `podman login REGISTRY`");
    return true;
}
