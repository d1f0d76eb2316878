/* Commands through the agent: exec with streamed output, command_get by offset, command_kill.
 * OOM kills are told apart from other SIGKILLs by the sandbox memcg's oom_kill counter. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MODULE "local"
#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_agent.h"
#include "backend/local/proto.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "backend/local/local_secrets.h"
#include "lib/base/log.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define OOM_LOOKBACK_EVENTS 200

/* The end of a command's output kept for its "command_failed" event (diagnose_sandbox). */
#define EXEC_EVENT_TAIL 512

struct exec_handle {
    struct lsbx *sb;
    struct exec_observer obs; /* callbacks NULL once detached: the watch only records the end */
    char cmd_id[32];
    char *command;
    uint64_t oom_before;
    bool started, detached;
    char tail[EXEC_EVENT_TAIL]; /* ring of the last output bytes (stdout and stderr as they came) */
    size_t tail_len, tail_pos;
    struct agent_conn *own; /* command_attach: the connection of this watch alone; NULL for exec */
};

static void handle_free(struct exec_handle *h)
{
    lsbx_unref(h->sb);
    free(h->command);
    free(h);
}

/* Base64 from the agent to bytes; NULL on bad input. */
static char *unb64(json_t *j, size_t *len)
{
    const char *s = json_string_value(j);
    size_t n = s ? strlen(s) : 0;
    char *out = xmalloc(base64_decoded_max(n) + 1);
    if (base64_decode(s ? s : "", n, (unsigned char *)out, len) < 0) {
        free(out);
        return NULL;
    }
    out[*len] = '\0';
    return out;
}

static const char *final_status(struct exec_handle *h, json_t *ev, bool *oom)
{
    const char *st = json_string_value(json_object_get(ev, "status"));
    json_int_t sig = json_integer_value(json_object_get(ev, "signal"));
    json_t *code = json_object_get(ev, "exit_code");
    *oom = false;
    if (st && strcmp(st, "timed_out") == 0)
        return "timed_out";
    /* Killed itself, or its shell reports a child killed by SIGKILL (128 + 9). */
    bool sigkill = sig == SIGKILL || (json_is_integer(code) && json_integer_value(code) == 128 + SIGKILL);
    if (sigkill && st && strcmp(st, "killed") != 0 && cg_oom_kills(&h->sb->cg) > h->oom_before) {
        *oom = true;
        return "oom_killed";
    }
    if (st && (strcmp(st, "killed") == 0 || strcmp(st, "signaled") == 0))
        return "killed";
    return "exited";
}

/* A member the agent left out is reported as null. */
static json_t *or_null(json_t *v)
{
    return v ? v : json_null();
}

static json_t *done_json(struct exec_handle *h, json_t *ev, const char *status)
{
    json_t *r = json_pack("{s:s, s:s, s:O, s:O, s:O, s:O, s:O}", "command_id", h->cmd_id, "status",
                          status, "exit_code", or_null(json_object_get(ev, "exit_code")), "signal",
                          or_null(json_object_get(ev, "signal")), "duration_ms",
                          or_null(json_object_get(ev, "duration_ms")), "stdout_bytes",
                          or_null(json_object_get(ev, "stdout_bytes")), "stderr_bytes",
                          or_null(json_object_get(ev, "stderr_bytes")));
    return r;
}

static void tail_add(struct exec_handle *h, const char *data, size_t len)
{
    if (len > EXEC_EVENT_TAIL) {
        data += len - EXEC_EVENT_TAIL;
        len = EXEC_EVENT_TAIL;
    }
    for (size_t i = 0; i < len; i++) {
        h->tail[h->tail_pos] = data[i];
        h->tail_pos = (h->tail_pos + 1) % EXEC_EVENT_TAIL;
    }
    h->tail_len = h->tail_len + len > EXEC_EVENT_TAIL ? EXEC_EVENT_TAIL : h->tail_len + len;
}

