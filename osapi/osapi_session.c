/* execd's bash sessions over mcpbox's shell sessions (the same ones run_command's session uses:
 * backend/shell_session_proc.h on backends with command_input, backend/shell_session.h's helper
 * scripts on the others): POST /session makes one (its shell starts, in cwd if given), POST
 * /session/{id}/run streams a command's events as POST /command does, DELETE /session/{id} ends
 * the shell and what it started. A session lives in the sandbox, so it outlives this server. */
#define LOG_MODULE "osapi"
#include "osapi/osapi-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shell_session.h"
#include "backend/shell_session_proc.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

/* Create and delete: one exec whose end is the answer. */
struct sess_op {
    struct osapi_req *req;
    char name[SHELL_SESSION_NAME_MAX + 1];
    struct shell_session_cmd cmd;
    struct shell_session_tail tail;
    struct shell_session_result res; /* a create on the proc primitive */
    bool proc;
    char *delete_command; /* NULL: a create */
};

static void sess_op_free(struct sess_op *op)
{
    shell_session_cmd_release(&op->cmd);
    free(op->delete_command);
    free(op);
}

static void discard(void *arg, const char *data, size_t len)
{
    (void)arg, (void)data, (void)len;
}

static void sess_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct sess_op *op = arg;
    if (stream == EXEC_STDOUT && op->delete_command == NULL)
        shell_session_tail_feed(&op->tail, data, len, discard, op);
}

static void create_done(struct sess_op *op, json_t *result)
{
    struct shell_session_result res = op->res;
    if (!op->proc)
        shell_session_tail_finish(&op->tail, discard, op, &res);
    const char *failure = shell_session_failure(res.kind);
    if (failure != NULL)
        osapi_reply_error(op->req, 500, "RUNTIME_ERROR", "%s", failure);
    else if (res.kind != SHELL_SESSION_DONE || res.status != 0)
        osapi_reply_error(op->req, 400, "INVALID_REQUEST_BODY",
                          "cwd: the session could not enter it (no such directory?)");
    else
        osapi_reply_json(op->req, 200, json_pack("{s:s}", "session_id", op->name), NULL);
    (void)result;
}

static void sess_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct sess_op *op = arg;
    json_int_t code = json_integer_value(json_object_get(result, "exit_code"));
    if (err != NULL)
        osapi_reply_mcp_error(op->req, err);
    else if (op->delete_command == NULL)
        create_done(op, result);
    else if (code == 3)
        osapi_reply_error(op->req, 404, "SESSION_NOT_FOUND", "no session %s in this sandbox",
                          op->name);
    else if (code != 0)
        osapi_reply_error(op->req, 500, "RUNTIME_ERROR", "ending session %s failed (exit %lld)",
                          op->name, (long long)code);
    else {
        if (shell_session_proc_available(op->req->be))
            shell_session_proc_forget(op->req->be, op->req->sandbox_id, op->name);
        osapi_reply_raw(op->req, 200, NULL, NULL, "", 0);
    }
    sess_op_free(op);
}

static void sess_exec(struct sess_op *op, const struct exec_request *er)
{
    struct osapi_req *req = op->req;
    struct exec_observer obs = {NULL, sess_output, sess_done, op};
    struct mcp_error err;
    if (req->be->ops->exec(req->be, req->sandbox_id, er, &obs, NULL, &err) < 0) {
        osapi_reply_mcp_error(req, &err);
        sess_op_free(op);
    }
}

/* The create's first command, ":" in cwd, on the proc primitive. */
static void create_proc(struct sess_op *op, const char *cwd)
{
    struct osapi_req *req = op->req;
    struct shell_session_request sr = {.name = op->name, .command = ":", .cwd = cwd};
    struct exec_observer obs = {NULL, NULL, sess_done, op};
    struct mcp_error err;
    op->proc = true;
    if (shell_session_proc_run(req->be, req->sandbox_id, &sr, &obs, &op->res, NULL, &err) < 0) {
        osapi_reply_mcp_error(req, &err);
        sess_op_free(op);
    }
}

