/* The synchronous test harness over the local backend (see harness.h). */
#include "harness.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/local/doctor.h"
#include "backend/local/local.h"
#include "backend/local/runtime_dir.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/config.h"
#include "lib/store/store.h"
#include "lib/base/rmtree.h"

#define HARNESS_OUTPUT_MAX (64u * 1024 * 1024)
#define HARNESS_SKIP 77

void harness_reset(struct harness *h)
{
    json_decref(h->result);
    h->result = NULL;
    h->done = false;
    h->failed = false;
    memset(&h->err, 0, sizeof(h->err));
}

void harness_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct harness *h = arg;
    h->done = true;
    h->failed = err != NULL;
    if (err != NULL)
        mcp_error_copy(&h->err, err);
    else
        h->result = json_incref(result);
}

int harness_wait(struct harness *h)
{
    while (!h->done)
        if (uv_run(&h->loop, UV_RUN_ONCE) == 0 && !h->done) {
            h->failed = true;
            return mcp_error_set(&h->err, MCP_ERR_INTERNAL, 0, "loop went idle");
        }
    return h->failed ? -1 : 0;
}

/* The kernel refuses what sandboxes need (user namespaces, the uid map, seccomp): the doctor's
 * probes say so precisely, and the caller skips. */
static bool harness_host_refuses(const char *state_dir)
{
    static const char *const needed[] = {"namespaces_probe", "uid_mapping", "seccomp"};
    struct doctor_report r;
    doctor_run(state_dir, &r);
    bool refused = false;
    for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
        const struct doctor_check *c = doctor_report_find(&r, needed[i]);
        if (c != NULL && !c->ok && c->required) { /* single uid is a WARN: sandboxes run */
            printf("# SKIP: %s: %s\n", c->name, c->detail);
            refused = true;
        }
    }
    doctor_report_release(&r);
    return refused;
}

/* The server's default pool unless MCPBOX_LOCAL_POOL says otherwise (0: off). */
int harness_pool_size(void)
{
    const char *v = getenv("MCPBOX_LOCAL_POOL");
    return v && *v ? atoi(v) : CONFIG_LOCAL_POOL_DEFAULT;
}

int harness_reopen_backend(struct harness *h, int pool)
{
    local_backend_free(h->be);
    h->be = NULL;
    uv_run(&h->loop, UV_RUN_NOWAIT); /* close callbacks */
    struct local_options opts = {.pool = pool};
    h->be = local_backend_new(&h->loop, h->store, &opts, &h->err);
    return h->be ? 0 : -1;
}

int harness_open(struct harness *h)
{
    return harness_open_dir(h, NULL, harness_pool_size());
}

int harness_open_dir(struct harness *h, const char *dir, int pool)
{
    memset(h, 0, sizeof(*h));
    snprintf(h->state_dir, sizeof(h->state_dir), "%s", dir ? dir : "/tmp/mbxt-XXXXXX");
    if ((dir == NULL && mkdtemp(h->state_dir) == NULL) || uv_loop_init(&h->loop) != 0)
        return -1;
    if (harness_host_refuses(h->state_dir))
        return HARNESS_SKIP;
    struct local_options opts = {.pool = pool};
    h->store = store_open(h->state_dir, &h->err);
    if (h->store == NULL) {
        fprintf(stderr, "store_open: %s\n", h->err.msg);
        return -1;
    }
    h->be = local_backend_new(&h->loop, h->store, &opts, &h->err);
    if (h->be == NULL) {
        printf("# local backend unavailable: %s\n", h->err.msg);
        return h->err.code == MCP_ERR_UNSUPPORTED ? HARNESS_SKIP : -1;
    }
    return 0;
}

static void harness_close_walk(uv_handle_t *handle, void *arg)
{
    if (!uv_is_closing(handle))
        uv_close(handle, NULL);
}

void harness_close(struct harness *h)
{
    if (h->be != NULL)
        local_backend_free(h->be);
    uv_run(&h->loop, UV_RUN_NOWAIT);
    uv_walk(&h->loop, harness_close_walk, NULL);
    uv_run(&h->loop, UV_RUN_DEFAULT);
    uv_loop_close(&h->loop);
    store_close(h->store);
    json_decref(h->result);
    if (rmtree(h->state_dir) < 0)
        fprintf(stderr, "could not remove %s\n", h->state_dir);
}

static int entries_left(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && ++n)
            printf("# left in the runtime directory: %s/%s\n", dir, e->d_name);
    if (d)
        closedir(d);
    return n;
}

#define HARNESS_RUNTIME_CANDIDATES 2

/* The i-th place the backend may keep this state directory's runtime files (runtime_dir.h: the
 * tmpfs one for this euid, else <state>/run); -1 if none. */
static int runtime_candidate(const struct harness *h, int i, char *out, size_t size)
{
    char root[PATH_MAX], real[PATH_MAX];
    int on_tmpfs = local_runtime_path(h->state_dir, root, sizeof root, out, size);
    if (on_tmpfs < 0 || realpath(h->state_dir, real) == NULL)
        return -1; /* no state directory, so no runtime directory either */
    if (i == 1)
        snprintf(out, size, "%s/run", real);
    return 0;
}