static json_t *tail_json(const struct exec_handle *h)
{
    char out[EXEC_EVENT_TAIL];
    size_t start = (h->tail_pos + EXEC_EVENT_TAIL - h->tail_len) % EXEC_EVENT_TAIL;
    for (size_t i = 0; i < h->tail_len; i++)
        out[i] = h->tail[(start + i) % EXEC_EVENT_TAIL];
    return utf8_json_text(out, h->tail_len);
}

/* A command that did not exit 0 (non-zero exit, timeout, kill, signal, OOM kill) leaves a
 * "command_failed" event with its output tail, so that diagnose_sandbox can show how recent
 * commands failed even after the output is gone (the sandbox destroyed, this process ended). */
static void record_failure(struct exec_handle *h, json_t *res)
{
    const char *status = json_string_value(json_object_get(res, "status"));
    json_t *code = json_object_get(res, "exit_code");
    if (status && strcmp(status, "exited") == 0 && json_is_integer(code) &&
        json_integer_value(code) == 0)
        return;
    struct mcp_error err;
    json_t *data = json_pack("{s:s, s:s%, s:s, s:O, s:O, s:O, s:o}", "command_id", h->cmd_id,
                             "command", h->command, strlen(h->command) > 200 ? (size_t)200
                                                                             : strlen(h->command),
                             "status", status ? status : "exited", "exit_code",
                             code ? code : json_null(), "signal",
                             or_null(json_object_get(res, "signal")), "duration_ms",
                             or_null(json_object_get(res, "duration_ms")), "output_tail",
                             tail_json(h));
    local_event(h->sb->be->base.store, h->sb->id, "command_failed", data, &err);
}

static void on_event(void *arg, json_t *ev)
{
    struct exec_handle *h = arg;
    const char *kind = json_string_value(json_object_get(ev, "ev"));
    if (kind && strcmp(kind, "output") == 0) {
        size_t len;
        char *data = unb64(json_object_get(ev, "data"), &len);
        const char *stream = json_string_value(json_object_get(ev, "stream"));
        if (data)
            tail_add(h, data, len);
        if (data && h->obs.on_output)
            h->obs.on_output(h->obs.arg, stream && strcmp(stream, "stderr") == 0 ? EXEC_STDERR
                                                                                 : EXEC_STDOUT,
                             data, len);
        free(data);
        return;
    }
    json_t *res;
    if (kind && strcmp(kind, "exit") == 0) {
        bool oom;
        const char *status = final_status(h, ev, &oom);
        res = done_json(h, ev, status);
        if (oom) {
            struct mcp_error err;
            local_note_oom(h->sb);
            local_event(h->sb->be->base.store, h->sb->id, "oom_kill",
                            json_pack("{s:s, s:s}", "command_id", h->cmd_id, "command", h->command),
                            &err);
        }
        record_failure(h, res);
        agent_unwatch(h->sb->conn, h->cmd_id); /* after this, ev's watch entry is gone */
    } else { /* "lost": the connection (or the sandbox) went away; the watch is already freed */
        res = json_pack("{s:s, s:s, s:n, s:n, s:n, s:i, s:i}", "command_id", h->cmd_id, "status",
                        "lost", "exit_code", "signal", "duration_ms", "stdout_bytes", 0,
                        "stderr_bytes", 0);
    }
    struct local_backend *lb = h->sb->be;
    if (h->obs.on_done) /* NULL once detached */
        h->obs.on_done(h->obs.arg, res, NULL);
    json_decref(res);
    handle_free(h);
    local_pool_after_exec(lb); /* after the answer: the caller is busy with it now */
}

static void on_exec_reply(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct exec_handle *h = arg;
    if (err) {
        if (!h->detached)
            h->obs.on_done(h->obs.arg, NULL, err);
        handle_free(h);
        return;
    }
    const char *id = json_string_value(json_object_get(reply, "command_id"));
    snprintf(h->cmd_id, sizeof h->cmd_id, "%s", id ? id : "");
    if (h->detached || h->sb->conn == NULL) {
        handle_free(h);
        return;
    }
    h->started = true;
    agent_watch(h->sb->conn, h->cmd_id, on_event, h);
    if (h->obs.on_started)
        h->obs.on_started(h->obs.arg, h->cmd_id);
}

