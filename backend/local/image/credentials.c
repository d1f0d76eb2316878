/* Registry credentials from files and credential helpers (credentials.h). */
#include "backend/local/image/credentials.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define CRED_OUTPUT_MAX (64u << 10) /* a helper's answer is a few hundred bytes */

/* ---- the files ------------------------------------------------------------------------------- */

/* "https://index.docker.io/v1/" -> "index.docker.io"; "host:5000/ns" -> "host:5000" */
static void key_host(const char *key, char *out, size_t size)
{
    if (strncmp(key, "https://", 8) == 0)
        key += 8;
    else if (strncmp(key, "http://", 7) == 0)
        key += 7;
    snprintf(out, size, "%.*s", (int)strcspn(key, "/"), key);
}

static bool same_registry(const char *a, const char *b)
{
    static const char *const hub[] = {"docker.io", "index.docker.io", "registry-1.docker.io"};
    bool ha = false, hb = false;
    for (size_t i = 0; i < 3; i++)
        ha |= strcmp(a, hub[i]) == 0, hb |= strcmp(b, hub[i]) == 0;
    return (ha && hb) || strcmp(a, b) == 0;
}

/* auths.<registry>.auth decoded ("user:password"), or its identitytoken ("<token>:..."), or
 * NULL. */
static char *inline_creds(json_t *root, const char *registry)
{
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(root, "auths"), key, v) {
        char host[300];
        key_host(key, host, sizeof host);
        const char *b64 = json_string_value(json_object_get(v, "auth"));
        const char *idt = json_string_value(json_object_get(v, "identitytoken"));
        if (same_registry(host, registry) && idt && idt[0])
            return xasprintf(CRED_IDENTITY_PREFIX "%s", idt);
        if (!same_registry(host, registry) || b64 == NULL)
            continue;
        size_t len = strlen(b64), out_len = 0;
        char *dec = xmalloc(base64_decoded_max(len) + 1);
        if (base64_decode(b64, len, (unsigned char *)dec, &out_len) == 0 &&
            memchr(dec, ':', out_len)) {
            dec[out_len] = '\0';
            return dec;
        }
        free(dec);
    }
    return NULL;
}

/* credHelpers.<registry>, else credsStore: the helper's name, or NULL. */
static const char *helper_for(json_t *root, const char *registry, const char **which)
{
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(root, "credHelpers"), key, v) {
        char host[300];
        key_host(key, host, sizeof host);
        if (same_registry(host, registry) && json_string_length(v) > 0) {
            *which = "credHelpers";
            return json_string_value(v);
        }
    }
    const char *store = json_string_value(json_object_get(root, "credsStore"));
    *which = "credsStore";
    return store && store[0] ? store : NULL;
}

/* A name that is a plain word: it becomes part of a program name looked up in PATH. */
static bool helper_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n < CRED_HELPER_NAME_MAX - 32 &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

static bool find_in_file(const char *path, const char *registry, struct cred_source *out)
{
    json_t *root = json_load_file(path, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return false;
    }
    const char *which = NULL;
    const char *helper = helper_for(root, registry, &which);
    out->creds = inline_creds(root, registry); /* a helper's fallback if it has none */
    if (helper) {
        snprintf(out->helper, sizeof out->helper, "%s", helper);
        out->helper_key = which;
    }
    snprintf(out->file, sizeof out->file, "%s", path);
    json_decref(root);
    return helper != NULL || out->creds != NULL;
}

void cred_find(const char *registry, struct cred_source *out)
{
    memset(out, 0, sizeof *out);
    const char *home = getenv("HOME"), *xdg = getenv("XDG_RUNTIME_DIR"),
               *file = getenv("REGISTRY_AUTH_FILE");
    char paths[4][CRED_FILE_MAX];
    snprintf(paths[0], sizeof paths[0], "%s", file ? file : "");
    snprintf(paths[1], sizeof paths[1], "%s/containers/auth.json", xdg ? xdg : "/nonexistent");
    snprintf(paths[2], sizeof paths[2], "%s/.config/containers/auth.json",
             home ? home : "/nonexistent");
    snprintf(paths[3], sizeof paths[3], "%s/.docker/config.json", home ? home : "/nonexistent");
    for (size_t i = 0; i < 4; i++)
        if (paths[i][0] && find_in_file(paths[i], registry, out))
            return;
    memset(out, 0, sizeof *out);
}

void cred_server_address(const char *registry, char *out, size_t size)
{
    if (same_registry(registry, "docker.io"))
        snprintf(out, size, "https://index.docker.io/v1/");
    else
        snprintf(out, size, "%s", registry);
}

