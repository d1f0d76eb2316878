/* execd's files, directories and metrics endpoints, over the backend's file
 * operations (file_op, file_read, file_write, metrics); permissions through exec (chmod,
 * chown), since the vtable has no such operation. Several paths in one request are done one
 * after another; the first failure answers. */
#define LOG_MODULE "osapi"
#include "osapi/osapi-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/base/buf.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/server.h"

/* Matches a search answers with, at most (each one is stat'ed for its FileInfo). */
#define FILES_SEARCH_MAX 1000

static bool method_is(struct osapi_req *req, enum http_method m)
{
    return osapi_req_http(req)->method == m;
}

static void reply_file_error(struct osapi_req *req, const struct mcp_error *err)
{
    if (err->code == MCP_ERR_NOT_FOUND)
        osapi_reply_error(req, 404, "FILE_NOT_FOUND", "%s", err->msg);
    else if (err->code == MCP_ERR_INVALID || err->code == MCP_ERR_DENIED)
        osapi_reply_error(req, 400, "INVALID_FILE", "%s", err->msg);
    else
        osapi_reply_error(req, 500, "RUNTIME_ERROR", "%s", err->msg);
}

/* ---- a run of file_op calls, one after another ---------------------------------------------------- */

struct batch;
typedef void batch_finish_fn(struct osapi_req *req, struct batch *b);

struct batch {
    const char *op;
    json_t *args;    /* array of argument objects */
    json_t *results; /* array, one per call done */
    size_t next;
    batch_finish_fn *finish;
    json_t *extra;   /* the handler's own data */
};

static void batch_free(void *p)
{
    struct batch *b = p;
    json_decref(b->args);
    json_decref(b->results);
    json_decref(b->extra);
    free(b);
}

static void batch_step(struct osapi_req *req);

static void batch_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct batch *b = req->state;
    if (err) {
        reply_file_error(req, err);
        return;
    }
    json_array_append(b->results, result ? result : json_null());
    batch_step(req);
}

static void batch_step(struct osapi_req *req)
{
    struct batch *b = req->state;
    if (b->next >= json_array_size(b->args)) {
        b->finish(req, b);
        return;
    }
    json_t *a = json_array_get(b->args, b->next++);
    struct mcp_error err;
    if (req->be->ops->file_op(req->be, req->sandbox_id, b->op, a, batch_cb, req, &err) < 0)
        reply_file_error(req, &err);
}

static void batch_start(struct osapi_req *req, const char *op, json_t *args,
                        batch_finish_fn *finish, json_t *extra)
{
    struct batch *b = xcalloc(1, sizeof(*b));
    b->op = op;
    b->args = args;
    b->results = json_array();
    b->finish = finish;
    b->extra = extra;
    req->state = b;
    req->free_state = batch_free;
    batch_step(req);
}

static void finish_empty(struct osapi_req *req, struct batch *b)
{
    osapi_reply_raw(req, 200, NULL, NULL, "", 0);
}

/* The query's path parameters, as [{path: p}, ...]; NULL after answering 400. */
static json_t *path_args(struct osapi_req *req, const char *extra_key, json_t *extra_value)
{
    json_t *paths = osapi_query_all(osapi_req_query(req), "path"), *p;
    size_t i;
    if (json_array_size(paths) == 0) {
        json_decref(paths);
        json_decref(extra_value);
        osapi_reply_error(req, 400, "MISSING_QUERY", "missing query parameter path");
        return NULL;
    }
    json_t *args = json_array();
    json_array_foreach(paths, i, p) {
        json_t *a = json_pack("{s:O}", "path", p);
        if (extra_key)
            json_object_set(a, extra_key, extra_value);
        json_array_append_new(args, a);
    }
    json_decref(paths);
    json_decref(extra_value);
    return args;
}

/* ---- info, delete, move, replace, search, directories ---------------------------------------------- */

static void finish_info(struct osapi_req *req, struct batch *b)
{
    json_t *out = json_object(), *r;
    size_t i;
    json_array_foreach(b->results, i, r) {
        const char *asked = json_string_value(json_object_get(json_array_get(b->args, i), "path"));
        json_object_set_new(out, asked, osapi_file_info(r, asked));
    }
    osapi_reply_json(req, 200, out, NULL);
}

