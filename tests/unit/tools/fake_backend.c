/* A scripted backend: commands are tiny programs understood by the fake, not shell lines.
 *   "exit:N"          prints "out\n" and "err\n", exits N
 *   "sleep:MS"        prints "tick\n" every 100 ms for MS ms, exits 0
 *   "big:BYTES"       prints BYTES bytes ("BEGIN", filler, "END") in 1 MiB chunks, exits 0
 * Files live in memory. Every callback is deferred to the loop, as the contract requires. */
#include "fake.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define TICK_MS 100
#define BIG_CHUNK (1u << 20)

/* ---- deferred plain callbacks ---- */

struct later {
    uv_timer_t t;
    backend_cb *cb;
    void *arg;
    json_t *result;
    struct mcp_error err;
    bool is_err;
};

static void later_close(uv_handle_t *h)
{
    struct later *l = h->data;
    json_decref(l->result);
    free(l);
}

static void later_fire(uv_timer_t *t)
{
    struct later *l = t->data;
    l->cb(l->arg, l->is_err ? NULL : l->result, l->is_err ? &l->err : NULL);
    uv_close((uv_handle_t *)t, later_close);
}

static int later(struct backend *be, backend_cb *cb, void *arg, json_t *result,
                 const struct mcp_error *err)
{
    struct later *l = xcalloc(1, sizeof(*l));
    l->cb = cb;
    l->arg = arg;
    l->result = result;
    if (err) {
        l->err = *err;
        l->is_err = true;
    }
    uv_timer_init(be->loop, &l->t);
    l->t.data = l;
    uv_timer_start(&l->t, later_fire, 0, 0);
    return 0;
}

static json_t *info(const char *id, const char *state)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "sandbox_id", id, "backend", "local",
                     "image", "host", "state", state, "created_at", "2026-11-25T00:00:00Z",
                     "expires_at");
}

static int f_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb,
                    void *arg, struct mcp_error *err)
{
    struct fake_backend *fb = (struct fake_backend *)be;
    fb->last_network = spec->network;
    json_decref(fb->last_create_policy);
    fb->last_create_policy =
        spec->network_policy ? egress_policy_to_json(spec->network_policy) : NULL;
    return later(be, cb, arg, info("sbx-new", "running"), NULL);
}

static int f_set_network_policy(struct backend *be, const char *id,
                                const struct egress_policy *policy, backend_cb *cb, void *arg,
                                struct mcp_error *err)
{
    struct fake_backend *fb = (struct fake_backend *)be;
    json_decref(fb->last_set_policy);
    fb->last_set_policy = egress_policy_to_json(policy);
    json_t *res = info(id, "running");
    json_object_set(res, "network_policy", fb->last_set_policy);
    return later(be, cb, arg, res, NULL);
}

static int f_simple(struct backend *be, const char *id, backend_cb *cb, void *arg,
                    struct mcp_error *err)
{
    return later(be, cb, arg, info(id, "running"), NULL);
}

static int f_list(struct backend *be, const char *owner, json_t *filter, backend_cb *cb,
                  void *arg, struct mcp_error *err)
{
    return later(be, cb, arg, json_pack("{s:[o]}", "sandboxes", info("sbx-a1", "running")), NULL);
}

static int f_renew(struct backend *be, const char *id, int64_t t, backend_cb *cb, void *arg,
                   struct mcp_error *err)
{
    return later(be, cb, arg, info(id, "running"), NULL);
}

/* ---- commands ---- */

struct exec_handle {
    struct fake_backend *fb;
    uv_timer_t t;
    struct exec_observer obs;
    bool detached, done, kill;
    int mode; /* 0 exit, 1 sleep, 2 big */
    long param;
    long elapsed;
    uint64_t emitted;
    int64_t timeout_ms;
};

static struct exec_handle *current; /* the one running command (tests run one at a time) */

static void handle_close(uv_handle_t *h)
{
    if (current == h->data)
        current = NULL;
    free(h->data);
}