char *cred_parse_helper_output(const char *out, size_t len, const char *helper,
                               struct mcp_error *err)
{
    json_t *j = json_loadb(out, len, 0, NULL);
    const char *user = json_string_value(json_object_get(j, "Username"));
    const char *secret = json_string_value(json_object_get(j, "Secret"));
    char *creds = NULL;
    if (user == NULL || secret == NULL)
        mcp_error_set(err, MCP_ERR_BACKEND, 0,
                      "credential helper docker-credential-%s answered something other than "
                      "{\"Username\", \"Secret\"} JSON: check the helper (run `echo <registry> | "
                      "docker-credential-%s get`)",
                      helper, helper);
    else if (strchr(user, ':') != NULL)
        mcp_error_set(err, MCP_ERR_BACKEND, 0,
                      "credential helper docker-credential-%s gave a user name with ':', which "
                      "HTTP Basic cannot carry",
                      helper);
    else
        creds = xasprintf("%s:%s", user, secret);
    json_decref(j);
    return creds;
}

/* ---- running a helper ------------------------------------------------------------------------ */

struct cred_helper_run {
    uv_process_t proc;
    uv_pipe_t in, out, err;
    uv_timer_t timer;
    uv_write_t write;
    char input[300];
    char *output;
    size_t out_len;
    char errtext[400];
    size_t err_len;
    unsigned open_handles;
    int spawn_rc;
    bool proc_inited; /* uv_spawn was called (it initialises the handle even when it fails) */
    bool exited, out_done, err_done, timed_out, cancelled;
    int64_t exit_status;
    int term_signal;
    unsigned timeout_s;
    struct cred_source src; /* creds not owned here */
    cred_done_fn *done;
    void *arg;
};

static void finish(struct cred_helper_run *r)
{
    struct mcp_error err;
    const char *name = r->src.helper;
    char *creds = NULL;
    bool failed = true;
    if (r->cancelled)
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                      "credential helper docker-credential-%s was stopped: the pull was "
                      "cancelled",
                      name);
    else if (r->spawn_rc == UV_EINVAL && !r->proc_inited)
        mcp_error_set(&err, MCP_ERR_INVALID, 0,
                      "%s in %s names the credential helper '%.60s', which is not a plain name "
                      "(letters, digits, '-', '_', '.'): fix that file",
                      r->src.helper_key, r->src.file, name);
    else if (r->spawn_rc == UV_ENOENT)
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                      "credential helper docker-credential-%s (%s in %s) is not installed: no "
                      "such program in PATH. Install it, or remove %s from that file and log in "
                      "with `docker login` / `podman login` so the credentials are stored there",
                      name, r->src.helper_key, r->src.file, r->src.helper_key);
    else if (r->spawn_rc < 0)
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                      "cannot run credential helper docker-credential-%s (%s in %s): %s", name,
                      r->src.helper_key, r->src.file, uv_strerror(r->spawn_rc));
    else if (r->timed_out)
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                      "credential helper docker-credential-%s (%s in %s) did not answer within "
                      "%u s and was stopped (is it waiting for a keychain to be unlocked?); "
                      "raise %s (seconds) if it is just slow",
                      name, r->src.helper_key, r->src.file, r->timeout_s,
                      CRED_HELPER_TIMEOUT_ENV);
    else if ((r->exit_status != 0 || r->term_signal != 0) &&
             strstr(r->output ? r->output : "", "credentials not found") != NULL)
        failed = false; /* the helper has none for this registry: anonymous */
    else if (r->exit_status != 0 || r->term_signal != 0)
        mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0,
                      "credential helper docker-credential-%s (%s in %s) failed (exit %lld%s): "
                      "%.200s",
                      name, r->src.helper_key, r->src.file, (long long)r->exit_status,
                      r->term_signal ? ", killed" : "",
                      r->err_len ? r->errtext : r->output ? r->output : "no output");
    else
        failed = (creds = cred_parse_helper_output(r->output ? r->output : "", r->out_len, name,
                                                   &err)) == NULL;
    if (r->cancelled && creds) {
        free(creds);
        creds = NULL;
    }
    r->done(r->arg, creds, r->cancelled || failed ? &err : NULL);
    free(r->output);
    free(r);
}

static void handle_closed(uv_handle_t *h)
{
    struct cred_helper_run *r = h->data;
    if (--r->open_handles == 0)
        finish(r);
}

static void close_handle(struct cred_helper_run *r, uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, handle_closed);
    (void)r;
}

