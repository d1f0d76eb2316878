/* Files through execd: /files/info, /files/download (Range), /files/upload (multipart: the
 * metadata part MUST carry filename="metadata"), /files/mv, /files/search, /files/replace,
 * /files/permissions, /directories (list, create, delete), mapped onto the vtable's shapes. */
#define LOG_MODULE "opensandbox"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/httpc/curl_loader.h"
#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define OSB_LIST_DEFAULT_ENTRIES 500
#define OSB_SEARCH_DEFAULT_RESULTS 200

struct fop;
typedef void fop_step(struct fop *f, struct httpc_response *resp, const struct mcp_error *err);

struct fop {
    struct osb_backend *b;
    char *sid;
    char *path, *path2;     /* absolute sandbox paths */
    const char *op;
    backend_cb *cb;
    backend_read_cb *rcb;
    void *arg;
    json_t *args;
    uint64_t offset, length, size;
    uint32_t mode;
    bool append, is_dir;
    struct buf data;        /* content to upload / downloaded */
    /* the next execd request */
    const char *method;
    char *req_path;
    json_t *req_json;
    const char *range;
    char range_buf[64];
    bool upload, tolerate_error;
    size_t cap;
    fop_step *next;
};

uint32_t osb_mode_from_execd(int64_t digits)
{
    uint32_t bits = 0, mult = 1;
    for (int i = 0; i < 4 && digits > 0; i++, digits /= 10, mult *= 8)
        bits += (uint32_t)(digits % 10 % 8) * mult;
    return bits;
}

int64_t osb_mode_to_execd(uint32_t bits)
{
    return (bits >> 9 & 7) * 1000 + (bits >> 6 & 7) * 100 + (bits >> 3 & 7) * 10 + (bits & 7);
}

char *osb_sandbox_path(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return xstrdup(OSB_WORKSPACE);
    if (path[0] == '/')
        return xstrdup(path);
    if (strcmp(path, ".") == 0)
        return xstrdup(OSB_WORKSPACE);
    return xasprintf("%s/%s", OSB_WORKSPACE, strncmp(path, "./", 2) == 0 ? path + 2 : path);
}

static void fop_free(struct fop *f)
{
    free(f->sid);
    free(f->path);
    free(f->path2);
    free(f->req_path);
    json_decref(f->req_json);
    json_decref(f->args);
    buf_release(&f->data);
    free(f);
}

static struct fop *fop_new(struct osb_backend *b, const char *sid, const char *path)
{
    struct fop *f = xcalloc(1, sizeof(*f));
    f->b = b;
    f->sid = xstrdup(sid);
    f->path = osb_sandbox_path(path);
    buf_init(&f->data, OSB_FILE_MAX);
    return f;
}

static void fop_finish(struct fop *f, json_t *result, const struct mcp_error *err)
{
    if (f->rcb != NULL) {
        f->rcb(f->arg, NULL, err);
    } else {
        f->cb(f->arg, err ? NULL : result, err);
    }
    json_decref(result);
    fop_free(f);
}

static void fop_defer_fail(struct fop *f, const struct mcp_error *err)
{
    if (f->rcb != NULL) { /* reads get their error from a dedicated path: keep it async */
        f->rcb(f->arg, NULL, err);
        fop_free(f);
        return;
    }
    backend_defer(&f->b->base, f->cb, f->arg, NULL, err);
    fop_free(f);
}

static void fop_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct fop *f = arg;
    if (err != NULL && err->code == MCP_ERR_UNAVAILABLE && resp->status == 0)
        osb_endpoint_forget(f->b, f->sid + strlen(OSB_ID_PREFIX));
    fop_step *next = f->next;
    f->next = NULL;
    next(f, resp, err);
}