int harness_runtime_dir(const struct harness *h, char *out, size_t size)
{
    for (int i = 0; i < HARNESS_RUNTIME_CANDIDATES; i++)
        if (runtime_candidate(h, i, out, size) == 0 && access(out, F_OK) == 0)
            return 0;
    return -1;
}

int harness_runtime_left(const struct harness *h)
{
    char dir[PATH_MAX + 32];
    int n = 0;
    for (int i = 0; i < HARNESS_RUNTIME_CANDIDATES; i++)
        if (runtime_candidate(h, i, dir, sizeof dir) == 0)
            n += entries_left(dir);
    return n;
}

char *harness_create(struct harness *h, const struct sandbox_spec *spec)
{
    struct sandbox_spec def = {.owner = "test"};
    harness_reset(h);
    if (h->be->ops->create(h->be, spec ? spec : &def, harness_cb, h, &h->err) < 0 ||
        harness_wait(h) < 0) {
        h->failed = true;
        return NULL;
    }
    return xstrdup(json_string_value(json_object_get(h->result, "sandbox_id")));
}

/* destroy answers once the record is gone for callers (state "destroyed"); the release (the
 * init's exit, cgroups, directories, slot) follows on the loop and ends by deleting the record.
 * Waits for that (bounded), so that what a caller checks next is released. */
static int harness_wait_released(struct harness *h, const char *id)
{
    for (int i = 0; i < 20000; i++) {
        struct store_sandbox rec = {0};
        struct mcp_error err;
        if (store_sandbox_get(h->store, id, &rec, &err) < 0)
            return 0;
        store_sandbox_release(&rec);
        uv_run(&h->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return mcp_error_set(&h->err, MCP_ERR_TIMEOUT, 0, "the release of %s did not finish", id);
}

int harness_destroy(struct harness *h, const char *id)
{
    harness_reset(h);
    if (h->be->ops->destroy(h->be, id, harness_cb, h, &h->err) < 0)
        return -1;
    return harness_wait(h) < 0 ? -1 : harness_wait_released(h, id);
}

struct exec_ctx {
    struct harness *h;
    struct harness_exec *x;
};

static void exec_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct exec_ctx *c = arg;
    buf_append(stream == EXEC_STDERR ? &c->x->err : &c->x->out, data, len);
}

static void exec_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct exec_ctx *c = arg;
    harness_cb(c->h, result, err);
}

int harness_exec(struct harness *h, const char *id, const char *command, struct harness_exec *x)
{
    memset(x, 0, sizeof(*x));
    buf_init(&x->out, HARNESS_OUTPUT_MAX);
    buf_init(&x->err, HARNESS_OUTPUT_MAX);
    x->exit_code = -1;
    struct exec_ctx c = {h, x};
    struct exec_request req = {.command = command};
    struct exec_observer obs = {.on_output = exec_output, .on_done = exec_done, .arg = &c};
    harness_reset(h);
    if (h->be->ops->exec(h->be, id, &req, &obs, NULL, &h->err) < 0 || harness_wait(h) < 0)
        return -1;
    x->status = json_incref(h->result);
    x->state = json_string_value(json_object_get(x->status, "status"));
    if (x->state != NULL && strcmp(x->state, "exited") == 0)
        x->exit_code = (int)json_integer_value(json_object_get(x->status, "exit_code"));
    return 0;
}

void harness_exec_release(struct harness_exec *x)
{
    json_decref(x->status);
    buf_release(&x->out);
    buf_release(&x->err);
    memset(x, 0, sizeof(*x));
}

struct read_ctx {
    struct harness *h;
    char **data;
    size_t *len;
    bool *truncated;
};

static void read_done(void *arg, const struct file_read_result *res, const struct mcp_error *err)
{
    struct read_ctx *c = arg;
    if (res != NULL) {
        *c->data = xmalloc(res->len + 1);
        memcpy(*c->data, res->data, res->len);
        (*c->data)[res->len] = '\0';
        *c->len = res->len;
        if (c->truncated != NULL)
            *c->truncated = res->truncated;
        harness_cb(c->h, json_true(), NULL);
    } else {
        harness_cb(c->h, NULL, err);
    }
}

int harness_read(struct harness *h, const char *id, const char *path, uint64_t offset,
                 uint64_t length, char **data, size_t *len, bool *truncated)
{
    *data = NULL;
    *len = 0;
    struct read_ctx c = {h, data, len, truncated};
    harness_reset(h);
    if (h->be->ops->file_read(h->be, id, path, offset, length, read_done, &c, &h->err) < 0)
        return -1;
    return harness_wait(h);
}

int harness_write(struct harness *h, const char *id, const char *path, const char *data,
                  size_t len)
{
    harness_reset(h);
    if (h->be->ops->file_write(h->be, id, path, data, len, 0644, false, harness_cb, h,
                               &h->err) < 0)
        return -1;
    return harness_wait(h);
}
