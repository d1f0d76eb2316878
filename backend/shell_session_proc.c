/* Shell sessions on the proc primitive: the sessions of this process, their shells and the one
 * command each runs at a time (shell_session_proc.h). */
#define LOG_MODULE "session"
#include "backend/shell_session_proc-internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

/* Every session of this process, of every backend (one loop, no locks). */
static struct sess *sessions;

bool shell_session_proc_available(const struct backend *be)
{
    return be->ops->command_input != backend_def_command_input;
}

/* ---- sessions ---------------------------------------------------------------------------- */

static int sess_refs(struct sess *s, int delta);

static void sess_closed(uv_handle_t *h)
{
    struct sess *s = h->data;
    free(s->sandbox_id);
    free(s);
}

/* refs: one for the list, one per agent call in flight. */
static int sess_refs(struct sess *s, int delta)
{
    s->refs += delta;
    if (s->refs == 0)
        uv_close((uv_handle_t *)&s->timer, sess_closed);
    return s->refs;
}

static void sess_unlink(struct sess *s)
{
    for (struct sess **p = &sessions; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            sess_refs(s, -1);
            return;
        }
}

/* Forgets the oldest sessions without a shell past SESS_KEEP_MAX (names used once, sandboxes
 * gone): what keeps the list bounded in a long-lived server. */
static void sess_trim(void)
{
    size_t n = 0;
    for (struct sess *s = sessions, *next; s; s = next) {
        next = s->next;
        if (++n > SESS_KEEP_MAX && s->state == SESS_NONE && s->cur == NULL && s->refs == 1)
            sess_unlink(s);
    }
}

static struct sess *sess_get(struct backend *be, const char *sandbox_id, const char *name)
{
    for (struct sess *s = sessions; s; s = s->next)
        if (s->be == be && !strcmp(s->sandbox_id, sandbox_id) && !strcmp(s->name, name))
            return s;
    struct sess *s = xcalloc(1, sizeof(*s));
    s->be = be;
    s->sandbox_id = xstrdup(sandbox_id);
    snprintf(s->name, sizeof s->name, "%s", name);
    uv_timer_init(be->loop, &s->timer);
    s->timer.data = s;
    s->refs = 1;
    s->next = sessions;
    sessions = s;
    sess_trim();
    return s;
}

struct sess_record *sess_find_record(struct backend *be, const char *sandbox_id,
                                     const char *command_id, struct sess **owner)
{
    for (struct sess *s = sessions; s; s = s->next) {
        if (s->be != be || strcmp(s->sandbox_id, sandbox_id) != 0)
            continue;
        for (size_t i = 0; i < SESS_RECORDS; i++)
            if (s->recs[i].id[0] != '\0' && !strcmp(s->recs[i].id, command_id)) {
                *owner = s;
                return &s->recs[i];
            }
    }
    return NULL;
}

static size_t live_in(struct backend *be, const char *sandbox_id)
{
    size_t n = 0;
    for (struct sess *s = sessions; s; s = s->next)
        n += s->be == be && !strcmp(s->sandbox_id, sandbox_id) && s->state != SESS_NONE &&
             s->state != SESS_DEAD;
    return n;
}

static void signal_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct sess *s = arg;
    if (err != NULL)
        log_info("session %s: signalling its shell: %s", s->name, err->msg);
    sess_refs(s, -1);
}

void sess_signal(struct sess *s, int sig)
{
    struct mcp_error err;
    if (s->shell_id[0] == '\0')
        return;
    sess_refs(s, 1);
    if (s->be->ops->command_kill(s->be, s->sandbox_id, s->shell_id, sig, signal_done, s, &err) < 0)
        signal_done(s, NULL, &err);
}

/* ---- one command ----------------------------------------------------------------------------- */

static const char *final_status(const struct sess_cmd *c, enum shell_session_kind kind)
{
    if (kind == SHELL_SESSION_NONE)
        return "lost";
    return c->timed_out ? "timed_out" : c->killing ? "killed" : "exited";
}