/* stdin bytes as "stdin" (base64), which every agent reads; an interactive command's as
 * "stdin_data" beside "stdin":"pipe" (and bytes whose base64 is "pipe" always so). */
static void set_stdin_args(json_t *msg, const struct exec_request *req)
{
    bool pty = req->pty_rows > 0 && req->pty_cols > 0;
    if (pty)
        json_object_set_new(
            msg, "pty",
            json_pack("{s:i, s:i}", "rows", (int)req->pty_rows, "cols", (int)req->pty_cols));
    if (req->stdin_open || pty)
        json_object_set_new(msg, "stdin", json_string("pipe"));
    if (req->stdin_data == NULL)
        return;
    char *b64 = xmalloc(base64_encoded_len(req->stdin_len) + 1);
    base64_encode(req->stdin_data, req->stdin_len, b64);
    bool as_data = req->stdin_open || pty || strcmp(b64, "pipe") == 0;
    json_object_set_new(msg, as_data ? "stdin_data" : "stdin", json_string(b64));
    free(b64);
}

static int check_request(const struct exec_request *req, struct mcp_error *err)
{
    if (req->command == NULL || req->command[0] == '\0')
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "command is empty");
    if (req->label && !agent_label_valid(req->label))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "a command's label is 1 to %d characters of A-Z a-z 0-9 _ . : -",
                             BACKEND_LABEL_MAX);
    return 0;
}

/* stdin, pty and label */
static void set_request_args(json_t *msg, const struct exec_request *req)
{
    set_stdin_args(msg, req);
    if (req->label)
        json_object_set_new(msg, "label", json_string(req->label));
}

int local_exec(struct backend *be, const char *id, const struct exec_request *req,
               const struct exec_observer *obs, struct exec_handle **out, struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct lsbx *sb = lsbx_for_op(lb, id, false, err);
    struct agent_conn *conn = sb ? lsbx_conn(sb, err) : NULL;
    if (conn == NULL)
        return -1;
    if (check_request(req, err) < 0)
        return -1;
    json_t *msg = json_pack("{s:s, s:s, s:b}", "op", "exec", "command", req->command, "watch", 1);
    if (req->cwd)
        json_object_set_new(msg, "cwd", json_string(req->cwd));
    json_t *env = local_secrets_exec_env(sb, req->env); /* placeholders bound after create */
    if (json_is_object(env))
        json_object_set(msg, "env", env);
    json_decref(env);
    if (req->timeout_ms > 0)
        json_object_set_new(msg, "timeout_ms", json_integer(req->timeout_ms));
    set_request_args(msg, req);
    struct exec_handle *h = xcalloc(1, sizeof *h);
    h->sb = sb;
    h->obs = *obs;
    h->command = xstrdup(req->command);
    lsbx_ref(sb);
    if (agent_call(conn, msg, on_exec_reply, h, err) < 0) {
        handle_free(h);
        return -1;
    }
    /* Read while the agent starts the command (a cgroup file's open is a path walk, 6 % of the
     * server's time per run_command): the command cannot even have exec'd yet, let alone been
     * OOM-killed, before this returns. */
    h->oom_before = cg_oom_kills(&sb->cg);
    uint64_t now = now_mono_ms();
    if (now - sb->touched_ms >= LOCAL_TOUCH_INTERVAL_MS) { /* a store write per exec is too dear */
        struct mcp_error e2;
        if (store_sandbox_touch(be->store, id, &e2) < 0)
            log_warn("sandbox %s: its last use was not recorded: %s", id, e2.msg);
        sb->touched_ms = now;
    }
    if (out)
        *out = h;
    return 0;
}

static void attach_detach(struct exec_handle *h);

void local_exec_detach(struct exec_handle *h)
{
    if (h == NULL)
        return;
    if (h->own) {
        attach_detach(h);
        return;
    }
    if (!h->started) {
        h->detached = true; /* freed when the agent's reply arrives */
        return;
    }
    if (h->sb->conn == NULL) {
        handle_free(h);
        return;
    }
    /* Keep watching without the caller, to record how the command ends (record_failure); its
     * exit, or the loss of the connection, frees the handle. */
    h->obs.on_output = NULL;
    h->obs.on_started = NULL;
    h->obs.on_done = NULL;
}