static void exec_finish(struct exec_handle *h, const char *status, int code)
{
    h->done = true;
    uv_timer_stop(&h->t);
    if (!h->detached) {
        json_t *fin = json_pack("{s:s, s:s, s:i, s:n, s:i, s:I, s:i}", "command_id", "cmd-1",
                                "status", status, "exit_code", code, "signal", "duration_ms",
                                (int)h->elapsed, "stdout_bytes", (json_int_t)h->emitted,
                                "stderr_bytes", 0);
        h->obs.on_done(h->obs.arg, fin, NULL);
        json_decref(fin);
    }
    uv_close((uv_handle_t *)&h->t, handle_close);
}

static void emit(struct exec_handle *h, enum exec_stream s, const char *d, size_t n)
{
    if (!h->detached)
        h->obs.on_output(h->obs.arg, s, d, n);
    h->emitted += n;
}

static void exec_tick(uv_timer_t *t)
{
    struct exec_handle *h = t->data;
    if (h->elapsed == 0 && !h->detached)
        h->obs.on_started(h->obs.arg, "cmd-1");
    if (h->kill) {
        exec_finish(h, "killed", 137);
        return;
    }
    if (h->timeout_ms > 0 && h->elapsed >= h->timeout_ms) {
        exec_finish(h, "timed_out", 137);
        return;
    }
    h->elapsed += TICK_MS;
    if (h->mode == 0) {
        emit(h, EXEC_STDOUT, "out\n", 4);
        emit(h, EXEC_STDERR, "err\n", 4);
        exec_finish(h, "exited", (int)h->param);
        return;
    }
    if (h->mode == 1) {
        emit(h, EXEC_STDOUT, "tick\n", 5);
        if (h->elapsed >= h->param)
            exec_finish(h, "exited", 0);
        return;
    }
    static char chunk[BIG_CHUNK];
    uint64_t left = (uint64_t)h->param - h->emitted;
    size_t n = left < BIG_CHUNK ? (size_t)left : BIG_CHUNK;
    memset(chunk, 'x', n);
    if (h->emitted == 0)
        memcpy(chunk, "BEGIN", 5);
    if (h->emitted + n == (uint64_t)h->param)
        memcpy(chunk + n - 3, "END", 3);
    emit(h, EXEC_STDOUT, chunk, n);
    if (h->emitted >= (uint64_t)h->param)
        exec_finish(h, "exited", 0);
}

static int f_exec(struct backend *be, const char *id, const struct exec_request *req,
                  const struct exec_observer *obs, struct exec_handle **out,
                  struct mcp_error *err)
{
    struct exec_handle *h = xcalloc(1, sizeof(*h));
    h->fb = (struct fake_backend *)be;
    h->obs = *obs;
    h->timeout_ms = req->timeout_ms;
    if (strncmp(req->command, "exit:", 5) == 0) {
        h->mode = 0;
    } else if (strncmp(req->command, "sleep:", 6) == 0) {
        h->mode = 1;
    } else if (strncmp(req->command, "big:", 4) == 0) {
        h->mode = 2;
    } else {
        free(h);
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "fake: unknown command");
    }
    h->param = atol(strchr(req->command, ':') + 1);
    uv_timer_init(be->loop, &h->t);
    h->t.data = h;
    uv_timer_start(&h->t, exec_tick, 1, h->mode == 2 ? 1 : TICK_MS);
    current = h;
    if (out)
        *out = h;
    return 0;
}

static void f_detach(struct exec_handle *h)
{
    h->detached = true;
    h->fb->detach_count++;
}

static int f_command_get(struct backend *be, const char *id, const char *cmd, uint64_t offset,
                         uint64_t limit, backend_cb *cb, void *arg, struct mcp_error *err)
{
    if (strcmp(cmd, "cmd-1") != 0)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no command %s", cmd);
    bool running = current && !current->done;
    return later(be, cb, arg,
                 json_pack("{s:s, s:s, s:o, s:n, s:i, s:s, s:I, s:I, s:I, s:b}", "command_id", cmd,
                           "status", running ? "running" : "exited", "exit_code",
                           running ? json_null() : json_integer(0), "signal", "duration_ms", 1,
                           "output", "tick\n", "offset", (json_int_t)offset, "next_offset",
                           (json_int_t)offset + 5, "total_bytes", (json_int_t)offset + 5, "eof",
                           !running),
                 NULL);
}