static void record_end(struct sess_cmd *c, const char *status, int code)
{
    struct sess_record *r = c->rec;
    if (r == NULL)
        return;
    r->end = r->start + c->bytes[0] + c->bytes[1];
    r->duration_ms = now_mono_ms() - r->started_ms;
    r->status = status;
    r->exit_code = code;
    r->done = true;
}

/* The end of c: fills its result, tells its observer, frees it. */
static void cmd_finish(struct sess_cmd *c, enum shell_session_kind kind, int code, const char *cwd)
{
    const char *status = final_status(c, kind);
    record_end(c, status, code);
    if (c->s != NULL && c->s->cur == c) {
        c->s->cur = NULL;
        uv_timer_stop(&c->s->timer);
    }
    if (c->res != NULL) {
        c->res->kind = kind;
        c->res->status = code;
        snprintf(c->res->cwd, sizeof c->res->cwd, "%s", cwd ? cwd : "");
        c->res->followed = c->followed;
    }
    json_t *fin =
        json_pack("{s:s, s:s, s:o, s:n, s:I, s:I, s:I}", "command_id", c->rec ? c->rec->id : "",
                  "status", status, "exit_code", code >= 0 ? json_integer(code) : json_null(),
                  "signal", "duration_ms", (json_int_t)(now_mono_ms() - c->started_ms),
                  "stdout_bytes", (json_int_t)c->bytes[0], "stderr_bytes", (json_int_t)c->bytes[1]);
    if (c->obs.on_done != NULL)
        c->obs.on_done(c->obs.arg, fin, NULL);
    json_decref(fin);
    free(c->text);
    free(c);
}

/* A command that did not run (busy, gone, too many): told from the loop, not from the call. */
static void not_run_fire(void *arg, json_t *result, const struct mcp_error *err)
{
    struct sess_cmd *c = arg;
    cmd_finish(c, c->not_run, -1, NULL);
}

static void not_run(struct sess_cmd *c, struct backend *be, enum shell_session_kind kind)
{
    c->not_run = kind;
    json_t *empty = json_object();
    backend_defer(be, not_run_fire, c, empty, NULL);
    json_decref(empty);
}

static void timer_fired(uv_timer_t *t)
{
    struct sess *s = t->data;
    struct sess_cmd *c = s->cur;
    if (c == NULL)
        return;
    if (c->kill_armed) { /* the interrupt was ignored: the shell goes, with its state */
        c->killing = true;
        sess_signal(s, SIGKILL);
        return;
    }
    c->timed_out = true;
    c->kill_armed = true;
    sess_signal(s, SIGINT);
    uv_timer_start(&s->timer, timer_fired, SESS_KILL_GRACE_MS, 0);
}

void sess_interrupt(struct sess *s, bool kill)
{
    struct sess_cmd *c = s->cur;
    if (c == NULL)
        return;
    sess_signal(s, SIGINT);
    if (kill && !c->kill_armed) {
        c->kill_armed = true;
        uv_timer_start(&s->timer, timer_fired, SESS_KILL_GRACE_MS, 0);
    }
}

/* c is now the session's command: it has a record and an id. */
static void cmd_begin(struct sess *s, struct sess_cmd *c)
{
    struct sess_record *r = &s->recs[s->seq % SESS_RECORDS];
    s->seq++;
    memset(r, 0, sizeof(*r));
    /* the start in the shell's log: unique in the shell, whichever process sent the command */
    snprintf(r->id, sizeof r->id, "%s.%llu", s->shell_id, (unsigned long long)s->log_pos);
    r->start = s->log_pos;
    r->started_ms = now_mono_ms();
    r->status = "running";
    r->exit_code = -1;
    c->rec = r;
    s->state = SESS_BUSY;
    if (c->timeout_ms > 0)
        uv_timer_start(&s->timer, timer_fired, (uint64_t)c->timeout_ms, 0);
}