/* ---- command_get / command_kill ------------------------------------------------------------ */

struct call_ctx {
    struct lsbx *sb;
    backend_cb *cb;
    void *arg;
};

static struct call_ctx *ctx_new(struct lsbx *sb, backend_cb *cb, void *arg)
{
    struct call_ctx *c = xcalloc(1, sizeof *c);
    c->sb = sb, c->cb = cb, c->arg = arg;
    lsbx_ref(sb);
    return c;
}

static void ctx_free(struct call_ctx *c)
{
    lsbx_unref(c->sb);
    free(c);
}

/* Whether the exec path attributed an OOM kill to this command (an "oom_kill" event). */
static bool oom_recorded(struct lsbx *sb, const char *cmd_id)
{
    json_t *events = NULL;
    struct mcp_error err;
    bool found = false;
    if (cmd_id == NULL || store_event_list(sb->be->base.store, sb->id, OOM_LOOKBACK_EVENTS, &events,
                                           &err) < 0)
        return false;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        const char *kind = json_string_value(json_object_get(ev, "kind"));
        const char *id = json_string_value(json_object_get(json_object_get(ev, "data"), "command_id"));
        if (kind && id && strcmp(kind, "oom_kill") == 0 && strcmp(id, cmd_id) == 0)
            found = true;
    }
    json_decref(events);
    return found;
}

/* A page that more output follows ends before a character it would split (the next page,
 * from next_offset, starts with it); the agent pages by bytes. */
static void page_at_char(json_t *reply, const char *data, size_t *len)
{
    json_int_t next = json_integer_value(json_object_get(reply, "next_offset"));
    json_int_t total = json_integer_value(json_object_get(reply, "total_bytes"));
    size_t end = data ? utf8_page_end(data, *len) : *len;
    if (next >= total || end == *len)
        return;
    json_object_set_new(reply, "next_offset", json_integer(next - (json_int_t)(*len - end)));
    json_object_set_new(reply, "eof", json_false());
    *len = end;
}

static void on_status_reply(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct call_ctx *c = arg;
    if (err) {
        c->cb(c->arg, NULL, err);
        ctx_free(c);
        return;
    }
    size_t len = 0;
    char *data = unb64(json_object_get(reply, "output"), &len);
    page_at_char(reply, data, &len);
    const char *st = json_string_value(json_object_get(reply, "status"));
    const char *status = !st ? "exited"
                         : strcmp(st, "signaled") == 0 ? "killed" : st;
    bool sigkill = json_integer_value(json_object_get(reply, "signal")) == SIGKILL ||
                   json_integer_value(json_object_get(reply, "exit_code")) == 128 + SIGKILL;
    if (sigkill && strcmp(status, "running") != 0 &&
        oom_recorded(c->sb, json_string_value(json_object_get(reply, "command_id"))))
        status = "oom_killed";
    json_t *res = json_pack("{s:O, s:s, s:O, s:O, s:O, s:o, s:O, s:O, s:O, s:O}", "command_id",
                            json_object_get(reply, "command_id"), "status", status, "exit_code",
                            json_object_get(reply, "exit_code"), "signal",
                            json_object_get(reply, "signal"), "duration_ms",
                            json_object_get(reply, "duration_ms"), "output",
                            utf8_json_text(data ? data : "", data ? len : 0), "offset",
                            json_object_get(reply, "offset"), "next_offset",
                            json_object_get(reply, "next_offset"), "total_bytes",
                            json_object_get(reply, "total_bytes"), "eof",
                            json_object_get(reply, "eof"));
    if (json_is_string(json_object_get(reply, "label"))) /* exec_request.label */
        json_object_set(res, "label", json_object_get(reply, "label"));
    free(data);
    c->cb(c->arg, res, NULL);
    json_decref(res);
    ctx_free(c);
}

static void on_plain_reply(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct call_ctx *c = arg;
    if (reply) {
        json_object_del(reply, "id");
        json_object_del(reply, "ok");
    }
    c->cb(c->arg, reply, err);
    ctx_free(c);
}