static void handle_create(struct osapi_req *req)
{
    json_t *body = osapi_req_http(req)->body.len ? osapi_req_json(req) : json_object();
    if (body == NULL)
        return;
    json_t *cwd = json_object_get(body, "cwd");
    struct sess_op *op = xcalloc(1, sizeof(*op));
    op->req = req;
    random_id(op->name, sizeof op->name, "session-", 8);
    struct mcp_error err;
    struct exec_request er;
    if ((cwd != NULL && !json_is_null(cwd) && !json_is_string(cwd)) ||
        shell_session_prepare(op->name, ":", json_string_value(cwd), NULL, 0, &op->cmd, &err) < 0) {
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY", "cwd must be a string");
        sess_op_free(op);
    } else if (osapi_bind(req, req->sandbox_id, true, NULL) < 0) {
        sess_op_free(op);
    } else if (shell_session_proc_available(req->be)) {
        create_proc(op, json_string_value(cwd));
    } else {
        shell_session_tail_init(&op->tail, op->cmd.nonce);
        shell_session_exec_request(&op->cmd, 0, &er);
        sess_exec(op, &er);
    }
    json_decref(body);
}

static void handle_delete(struct osapi_req *req, const char *id)
{
    if (osapi_bind(req, req->sandbox_id, true, NULL) < 0)
        return;
    struct sess_op *op = xcalloc(1, sizeof(*op));
    op->req = req;
    snprintf(op->name, sizeof op->name, "%s", id);
    op->delete_command = shell_session_delete_command(id);
    struct exec_request er = {.command = op->delete_command, .timeout_ms = 30000};
    sess_exec(op, &er);
}

/* A run in a bound sandbox: on the proc primitive where the backend has it, else cmd's helper. */
static void run_bound(struct osapi_req *req, const char *id, const char *command, const char *cwd,
                      int64_t timeout_s, struct shell_session_cmd *cmd)
{
    if (shell_session_proc_available(req->be)) {
        struct shell_session_request sr = {
            .name = id, .command = command, .cwd = cwd, .timeout_s = timeout_s, .must_exist = true};
        osapi_cmd_stream_session(req, &sr);
        return;
    }
    struct exec_request er;
    shell_session_require_existing(cmd);
    shell_session_exec_request(cmd, timeout_s, &er);
    struct shell_session_tail *tail = xmalloc(sizeof(*tail));
    shell_session_tail_init(tail, cmd->nonce);
    osapi_cmd_stream(req, command, &er, false, tail);
}

/* RunInSessionRequest {command, cwd?, timeout? (ms)}. */
static void handle_run(struct osapi_req *req, const char *id)
{
    json_t *body = osapi_req_json(req);
    if (body == NULL)
        return;
    const char *command = json_string_value(json_object_get(body, "command"));
    json_t *cwd = json_object_get(body, "cwd"), *timeout = json_object_get(body, "timeout");
    struct shell_session_cmd cmd;
    struct mcp_error err;
    int64_t timeout_s = json_is_integer(timeout) ? (json_integer_value(timeout) + 999) / 1000 : 0;
    if (command == NULL || *command == '\0' ||
        (timeout && !json_is_null(timeout) && (!json_is_integer(timeout) || timeout_s < 0))) {
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "command is required (a non-empty "
                          "string); timeout is milliseconds >= 0");
    } else if (shell_session_prepare(id, command, json_string_value(cwd), NULL, timeout_s, &cmd,
                                     &err) < 0) {
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY", "%s", err.msg);
    } else {
        if (osapi_bind(req, req->sandbox_id, true, NULL) == 0)
            run_bound(req, id, command, json_string_value(cwd), timeout_s, &cmd);
        shell_session_cmd_release(&cmd);
    }
    json_decref(body);
}

static bool method_is(struct osapi_req *req, enum http_method m)
{
    return osapi_req_http(req)->method == m;
}

bool osapi_session_route(struct osapi_req *req, const char *path)
{
    if (strcmp(path, "/session") == 0) {
        if (method_is(req, HTTP_POST))
            handle_create(req);
        else
            osapi_reply_error(req, 405, "INVALID_REQUEST_BODY", "use POST on /session");
        return true;
    }
    if (strncmp(path, "/session/", 9) != 0)
        return false;
    char id[SHELL_SESSION_NAME_MAX + 8];
    const char *rest = path + 9, *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    struct mcp_error err;
    snprintf(id, sizeof id, "%.*s", (int)(n < sizeof id ? n : sizeof id - 1), rest);
    if (n >= sizeof id || shell_session_check_name(id, &err) < 0)
        osapi_reply_error(req, 404, "SESSION_NOT_FOUND", "no session %.*s in this sandbox",
                          (int)(n > 64 ? 64 : n), rest);
    else if (slash == NULL && method_is(req, HTTP_DELETE))
        handle_delete(req, id);
    else if (slash != NULL && strcmp(slash, "/run") == 0 && method_is(req, HTTP_POST))
        handle_run(req, id);
    else
        osapi_reply_error(req, 405, "INVALID_REQUEST_BODY",
                          "use POST /session/{id}/run or DELETE /session/{id}");
    return true;
}
