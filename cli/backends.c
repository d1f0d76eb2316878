/* Every backend of this executable, in create_sandbox's order of preference, each made from its
 * own options (the server configuration stops here). */
#define LOG_MODULE "server"
#include "cli/backends.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/local/doctor.h"
#include "backend/local/identity.h"
#include "backend/local/image/image.h"
#include "backend/local/image/unpack.h"
#include "backend/local/local.h"
#include "backend/local/snapshot.h"
#include "backend/local/workspace_review.h"
#include "backend/opensandbox/opensandbox.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "server/config.h"

static struct backend *start_local(uv_loop_t *loop, struct store *store,
                                   const struct mcp_config *cfg, struct mcp_error *err)
{
    /* Host directories: --allow-dir / MCPBOX_ALLOW_DIRS, else for a stdio server the directory
     * it was started in (where Claude Code and Cursor start it: the project), else none
     * (docs/configuration.md, "Host directories"). */
    char cwd[4096];
    const char *allow = cfg->allow_dirs;
    if (allow == NULL && cfg->http_listen == NULL && getcwd(cwd, sizeof cwd) != NULL)
        allow = cwd;
    struct local_options opts = {.pool = cfg->local_pool,
                                 .allow_dirs = allow,
                                 .apply_unreviewed = cfg->apply_unreviewed,
                                 .apply_max_bytes = cfg->apply_max_bytes};
    return cfg->local_enabled ? local_backend_new(loop, store, &opts, err) : NULL;
}

static struct backend *start_opensandbox(uv_loop_t *loop, struct store *store,
                                         const struct mcp_config *cfg, struct mcp_error *err)
{
    struct opensandbox_options opts = {
        .domain = cfg->opensandbox_domain, .api_key = cfg->opensandbox_api_key,
        .protocol = cfg->opensandbox_protocol,
        .request_timeout_s = cfg->opensandbox_request_timeout_s,
        .use_server_proxy = cfg->opensandbox_use_server_proxy,
    };
    return cfg->opensandbox_domain ? opensandbox_backend_new(loop, store, &opts, err) : NULL;
}

/* For one command of a person's: the local backend with its defaults (no pool; host directories
 * only those backends_allow_dir adds). */
static struct backend *open_local(uv_loop_t *loop, struct store *store, struct mcp_error *err)
{
    return local_backend_new(loop, store, NULL, err);
}

static int allow_local(struct backend *be, const char *dir, struct mcp_error *err)
{
    return local_backend_allow(be, dir, err);
}

static const struct {
    const struct backend_ops *ops;
    struct backend *(*start)(uv_loop_t *loop, struct store *store, const struct mcp_config *cfg,
                             struct mcp_error *err);
    /* The CLI's: NULL where a backend has no such use. */
    struct backend *(*open)(uv_loop_t *loop, struct store *store, struct mcp_error *err);
    int (*allow_dir)(struct backend *be, const char *dir, struct mcp_error *err);
} backends[] = {
    {&local_ops, start_local, open_local, allow_local},
    {&opensandbox_ops, start_opensandbox, NULL, NULL},
};

void backends_start(struct backend_set *set, uv_loop_t *loop, struct store *store,
                    const struct mcp_config *cfg)
{
    for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
        struct mcp_error err = {0};
        struct backend *be = backends[i].start(loop, store, cfg, &err);
        if (be == NULL && err.msg[0] != '\0')
            log_warn("%s backend unavailable: %s", backends[i].ops->name, err.msg);
        if (backend_set_add(set, backends[i].ops, be, &err) < 0) {
            log_error("%s", err.msg);
            if (be != NULL)
                be->ops->free(be);
        }
    }
}

struct backend *backends_open(const char *name, uv_loop_t *loop, struct store *store,
                              struct mcp_error *err)
{
    for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
        if (strcmp(backends[i].ops->name, name) == 0 && backends[i].open != NULL)
            return backends[i].open(loop, store, err);
    }
    mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                  "the %s backend cannot be used from the command line; use mcpbox serve", name);
    return NULL;
}