/* ---- the shell's output and end ------------------------------------------------------------ */

static void emit_out(void *arg, const char *data, size_t len)
{
    struct sess_cmd *c = arg;
    c->bytes[0] += len;
    if (len > 0 && c->obs.on_output != NULL)
        c->obs.on_output(c->obs.arg, EXEC_STDOUT, data, len);
}

static void emit_err(void *arg, const char *data, size_t len)
{
    struct sess_cmd *c = arg;
    c->bytes[1] += len;
    if (len > 0 && c->obs.on_output != NULL)
        c->obs.on_output(c->obs.arg, EXEC_STDERR, data, len);
}

static enum shell_session_kind word_kind(const char *word)
{
    if (!strcmp(word, "gone"))
        return SHELL_SESSION_GONE;
    if (!strcmp(word, "limit"))
        return SHELL_SESSION_LIMIT;
    if (!strcmp(word, "nobash"))
        return SHELL_SESSION_NOBASH;
    return SHELL_SESSION_ERROR;
}

/* Both markers are in: the command ended (or a new shell refused to start and is exiting). */
static void cmd_marked(struct sess *s, struct sess_cmd *c)
{
    struct shell_mark_result mr;
    shell_mark_result(&c->mark[0], &mr);
    if (mr.word[0] != '\0') { /* the shell exits by itself; this session starts afresh */
        if (s->h != NULL) {
            s->be->ops->exec_detach(s->h);
            s->h = NULL;
            sess_refs(s, -1); /* the watch's: no sh_done now */
        }
        s->shell_id[0] = '\0';
        s->state = SESS_NONE;
        cmd_finish(c, word_kind(mr.word), -1, NULL);
        return;
    }
    s->state = SESS_IDLE;
    cmd_finish(c, c->timed_out ? SHELL_SESSION_TIMEOUT : SHELL_SESSION_DONE, mr.status, mr.cwd);
}

/* Before a command's start marker (after an attach): what an earlier command printed. */
static void discard(void *arg, const char *data, size_t len)
{
    struct sess_cmd *c = arg;
    c->followed = c->followed || len > 0;
}

/* Feeds one chunk of stream i to c: the start marker first where one is awaited, then the
 * command's output up to its end marker. */
static void feed(struct sess_cmd *c, int i, const char *data, size_t len)
{
    while (len > 0 && !c->mark[i].done) {
        bool before = c->await_start && !c->started[i];
        size_t used = shell_mark_feed(&c->mark[i], data, len,
                                      before ? discard
                                      : i    ? emit_err
                                             : emit_out,
                                      c);
        if (before && c->mark[i].done) { /* the start marker: the end marker comes next */
            c->started[i] = true;
            shell_mark_init(&c->mark[i], c->nonce);
        }
        data += used;
        len -= used;
    }
}

static void sh_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct sess *s = arg;
    s->log_pos += len;
    struct sess_cmd *c = s->cur;
    if (c == NULL || s->state != SESS_BUSY)
        return; /* between commands: a background job's output, in the log only */
    feed(c, stream == EXEC_STDERR, data, len);
    if (c->mark[0].done && c->mark[1].done)
        cmd_marked(s, c);
}

static int send_command(struct sess *s, struct sess_cmd *c, struct mcp_error *err);
static void start_or_fail(struct sess *s, struct sess_cmd *c);

/* Attached to the shell an earlier process started: the command goes to it now, behind a start
 * marker (that process may have left a command running, whose end comes first). */
static void attached(struct sess *s)
{
    struct sess_cmd *c = s->cur;
    struct mcp_error err;
    s->state = SESS_IDLE;
    s->cur = NULL;
    if (c == NULL)
        return;
    size_t len;
    char *text = sess_with_start_marker(c->nonce, c->text, c->text_len, &len);
    free(c->text);
    c->text = text;
    c->text_len = len;
    c->await_start = true;
    send_command(s, c, &err);
}