static int f_command_kill(struct backend *be, const char *id, const char *cmd, int sig,
                          backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct fake_backend *fb = (struct fake_backend *)be;
    fb->kill_count++;
    fb->last_kill_signal = sig;
    if (current && !current->done)
        current->kill = true;
    return later(be, cb, arg, json_pack("{s:s, s:i, s:s}", "command_id", cmd, "signal", sig,
                                        "status", "killed"),
                 NULL);
}

/* ---- files ---- */

struct read_later {
    uv_timer_t t;
    backend_read_cb *cb;
    void *arg;
    unsigned char *data;
    struct file_read_result res;
    struct mcp_error err;
    bool is_err;
};

static void read_close(uv_handle_t *h)
{
    struct read_later *r = h->data;
    free(r->data);
    free(r);
}

static void read_fire(uv_timer_t *t)
{
    struct read_later *r = t->data;
    r->res.data = (const char *)r->data;
    r->cb(r->arg, r->is_err ? NULL : &r->res, r->is_err ? &r->err : NULL);
    uv_close((uv_handle_t *)t, read_close);
}

static int f_read(struct backend *be, const char *id, const char *path, uint64_t offset,
                  uint64_t length, backend_read_cb *cb, void *arg, struct mcp_error *err)
{
    struct fake_backend *fb = (struct fake_backend *)be;
    const char *b64 = json_string_value(json_object_get(fb->files, path));
    struct read_later *r = xcalloc(1, sizeof(*r));
    r->cb = cb;
    r->arg = arg;
    if (b64 == NULL) {
        r->is_err = true;
        mcp_error_set(&r->err, MCP_ERR_NOT_FOUND, 0, "no file %s in sandbox %s", path, id);
    } else {
        size_t n = 0;
        unsigned char *all = xmalloc(base64_decoded_max(strlen(b64)) + 1);
        base64_decode(b64, strlen(b64), all, &n);
        uint64_t start = offset < n ? offset : n;
        uint64_t len = n - start < length ? n - start : length;
        r->data = xmalloc(len + 1);
        memcpy(r->data, all + start, len);
        free(all);
        r->res.len = len;
        r->res.size = n;
        r->res.offset = start;
        r->res.truncated = start + len < n;
    }
    uv_timer_init(be->loop, &r->t);
    r->t.data = r;
    uv_timer_start(&r->t, read_fire, 0, 0);
    return 0;
}

static int f_write(struct backend *be, const char *id, const char *path, const void *data,
                   size_t len, uint32_t mode, bool append, backend_cb *cb, void *arg,
                   struct mcp_error *err)
{
    struct fake_backend *fb = (struct fake_backend *)be;
    if (strstr(path, "..") != NULL)
        return mcp_error_set(err, MCP_ERR_DENIED, 0, "path %s leaves the sandbox", path);
    /* Simulate a short write for one special path, to exercise the sha256 check. */
    size_t keep = strcmp(path, "short.bin") == 0 && len > 1 ? len - 1 : len;
    char *b64 = xmalloc(base64_encoded_len(keep) + 1);
    base64_encode(data, keep, b64);
    json_object_set_new(fb->files, path, json_string(b64));
    free(b64);
    char sha[65];
    sha256_hex(data, keep, sha);
    return later(be, cb, arg, json_pack("{s:s, s:I, s:s}", "path", path, "size",
                                        (json_int_t)keep, "sha256", sha),
                 NULL);
}

static int f_file_op(struct backend *be, const char *id, const char *op, json_t *args,
                     backend_cb *cb, void *arg, struct mcp_error *err)
{
    /* Echo what the tool layer passed, so tests can check the argument mapping. */
    const char *path = json_string_value(json_object_get(args, "path"));
    json_t *res = json_pack("{s:s, s:O, s:[], s:b, s:[], s:s}", "op", op, "args", args, "entries",
                            "truncated", 0, "matches", "path", path ? path : "");
    return later(be, cb, arg, res, NULL);
}