static curl_mime *fop_mime(void *arg, CURL *easy)
{
    struct fop *f = arg;
    curl_mime *mime = httpc_curl.mime_init(easy);
    cleanup_json json_t *meta = json_pack("{s:s,s:I}", "path", f->path, "mode",
                                          (json_int_t)osb_mode_to_execd(f->mode ? f->mode : 0644));
    cleanup_free char *meta_s = json_dumps(meta, JSON_COMPACT);
    curl_mimepart *p = httpc_curl.mime_addpart(mime);
    httpc_curl.mime_name(p, "metadata");
    httpc_curl.mime_data(p, meta_s, CURL_ZERO_TERMINATED);
    httpc_curl.mime_filename(p, "metadata"); /* execd ignores a metadata part without a filename */
    httpc_curl.mime_type(p, "application/json");
    p = httpc_curl.mime_addpart(mime);
    httpc_curl.mime_name(p, "file");
    httpc_curl.mime_data(p, f->data.data ? f->data.data : "", f->data.len);
    httpc_curl.mime_filename(p, f->path);
    httpc_curl.mime_type(p, "application/octet-stream");
    return mime;
}

static void fop_with_endpoint(void *arg, const struct osb_endpoint *ep, const struct mcp_error *err)
{
    struct fop *f = arg;
    if (err != NULL) {
        fop_defer_fail(f, err);
        return;
    }
    cleanup_free char *what = xasprintf("%s %s", f->op, f->path);
    struct osb_call_opts o = {.method = f->method, .what = what, .sandbox_id = f->sid,
                              .json = f->req_json, .range = f->range,
                              .mime_build = f->upload ? fop_mime : NULL,
                              .retry = strcmp(f->method, "GET") == 0 ||
                                               strcmp(f->method, "DELETE") == 0
                                           ? HTTPC_RETRY_IDEMPOTENT
                                           : HTTPC_RETRY_SAFE,
                              .body_cap = f->cap ? f->cap : OSB_JSON_BODY_MAX};
    struct mcp_error e;
    if (osb_execd_call(f->b, ep, f->req_path, &o, fop_done, f, &e) == NULL)
        fop_defer_fail(f, &e);
}

/* Issues the next request of f: method path [json] -> next(f, resp, err). */
static void fop_request(struct fop *f, const char *method, char *path, json_t *json,
                        fop_step *next)
{
    free(f->req_path);
    json_decref(f->req_json);
    f->method = method;
    f->req_path = path;
    f->req_json = json;
    f->next = next;
    struct mcp_error e;
    if (osb_endpoint_resolve(f->b, f->sid, fop_with_endpoint, f, &e) != 0)
        fop_defer_fail(f, &e);
}

static char *q(const char *s)
{
    return osb_escape(s);
}

/* ---- FileInfo ------------------------------------------------------------------------------ */

static json_t *entry_json(json_t *fi)
{
    const char *path = json_string_value(json_object_get(fi, "path"));
    const char *type = json_string_value(json_object_get(fi, "type"));
    json_t *mt = json_object_get(fi, "modified_at");
    int64_t ms;
    char when[32] = "";
    if (json_is_string(mt) && parse_rfc3339_ms(json_string_value(mt), &ms) == 0)
        format_rfc3339_ms(ms, when);
    return json_pack("{s:s,s:s,s:I,s:i,s:s}", "path", path ? path : "", "type",
                     type ? type : "other", "size",
                     (json_int_t)json_integer_value(json_object_get(fi, "size")), "mode",
                     (int)osb_mode_from_execd(json_integer_value(json_object_get(fi, "mode"))),
                     "mtime", when);
}

/* /files/info answers {"<path>": FileInfo}. */
static json_t *info_parse(struct fop *f, struct httpc_response *resp, struct mcp_error *e)
{
    cleanup_json json_t *j = osb_resp_json(resp, "stat", e);
    json_t *fi = json_object_get(j, f->path);
    if (fi == NULL && json_is_object(j)) /* keys are the paths as sent; be lenient anyway */
        fi = json_object_iter_value(json_object_iter(j));
    if (!json_is_object(fi)) {
        if (j != NULL)
            mcp_error_set(e, MCP_ERR_BACKEND, 0, "stat %s: unexpected answer from execd", f->path);
        return NULL;
    }
    return json_incref(fi);
}

