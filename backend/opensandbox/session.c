/* MCP shell sessions on execd's bash sessions (issue 35; docs/opensandbox.md, "Sessions").
 *
 * A session name of a sandbox maps to one execd session, made by POST /session on its first
 * command and recorded (session_store.c), so a restarted mcpbox finds it. Each command is one
 * POST /session/{id}/run, streamed as /command is (exec.c). The command goes in as
 *
 *   { cd -- 'cwd' && export 'K=V' && { command
 *   } ; } </dev/null ; printf '\n%s done %s %s\n' NONCE "$?" "$PWD"
 *
 * so that the session's shell itself reports the exit status and its cwd afterwards in a last
 * stdout line (shell_session.h's trailer, fresh nonce per command), which is cut off and never
 * reaches the agent. Without that line (a timeout, `exit`, a syntax error) the status is
 * execd's and the cwd unknown. A remote without /session (404 or 501 on create) is remembered
 * per sandbox and refused with MCP_ERR_UNSUPPORTED: the tool layer runs the session on its
 * helper scripts over /command instead. */
#define LOG_MODULE "opensandbox"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/opensandbox/osb.h"
#include "backend/shell_session.h"
#include "backend/shell_session_proc.h"
#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define OSB_SESSION_ID_MAX 128

struct osb_sess_run {
    struct osb_backend *b;
    char *sid, *name;
    char *session_id; /* execd's, once known */
    char *orphan;     /* a session made at the same time as another's, to end */
    struct osb_cmd *cmd;
    struct shell_session_tail tail;
    struct shell_session_result *res;
};

/* ---- the command text ------------------------------------------------------------------------ */

static void append_quoted(struct buf *b, const char *s)
{
    buf_append_str(b, "'");
    for (const char *p = s; *p; p++)
        buf_append_str(b, *p == '\'' ? "'\\''" : (char[2]){*p, 0});
    buf_append_str(b, "'");
}

/* stdin: execd has none, so the bytes travel base64 in the command (as exec.c's /command). */
static void append_stdin(struct buf *b, const struct shell_session_request *req)
{
    if (req->stdin_data == NULL) {
        buf_append_str(b, " </dev/null");
        return;
    }
    cleanup_free char *b64 = xmalloc(base64_encoded_len(req->stdin_len) + 1);
    base64_encode(req->stdin_data, req->stdin_len, b64);
    buf_printf(b, " < <(printf '%%s' '%s' | base64 -d)", b64);
}

static char *session_text(const struct shell_session_request *req, const char *nonce)
{
    struct buf b;
    buf_init(&b, (size_t)-1);
    buf_append_str(&b, "{ ");
    if (req->cwd != NULL) {
        buf_append_str(&b, "cd -- ");
        append_quoted(&b, req->cwd);
        buf_append_str(&b, " && ");
    }
    const char *key;
    json_t *val;
    json_object_foreach(req->env, key, val)
    {
        cleanup_free char *pair = xasprintf("%s=%s", key, json_string_value(val));
        buf_append_str(&b, "export ");
        append_quoted(&b, pair);
        buf_append_str(&b, " && ");
    }
    buf_printf(&b, "{ %s\n} ; }", req->command);
    append_stdin(&b, req);
    buf_printf(&b, " ; printf '\\n%%s done %%s %%s\\n' %s \"$?\" \"$PWD\"", nonce);
    return buf_steal(&b, NULL);
}

static json_t *run_body(const struct shell_session_request *req, const char *nonce,
                        struct mcp_error *err)
{
    if (req->stdin_len > OSB_STDIN_MAX) {
        mcp_error_set(err, MCP_ERR_LIMIT, 0,
                      "stdin is limited to %u bytes on OpenSandbox sandboxes; write the data to "
                      "a file with write_file and redirect from it",
                      OSB_STDIN_MAX);
        return NULL;
    }
    if (strlen(req->command) > SHELL_SESSION_COMMAND_MAX) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "command: a session command may be at most 64 KiB; write a longer script "
                      "to a file with write_file and run it with `. ./script.sh` in the session");
        return NULL;
    }
    cleanup_free char *text = session_text(req, nonce);
    json_t *body = json_pack("{s:s}", "command", text);
    if (req->timeout_s > 0)
        json_object_set_new(body, "timeout", json_integer(req->timeout_s * 1000));
    return body;
}