static void finish_list(struct osapi_req *req, struct batch *b)
{
    json_t *entries = json_object_get(json_array_get(b->results, 0), "entries"), *e;
    json_t *out = json_array();
    size_t i;
    json_array_foreach(entries, i, e) json_array_append_new(out, osapi_file_info(e, NULL));
    osapi_reply_json(req, 200, out, NULL);
}

/* search answers paths; each gets its FileInfo from a stat, another batch. */
static void finish_search_stats(struct osapi_req *req, struct batch *b)
{
    json_t *out = json_array(), *r;
    size_t i;
    json_array_foreach(b->results, i, r) json_array_append_new(out, osapi_file_info(r, NULL));
    osapi_reply_json(req, 200, out, NULL);
}

static void finish_search(struct osapi_req *req, struct batch *b)
{
    json_t *matches = json_object_get(json_array_get(b->results, 0), "matches"), *m;
    json_t *args = json_array();
    size_t i;
    json_array_foreach(matches, i, m) json_array_append_new(args, json_pack("{s:O}", "path", m));
    req->state = NULL;
    batch_free(b);
    batch_start(req, "stat", args, finish_search_stats, NULL);
}

static void finish_replace(struct osapi_req *req, struct batch *b)
{
    if (!json_is_true(b->extra)) {
        osapi_reply_raw(req, 200, NULL, NULL, "", 0);
        return;
    }
    json_t *out = json_object(), *r;
    size_t i;
    json_array_foreach(b->results, i, r) {
        const char *p = json_string_value(json_object_get(json_array_get(b->args, i), "path"));
        json_object_set_new(out, p, json_pack("{s:I}", "replacedCount",
                                              json_integer_value(json_object_get(r, "replacements"))));
    }
    osapi_reply_json(req, 200, out, NULL);
}

/* {path: {...}} bodies (replace, mkdir, permissions): NULL after answering 400. */
static json_t *object_body(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req);
    if (body && (!json_is_object(body) || json_object_size(body) == 0)) {
        json_decref(body);
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "the body must be an object keyed by path");
        return NULL;
    }
    return body;
}

static void handle_replace(struct osapi_req *req)
{
    json_t *body = object_body(req), *v;
    const char *path;
    if (!body)
        return;
    json_t *args = json_array();
    json_object_foreach(body, path, v) {
        const char *old = json_string_value(json_object_get(v, "old"));
        const char *new = json_string_value(json_object_get(v, "new"));
        if (!old || !*old || !new) {
            json_decref(args);
            json_decref(body);
            osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                              "%s: old (non-empty) and new are required", path);
            return;
        }
        json_array_append_new(args, json_pack("{s:s, s:s, s:s}", "path", path, "old", old,
                                              "new", new));
    }
    json_decref(body);
    char *verbose = osapi_query_get(osapi_req_query(req), "verbose");
    bool v2 = verbose && (!strcmp(verbose, "true") || !strcmp(verbose, "1"));
    free(verbose);
    batch_start(req, "replace", args, finish_replace, json_boolean(v2));
}

static void handle_mkdir(struct osapi_req *req)
{
    json_t *body = object_body(req), *v;
    const char *path;
    if (!body)
        return;
    json_t *args = json_array();
    json_object_foreach(body, path, v) {
        uint32_t mode = 0755;
        json_t *m = json_object_get(v, "mode");
        if (json_is_integer(m) && json_integer_value(m) != 0 &&
            osapi_mode_from_execd(json_integer_value(m), &mode) < 0) {
            json_decref(args);
            json_decref(body);
            osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                              "%s: mode is octal digits written as a number (755)", path);
            return;
        }
        json_array_append_new(args, json_pack("{s:s, s:b, s:i}", "path", path, "parents", 1,
                                              "mode", (int)mode));
    }
    json_decref(body);
    batch_start(req, "mkdir", args, finish_empty, NULL);
}

