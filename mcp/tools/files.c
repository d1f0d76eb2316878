/* File tools: write_file and read_file (utf-8 or base64, ranges, sha256 echoed, binary detected)
 * and the generic operations (list, search, replace, move, delete, mkdir). */
#define LOG_MODULE "tools"
#include "mcp/tools/tools-internal.h"

#include <stdio.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"

/* ---- write_file ------------------------------------------------------------------------------ */

struct write_job {
    struct tool_job *job;
    char sha256[65]; /* of the bytes sent */
    size_t len;
    bool append;
};

static void write_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    struct write_job *wj = arg;
    struct tool_job *job = wj->job;
    const char *sha = result ? json_string_value(json_object_get(result, "sha256")) : NULL;
    struct mcp_error e;
    if (err != NULL) {
        tool_job_fail(job, err);
    } else if (!wj->append && (sha == NULL || strcmp(sha, wj->sha256) != 0)) {
        /* Never let a short or corrupted write pass silently. */
        mcp_error_set(&e, MCP_ERR_IO, 0,
                      "the file's sha256 after writing (%s) differs from the content's (%s); "
                      "the write was incomplete, write it again",
                      sha ? sha : "unknown", wj->sha256);
        tool_job_fail(job, &e);
    } else if (!json_is_object(result)) {
        tool_job_fail(job, (tools_no_result(&e), &e));
    } else {
        json_t *out = json_deep_copy(result);
        json_object_set_new(out, "bytes_written", json_integer((json_int_t)wj->len));
        tool_job_finish(job, out);
    }
    free(wj);
}

/* The bytes to write: the string itself (utf-8) or its base64 decoding (malloc'd). */
static int write_payload(json_t *args, unsigned char **data, size_t *len, struct mcp_error *err)
{
    json_t *content = json_object_get(args, "content");
    const char *s = json_string_value(content);
    size_t n = json_string_length(content);
    if (strcmp(tools_arg_str(args, "encoding", "utf-8"), "base64") != 0) {
        if (n > TOOLS_MAX_WRITE_BYTES)
            goto too_big;
        *data = xmalloc(n + 1);
        memcpy(*data, s, n);
        *len = n;
        return 0;
    }
    if (base64_decoded_max(n) > TOOLS_MAX_WRITE_BYTES + 3)
        goto too_big;
    *data = xmalloc(base64_decoded_max(n) + 1);
    if (base64_decode(s, n, *data, len) < 0) {
        free(*data);
        *data = NULL;
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "content is not valid base64 (standard alphabet, no line breaks); "
                             "send text with encoding \"utf-8\" or fix the encoding");
    }
    return 0;
too_big:
    return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                         "content is over %u MiB; write the file in parts with append:true",
                         TOOLS_MAX_WRITE_BYTES >> 20);
}

void tool_write_file(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    unsigned char *data = NULL;
    size_t len = 0;
    uint32_t mode = 0;
    const char *mode_s = tools_arg_str(args, "mode", NULL);
    if ((mode_s != NULL && tools_parse_mode(mode_s, &mode, &err) < 0) ||
        tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0 ||
        write_payload(args, &data, &len, &err) < 0) {
        tool_job_fail(job, &err);
        return;
    }
    struct write_job *wj = xcalloc(1, sizeof(*wj));
    wj->job = job;
    wj->len = len;
    wj->append = tools_arg_bool(args, "append", false);
    sha256_hex(data, len, wj->sha256);
    const char *path = tools_arg_str(args, "path", "");
    tool_job_set_detail(job, "path=%s bytes=%zu", path, len);
    int rc = job->be->ops->file_write(job->be, job->sandbox_id, path, data, len, mode, wj->append,
                                      write_done_cb, wj, &err);
    free(data);
    if (rc < 0) {
        free(wj);
        tool_job_fail(job, &err);
    }
}

/* ---- read_file ------------------------------------------------------------------------------- */

struct read_job {
    struct tool_job *job;
    char *path;
    char *encoding; /* "auto", "utf-8", "base64" */
};