int backends_allow_dir(struct backend *be, const char *dir, struct mcp_error *err)
{
    for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
        if (backends[i].ops == be->ops && backends[i].allow_dir != NULL)
            return backends[i].allow_dir(be, dir, err);
    }
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "the %s backend mounts no host directory",
                         be->ops->name);
}

bool backends_helper(int argc, char **argv, int *status)
{
    if (argc > 1 && strcmp(argv[1], IMAGE_UNPACK_ARGV1) == 0)
        *status = image_unpack_child_main(argc, argv);
    else if (argc > 1 && strcmp(argv[1], WS_HELPER_ARGV1) == 0)
        *status = ws_helper_main(argc, argv);
    else if (argc > 1 && strcmp(argv[1], SNAP_HELPER_ARGV1) == 0)
        *status = snap_helper_main(argc, argv);
    else
        return false;
    return true;
}

void backends_before_serve(int argc, char **argv)
{
    local_enter_delegated_scope(argc, argv);
}

const char *backends_names(void)
{
    static char names[128];
    size_t len = 0;
    for (size_t i = 0; i < ARRAY_SIZE(backends) && len < sizeof names; i++) {
        int n = snprintf(names + len, sizeof names - len, "%s%s", i ? "," : "",
                         backends[i].ops->name);
        len += n > 0 ? (size_t)n : 0;
    }
    return names;
}

json_t *backends_doctor(const char *state_dir)
{
    struct doctor_report r;
    doctor_run(state_dir, &r);
    /* The backend's own verdict, beside the checks that explain it. */
    struct doctor_check *c = doctor_add(&r, "local_backend", true);
    struct mcp_error err = {0};
    if (local_backend_probe(&err) == 0)
        doctor_pass(c, "the local backend's own probe passes");
    else
        doctor_fail(c,
                    geteuid() != 0 ? "run mcpbox as root (for example: sudo mcpbox serve)"
                                   : "see the failed checks above",
                    "%s", err.msg);
    json_t *out = doctor_report_json(&r);
    doctor_report_release(&r);
    return out;
}

struct backends_images {
    struct image_service *svc;
};

/* Layers of every local sandbox on record: prune and eviction keep them. */
static json_t *images_in_use(void *arg, struct mcp_error *err)
{
    return local_image_layers_in_use(arg, err);
}

struct backends_images *backends_images_open(uv_loop_t *loop, const char *state_dir,
                                             struct store *st, struct mcp_error *err)
{
    /* The same identity a server of this user has; static, as the unpacks that use it may
     * outlive backends_images_close until the loop has run them out. */
    static struct local_identity ident;
    static struct unpack_userns ns = {.write_maps = local_image_write_maps, .arg = &ident};
    local_identity_detect(&ident);
    struct image_service *svc = image_service_new(
        loop, state_dir, ident.mode == LOCAL_ID_SLICES ? NULL : &ns, images_in_use, st, err);
    if (svc == NULL)
        return NULL;
    struct backends_images *im = xcalloc(1, sizeof(*im));
    im->svc = svc;
    return im;
}

void backends_images_close(struct backends_images *im)
{
    if (im == NULL)
        return;
    image_service_free(im->svc);
    free(im);
}

int backends_images_pull(struct backends_images *im, const char *ref,
                         backends_pull_progress_fn *progress, backends_pull_done_fn *done,
                         void *arg, struct mcp_error *err)
{
    return image_service_resolve(im->svc, ref, true, progress, done, arg, err);
}

json_t *backends_images_list(struct backends_images *im)
{
    return image_service_list(im->svc);
}

int backends_images_remove(struct backends_images *im, const char *ref, struct mcp_error *err)
{
    return image_service_remove(im->svc, ref, err);
}

json_t *backends_images_prune(struct backends_images *im, struct mcp_error *err)
{
    return image_service_prune(im->svc, err);
}