/* ---- the run --------------------------------------------------------------------------------- */

void osb_sess_run_free(struct osb_sess_run *s)
{
    if (s == NULL)
        return;
    free(s->sid);
    free(s->name);
    free(s->session_id);
    free(s->orphan);
    free(s);
}

static void ignore_reply(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    (void)arg, (void)resp, (void)err;
}

/* Ends execd session id (fire and forget: a leftover shell is the remote's to reap). */
static void session_delete(struct osb_backend *b, const struct osb_endpoint *ep, const char *sid,
                           const char *id)
{
    cleanup_free char *eid = osb_escape(id);
    cleanup_free char *path = xasprintf("/session/%s", eid);
    struct osb_call_opts o = {.method = "DELETE",
                              .what = "ending the session",
                              .sandbox_id = sid,
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    struct mcp_error e;
    osb_execd_call(b, ep, path, &o, ignore_reply, NULL, &e);
}

static void run_start(void *arg, const struct osb_endpoint *ep, const struct mcp_error *err)
{
    struct osb_sess_run *s = arg;
    if (err != NULL) {
        osb_cmd_fail(s->cmd, err);
        return;
    }
    if (s->orphan != NULL)
        session_delete(s->b, ep, s->sid, s->orphan);
    cleanup_free char *eid = osb_escape(s->session_id);
    cleanup_free char *path = xasprintf("/session/%s/run", eid);
    osb_cmd_start_at(s->cmd, ep, path);
}

static bool session_id_ok(const char *id)
{
    size_t n = strlen(id);
    return n > 0 && n <= OSB_SESSION_ID_MAX &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                      "NOPQRSTUVWXYZ0123456789-_.") == n;
}

/* The remote answered POST /session: remember the id, then run. */
static void created(struct osb_sess_run *s, struct httpc_response *resp)
{
    struct mcp_error e;
    cleanup_json json_t *doc = NULL;
    json_t *id = osb_resp_member(resp, "creating the session", "session_id", JSON_STRING, &doc, &e);
    if (id != NULL && !session_id_ok(json_string_value(id)))
        id = NULL, mcp_error_set(&e, MCP_ERR_BACKEND, 0,
                                 "creating the session: execd gave a malformed session_id");
    if (id == NULL) {
        osb_cmd_fail(s->cmd, &e);
        return;
    }
    /* Two first commands at once: the first recorded wins, the other session is ended. */
    cleanup_free char *other = osb_sess_lookup(s->b, s->sid, s->name);
    s->session_id = xstrdup(other ? other : json_string_value(id));
    if (other == NULL)
        osb_sess_record(s->b, s->sid, s->name, s->session_id);
    else
        s->orphan = xstrdup(json_string_value(id));
    if (osb_endpoint_resolve(s->b, s->sid, run_start, s, &e) != 0)
        osb_cmd_fail(s->cmd, &e);
}

static void create_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct osb_sess_run *s = arg;
    struct mcp_error e;
    if (err != NULL && (resp->status == 404 || resp->status == 501)) {
        if (s->b->no_sessions == NULL)
            s->b->no_sessions = json_object();
        json_object_set_new(s->b->no_sessions, s->sid, json_true());
        mcp_error_set(&e, MCP_ERR_UNSUPPORTED, 0,
                      "the remote's execd has no bash sessions (POST /session answered %ld)",
                      resp->status);
        err = &e;
    }
    if (err != NULL)
        osb_cmd_fail(s->cmd, err);
    else
        created(s, resp);
}

static void create_start(void *arg, const struct osb_endpoint *ep, const struct mcp_error *err)
{
    struct osb_sess_run *s = arg;
    struct mcp_error e;
    if (err != NULL) {
        osb_cmd_fail(s->cmd, err);
        return;
    }
    cleanup_json json_t *body = json_object();
    struct osb_call_opts o = {.method = "POST",
                              .what = "creating the session",
                              .sandbox_id = s->sid,
                              .json = body,
                              .retry = HTTPC_RETRY_SAFE};
    if (osb_execd_call(s->b, ep, "/session", &o, create_done, s, &e) == NULL)
        osb_cmd_fail(s->cmd, &e);
}