static void fop_info(struct fop *f, fop_step *next)
{
    cleanup_free char *ep = q(f->path);
    fop_request(f, "GET", xasprintf("/files/info?path=%s", ep), NULL, next);
}

static void file_not_found(struct fop *f, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err->code == MCP_ERR_NOT_FOUND) {
        mcp_error_set(&e, MCP_ERR_NOT_FOUND, 0, "no such file or directory in %s: %s", f->sid,
                      f->path);
        fop_finish(f, NULL, &e);
        return;
    }
    fop_finish(f, NULL, err);
}

/* ---- read ------------------------------------------------------------------------------------ */

static void read_downloaded(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    const char *data = resp->body.data ? resp->body.data : "";
    size_t len = resp->body.len;
    if (resp->status == 200 && f->offset > 0) { /* the server ignored Range */
        size_t skip = f->offset < len ? (size_t)f->offset : len;
        data += skip, len -= skip;
    }
    if (len > f->length)
        len = (size_t)f->length;
    struct file_read_result res = {data, len, f->size, f->offset, f->mode,
                                   f->offset + len < f->size};
    f->rcb(f->arg, &res, NULL);
    fop_free(f);
}

static void read_stat_done(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    cleanup_json json_t *fi = info_parse(f, resp, &e);
    if (fi == NULL) {
        fop_finish(f, NULL, &e);
        return;
    }
    const char *type = json_string_value(json_object_get(fi, "type"));
    if (type && strcmp(type, "directory") == 0) {
        mcp_error_set(&e, MCP_ERR_INVALID, 0, "%s is a directory; use list_files", f->path);
        fop_finish(f, NULL, &e);
        return;
    }
    f->size = (uint64_t)json_integer_value(json_object_get(fi, "size"));
    f->mode = osb_mode_from_execd(json_integer_value(json_object_get(fi, "mode")));
    uint64_t left = f->offset < f->size ? f->size - f->offset : 0;
    uint64_t want = f->length ? f->length : OSB_READ_DEFAULT;
    f->length = want < left ? want : left;
    if (f->length > OSB_FILE_MAX)
        f->length = OSB_FILE_MAX;
    if (f->length == 0) {
        struct file_read_result res = {"", 0, f->size, f->offset, f->mode, false};
        f->rcb(f->arg, &res, NULL);
        fop_free(f);
        return;
    }
    if (f->offset > 0 || f->length < f->size) {
        snprintf(f->range_buf, sizeof(f->range_buf), "bytes=%llu-%llu",
                 (unsigned long long)f->offset, (unsigned long long)(f->offset + f->length - 1));
        f->range = f->range_buf;
    }
    /* Enough even if the server ignores Range, unless that would mean buffering more than
     * OSB_FILE_MAX: then only a honoured Range fits (else a clear size error). */
    f->cap = f->offset + f->length <= OSB_FILE_MAX ? (size_t)(f->offset + f->length)
                                                   : (size_t)f->length;
    cleanup_free char *ep = q(f->path);
    fop_request(f, "GET", xasprintf("/files/download?path=%s", ep), NULL, read_downloaded);
}

int osb_file_read(struct backend *be, const char *sandbox_id, const char *path, uint64_t offset,
                  uint64_t length, backend_read_cb *cb, void *arg, struct mcp_error *err)
{
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    struct fop *f = fop_new(osb_of(be), sandbox_id, path);
    f->op = "read";
    f->rcb = cb;
    f->arg = arg;
    f->offset = offset;
    f->length = length;
    /* fop_request may resolve from the cache, but its first callback is always a request. */
    fop_info(f, read_stat_done);
    return 0;
}

/* ---- write ---------------------------------------------------------------------------------- */