static void handle_move(struct osapi_req *req)
{
    json_t *body = osapi_req_json(req), *item;
    size_t i;
    if (!body)
        return;
    json_t *args = json_array();
    bool ok = json_is_array(body) && json_array_size(body) > 0;
    json_array_foreach(body, i, item) {
        const char *src = json_string_value(json_object_get(item, "src"));
        const char *dest = json_string_value(json_object_get(item, "dest"));
        if (!src || !dest)
            ok = false;
        else
            json_array_append_new(args, json_pack("{s:s, s:s}", "source", src, "destination",
                                                  dest));
    }
    json_decref(body);
    if (!ok) {
        json_decref(args);
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "the body must be a list of {\"src\",\"dest\"}");
        return;
    }
    batch_start(req, "move", args, finish_empty, NULL);
}

static void handle_search(struct osapi_req *req)
{
    const char *q = osapi_req_query(req);
    char *path = osapi_query_get(q, "path"), *pattern = osapi_query_get(q, "pattern");
    if (!path) {
        free(pattern);
        osapi_reply_error(req, 400, "MISSING_QUERY", "missing query parameter path");
        return;
    }
    json_t *args = json_pack("[{s:s, s:s, s:i}]", "path", path, "pattern",
                             pattern && *pattern ? pattern : "*", "max_results",
                             FILES_SEARCH_MAX);
    free(path);
    free(pattern);
    batch_start(req, "search", args, finish_search, NULL);
}

static void handle_list(struct osapi_req *req)
{
    const char *q = osapi_req_query(req);
    char *path = osapi_query_get(q, "path"), *depth = osapi_query_get(q, "depth"), *end = NULL;
    long d = depth ? strtol(depth, &end, 10) : 1;
    bool bad = depth && (!*depth || *end || d < 0);
    free(depth);
    if (!path || bad) {
        free(path);
        osapi_reply_error(req, 400, path ? "INVALID_REQUEST_BODY" : "MISSING_QUERY",
                          path ? "depth must be an integer >= 0" : "missing query parameter path");
        return;
    }
    if (d == 0) {
        free(path);
        osapi_reply_json(req, 200, json_array(), NULL);
        return;
    }
    json_t *args = json_pack("[{s:s, s:i}]", "path", path, "depth", (int)(d > 16 ? 16 : d));
    free(path);
    batch_start(req, "list", args, finish_list, NULL);
}

/* ---- permissions (through exec: the vtable has no chmod/chown) --------------------------------------- */

struct perm_run {
    struct buf err;
};

static void perm_started(void *arg, const char *id) {}

static void perm_output(void *arg, enum exec_stream s, const char *data, size_t len)
{
    struct osapi_req *req = arg;
    struct perm_run *pr = req->state;
    if (s == EXEC_STDERR)
        buf_append(&pr->err, data, len);
}

static void perm_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct perm_run *pr = req->state;
    json_t *code = json_object_get(result, "exit_code");
    if (err)
        osapi_reply_error(req, 500, "RUNTIME_ERROR", "%s", err->msg);
    else if (!json_is_integer(code) || json_integer_value(code) != 0)
        osapi_reply_error(req, 400, "INVALID_FILE", "chmod/chown failed: %.500s",
                          pr->err.len ? buf_cstr(&pr->err) : "(no message)");
    else
        osapi_reply_raw(req, 200, NULL, NULL, "", 0);
}

static void perm_free(void *p)
{
    struct perm_run *pr = p;
    buf_release(&pr->err);
    free(pr);
}