static void sh_started(void *arg, const char *command_id)
{
    struct sess *s = arg;
    snprintf(s->shell_id, sizeof s->shell_id, "%s", command_id);
    if (s->state == SESS_FINDING) {
        attached(s);
    } else if (s->cur != NULL) {
        cmd_begin(s, s->cur);
        if (s->cur->obs.on_started != NULL)
            s->cur->obs.on_started(s->cur->obs.arg, s->cur->rec->id);
    } else
        s->state = SESS_IDLE;
}

/* A shell killed by a signal that is not ours before the command printed anything: the kill
 * raced the command's write (a shell killed between commands), so it is told as gone, the
 * command not run. A command that kills its own shell silently is told so too. */
static bool killed_before(const struct sess_cmd *c, json_t *result)
{
    return json_is_integer(json_object_get(result, "signal")) && c->rec != NULL &&
           c->bytes[0] + c->bytes[1] == 0 && !c->mark[0].inside && !c->mark[1].inside &&
           c->mark[0].held == 0 && c->mark[1].held == 0;
}

/* The shell ended: during a command that says how; between commands the next one is told. */
static void sh_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct sess *s = arg;
    const char *status = result ? json_string_value(json_object_get(result, "status")) : NULL;
    json_t *code = result ? json_object_get(result, "exit_code") : NULL;
    bool lost = err != NULL || status == NULL || !strcmp(status, "lost");
    struct sess_cmd *c = s->cur;
    enum sess_state was = s->state;
    s->h = NULL;
    if (was == SESS_FINDING && !s->released) { /* the shell found ended before the attach */
        start_or_fail(s, c);
        sess_refs(s, -1);
        return;
    }
    s->shell_id[0] = '\0';
    s->state = was == SESS_IDLE && !lost ? SESS_DEAD : SESS_NONE;
    if (c != NULL) {
        s->reported = true;
        enum shell_session_kind kind = lost                         ? SHELL_SESSION_NONE
                                       : c->killing || c->timed_out ? SHELL_SESSION_KILLED
                                       : killed_before(c, result)   ? SHELL_SESSION_GONE
                                                                    : SHELL_SESSION_EXITED;
        if (err != NULL && c->obs.on_done != NULL) { /* the shell could not start */
            c->obs.on_done(c->obs.arg, NULL, err);
            c->obs.on_done = NULL;
            c->res = NULL;
        }
        cmd_finish(c, kind, json_is_integer(code) ? (int)json_integer_value(code) : -1, NULL);
    }
    if (lost)
        sess_unlink(s); /* the sandbox (or its agent) went away */
    sess_refs(s, -1);   /* the watch's */
}

/* ---- starting a command ---------------------------------------------------------------------- */

static int start_shell(struct sess *s, struct sess_cmd *c, struct mcp_error *err)
{
    size_t len;
    char *text = sess_start_text(s->name, c->nonce, s->reported, c->text, c->text_len, &len);
    char *line = sess_shell_line(c->nonce);
    char label[BACKEND_LABEL_MAX + 1];
    sess_label(s->name, label, sizeof label);
    struct exec_request req = {
        .command = line, .stdin_data = text, .stdin_len = len, .stdin_open = true, .label = label};
    struct exec_observer obs = {sh_started, sh_output, sh_done, s};
    s->state = SESS_STARTING;
    s->looked = true; /* this process knows the session's shell from now on */
    s->log_pos = 0;
    s->cur = c;
    sess_refs(s, 1);
    int rc = s->be->ops->exec(s->be, s->sandbox_id, &req, &obs, &s->h, err);
    free(text);
    free(line);
    if (rc < 0) {
        s->state = SESS_NONE;
        s->cur = NULL;
        sess_refs(s, -1);
        return -1;
    }
    s->reported = false;
    return 0;
}

/* A command that could not be started: told at once (we are in a callback already). */
static void fail_cmd(struct sess *s, struct sess_cmd *c, const struct mcp_error *err)
{
    s->cur = NULL;
    s->state = SESS_NONE;
    if (c->obs.on_done != NULL)
        c->obs.on_done(c->obs.arg, NULL, err);
    free(c->text);
    free(c);
}

