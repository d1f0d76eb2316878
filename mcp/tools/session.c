/* run_command's session argument: the command runs in a named long-lived shell of the sandbox
 * (backend/shell_session.h has the protocol; docs/tools-design.md, "Shell sessions"). */
#include "mcp/tools/session.h"

#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

static int session_run_prepare(json_t *args, struct session_run *sr, struct exec_request *req,
                               struct mcp_error *err)
{
    const char *name = tools_arg_str(args, "session", NULL);
    int64_t timeout_s = tools_arg_int(args, "timeout_seconds", 0, 0, MAX_DURATION_S);
    if (shell_session_prepare(name, tools_arg_str(args, "command", ""),
                              tools_arg_str(args, "cwd", NULL), json_object_get(args, "env"),
                              timeout_s, &sr->cmd, err) < 0)
        return -1;
    sr->name = xstrdup(name);
    sr->tail = xmalloc(sizeof(*sr->tail));
    shell_session_tail_init(sr->tail, sr->cmd.nonce);
    shell_session_exec_request(&sr->cmd, timeout_s, req);
    json_t *in = json_object_get(args, "stdin");
    if (json_is_string(in)) {
        req->stdin_data = json_string_value(in);
        req->stdin_len = json_string_length(in);
    }
    return 0;
}

static void session_request(json_t *args, struct shell_session_request *out)
{
    json_t *in = json_object_get(args, "stdin");
    *out = (struct shell_session_request){
        .name = tools_arg_str(args, "session", NULL),
        .command = tools_arg_str(args, "command", ""),
        .cwd = tools_arg_str(args, "cwd", NULL),
        .env = json_object_get(args, "env"),
        .stdin_data = json_is_string(in) ? json_string_value(in) : NULL,
        .stdin_len = json_is_string(in) ? json_string_length(in) : 0,
        .timeout_s = tools_arg_int(args, "timeout_seconds", 0, 0, MAX_DURATION_S)};
}

/* On the proc primitive: the command goes to the session's shell, no process of its own. */
static int session_run_proc(struct backend *be, const char *sandbox_id, json_t *args,
                            struct session_run *sr, const struct exec_observer *obs,
                            struct mcp_error *err)
{
    struct shell_session_request req;
    session_request(args, &req);
    if (shell_session_proc_run(be, sandbox_id, &req, obs, &sr->res, &sr->proc, err) < 0)
        return -1;
    sr->name = xstrdup(req.name);
    return 0;
}

/* Over any backend's exec: the helper scripts of backend/shell_session.h. */
static int session_run_helper(struct backend *be, const char *sandbox_id, json_t *args,
                              struct session_run *sr, const struct exec_observer *obs,
                              struct exec_handle **h, struct mcp_error *err)
{
    struct exec_request req;
    if (session_run_prepare(args, sr, &req, err) < 0)
        return -1;
    return be->ops->exec(be, sandbox_id, &req, obs, h, err);
}

int session_run_start(struct backend *be, const char *sandbox_id, json_t *args,
                      struct session_run *sr, const struct exec_observer *obs,
                      struct exec_handle **h, struct mcp_error *err)
{
    memset(sr, 0, sizeof(*sr));
    if (shell_session_proc_available(be))
        return session_run_proc(be, sandbox_id, args, sr, obs, err);
    struct shell_session_request sreq;
    session_request(args, &sreq);
    if (be->ops->session_run(be, sandbox_id, &sreq, obs, &sr->res, h, err) == 0) {
        sr->name = xstrdup(sreq.name);
        sr->remote = true;
        sr->args = json_incref(args);
        return 0;
    }
    if (err->code != MCP_ERR_UNSUPPORTED)
        return -1;
    if (be->ops->session_run != backend_def_session_run) /* the remote lacks them: say so */
        sr->fallback = xstrdup(err->msg);
    return session_run_helper(be, sandbox_id, args, sr, obs, h, err);
}