static void handle_permissions(struct osapi_req *req)
{
    json_t *body = object_body(req), *v;
    const char *path;
    if (!body)
        return;
    struct buf cmd;
    buf_init(&cmd, (size_t)-1);
    buf_append_str(&cmd, "set -e");
    json_object_foreach(body, path, v) {
        json_t *m = json_object_get(v, "mode");
        const char *owner = json_string_value(json_object_get(v, "owner"));
        const char *group = json_string_value(json_object_get(v, "group"));
        uint32_t mode = 0;
        if (json_is_integer(m) && osapi_mode_from_execd(json_integer_value(m), &mode) < 0) {
            buf_release(&cmd);
            json_decref(body);
            osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                              "%s: mode is octal digits written as a number (755)", path);
            return;
        }
        if (mode) {
            buf_printf(&cmd, "; chmod %o -- ", mode);
            buf_append_shell_word(&cmd, path);
        }
        if ((owner && *owner) || (group && *group)) {
            buf_append_str(&cmd, "; chown -- ");
            struct buf who;
            buf_init(&who, 512);
            buf_printf(&who, "%s%s%s", owner ? owner : "", group && *group ? ":" : "",
                       group ? group : "");
            buf_append_shell_word(&cmd, buf_cstr(&who));
            buf_release(&who);
            buf_append_str(&cmd, " ");
            buf_append_shell_word(&cmd, path);
        }
    }
    json_decref(body);
    struct perm_run *pr = xcalloc(1, sizeof(*pr));
    buf_init(&pr->err, 4096);
    req->state = pr;
    req->free_state = perm_free;
    struct exec_request er = {.command = buf_cstr(&cmd)};
    struct exec_observer obs = {perm_started, perm_output, perm_done, req};
    struct mcp_error err;
    if (req->be->ops->exec(req->be, req->sandbox_id, &er, &obs, NULL, &err) < 0)
        osapi_reply_error(req, 500, "RUNTIME_ERROR", "%s", err.msg);
    buf_release(&cmd);
}

/* ---- upload (multipart/form-data: metadata and file parts, in pairs) ---------------------------------- */

#define UPLOAD_MAX_FILES 64

struct upload {
    json_t *metas; /* [{path, mode}] */
    struct osapi_part files[UPLOAD_MAX_FILES]; /* data: owned copies (the client may go meanwhile) */
    size_t next, count;
};

static void upload_free(void *p)
{
    struct upload *u = p;
    json_decref(u->metas);
    for (size_t i = 0; i < UPLOAD_MAX_FILES; i++)
        free((char *)u->files[i].data);
    free(u);
}

static void upload_step(struct osapi_req *req);

static void upload_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (err)
        reply_file_error(req, err);
    else
        upload_step(req);
}

static void upload_step(struct osapi_req *req)
{
    struct upload *u = req->state;
    if (u->next >= u->count) {
        osapi_reply_raw(req, 200, NULL, NULL, "", 0);
        return;
    }
    json_t *m = json_array_get(u->metas, u->next);
    struct osapi_part *f = &u->files[u->next++];
    uint32_t mode = 0644;
    json_t *mv = json_object_get(m, "mode");
    if (json_is_integer(mv) && json_integer_value(mv) != 0)
        osapi_mode_from_execd(json_integer_value(mv), &mode);
    struct mcp_error err;
    if (req->be->ops->file_write(req->be, req->sandbox_id,
                                 json_string_value(json_object_get(m, "path")), f->data, f->len,
                                 mode, false, upload_cb, req, &err) < 0)
        reply_file_error(req, &err);
}

static void handle_upload(struct osapi_req *req)
{
    const struct http_request *h = osapi_req_http(req);
    char boundary[72];
    struct osapi_part parts[2 * UPLOAD_MAX_FILES];
    if (osapi_multipart_boundary(http_request_header(h, "content-type", NULL), boundary,
                           sizeof(boundary)) < 0) {
        osapi_reply_error(req, 400, "INVALID_FILE", "the body must be multipart/form-data with "
                          "a boundary (metadata and file parts)");
        return;
    }
    int n = osapi_multipart_parts(h->body.data ? h->body.data : "", h->body.len, boundary, parts,
                            2 * UPLOAD_MAX_FILES);
    if (n < 0) {
        osapi_reply_error(req, 400, "INVALID_FILE", "malformed multipart body (at most %d files "
                          "per upload)", UPLOAD_MAX_FILES);
        return;
    }
    struct upload *u = xcalloc(1, sizeof(*u));
    u->metas = json_array();
    req->state = u;
    req->free_state = upload_free;
    size_t nfiles = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(parts[i].name, "metadata")) {
            json_t *m = json_loadb(parts[i].data, parts[i].len, 0, NULL);
            const char *p = json_string_value(json_object_get(m, "path"));
            if (!p || !*p) {
                json_decref(m);
                osapi_reply_error(req, 400, "INVALID_FILE_METADATA",
                                  "each metadata part must be JSON with a non-empty path");
                return;
            }
            json_array_append_new(u->metas, m);
        } else if (!strcmp(parts[i].name, "file") && nfiles < UPLOAD_MAX_FILES) {
            struct osapi_part *f = &u->files[nfiles++];
            *f = parts[i];
            char *copy = xmalloc(f->len + 1);
            memcpy(copy, parts[i].data, f->len);
            f->data = copy;
        }
    }
    if (json_array_size(u->metas) == 0) {
        osapi_reply_error(req, 400, "INVALID_FILE_METADATA", "metadata file is missing");
        return;
    }
    if (nfiles == 0) {
        osapi_reply_error(req, 400, "INVALID_FILE_CONTENT", "file part is missing");
        return;
    }
    if (nfiles != json_array_size(u->metas)) {
        osapi_reply_error(req, 400, "INVALID_FILE", "metadata and file parts must come in pairs "
                          "(%zu metadata, %zu files)", json_array_size(u->metas), nfiles);
        return;
    }
    u->count = nfiles;
    upload_step(req);
}