static json_t *read_result(struct read_job *rj, const struct file_read_result *res)
{
    size_t len = res->len;
    bool truncated = res->truncated;
    /* A range that ends inside a character: stop before it, the next read starts there. */
    size_t whole = utf8_page_end(res->data, len);
    if (res->truncated && whole < len && utf8_is_text(res->data, whole)) {
        len = whole;
        truncated = true;
    }
    bool text = utf8_is_text(res->data, len);
    bool as_text = text && strcmp(rj->encoding, "base64") != 0;
    char sha[65];
    sha256_hex(res->data, len, sha);
    json_t *content;
    if (as_text) {
        content = json_stringn(res->data, len);
    } else {
        char *b64 = xmalloc(base64_encoded_len(len) + 1);
        base64_encode(res->data, len, b64);
        content = json_string(b64);
        free(b64);
    }
    json_t *out = json_pack("{s:o, s:o, s:s, s:b, s:I, s:I, s:I, s:s, s:b}", "path",
                            utf8_json_text(rj->path, strlen(rj->path)),
                            "content", content, "encoding", as_text ? "utf-8" : "base64",
                            "binary", !text, "size", (json_int_t)res->size, "offset",
                            (json_int_t)res->offset, "length", (json_int_t)len, "sha256", sha,
                            "truncated", truncated);
    if (!text && strcmp(rj->encoding, "base64") != 0)
        json_object_set_new(out, "note", json_string("binary content (not UTF-8 text): content "
                                                     "is base64"));
    else if (truncated)
        json_object_set_new(out, "note", json_string("more follows: read again from "
                                                     "offset+length"));
    return out;
}

static void read_done_cb(void *arg, const struct file_read_result *res,
                         const struct mcp_error *err)
{
    struct read_job *rj = arg;
    struct mcp_error e;
    if (err == NULL && res == NULL)
        err = (tools_no_result(&e), &e);
    if (err != NULL)
        tool_job_fail(rj->job, err);
    else
        tool_job_finish(rj->job, read_result(rj, res));
    free(rj->path);
    free(rj->encoding);
    free(rj);
}

/* args.path, or the bytes of args.path_base64 when given: the exact name of a file whose name
 * is not UTF-8, as list_files and search_files report it. malloc'd; NULL with err. */
static char *path_from_args(json_t *args, struct mcp_error *err)
{
    const char *b64 = tools_arg_str(args, "path_base64", NULL);
    if (b64 == NULL)
        return xstrdup(tools_arg_str(args, "path", ""));
    size_t len = strlen(b64), n = 0;
    char *p = xmalloc(base64_decoded_max(len) + 1);
    if (base64_decode(b64, len, (unsigned char *)p, &n) < 0 || n == 0 ||
        memchr(p, '\0', n) != NULL) {
        free(p);
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "path_base64 is not the base64 of a path (non-empty, no NUL): pass the "
                      "path_base64 list_files or search_files gave");
        return NULL;
    }
    p[n] = '\0';
    return p;
}

void tool_read_file(struct tool_call *call, json_t *args)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    char *path = NULL;
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0 ||
        (path = path_from_args(args, &err)) == NULL) {
        tool_job_fail(job, &err);
        return;
    }
    struct read_job *rj = xcalloc(1, sizeof(*rj));
    rj->job = job;
    rj->path = path;
    rj->encoding = xstrdup(tools_arg_str(args, "encoding", "auto"));
    uint64_t offset = (uint64_t)tools_arg_int(args, "offset", 0, 0, INT64_MAX);
    uint64_t length = (uint64_t)tools_arg_int(args, "length", TOOLS_DEFAULT_READ_LENGTH, 1,
                                              TOOLS_MAX_READ_LENGTH);
    tool_job_set_detail(job, "path=%s offset=%llu length=%llu", rj->path,
                        (unsigned long long)offset, (unsigned long long)length);
    if (job->be->ops->file_read(job->be, job->sandbox_id, rj->path, offset, length, read_done_cb,
                                rj, &err) < 0)
        read_done_cb(rj, NULL, &err);
}