static void missing(struct sess *s, struct sess_cmd *c)
{
    s->state = SESS_NONE;
    s->cur = NULL;
    cmd_finish(c, SHELL_SESSION_MISSING, -1, NULL);
}

static void start_or_fail(struct sess *s, struct sess_cmd *c)
{
    struct mcp_error err;
    if (start_shell(s, c, &err) < 0)
        fail_cmd(s, c, &err);
}

static void attach_shell(struct sess *s, struct sess_cmd *c, const char *shell_id, uint64_t at)
{
    struct exec_observer obs = {sh_started, sh_output, sh_done, s};
    struct mcp_error err;
    s->log_pos = at; /* from the end of its log: what came before is earlier commands' */
    sess_refs(s, 1);
    if (s->be->ops->command_attach(s->be, s->sandbox_id, shell_id, at, &obs, &s->h, &err) < 0) {
        sess_refs(s, -1);
        log_info("session %s: attaching to its shell %s: %s", s->name, shell_id, err.msg);
        start_or_fail(s, c);
    }
}

static void found(void *arg, json_t *result, const struct mcp_error *err)
{
    struct sess *s = arg;
    struct sess_cmd *c = s->cur;
    const char *id = result ? json_string_value(json_object_get(result, "command_id")) : NULL;
    json_int_t at = result ? json_integer_value(json_object_get(result, "total_bytes")) : 0;
    if (s->released || c == NULL || s->state != SESS_FINDING)
        ; /* the backend is stopping: the command was told */
    else if (id != NULL)
        attach_shell(s, c, id, at > 0 ? (uint64_t)at : 0);
    else if (c->must_exist)
        missing(s, c);
    else
        start_or_fail(s, c); /* none runs: a new shell (which tells a dead one's end) */
    sess_refs(s, -1);
}

/* A session this process has not seen: its shell may be one an earlier process started. */
static int find_shell(struct sess *s, struct sess_cmd *c, struct mcp_error *err)
{
    char label[BACKEND_LABEL_MAX + 1];
    sess_label(s->name, label, sizeof label);
    s->looked = true;
    s->state = SESS_FINDING;
    s->cur = c;
    sess_refs(s, 1);
    if (s->be->ops->command_find(s->be, s->sandbox_id, label, found, s, err) < 0) {
        sess_refs(s, -1);
        s->state = SESS_NONE;
        s->cur = NULL;
        return start_shell(s, c, err);
    }
    return 0;
}

struct input_call {
    struct sess *s;
    struct sess_cmd *c; /* the command it carried, if still s->cur */
    unsigned seq;
};

static void input_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct input_call *ic = arg;
    struct sess *s = ic->s;
    struct sess_cmd *c = s->cur == ic->c && s->seq == ic->seq ? ic->c : NULL;
    if (c != NULL && c->obs.on_started != NULL)
        c->obs.on_started(c->obs.arg, c->rec->id);
    if (err != NULL && c != NULL && s->cur == c) {
        log_info("session %s: writing a command to its shell: %s", s->name, err->msg);
        c->killing = true; /* the shell is going: the command ends with it */
        sess_signal(s, SIGKILL);
    }
    sess_refs(s, -1);
    free(ic);
}

static int send_command(struct sess *s, struct sess_cmd *c, struct mcp_error *err)
{
    s->cur = c;
    cmd_begin(s, c);
    struct input_call *ic = xcalloc(1, sizeof(*ic));
    ic->s = s;
    ic->c = c;
    ic->seq = s->seq;
    sess_refs(s, 1);
    if (s->be->ops->command_input(s->be, s->sandbox_id, s->shell_id, c->text, c->text_len, false,
                                  input_done, ic, err) < 0) {
        struct mcp_error copy = *err;
        backend_defer(s->be, input_done, ic, NULL, &copy); /* ends through the shell's kill */
    }
    return 0;
}