int local_command_get(struct backend *be, const char *id, const char *cmd, uint64_t offset,
                      uint64_t limit, backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    struct agent_conn *conn = sb ? lsbx_conn(sb, err) : NULL;
    if (conn == NULL)
        return -1;
    json_t *msg = json_pack("{s:s, s:s, s:I, s:I}", "op", "cmd_status", "cmd", cmd, "offset",
                            (json_int_t)offset, "limit", (json_int_t)limit);
    struct call_ctx *c = ctx_new(sb, cb, arg);
    if (agent_call(conn, msg, on_status_reply, c, err) < 0) {
        ctx_free(c);
        return -1;
    }
    return 0;
}

int local_command_kill(struct backend *be, const char *id, const char *cmd, int sig,
                       backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    struct agent_conn *conn = sb ? lsbx_conn(sb, err) : NULL;
    if (conn == NULL)
        return -1;
    json_t *msg = json_pack("{s:s, s:s, s:i}", "op", "cmd_kill", "cmd", cmd, "signal",
                            sig > 0 ? sig : SIGKILL);
    struct call_ctx *c = ctx_new(sb, cb, arg);
    if (agent_call(conn, msg, on_plain_reply, c, err) < 0) {
        ctx_free(c);
        return -1;
    }
    return 0;
}

/* ---- interactive commands ------------------------------------------------------------------- */

static int call_plain(struct backend *be, const char *id, json_t *msg, backend_cb *cb, void *arg,
                      struct mcp_error *err)
{
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    struct agent_conn *conn = sb ? lsbx_conn(sb, err) : NULL;
    if (conn == NULL) {
        json_decref(msg);
        return -1;
    }
    struct call_ctx *c = ctx_new(sb, cb, arg);
    if (agent_call(conn, msg, on_plain_reply, c, err) < 0) {
        ctx_free(c);
        return -1;
    }
    return 0;
}

int local_command_input(struct backend *be, const char *id, const char *cmd, const void *data,
                        size_t len, bool eof, backend_cb *cb, void *arg, struct mcp_error *err)
{
    if (len > BACKEND_INPUT_MAX)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "one input carries at most %u MiB (this was %zu bytes): send it in "
                             "pieces",
                             BACKEND_INPUT_MAX >> 20, len);
    char *b64 = xmalloc(base64_encoded_len(len) + 1);
    base64_encode(data, len, b64);
    json_t *msg = json_pack("{s:s, s:s, s:s, s:b}", "op", "cmd_input", "cmd", cmd ? cmd : "",
                            "data", b64, "eof", eof);
    free(b64);
    return call_plain(be, id, msg, cb, arg, err);
}

int local_command_resize(struct backend *be, const char *id, const char *cmd, unsigned rows,
                         unsigned cols, backend_cb *cb, void *arg, struct mcp_error *err)
{
    json_t *msg = json_pack("{s:s, s:s, s:I, s:I}", "op", "cmd_resize", "cmd", cmd ? cmd : "",
                            "rows", (json_int_t)rows, "cols", (json_int_t)cols);
    return call_plain(be, id, msg, cb, arg, err);
}

/* ---- command_attach / command_find ------------------------------------------------------------
 * An attach watches on a connection of its own (cmd_watch): the agent tells its events apart by
 * connection, not by watcher, and closing it is what ends the watch there. */

/* Frees h and closes its connection; nothing of h is left on it (its watch and its call are
 * gone), so the close calls nothing back. */
static void attach_free(struct exec_handle *h)
{
    struct agent_conn *own = h->own;
    h->own = NULL;
    handle_free(h);
    agent_conn_close(own);
}

static void attach_done(struct exec_handle *h, json_t *res, const struct mcp_error *err)
{
    agent_unwatch(h->own, h->cmd_id);
    if (h->obs.on_done)
        h->obs.on_done(h->obs.arg, res, err);
    attach_free(h);
}