/* ---- download ------------------------------------------------------------------------------------------ */

struct download {
    char *name;
    bool ranged;
    uint64_t first, last; /* inclusive range, when ranged */
};

static void download_free(void *p)
{
    struct download *d = p;
    free(d->name);
    free(d);
}

static void download_cb(void *arg, const struct file_read_result *res, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    struct download *d = req->state;
    if (err) {
        reply_file_error(req, err);
        return;
    }
    char extra[600];
    int n = snprintf(extra, sizeof(extra), "Content-Disposition: attachment; filename=\"%s\"\r\n",
                     d->name);
    if (d->ranged) {
        if (d->first >= res->size) {
            snprintf(extra + n, sizeof(extra) - (size_t)n, "Content-Range: bytes */%llu\r\n",
                     (unsigned long long)res->size);
            osapi_reply_raw(req, 416, "application/json", extra,
                            "{\"code\":\"UNKNOWN\",\"message\":\"range not satisfiable\"}", 53);
            return;
        }
        snprintf(extra + n, sizeof(extra) - (size_t)n, "Content-Range: bytes %llu-%llu/%llu\r\n",
                 (unsigned long long)res->offset,
                 (unsigned long long)(res->offset + res->len - (res->len ? 1 : 0)),
                 (unsigned long long)res->size);
        osapi_reply_raw(req, 206, "application/octet-stream", extra, res->data, res->len);
        return;
    }
    if (res->truncated) {
        osapi_reply_error(req, 400, "INVALID_FILE",
                          "the file is %llu bytes; mcpbox answers at most %u per download: ask "
                          "for parts with Range: bytes=FIRST-LAST",
                          (unsigned long long)res->size, OSAPI_MAX_DOWNLOAD);
        return;
    }
    osapi_reply_raw(req, 200, "application/octet-stream", extra, res->data, res->len);
}

/* "bytes=FIRST-[LAST]" (one range); false if malformed. */
static bool parse_range(const char *r, uint64_t *first, uint64_t *last)
{
    unsigned long long a, b;
    char tail;
    if (sscanf(r, "bytes=%llu-%llu%c", &a, &b, &tail) == 2 && b >= a) {
        *first = a, *last = b;
        return true;
    }
    if (sscanf(r, "bytes=%llu-%c", &a, &tail) == 1 && r[strlen(r) - 1] == '-') {
        *first = a, *last = UINT64_MAX;
        return true;
    }
    return false;
}

static void handle_download(struct osapi_req *req)
{
    char *path = osapi_query_get(osapi_req_query(req), "path");
    const char *range = http_request_header(osapi_req_http(req), "range", NULL);
    if (!path) {
        osapi_reply_error(req, 400, "MISSING_QUERY", "missing query parameter path");
        return;
    }
    struct download *d = xcalloc(1, sizeof(*d));
    const char *base = strrchr(path, '/');
    d->name = xstrdup(base ? base + 1 : path);
    for (char *c = d->name; *c; c++)
        if (*c == '"' || (unsigned char)*c < 0x20)
            *c = '_';
    req->state = d;
    req->free_state = download_free;
    if (range && !(d->ranged = parse_range(range, &d->first, &d->last))) {
        free(path);
        osapi_reply_error(req, 416, "UNKNOWN", "Range must be bytes=FIRST-LAST or bytes=FIRST-");
        return;
    }
    uint64_t len = OSAPI_MAX_DOWNLOAD;
    if (d->ranged && d->last != UINT64_MAX && d->last - d->first + 1 < len)
        len = d->last - d->first + 1;
    struct mcp_error err;
    if (req->be->ops->file_read(req->be, req->sandbox_id, path, d->ranged ? d->first : 0, len,
                                download_cb, req, &err) < 0)
        reply_file_error(req, &err);
    free(path);
}