int session_run_fallback(struct backend *be, const char *sandbox_id, struct session_run *sr,
                         const struct mcp_error *why, const struct exec_observer *obs,
                         struct exec_handle **h, struct mcp_error *err)
{
    json_t *args = steal_ptr(&sr->args);
    free(sr->name);
    sr->name = NULL;
    sr->remote = false;
    sr->fallback = xstrdup(why->msg);
    int rc = session_run_helper(be, sandbox_id, args, sr, obs, h, err);
    json_decref(args);
    return rc;
}

void session_run_detach(struct session_run *sr, struct backend *be, struct exec_handle *h)
{
    if (sr->proc != NULL)
        shell_session_proc_detach(sr->proc);
    else
        be->ops->exec_detach(h);
    sr->proc = NULL;
}

void session_run_release(struct session_run *sr)
{
    shell_session_cmd_release(&sr->cmd);
    free(sr->tail);
    free(sr->name);
    free(sr->fallback);
    json_decref(sr->args);
    sr->tail = NULL;
    sr->name = NULL;
    sr->fallback = NULL;
    sr->args = NULL;
}

/* What the result says about the session, after the trailer. */
static const char *session_note(const struct shell_session_result *res)
{
    switch (res->kind) {
    case SHELL_SESSION_TIMEOUT:
        return "interrupted (SIGINT) after timeout_seconds; the session lives on with its state";
    case SHELL_SESSION_KILLED:
        return "it ignored the interrupt after timeout_seconds, so the session's shell was "
               "killed and its state is gone; the next command with this session starts a "
               "fresh shell";
    case SHELL_SESSION_EXITED:
        return "the session's shell exited (exit_code is its status), so its state is gone; "
               "the next command with this session starts a fresh shell";
    case SHELL_SESSION_NONE:
        return "the session's helper ended without a report (killed or cancelled); the "
               "command may still run in the session";
    default:
        return NULL;
    }
}

/* The remote keeps no sessions: the note says this one ran on the helper scripts. */
static void session_note_fallback(json_t *res, const char *why, const char *note)
{
    cleanup_free char *text =
        xasprintf("%s, so this session runs on mcpbox's own helper shell over /command%s%s", why,
                  note ? "; " : "", note ? note : "");
    json_object_set_new(res, "note", json_string(text));
}

int session_run_decorate(const struct session_run *sr, json_t *res, struct mcp_error *err)
{
    const struct shell_session_result *r = &sr->res;
    const char *failure = shell_session_failure(r->kind);
    if (failure != NULL) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0, "session \"%s\": %s", sr->name, failure);
        return -1;
    }
    const char *status = json_string_value(json_object_get(res, "status"));
    bool running = status != NULL && strcmp(status, "running") == 0;
    if (r->kind == SHELL_SESSION_TIMEOUT || r->kind == SHELL_SESSION_KILLED)
        json_object_set_new(res, "status", json_string("timed_out"));
    if (r->status >= 0)
        json_object_set_new(res, "exit_code", json_integer(r->status));
    json_t *info = json_pack("{s:s}", "name", sr->name);
    json_object_set_new(info, "cwd",
                        r->kind == SHELL_SESSION_DONE || r->kind == SHELL_SESSION_TIMEOUT
                            ? json_string(r->cwd)
                            : json_null());
    json_object_set_new(res, "session", info);
    const char *note = running ? NULL : r->note ? r->note : session_note(r);
    if (note == NULL && !running && r->followed)
        note = "the session was still running a command an earlier mcpbox process started (or "
               "a job printed meanwhile); this command ran after it ended, and that output is in "
               "the session shell's log (get_command on the part of this command_id before the "
               "'.')";
    if (sr->fallback != NULL)
        session_note_fallback(res, sr->fallback, note);
    else if (note != NULL)
        json_object_set_new(res, "note", json_string(note));
    return 0;
}