/* ---- the generic operations ------------------------------------------------------------------ */

/* The backend's arguments: the tool's minus sandbox_id, with the tool layer's defaults. */
static json_t *op_args(const char *op, json_t *args, struct mcp_error *err)
{
    json_t *a = json_deep_copy(args);
    json_object_del(a, "sandbox_id");
    if (strcmp(op, "list") == 0) {
        if (!json_object_get(a, "path"))
            json_object_set_new(a, "path", json_string("."));
        if (!json_object_get(a, "max_entries"))
            json_object_set_new(a, "max_entries", json_integer(TOOLS_DEFAULT_LIST_ENTRIES));
    } else if (strcmp(op, "search") == 0) {
        if (!json_object_get(a, "path"))
            json_object_set_new(a, "path", json_string("."));
        if (!json_object_get(a, "max_results"))
            json_object_set_new(a, "max_results", json_integer(TOOLS_DEFAULT_SEARCH_RESULTS));
    } else if (strcmp(op, "replace") == 0) {
        /* the edit tools models know replace one unique match; all: true replaces every one */
        bool all = json_is_true(json_object_get(a, "all"));
        json_object_del(a, "all");
        json_object_set_new(a, "count", json_integer(all ? 0 : 1));
        if (!all)
            json_object_set_new(a, "unique", json_true());
    } else if (strcmp(op, "mkdir") == 0 && !json_object_get(a, "parents")) {
        json_object_set_new(a, "parents", json_true()); /* the schema's documented default */
    }
    if (strcmp(op, "mkdir") == 0 && json_is_string(json_object_get(a, "mode"))) {
        uint32_t mode;
        if (tools_parse_mode(json_string_value(json_object_get(a, "mode")), &mode, err) < 0) {
            json_decref(a);
            return NULL;
        }
        json_object_set_new(a, "mode", json_integer(mode));
    }
    return a;
}

/* list: modes as the octal strings write_file and make_directory take ("644", not 420). */
static void list_done_cb(void *arg, json_t *result, const struct mcp_error *err)
{
    json_t *entry;
    size_t i;

    json_array_foreach(json_object_get(result, "entries"), i, entry) {
        json_t *mode = json_object_get(entry, "mode");
        if (json_is_integer(mode)) {
            char octal[16];
            snprintf(octal, sizeof(octal), "%03llo",
                     (unsigned long long)json_integer_value(mode) & 07777ULL);
            json_object_set_new(entry, "mode", json_string(octal));
        }
    }
    tool_job_done_cb(arg, result, err);
}

static void file_op(struct tool_call *call, json_t *args, const char *op)
{
    struct tool_job *job = tool_job_new(call, args);
    struct mcp_error err;
    json_t *a = NULL;
    const char *path = tools_arg_str(args, "path", tools_arg_str(args, "source", ""));
    tool_job_set_detail(job, "op=%s path=%s", op, path);
    if (tool_job_bind(job, tools_arg_str(args, "sandbox_id", ""), TOOL_NEED_RUNNING, &err) < 0 ||
        (a = op_args(op, args, &err)) == NULL ||
        job->be->ops->file_op(job->be, job->sandbox_id, op, a,
                              strcmp(op, "list") == 0 ? list_done_cb : tool_job_done_cb, job,
                              &err) < 0)
        tool_job_fail(job, &err);
    json_decref(a);
}

void tool_list_files(struct tool_call *call, json_t *args)
{
    file_op(call, args, "list");
}

void tool_search_files(struct tool_call *call, json_t *args)
{
    file_op(call, args, "search");
}

void tool_replace_in_file(struct tool_call *call, json_t *args)
{
    file_op(call, args, "replace");
}

void tool_move_path(struct tool_call *call, json_t *args)
{
    file_op(call, args, "move");
}

void tool_delete_path(struct tool_call *call, json_t *args)
{
    file_op(call, args, "delete");
}

void tool_make_directory(struct tool_call *call, json_t *args)
{
    file_op(call, args, "mkdir");
}