/* ---- metrics --------------------------------------------------------------------------------------------- */

/* The backend's metrics in execd's Metrics shape. */
static json_t *metrics_json(json_t *r)
{
    int64_t ts = now_wall_ms();
    const char *t = json_string_value(json_object_get(r, "timestamp"));
    if (t)
        parse_rfc3339_ms(t, &ts);
    return json_pack("{s:f, s:f, s:f, s:f, s:I}", "cpu_count",
                     json_number_value(json_object_get(r, "cpu_count")), "cpu_used_pct",
                     json_number_value(json_object_get(r, "cpu_used_pct")), "mem_total_mib",
                     json_number_value(json_object_get(r, "memory_total_bytes")) / 1048576.0,
                     "mem_used_mib",
                     json_number_value(json_object_get(r, "memory_used_bytes")) / 1048576.0,
                     "timestamp", (json_int_t)ts);
}

static void metrics_cb(void *arg, json_t *r, const struct mcp_error *err)
{
    struct osapi_req *req = arg;
    if (err)
        osapi_reply_error(req, 500, "RUNTIME_ERROR", "%s", err->msg);
    else
        osapi_reply_json(req, 200, metrics_json(r), NULL);
}

/* A backend without live metrics answers as execd does for what it lacks. */
static void metrics_failed(struct osapi_req *req, const struct mcp_error *err)
{
    if (err->code == MCP_ERR_UNSUPPORTED)
        osapi_reply_unsupported(req, "metrics: %s", err->msg);
    else
        osapi_reply_error(req, 500, "RUNTIME_ERROR", "%s", err->msg);
}

/* /metrics/watch: one Metrics object and "\n" per second (execd's NDJSON) until the client goes. */
struct watch {
    struct osapi_req *req; /* NULL once the client is gone */
    struct backend *be;
    char *sandbox_id;
    uv_timer_t timer;
    bool asking; /* a metrics call is in flight */
    bool timer_closed;
};

static void watch_free_cb(uv_handle_t *h)
{
    struct watch *w = h->data;
    w->timer_closed = true;
    if (!w->asking) {
        free(w->sandbox_id);
        free(w);
    }
}

static void watch_stop(struct watch *w)
{
    if (w->req) {
        struct osapi_req *req = w->req;
        w->req = NULL;
        req->state = NULL;
        struct http_conn *c = req->conn;
        req->conn = NULL;
        if (c) {
            http_ext_on_abort(c, NULL, NULL);
            http_ext_stream_end(c);
        }
        osapi_req_free(req);
    }
    if (!uv_is_closing((uv_handle_t *)&w->timer))
        uv_close((uv_handle_t *)&w->timer, watch_free_cb);
}

static void watch_line(void *arg, json_t *r, const struct mcp_error *err)
{
    struct watch *w = arg;
    w->asking = false;
    if (w->timer_closed) { /* stopped meanwhile: the last one out frees */
        free(w->sandbox_id);
        free(w);
        return;
    }
    if (!w->req || !w->req->conn)
        return;
    json_t *line = err ? json_pack("{s:s}", "error", err->msg) : metrics_json(r);
    char *s = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    size_t n = strlen(s);
    http_ext_stream_write(w->req->conn, s, n);
    http_ext_stream_write(w->req->conn, "\n", 1);
    free(s);
    if (err)
        watch_stop(w);
}

static void watch_tick(uv_timer_t *t)
{
    struct watch *w = t->data;
    struct mcp_error err;
    if (!w->req || !w->req->conn) {
        watch_stop(w);
        return;
    }
    if (w->asking)
        return; /* the previous answer is late: skip a beat */
    if (http_ext_queued(w->req->conn) > (1u << 20))
        return; /* the client is not reading: do not pile up */
    w->asking = true;
    if (w->be->ops->metrics(w->be, w->sandbox_id, watch_line, w, &err) < 0)
        watch_line(w, NULL, &err);
}