/* Synchronous refusals: a bad name, a remote known to lack sessions, the cap. */
static int run_check(struct osb_backend *b, const char *sandbox_id,
                     const struct shell_session_request *req, char **known, struct mcp_error *err)
{
    *known = NULL;
    if (osb_remote_id(sandbox_id, err) == NULL || shell_session_check_name(req->name, err) < 0)
        return -1;
    if (json_is_true(json_object_get(b->no_sessions, sandbox_id)))
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the remote's execd has no bash sessions (POST /session answered "
                             "404 or 501)");
    *known = osb_sess_lookup(b, sandbox_id, req->name);
    if (*known == NULL && req->must_exist)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "session \"%s\": %s", req->name,
                             shell_session_failure(SHELL_SESSION_MISSING));
    if (*known == NULL && osb_sess_count(b, sandbox_id) >= SHELL_SESSION_MAX)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0, "session \"%s\": %s", req->name,
                             shell_session_failure(SHELL_SESSION_LIMIT));
    return 0;
}

int osb_session_run(struct backend *be, const char *sandbox_id,
                    const struct shell_session_request *req, const struct exec_observer *obs,
                    struct shell_session_result *res, struct exec_handle **out,
                    struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    char *known;
    if (run_check(b, sandbox_id, req, &known, err) < 0)
        return -1;
    struct osb_sess_run *s = xcalloc(1, sizeof(*s));
    char nonce[SHELL_SESSION_NONCE_HEX + 1];
    random_id(nonce, sizeof nonce, "", SHELL_SESSION_NONCE_HEX / 2);
    json_t *body = run_body(req, nonce, err);
    if (body == NULL) {
        free(known);
        free(s);
        return -1;
    }
    *s = (struct osb_sess_run){
        .b = b, .sid = xstrdup(sandbox_id), .name = xstrdup(req->name), .session_id = known};
    shell_session_tail_init(&s->tail, nonce);
    s->res = res;
    if (res != NULL)
        *res = (struct shell_session_result){.kind = SHELL_SESSION_NONE, .status = -1};
    s->cmd = osb_cmd_for_session(b, sandbox_id, body, req->timeout_s * 1000, obs, s);
    int rc = osb_endpoint_resolve(b, sandbox_id, known ? run_start : create_start, s, err);
    if (osb_cmd_started(s->cmd, rc, err) < 0)
        return -1;
    if (out != NULL)
        *out = (struct exec_handle *)s->cmd;
    return 0;
}

/* ---- exec.c's hooks -------------------------------------------------------------------------- */

static void emit_stdout(void *arg, const char *data, size_t len)
{
    struct osb_sess_run *s = arg;
    osb_cmd_emit(s->cmd, EXEC_STDOUT, data, len);
}

void osb_sess_run_stdout(struct osb_sess_run *s, const char *data, size_t n)
{
    shell_session_tail_feed(&s->tail, data, n, emit_stdout, s);
}

static const char *no_report_note(const char *status)
{
    if (strcmp(status, "timed_out") == 0)
        return "the remote stopped the command at timeout_seconds (execd's run timeout); the "
               "session is kept as the remote left it (mcpbox's own OpenSandbox API interrupts "
               "the command and keeps the shell), and its cwd is unknown";
    if (strcmp(status, "killed") == 0)
        return "ended by kill_command, which ends the whole session on OpenSandbox (execd has "
               "no interrupt for a session's command); the next command starts a fresh one";
    if (strcmp(status, "lost") == 0)
        return "the stream from the remote broke before the command's end; it may still run in "
               "the session, and its cwd is unknown";
    return "the session's shell did not report the command's end (it ran exit, or the command "
           "had a syntax error), so exit_code is execd's and the cwd unknown; if the shell "
           "exited, the next command says so and the one after starts a fresh session";
}

void osb_sess_run_end(struct osb_sess_run *s, struct osb_cmd *c, const char *status,
                      int64_t exit_code)
{
    (void)c;
    struct shell_session_result r;
    shell_session_tail_finish(&s->tail, emit_stdout, s, &r);
    if (r.kind == SHELL_SESSION_DONE && status != NULL && strcmp(status, "timed_out") == 0)
        r.note = "the remote interrupted the command at timeout_seconds (execd's run timeout); "
                 "the session lives on with its state";
    if (r.kind != SHELL_SESSION_DONE) {
        r = (struct shell_session_result){.kind = SHELL_SESSION_NONE, .status = (int)exit_code};
        r.note = no_report_note(status ? status : "exited");
    }
    if (s->res != NULL)
        *s->res = r;
}