static void write_uploaded(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    if (err != NULL) {
        fop_finish(f, NULL, err);
        return;
    }
    char hex[65];
    sha256_hex(f->data.data ? f->data.data : "", f->data.len, hex);
    fop_finish(f, json_pack("{s:s,s:I,s:s,s:I}", "path", f->path, "size",
                            (json_int_t)f->data.len, "sha256", hex, "bytes_written",
                            (json_int_t)f->length), NULL);
}

static void fop_upload(struct fop *f, fop_step *next)
{
    f->upload = true;
    fop_request(f, "POST", xstrdup("/files/upload"), NULL, next);
}

static void write_old_downloaded(struct fop *f, struct httpc_response *resp,
                                 const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL && err->code != MCP_ERR_NOT_FOUND) {
        fop_finish(f, NULL, err);
        return;
    }
    struct buf all;
    buf_init(&all, OSB_FILE_MAX);
    if ((err == NULL && buf_append(&all, resp->body.data ? resp->body.data : "",
                                   resp->body.len) != 0) ||
        buf_append(&all, f->data.data ? f->data.data : "", f->data.len) != 0) {
        buf_release(&all);
        mcp_error_set(&e, MCP_ERR_LIMIT, 0, "appending would make %s larger than %u bytes",
                      f->path, OSB_FILE_MAX);
        fop_finish(f, NULL, &e);
        return;
    }
    buf_release(&f->data);
    f->data = all;
    fop_upload(f, write_uploaded);
}

int osb_file_write(struct backend *be, const char *sandbox_id, const char *path, const void *data,
                   size_t len, uint32_t mode, bool append, backend_cb *cb, void *arg,
                   struct mcp_error *err)
{
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    if (len > OSB_FILE_MAX)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0, "write_file is limited to %u bytes per "
                             "call on OpenSandbox sandboxes", OSB_FILE_MAX);
    struct fop *f = fop_new(osb_of(be), sandbox_id, path);
    f->op = "write";
    f->cb = cb;
    f->arg = arg;
    f->mode = mode;
    f->length = len;
    buf_append(&f->data, data, len);
    if (append) {
        f->cap = OSB_FILE_MAX;
        cleanup_free char *ep = q(f->path);
        fop_request(f, "GET", xasprintf("/files/download?path=%s", ep), NULL,
                    write_old_downloaded);
    } else {
        fop_upload(f, write_uploaded);
    }
    return 0;
}

/* ---- file_op --------------------------------------------------------------------------------- */