/* Once the helper has exited and its output is read, or at the time limit: close the rest. */
static void settle(struct cred_helper_run *r, bool now)
{
    if (!now && !(r->exited && r->out_done && r->err_done))
        return;
    close_handle(r, (uv_handle_t *)&r->timer);
    close_handle(r, (uv_handle_t *)&r->out);
    close_handle(r, (uv_handle_t *)&r->err);
    close_handle(r, (uv_handle_t *)&r->in);
    if (r->proc_inited && (r->exited || r->spawn_rc < 0))
        close_handle(r, (uv_handle_t *)&r->proc);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct cred_helper_run *r = p->data;
    r->exited = true;
    r->exit_status = status;
    r->term_signal = sig;
    close_handle(r, (uv_handle_t *)&r->proc);
    settle(r, r->timed_out);
}

static void on_timeout(uv_timer_t *t)
{
    struct cred_helper_run *r = t->data;
    r->timed_out = true;
    if (!r->exited)
        uv_kill(-r->proc.pid, SIGKILL); /* its exit callback closes the rest */
    else
        settle(r, true);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h, (void)suggested;
    static char scratch[4096]; /* the loop's thread only; copied out in on_read */
    *buf = uv_buf_init(scratch, sizeof scratch);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct cred_helper_run *r = s->data;
    bool is_out = s == (uv_stream_t *)&r->out;
    if (n > 0 && is_out && r->out_len + (size_t)n < CRED_OUTPUT_MAX) {
        r->output = xrealloc(r->output, r->out_len + (size_t)n + 1);
        memcpy(r->output + r->out_len, buf->base, (size_t)n);
        r->out_len += (size_t)n;
        r->output[r->out_len] = '\0';
    } else if (n > 0 && !is_out && r->err_len + 1 < sizeof r->errtext) {
        size_t room = sizeof r->errtext - 1 - r->err_len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(r->errtext + r->err_len, buf->base, take);
        r->err_len += take;
        r->errtext[r->err_len] = '\0';
    }
    if (n < 0) {
        uv_read_stop(s);
        if (is_out)
            r->out_done = true;
        else
            r->err_done = true;
        settle(r, false);
    }
}

static void on_written(uv_write_t *w, int status)
{
    struct cred_helper_run *r = w->data;
    (void)status;
    close_handle(r, (uv_handle_t *)&r->in); /* EOF on the helper's stdin */
}

static unsigned helper_timeout_s(void)
{
    const char *v = getenv(CRED_HELPER_TIMEOUT_ENV);
    long s = v ? strtol(v, NULL, 10) : 0;
    return s > 0 && s <= 3600 ? (unsigned)s : CRED_HELPER_TIMEOUT_S;
}

struct cred_helper_run *cred_helper_start(uv_loop_t *loop, const struct cred_source *src,
                                          const char *registry, cred_done_fn *done, void *arg)
{
    struct cred_helper_run *r = xcalloc(1, sizeof *r);
    r->src = *src;
    r->src.creds = NULL;
    r->done = done, r->arg = arg;
    r->timeout_s = helper_timeout_s();
    uv_pipe_init(loop, &r->in, 0);
    uv_pipe_init(loop, &r->out, 0);
    uv_pipe_init(loop, &r->err, 0);
    uv_timer_init(loop, &r->timer);
    r->in.data = r->out.data = r->err.data = r->timer.data = r->proc.data = r->write.data = r;
    r->open_handles = 4;
    char file[CRED_HELPER_NAME_MAX + 32];
    snprintf(file, sizeof file, "docker-credential-%s", src->helper);
    char *args[] = {file, (char *)"get", NULL};
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&r->in},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->err}};
    /* Its own session: at the time limit the whole group goes (a shell script's children
     * too), not just the helper. */
    uv_process_options_t o = {.exit_cb = on_exit_cb, .file = file, .args = args,
                              .flags = UV_PROCESS_DETACHED, .stdio_count = 3, .stdio = stdio};
    r->spawn_rc = UV_EINVAL;
    if (helper_name_ok(src->helper)) {
        r->proc_inited = true;
        r->open_handles++;
        r->spawn_rc = uv_spawn(loop, &r->proc, &o);
    }
    if (r->spawn_rc < 0) {
        settle(r, true); /* done comes from the close callbacks, on the loop */
        return r;
    }
    cred_server_address(registry, r->input, sizeof r->input);
    uv_buf_t b = uv_buf_init(r->input, (unsigned)strlen(r->input));
    if (uv_write(&r->write, (uv_stream_t *)&r->in, &b, 1, on_written) < 0)
        close_handle(r, (uv_handle_t *)&r->in);
    uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&r->err, on_alloc, on_read);
    uv_timer_start(&r->timer, on_timeout, (uint64_t)r->timeout_s * 1000, 0);
    return r;
}

void cred_helper_cancel(struct cred_helper_run *r)
{
    r->cancelled = true;
    if (!r->exited && r->spawn_rc == 0)
        uv_kill(-r->proc.pid, SIGKILL);
}