static json_t *attach_final(struct exec_handle *h, json_t *ev)
{
    bool oom;
    const char *status = final_status(h, ev, &oom);
    /* killed before this watch began: the starter's watch recorded the OOM kill, if any */
    if (!oom && strcmp(status, "killed") == 0 && oom_recorded(h->sb, h->cmd_id))
        status = "oom_killed";
    return done_json(h, ev, status);
}

static void on_attach_event(void *arg, json_t *ev)
{
    struct exec_handle *h = arg;
    const char *kind = json_string_value(json_object_get(ev, "ev"));
    if (kind && strcmp(kind, "output") == 0) {
        size_t len;
        char *data = unb64(json_object_get(ev, "data"), &len);
        const char *stream = json_string_value(json_object_get(ev, "stream"));
        if (data && h->obs.on_output)
            h->obs.on_output(h->obs.arg,
                             stream && strcmp(stream, "stderr") == 0 ? EXEC_STDERR : EXEC_STDOUT,
                             data, len);
        free(data);
        return;
    }
    json_t *res = kind && strcmp(kind, "exit") == 0
                      ? attach_final(h, ev)
                      : json_pack("{s:s, s:s, s:n, s:n, s:n, s:i, s:i}", "command_id", h->cmd_id,
                                  "status", "lost", "exit_code", "signal", "duration_ms",
                                  "stdout_bytes", 0, "stderr_bytes", 0);
    attach_done(h, res, NULL);
    json_decref(res);
}

static void on_attach_reply(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct exec_handle *h = arg;
    if (err || h->detached) {
        if (h->detached)
            h->obs.on_done = NULL;
        attach_done(h, NULL, err);
        return;
    }
    h->started = true;
    if (h->obs.on_started)
        h->obs.on_started(h->obs.arg, h->cmd_id);
}

/* After this no callback of the caller's is called: closing the connection ends the watch in
 * the agent and here (its "lost" event, or its failed call, frees h). */
static void attach_detach(struct exec_handle *h)
{
    h->obs = (struct exec_observer){.arg = h->obs.arg};
    h->detached = true;
    agent_conn_close(h->own);
}

int local_command_attach(struct backend *be, const char *id, const char *cmd, uint64_t offset,
                         const struct exec_observer *obs, struct exec_handle **out,
                         struct mcp_error *err)
{
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    if (sb == NULL)
        return -1;
    if (cmd == NULL || cmd[0] == '\0' || strlen(cmd) >= sizeof((struct exec_handle *)0)->cmd_id)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no command '%s' in sandbox %s",
                             cmd ? cmd : "", id);
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/agent.sock", sb->dir);
    struct agent_conn *own = agent_conn_open(sb->be->base.loop, path, err);
    if (own == NULL)
        return -1;
    struct exec_handle *h = xcalloc(1, sizeof *h);
    h->sb = sb, h->obs = *obs, h->own = own;
    h->command = xstrdup("");
    snprintf(h->cmd_id, sizeof h->cmd_id, "%s", cmd);
    h->oom_before = cg_oom_kills(&sb->cg);
    lsbx_ref(sb);
    agent_watch(own, h->cmd_id, on_attach_event, h);
    json_t *msg = json_pack("{s:s, s:s, s:I}", "op", "cmd_watch", "cmd", cmd, "offset",
                            (json_int_t)(offset > INT64_MAX ? INT64_MAX : offset));
    if (agent_call(own, msg, on_attach_reply, h, err) < 0) {
        agent_unwatch(own, h->cmd_id);
        attach_free(h);
        return -1;
    }
    if (out)
        *out = h;
    return 0;
}

int local_command_find(struct backend *be, const char *id, const char *label, backend_cb *cb,
                       void *arg, struct mcp_error *err)
{
    if (!agent_label_valid(label))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "a command's label is 1 to %d characters of A-Z a-z 0-9 _ . : -",
                             BACKEND_LABEL_MAX);
    json_t *msg = json_pack("{s:s, s:s}", "op", "cmd_find", "label", label);
    return call_plain(be, id, msg, cb, arg, err);
}

/* ---- files --------------------------------------------------------------------------------- */

struct read_ctx {
    struct lsbx *sb;
    backend_read_cb *cb;
    void *arg;
};