static int64_t arg_int(json_t *args, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(args, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static uint32_t arg_mode(json_t *args, uint32_t dflt)
{
    json_t *v = json_object_get(args, "mode");
    if (json_is_string(v))
        return (uint32_t)strtoul(json_string_value(v), NULL, 8);
    if (json_is_integer(v))
        return (uint32_t)json_integer_value(v);
    return dflt;
}

/* The JSON array execd answered for op on f->path, or NULL with e filled. New reference. */
static json_t *resp_array(struct fop *f, struct httpc_response *resp, const char *op,
                          struct mcp_error *e)
{
    json_t *arr = osb_resp_json(resp, op, e);
    if (json_is_array(arr))
        return arr;
    if (arr != NULL)
        mcp_error_set(e, MCP_ERR_BACKEND, 0, "%s %s: unexpected answer from execd", op, f->path);
    json_decref(arr);
    return NULL;
}

static void list_done(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    cleanup_json json_t *arr = resp_array(f, resp, "list", &e);
    if (arr == NULL) {
        fop_finish(f, NULL, &e);
        return;
    }
    size_t max = (size_t)arg_int(f->args, "max_entries", OSB_LIST_DEFAULT_ENTRIES);
    if (max > OSB_ENTRIES_MAX)
        max = OSB_ENTRIES_MAX;
    json_t *entries = json_array();
    size_t i;
    json_t *fi;
    json_array_foreach(arr, i, fi) {
        if (json_array_size(entries) >= max)
            break;
        json_array_append_new(entries, entry_json(fi));
    }
    fop_finish(f, json_pack("{s:s,s:o,s:b}", "path", f->path, "entries", entries, "truncated",
                            json_array_size(arr) > max), NULL);
}

static void search_done(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    cleanup_json json_t *arr = resp_array(f, resp, "search", &e);
    if (arr == NULL) {
        fop_finish(f, NULL, &e);
        return;
    }
    size_t max = (size_t)arg_int(f->args, "max_results", OSB_SEARCH_DEFAULT_RESULTS);
    json_t *matches = json_array();
    size_t i;
    json_t *fi;
    json_array_foreach(arr, i, fi) {
        if (json_array_size(matches) >= max)
            break;
        json_array_append(matches, json_object_get(fi, "path"));
    }
    fop_finish(f, json_pack("{s:s,s:O,s:o,s:b}", "path", f->path, "pattern",
                            json_object_get(f->args, "pattern"), "matches", matches, "truncated",
                            json_array_size(arr) > max), NULL);
}

static void simple_done(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    json_t *res;
    if (strcmp(f->op, "move") == 0)
        res = json_pack("{s:s,s:s}", "source", f->path, "destination", f->path2);
    else if (strcmp(f->op, "delete") == 0)
        res = json_pack("{s:s,s:b}", "path", f->path, "deleted", 1);
    else if (strcmp(f->op, "mkdir") == 0)
        res = json_pack("{s:s,s:b}", "path", f->path, "created", !f->is_dir);
    else
        res = json_pack("{s:s,s:i}", "path", f->path, "mode", (int)f->mode);
    fop_finish(f, res, NULL);
}

static void move_now(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    /* overwrite: a failed delete (nothing there) is fine; mv itself reports real problems */
    fop_request(f, "POST", xstrdup("/files/mv"),
                json_pack("[{s:s,s:s}]", "src", f->path, "dest", f->path2), simple_done);
}

static void delete_stat_done(struct fop *f, struct httpc_response *resp,
                             const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    cleanup_json json_t *fi = info_parse(f, resp, &e);
    if (fi == NULL) {
        fop_finish(f, NULL, &e);
        return;
    }
    const char *type = json_string_value(json_object_get(fi, "type"));
    cleanup_free char *ep = q(f->path);
    if (type && strcmp(type, "directory") == 0) {
        if (!json_is_true(json_object_get(f->args, "recursive"))) {
            mcp_error_set(&e, MCP_ERR_INVALID, 0, "%s is a directory: pass recursive:true to "
                          "delete it with everything in it", f->path);
            fop_finish(f, NULL, &e);
            return;
        }
        fop_request(f, "DELETE", xasprintf("/directories?path=%s", ep), NULL, simple_done);
        return;
    }
    fop_request(f, "DELETE", xasprintf("/files?path=%s", ep), NULL, simple_done);
}

static void mkdir_stat_done(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err == NULL) {
        cleanup_json json_t *fi = info_parse(f, resp, &e);
        const char *type = json_string_value(json_object_get(fi, "type"));
        if (type && strcmp(type, "directory") != 0) {
            mcp_error_set(&e, MCP_ERR_CONFLICT, 0, "%s exists and is not a directory", f->path);
            fop_finish(f, NULL, &e);
            return;
        }
        f->is_dir = type != NULL;
    } else if (err->code != MCP_ERR_NOT_FOUND) {
        fop_finish(f, NULL, err);
        return;
    }
    fop_request(f, "POST", xstrdup("/directories"),
                json_pack("{s:{s:I}}", f->path, "mode", (json_int_t)osb_mode_to_execd(f->mode)),
                simple_done);
}

static void stat_done(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    cleanup_json json_t *fi = info_parse(f, resp, &e);
    if (fi == NULL) {
        fop_finish(f, NULL, &e);
        return;
    }
    json_t *res = entry_json(fi);
    json_object_set_new(res, "path", json_string(f->path));
    fop_finish(f, res, NULL);
}

/* replace: count 0 uses execd's /files/replace (all occurrences), count > 0 or unique is done
 * here (download, check, replace the first count, upload); both answer with the new size and
 * sha256. */
static void replace_hashed(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    if (err != NULL) {
        fop_finish(f, NULL, err);
        return;
    }
    char hex[65];
    const char *d = resp->body.data ? resp->body.data : "";
    sha256_hex(d, resp->body.len, hex);
    fop_finish(f, json_pack("{s:s,s:I,s:I,s:s}", "path", f->path, "replacements",
                            (json_int_t)f->offset, "size", (json_int_t)resp->body.len, "sha256",
                            hex), NULL);
}

static void replace_remote_done(struct fop *f, struct httpc_response *resp,
                                const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    cleanup_json json_t *j = osb_resp_json(resp, "replace", &e);
    json_t *r = json_object_get(j, f->path);
    if (r == NULL && json_object_size(j) == 1)
        r = json_object_iter_value(json_object_iter(j));
    f->offset = (uint64_t)json_integer_value(json_object_get(r, "replacedCount"));
    f->cap = OSB_FILE_MAX;
    cleanup_free char *ep = q(f->path);
    fop_request(f, "GET", xasprintf("/files/download?path=%s", ep), NULL, replace_hashed);
}

static void replace_uploaded(struct fop *f, struct httpc_response *resp,
                             const struct mcp_error *err)
{
    if (err != NULL) {
        fop_finish(f, NULL, err);
        return;
    }
    char hex[65];
    sha256_hex(f->data.data ? f->data.data : "", f->data.len, hex);
    fop_finish(f, json_pack("{s:s,s:I,s:I,s:s}", "path", f->path, "replacements",
                            (json_int_t)f->offset, "size", (json_int_t)f->data.len, "sha256",
                            hex), NULL);
}

static void replace_local(struct fop *f, struct httpc_response *resp, const struct mcp_error *err)
{
    struct mcp_error e;
    if (err != NULL) {
        file_not_found(f, err);
        return;
    }
    const char *old = json_string_value(json_object_get(f->args, "old"));
    const char *new = json_string_value(json_object_get(f->args, "new"));
    int64_t count = arg_int(f->args, "count", 0);
    size_t olen = strlen(old), nlen = strlen(new), hits = 0;
    const char *s = resp->body.data ? resp->body.data : "", *end = s + resp->body.len;
    for (const char *h = s; (h = memmem(h, (size_t)(end - h), old, olen)) != NULL; h += olen)
        hits++;
    if (hits == 0 || (hits > 1 && json_is_true(json_object_get(f->args, "unique")))) {
        if (hits == 0)
            mcp_error_set(&e, MCP_ERR_NOT_FOUND, 0, "'%.80s' does not occur in %s", old, f->path);
        else
            mcp_error_set(&e, MCP_ERR_CONFLICT, 0, "'%.80s' occurs %zu times in %s; include "
                          "more of the surrounding text so it matches once, or pass all: true "
                          "to replace every occurrence", old, hits, f->path);
        fop_finish(f, NULL, &e);
        return;
    }
    buf_reset(&f->data);
    f->offset = 0;
    while (s < end) {
        const char *hit = (int64_t)f->offset < count ? memmem(s, (size_t)(end - s), old, olen)
                                                     : NULL;
        size_t keep = hit ? (size_t)(hit - s) : (size_t)(end - s);
        if (buf_append(&f->data, s, keep) != 0 || (hit && buf_append(&f->data, new, nlen) != 0)) {
            mcp_error_set(&e, MCP_ERR_LIMIT, 0, "the result would exceed %u bytes", OSB_FILE_MAX);
            fop_finish(f, NULL, &e);
            return;
        }
        if (hit == NULL)
            break;
        f->offset++;
        s = hit + olen;
    }
    /* keep the file's mode: the stat was not fetched, 0644 is execd's default too */
    fop_upload(f, replace_uploaded);
}

static int fop_start_replace(struct fop *f, struct mcp_error *err)
{
    const char *old = json_string_value(json_object_get(f->args, "old"));
    const char *new = json_string_value(json_object_get(f->args, "new"));
    if (old == NULL || old[0] == '\0' || new == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "replace needs a non-empty \"old\" and a "
                             "\"new\" string");
    cleanup_free char *ep = q(f->path);
    if (arg_int(f->args, "count", 0) > 0 || json_is_true(json_object_get(f->args, "unique"))) {
        f->cap = OSB_FILE_MAX;
        fop_request(f, "GET", xasprintf("/files/download?path=%s", ep), NULL, replace_local);
    } else {
        fop_request(f, "POST", xstrdup("/files/replace?verbose=true"),
                    json_pack("{s:{s:s,s:s}}", f->path, "old", old, "new", new),
                    replace_remote_done);
    }
    return 0;
}

static int fop_start(struct fop *f, struct mcp_error *err)
{
    cleanup_free char *ep = q(f->path);
    const char *op = f->op;
    if (strcmp(op, "list") == 0) {
        fop_request(f, "GET", xasprintf("/directories/list?path=%s&depth=%lld", ep,
                                        (long long)arg_int(f->args, "depth", 1)), NULL, list_done);
    } else if (strcmp(op, "search") == 0) {
        const char *pat = json_string_value(json_object_get(f->args, "pattern"));
        if (pat == NULL)
            return mcp_error_set(err, MCP_ERR_INVALID, 0, "search needs a \"pattern\"");
        cleanup_free char *epat = q(pat);
        fop_request(f, "GET", xasprintf("/files/search?path=%s&pattern=%s", ep, epat), NULL,
                    search_done);
    } else if (strcmp(op, "replace") == 0) {
        return fop_start_replace(f, err);
    } else if (strcmp(op, "move") == 0) {
        cleanup_free char *ed = q(f->path2);
        if (json_is_true(json_object_get(f->args, "overwrite")))
            fop_request(f, "DELETE", xasprintf("/files?path=%s", ed), NULL, move_now);
        else
            move_now(f, NULL, NULL);
    } else if (strcmp(op, "delete") == 0 || strcmp(op, "stat") == 0) {
        fop_info(f, op[0] == 'd' ? delete_stat_done : stat_done);
    } else if (strcmp(op, "mkdir") == 0) {
        f->mode = arg_mode(f->args, 0755);
        fop_info(f, mkdir_stat_done);
    } else if (strcmp(op, "chmod") == 0) {
        f->mode = arg_mode(f->args, 0644);
        fop_request(f, "POST", xstrdup("/files/permissions"),
                    json_pack("{s:{s:I}}", f->path, "mode",
                              (json_int_t)osb_mode_to_execd(f->mode)), simple_done);
    } else {
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0, "unknown file operation \"%s\"", op);
    }
    return 0;
}

int osb_file_op(struct backend *be, const char *sandbox_id, const char *op, json_t *args,
                backend_cb *cb, void *arg, struct mcp_error *err)
{
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    bool move = strcmp(op, "move") == 0;
    const char *path = json_string_value(json_object_get(args, move ? "source" : "path"));
    const char *dest = json_string_value(json_object_get(args, "destination"));
    if ((path == NULL && strcmp(op, "list") != 0 && strcmp(op, "search") != 0) ||
        (move && dest == NULL))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "%s needs %s", op,
                             move ? "\"source\" and \"destination\"" : "a \"path\"");
    struct fop *f = fop_new(osb_of(be), sandbox_id, path);
    f->op = op;
    f->cb = cb;
    f->arg = arg;
    f->args = json_incref(args);
    f->path2 = dest ? osb_sandbox_path(dest) : NULL;
    static const char *const ops[] = {"list", "search", "replace", "move", "delete", "mkdir",
                                      "stat", "chmod"};
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
        if (strcmp(op, ops[i]) == 0)
            f->op = ops[i]; /* a static name: f outlives the caller's string */
    if (fop_start(f, err) != 0) {
        fop_free(f);
        return -1;
    }
    return 0;
}