static void watch_aborted(struct osapi_req *req)
{
    struct watch *w = req->state;
    uv_timer_start(&w->timer, watch_tick, 0, 0); /* stop from the loop, not from inside a write */
}

static void handle_watch(struct osapi_req *req)
{
    struct watch *w = xcalloc(1, sizeof(*w));
    w->req = req;
    w->be = req->be;
    w->sandbox_id = xstrdup(req->sandbox_id);
    uv_timer_init(server_loop(req->api->srv), &w->timer);
    w->timer.data = w;
    req->state = w;
    req->on_abort = watch_aborted;
    char extra[80];
    snprintf(extra, sizeof(extra), "X-Request-ID: %s\r\n", req->request_id);
    http_ext_stream_start(req->conn, 200, "text/event-stream", extra);
    uv_timer_start(&w->timer, watch_tick, 0, 1000);
}

/* ---- routing ---------------------------------------------------------------------------------------------- */

static bool wrong_method(struct osapi_req *req, enum http_method m)
{
    if (method_is(req, m))
        return false;
    osapi_reply_error(req, 405, "INVALID_REQUEST_BODY", "method not allowed on this path");
    return true;
}

/* The paths that take one method and one handler. */
struct simple_route {
    const char *path;
    enum http_method method;
    void (*handle)(struct osapi_req *req);
};

static const struct simple_route simple_routes[] = {
    {"/directories/list", HTTP_GET, handle_list},
    {"/files/mv", HTTP_POST, handle_move},
    {"/files/replace", HTTP_POST, handle_replace},
    {"/files/search", HTTP_GET, handle_search},
    {"/files/permissions", HTTP_POST, handle_permissions},
    {"/files/upload", HTTP_POST, handle_upload},
    {"/files/download", HTTP_GET, handle_download},
};

static const struct simple_route *simple_route(const char *path)
{
    for (size_t i = 0; i < sizeof simple_routes / sizeof simple_routes[0]; i++)
        if (!strcmp(path, simple_routes[i].path))
            return &simple_routes[i];
    return NULL;
}

bool osapi_files_route(struct osapi_req *req, const char *path)
{
    const struct simple_route *simple;
    struct mcp_error err;
    bool running = strncmp(path, "/metrics", 8) != 0;
    bool known = !strncmp(path, "/files", 6) || !strncmp(path, "/directories", 12) ||
                 !strncmp(path, "/metrics", 8);
    if (!known)
        return false;
    if (osapi_bind(req, req->sandbox_id, running, NULL) < 0)
        return true;
    if (!strcmp(path, "/files/info")) {
        json_t *args;
        if (!wrong_method(req, HTTP_GET) && (args = path_args(req, NULL, NULL)))
            batch_start(req, "stat", args, finish_info, NULL);
    } else if (!strcmp(path, "/files")) {
        json_t *args;
        if (!wrong_method(req, HTTP_DELETE) &&
            (args = path_args(req, "recursive", json_false())))
            batch_start(req, "delete", args, finish_empty, NULL);
    } else if (!strcmp(path, "/directories")) {
        json_t *args;
        if (method_is(req, HTTP_POST))
            handle_mkdir(req);
        else if (!wrong_method(req, HTTP_DELETE) &&
                 (args = path_args(req, "recursive", json_true())))
            batch_start(req, "delete", args, finish_empty, NULL);
    } else if ((simple = simple_route(path))) {
        if (!wrong_method(req, simple->method))
            simple->handle(req);
    } else if (!strcmp(path, "/metrics")) {
        if (wrong_method(req, HTTP_GET))
            return true;
        if (req->be->ops->metrics(req->be, req->sandbox_id, metrics_cb, req, &err) < 0)
            metrics_failed(req, &err);
    } else if (!strcmp(path, "/metrics/watch")) {
        if (wrong_method(req, HTTP_GET))
            return true;
        handle_watch(req);
    } else {
        return false;
    }
    return true;
}
