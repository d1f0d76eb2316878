/* get_command and kill_command for a session command's id ("<shell's id>.<n>",
 * shell_session_proc.h): its output is the part of the shell's log between its start and its
 * end marker, its status the one this process recorded. */
#include "backend/shell_session_proc-internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"

bool shell_session_proc_is_command_id(const char *command_id)
{
    return command_id != NULL && strchr(command_id, '.') != NULL;
}

static int unknown(const char *command_id, struct mcp_error *err)
{
    const char *dot = strrchr(command_id, '.');
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                         "command_id %s is a session command this mcpbox process does not know "
                         "(an earlier process ran it, or it is one of more than %d since): its "
                         "output is in its session shell's log from offset %s on: get_command "
                         "with command_id %.*s and that offset",
                         command_id, SESS_RECORDS, dot + 1, (int)(dot - command_id), command_id);
}

struct get_call {
    struct sess_record rec; /* as it was when asked */
    uint64_t offset;
    backend_cb *cb;
    void *arg;
};

static json_t *reply_json(const struct get_call *g, json_t *output, uint64_t next)
{
    uint64_t total = g->rec.done ? g->rec.end - g->rec.start : next;
    json_t *r = json_pack("{s:s, s:s, s:o, s:n, s:I, s:o, s:I, s:I, s:I, s:b}", "command_id",
                          g->rec.id, "status", g->rec.status, "exit_code",
                          g->rec.exit_code >= 0 ? json_integer(g->rec.exit_code) : json_null(),
                          "signal", "duration_ms", (json_int_t)g->rec.duration_ms, "output", output,
                          "offset", (json_int_t)g->offset, "next_offset", (json_int_t)next,
                          "total_bytes", (json_int_t)total, "eof", g->rec.done && next >= total);
    return r;
}

static void got_log(void *arg, json_t *result, const struct mcp_error *err)
{
    struct get_call *g = arg;
    if (err != NULL) {
        g->cb(g->arg, NULL, err);
    } else {
        json_int_t next = json_integer_value(json_object_get(result, "next_offset"));
        uint64_t rel = (uint64_t)next > g->rec.start ? (uint64_t)next - g->rec.start : g->offset;
        json_t *out = json_object_get(result, "output");
        json_t *r = reply_json(g, json_is_string(out) ? json_incref(out) : json_string(""), rel);
        g->cb(g->arg, r, NULL);
        json_decref(r);
    }
    free(g);
}

int shell_session_proc_command_get(struct backend *be, const char *sandbox_id,
                                   const char *command_id, uint64_t offset, uint64_t limit,
                                   backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct sess *s;
    struct sess_record *rec = sess_find_record(be, sandbox_id, command_id, &s);
    if (rec == NULL)
        return unknown(command_id, err);
    struct get_call *g = xcalloc(1, sizeof(*g));
    g->rec = *rec;
    g->offset = offset;
    g->cb = cb;
    g->arg = arg;
    uint64_t avail = rec->done ? rec->end - rec->start : UINT64_MAX;
    if (offset >= avail) { /* nothing more: answer without asking */
        json_t *r = reply_json(g, json_string(""), offset);
        backend_defer(be, cb, arg, r, NULL);
        json_decref(r);
        free(g);
        return 0;
    }
    uint64_t lim = avail - offset < limit ? avail - offset : limit;
    char shell_id[SESS_ID_MAX];
    snprintf(shell_id, sizeof shell_id, "%.*s", (int)(strrchr(command_id, '.') - command_id),
             command_id);
    if (be->ops->command_get(be, sandbox_id, shell_id, rec->start + offset, lim, got_log, g, err) <
        0) {
        free(g);
        return -1;
    }
    return 0;
}

int shell_session_proc_command_kill(struct backend *be, const char *sandbox_id,
                                    const char *command_id, int signal, backend_cb *cb, void *arg,
                                    struct mcp_error *err)
{
    struct sess *s;
    struct sess_record *rec = sess_find_record(be, sandbox_id, command_id, &s);
    if (rec == NULL) { /* an earlier process's: interrupt its shell, the agent knows that id */
        char shell_id[SESS_ID_MAX];
        snprintf(shell_id, sizeof shell_id, "%.*s", (int)(strrchr(command_id, '.') - command_id),
                 command_id);
        return be->ops->command_kill(be, sandbox_id, shell_id, SIGINT, cb, arg, err);
    }
    if (!rec->done && s->cur != NULL && s->cur->rec == rec)
        sess_interrupt(s, signal == SIGKILL);
    json_t *r = json_pack("{s:s, s:i, s:s}", "command_id", command_id, "signal", signal, "status",
                          rec->status);
    backend_defer(be, cb, arg, r, NULL);
    json_decref(r);
    return 0;
}