/* execd's words for a session it does not have (mcpbox's API and execd's 404). */
static bool remote_lost_it(const char *why)
{
    return strstr(why, "no such session") || strstr(why, "not found") || strstr(why, "NOT_FOUND") ||
           strstr(why, "had exited");
}

const struct mcp_error *osb_sess_run_refused(struct osb_sess_run *s, const char *why,
                                             struct mcp_error *err)
{
    log_info("session %s of %s: execd refused a run: %.300s", s->name, s->sid, why);
    if (remote_lost_it(why)) {
        osb_sess_forget(s->b, s->sid, s->name);
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "session \"%s\": the remote no longer has this session (%.200s), so its "
                      "state is gone and this command did not run; run it again to start a "
                      "fresh session with this name",
                      s->name, why);
    } else {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "session \"%s\": the remote refused the command (%.300s); wait for the "
                      "session's running command, or use another session name",
                      s->name, why);
    }
    return err;
}

void osb_sess_run_detach(struct osb_sess_run *s)
{
    s->res = NULL;
}

char *osb_sess_run_command_id(struct osb_sess_run *s)
{
    char tag[9];
    random_id(tag, sizeof tag, "", 4);
    return xasprintf("%s#%s", s->session_id ? s->session_id : "", tag);
}

/* ---- kill_command ---------------------------------------------------------------------------- */

bool osb_session_command_id(const char *command_id)
{
    return strchr(command_id, '#') != NULL;
}

struct sess_kill {
    struct osb_backend *b;
    char *sid, *command_id, *session_id;
    backend_cb *cb;
    void *arg;
};

static void sess_kill_free(struct sess_kill *k)
{
    free(k->sid);
    free(k->command_id);
    free(k->session_id);
    free(k);
}

static void kill_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct sess_kill *k = arg;
    if (err != NULL && resp->status != 404) {
        k->cb(k->arg, NULL, err);
        sess_kill_free(k);
        return;
    }
    osb_sess_forget_id(k->b, k->sid, k->session_id);
    osb_cmd_killed(k->b, k->sid, k->command_id);
    json_t *res = json_pack("{s:s,s:i,s:s,s:s}", "command_id", k->command_id, "signal", 15,
                            "status", "killed", "note",
                            "execd has no interrupt for a command in a session, so its whole "
                            "session was ended (its state is gone); the next command with this "
                            "session name starts a fresh one");
    k->cb(k->arg, res, NULL);
    json_decref(res);
    sess_kill_free(k);
}

static void kill_with_endpoint(void *arg, const struct osb_endpoint *ep,
                               const struct mcp_error *err)
{
    struct sess_kill *k = arg;
    struct mcp_error e;
    if (err != NULL) {
        backend_defer(&k->b->base, k->cb, k->arg, NULL, err);
        sess_kill_free(k);
        return;
    }
    cleanup_free char *eid = osb_escape(k->session_id);
    cleanup_free char *path = xasprintf("/session/%s", eid);
    struct osb_call_opts o = {.method = "DELETE",
                              .what = "ending the session",
                              .sandbox_id = k->sid,
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_execd_call(k->b, ep, path, &o, kill_done, k, &e) == NULL) {
        backend_defer(&k->b->base, k->cb, k->arg, NULL, &e);
        sess_kill_free(k);
    }
}

int osb_session_command_kill(struct osb_backend *b, const char *sandbox_id, const char *command_id,
                             backend_cb *cb, void *arg, struct mcp_error *err)
{
    const char *hash = strchr(command_id, '#');
    struct sess_kill *k = xcalloc(1, sizeof(*k));
    *k = (struct sess_kill){b,
                            xstrdup(sandbox_id),
                            xstrdup(command_id),
                            xstrndup(command_id, (size_t)(hash - command_id)),
                            cb,
                            arg};
    if (!session_id_ok(k->session_id)) {
        sess_kill_free(k);
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "no command %s in sandbox %s; run_command returns the command_id "
                             "to use",
                             command_id, sandbox_id);
    }
    if (osb_endpoint_resolve(b, sandbox_id, kill_with_endpoint, k, err) != 0) {
        sess_kill_free(k);
        return -1;
    }
    return 0;
}