static void on_read_reply(void *arg, json_t *reply, const struct mcp_error *err)
{
    struct read_ctx *c = arg;
    if (err) {
        c->cb(c->arg, NULL, err);
    } else {
        size_t len = 0;
        char *data = unb64(json_object_get(reply, "data"), &len);
        struct file_read_result r = {
            .data = data ? data : "", .len = data ? len : 0,
            .size = (uint64_t)json_integer_value(json_object_get(reply, "size")),
            .offset = (uint64_t)json_integer_value(json_object_get(reply, "offset")),
            .mode = (uint32_t)json_integer_value(json_object_get(reply, "mode")),
            .truncated = json_is_true(json_object_get(reply, "truncated"))};
        c->cb(c->arg, &r, NULL);
        free(data);
    }
    lsbx_unref(c->sb);
    free(c);
}

/* msg.path, or msg.path_base64 for a name that is not UTF-8 (the agent takes either). */
static void set_path_arg(json_t *msg, const char *path)
{
    size_t n = strlen(path);
    if (utf8_is_text(path, n)) {
        json_object_set_new(msg, "path", json_string(path));
        return;
    }
    char *b64 = xmalloc(base64_encoded_len(n) + 1);
    base64_encode(path, n, b64);
    json_object_set_new(msg, "path_base64", json_string(b64));
    free(b64);
}

int local_file_read(struct backend *be, const char *id, const char *path, uint64_t offset,
                    uint64_t length, backend_read_cb *cb, void *arg, struct mcp_error *err)
{
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    struct agent_conn *conn = sb ? lsbx_conn(sb, err) : NULL;
    if (conn == NULL)
        return -1;
    json_t *msg = json_pack("{s:s, s:I, s:I}", "op", "read", "offset", (json_int_t)offset,
                            "length", (json_int_t)length);
    set_path_arg(msg, path);
    struct read_ctx *c = xcalloc(1, sizeof *c);
    c->sb = sb, c->cb = cb, c->arg = arg;
    lsbx_ref(sb);
    if (agent_call(conn, msg, on_read_reply, c, err) < 0) {
        lsbx_unref(sb);
        free(c);
        return -1;
    }
    return 0;
}

int local_file_write(struct backend *be, const char *id, const char *path, const void *data,
                     size_t len, uint32_t mode, bool append, backend_cb *cb, void *arg,
                     struct mcp_error *err)
{
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    struct agent_conn *conn = sb ? lsbx_conn(sb, err) : NULL;
    if (conn == NULL)
        return -1;
    char *b64 = xmalloc(base64_encoded_len(len) + 1);
    base64_encode(data, len, b64);
    json_t *msg = json_pack("{s:s, s:s, s:i, s:b}", "op", "write", "data", b64, "mode", (int)mode,
                            "append", append);
    set_path_arg(msg, path);
    free(b64);
    struct call_ctx *c = ctx_new(sb, cb, arg);
    if (agent_call(conn, msg, on_plain_reply, c, err) < 0) {
        ctx_free(c);
        return -1;
    }
    return 0;
}

int local_file_op(struct backend *be, const char *id, const char *op, json_t *args,
                  backend_cb *cb, void *arg, struct mcp_error *err)
{
    static const char *const ops[] = {"list", "search", "replace", "move", "delete", "mkdir",
                                      "stat"};
    bool known = false;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        known |= op && strcmp(op, ops[i]) == 0;
    if (!known)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "unknown file operation '%s'", op ? op : "");
    struct lsbx *sb = lsbx_for_op((struct local_backend *)be, id, false, err);
    struct agent_conn *conn = sb ? lsbx_conn(sb, err) : NULL;
    if (conn == NULL)
        return -1;
    json_t *msg = json_is_object(args) ? json_deep_copy(args) : json_object();
    json_object_set_new(msg, "op", json_string(op));
    struct call_ctx *c = ctx_new(sb, cb, arg);
    if (agent_call(conn, msg, on_plain_reply, c, err) < 0) {
        ctx_free(c);
        return -1;
    }
    return 0;
}