static struct sess_cmd *cmd_new(const struct shell_session_request *req,
                                const struct exec_observer *obs, struct shell_session_result *res,
                                struct mcp_error *err)
{
    struct sess_cmd *c = xcalloc(1, sizeof(*c));
    unsigned char raw[SHELL_MARK_NONCE_HEX / 2];
    random_bytes(raw, sizeof raw);
    hex_encode(raw, sizeof raw, c->nonce);
    c->text = sess_command_text(req, c->nonce, &c->text_len, err);
    if (c->text == NULL) {
        free(c);
        return NULL;
    }
    c->obs = *obs;
    c->res = res;
    c->started_ms = now_mono_ms();
    c->must_exist = req->must_exist;
    c->timeout_ms = req->timeout_s > 0 ? req->timeout_s * 1000 : 0;
    shell_mark_init(&c->mark[0], c->nonce);
    shell_mark_init(&c->mark[1], c->nonce);
    if (res != NULL)
        memset(res, 0, sizeof(*res));
    return c;
}

int shell_session_proc_run(struct backend *be, const char *sandbox_id,
                           const struct shell_session_request *req, const struct exec_observer *obs,
                           struct shell_session_result *res, struct shell_session_handle **out,
                           struct mcp_error *err)
{
    if (shell_session_check_name(req->name, err) < 0)
        return -1;
    struct sess_cmd *c = cmd_new(req, obs, res, err);
    if (c == NULL)
        return -1;
    struct sess *s = sess_get(be, sandbox_id, req->name);
    bool can_find = be->ops->command_find != backend_def_command_find;
    if (out != NULL)
        *out = (struct shell_session_handle *)c;
    if (s->state == SESS_STARTING || s->state == SESS_BUSY || s->state == SESS_FINDING) {
        not_run(c, be, SHELL_SESSION_BUSY);
    } else if (s->state == SESS_DEAD) {
        s->state = SESS_NONE;
        s->reported = true;
        not_run(c, be, SHELL_SESSION_GONE);
    } else if (s->state == SESS_NONE && req->must_exist && (s->looked || !can_find)) {
        not_run(c, be, SHELL_SESSION_MISSING);
    } else if (s->state == SESS_NONE && live_in(be, sandbox_id) >= SHELL_SESSION_MAX) {
        not_run(c, be, SHELL_SESSION_LIMIT);
    } else if (s->state == SESS_IDLE) {
        c->s = s;
        return send_command(s, c, err);
    } else {
        c->s = s;
        if ((can_find && !s->looked ? find_shell(s, c, err) : start_shell(s, c, err)) < 0) {
            free(c->text);
            free(c);
            return -1;
        }
    }
    return 0;
}

void shell_session_proc_detach(struct shell_session_handle *h)
{
    struct sess_cmd *c = (struct sess_cmd *)h;
    if (c == NULL)
        return;
    c->obs.on_started = NULL;
    c->obs.on_output = NULL;
    c->obs.on_done = NULL;
    c->res = NULL;
}

void shell_session_proc_forget(struct backend *be, const char *sandbox_id, const char *name)
{
    struct sess *s = sess_get(be, sandbox_id, name);
    if (s->state == SESS_IDLE || s->state == SESS_DEAD)
        s->state = SESS_NONE; /* its shell's end, when it comes, is nobody's news */
    s->reported = true;
    s->looked = true;
}

void shell_session_proc_release(struct backend *be)
{
    for (struct sess *s = sessions, *next; s; s = next) {
        next = s->next;
        if (s->be != be)
            continue;
        s->released = true;
        if (s->cur != NULL)
            cmd_finish(s->cur, SHELL_SESSION_NONE, -1, NULL);
        if (s->h != NULL) {
            be->ops->exec_detach(s->h);
            s->h = NULL;
            sess_refs(s, -1); /* the watch's */
        }
        sess_unlink(s);
    }
}