static int f_endpoint(struct backend *be, const char *id, int port, backend_cb *cb, void *arg,
                      struct mcp_error *err)
{
    return later(be, cb, arg, json_pack("{s:s, s:i, s:s, s:{}}", "sandbox_id", id, "port", port,
                                        "url", "http://127.0.0.1:1/", "headers"),
                 NULL);
}

static int f_diagnose(struct backend *be, const char *id, const char *what, backend_cb *cb,
                      void *arg, struct mcp_error *err)
{
    return later(be, cb, arg, json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "what", what,
                                        "state", "running"),
                 NULL);
}

static void f_shutdown(struct backend *be)
{
}

void fake_backend_free(struct backend *be)
{
    struct fake_backend *fb = (struct fake_backend *)be;
    json_decref(fb->files);
    json_decref(fb->last_create_policy);
    json_decref(fb->last_set_policy);
    free(fb);
}

static const struct backend_ops fake_ops = {
    .name = "local",
    .id_prefix = "sbx-",
    .enable_hint = "call diagnose_sandbox without a sandbox_id to see why",
    .shutdown = f_shutdown,
    .free = fake_backend_free,
    .create = f_create,
    .destroy = f_simple,
    .list = f_list,
    .get = f_simple,
    .renew = f_renew,
    .pause = f_simple,
    .resume = f_simple,
    .exec = f_exec,
    .exec_detach = f_detach,
    .command_get = f_command_get,
    .command_kill = f_command_kill,
    .file_read = f_read,
    .file_write = f_write,
    .file_op = f_file_op,
    .endpoint = f_endpoint,
    .diagnose = f_diagnose,
    .snapshot = backend_def_snapshot,
    .metrics = backend_def_metrics,
    .code_context = backend_def_code_context,
    .code_run = backend_def_code_run,
    .host_check = backend_def_host_check,
    .workspace = backend_def_workspace,
    .command_input = backend_def_command_input,
    .command_resize = backend_def_command_resize,
    .command_attach = backend_def_command_attach,
    .command_find = backend_def_command_find,
    .session_run = backend_def_session_run,
    .set_network_policy = f_set_network_policy,
    .volume = backend_def_volume,
    .bind_secrets = backend_def_bind_secrets,
    .credential_vault = backend_def_credential_vault,
};

/* Only ever a slot that is not running: a backend that keeps snapshots, to be named. */
static int f_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                      backend_cb *cb, void *arg, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_INTERNAL, 0, "the fake remote backend never runs");
}

const struct backend_ops fake_remote_ops = {
    .name = "opensandbox",
    .id_prefix = "osb-",
    .enable_hint = "set OPEN_SANDBOX_DOMAIN (and OPEN_SANDBOX_API_KEY) and restart mcpbox",
    .shutdown = f_shutdown,
    .free = fake_backend_free,
    .create = f_create,
    .destroy = f_simple,
    .list = f_list,
    .get = f_simple,
    .renew = f_renew,
    .pause = f_simple,
    .resume = f_simple,
    .exec = f_exec,
    .exec_detach = f_detach,
    .command_get = f_command_get,
    .command_kill = f_command_kill,
    .file_read = f_read,
    .file_write = f_write,
    .file_op = f_file_op,
    .endpoint = f_endpoint,
    .diagnose = f_diagnose,
    .snapshot = f_snapshot,
    .metrics = backend_def_metrics,
    .code_context = backend_def_code_context,
    .code_run = backend_def_code_run,
    .host_check = backend_def_host_check,
    .workspace = backend_def_workspace,
    .command_input = backend_def_command_input,
    .command_resize = backend_def_command_resize,
    .command_attach = backend_def_command_attach,
    .command_find = backend_def_command_find,
    .session_run = backend_def_session_run,
    .set_network_policy = backend_def_set_network_policy,
    .volume = backend_def_volume,
    .bind_secrets = backend_def_bind_secrets,
    .credential_vault = backend_def_credential_vault,
};

struct backend *fake_backend_new(uv_loop_t *loop, struct store *store)
{
    struct fake_backend *fb = xcalloc(1, sizeof(*fb));
    fb->base.ops = &fake_ops;
    fb->base.loop = loop;
    fb->base.store = store;
    fb->files = json_object();
    return &fb->base;
}
