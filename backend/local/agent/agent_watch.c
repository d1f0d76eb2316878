/* Watching a command from any connection: cmd_watch replays the command's kept log from an
 * offset, each piece with the stream it was written on, then sends its live output and its
 * exit; cmd_find names the newest running command with a label. What lets a restarted mcpbox
 * (or a second one) take up a command another process started.
 *
 * The log interleaves stdout and stderr; beside it each command keeps the offsets where the
 * stream changes (runs). A replay is paced by its connection: at most AGENT_WATCH_WBUF bytes
 * wait unsent, so a large log costs no more memory than a slow reader allows. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/local/agent/agent.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

_Static_assert(AGENT_LOG_CAP <= AGENT_RUN_STDERR, "a run's offset must fit beside its flag");

struct watcher {
    struct conn *conn;
    struct cmd *cmd;
    uint64_t off; /* next byte of the log to send */
    size_t run;   /* the run that holds off */
    int fd;       /* the log, opened at the first read, or -1 */
    bool live;    /* the replay has caught up: output comes as it is made */
    struct watcher *next;
};

/* ---- stream runs ---------------------------------------------------------------------------- */

static bool run_is_err(uint32_t run)
{
    return (run & AGENT_RUN_STDERR) != 0;
}

static uint64_t run_start(uint32_t run)
{
    return run & ~AGENT_RUN_STDERR;
}

bool agent_runs_would_grow(const struct cmd *c, bool is_err)
{
    return c->nruns == 0 || run_is_err(c->runs[c->nruns - 1]) != is_err;
}

bool agent_runs_note(struct agent *a, struct cmd *c, bool is_err)
{
    if (c->runs_full)
        return false;
    if (!agent_runs_would_grow(c, is_err))
        return true;
    if (c->nruns >= AGENT_RUNS_MAX || a->runs_total >= AGENT_TOTAL_RUNS) {
        c->runs_full = true;
        return false;
    }
    if (c->nruns == c->runs_cap) {
        c->runs_cap = c->runs_cap ? c->runs_cap * 2 : 4;
        c->runs = xrealloc(c->runs, c->runs_cap * sizeof *c->runs);
    }
    c->runs[c->nruns++] = (uint32_t)c->n_log | (is_err ? AGENT_RUN_STDERR : 0);
    a->runs_total++;
    return true;
}

/* The run holding offset off (the last one starting at or before it). */
static size_t run_at(const struct cmd *c, uint64_t off)
{
    size_t lo = 0, hi = c->nruns;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (run_start(c->runs[mid]) <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ---- watchers ------------------------------------------------------------------------------- */

static void send_exit(struct watcher *w)
{
    json_t *ev = agent_cmd_status_json(w->cmd);
    json_object_set_new(ev, "ev", json_string("exit"));
    json_object_set_new(ev, "cmd", json_string(w->cmd->id));
    agent_send(w->conn, ev);
}

static void watcher_free(struct agent *a, struct watcher *w)
{
    if (w->fd >= 0)
        close(w->fd);
    a->nwatchers--;
    free(w);
}

/* Unlinks and frees every watcher pick() selects, after end(w) (may be NULL). */
static void drop_watchers(struct agent *a, bool (*pick)(const struct watcher *, const void *),
                          const void *arg, void (*end)(struct watcher *))
{
    for (struct watcher **pp = &a->watchers; *pp;) {
        struct watcher *w = *pp;
        if (!pick(w, arg)) {
            pp = &w->next;
            continue;
        }
        if (end)
            end(w);
        *pp = w->next;
        watcher_free(a, w);
    }
}

static bool of_cmd(const struct watcher *w, const void *c)
{
    return w->cmd == c;
}

static bool live_of_cmd(const struct watcher *w, const void *c)
{
    return w->cmd == c && w->live;
}

static bool of_conn(const struct watcher *w, const void *conn)
{
    return w->conn == conn;
}

void agent_watch_finished(struct agent *a, struct cmd *c)
{
    drop_watchers(a, live_of_cmd, c, send_exit); /* replaying ones send it when they catch up */
}

void agent_watch_cmd_gone(struct agent *a, struct cmd *c)
{
    drop_watchers(a, of_cmd, c, send_exit);
    a->runs_total -= c->nruns;
    free(c->runs);
    c->runs = NULL;
    c->nruns = c->runs_cap = 0;
}

void agent_watch_forget_conn(struct agent *a, struct conn *conn)
{
    drop_watchers(a, of_conn, conn, NULL);
}

void agent_watch_output(struct agent *a, struct cmd *c, const char *stream, const char *b64)
{
    for (struct watcher *w = a->watchers; w; w = w->next)
        if (w->cmd == c && w->live)
            agent_send(w->conn, json_pack("{s:s, s:s, s:s, s:s}", "ev", "output", "cmd", c->id,
                                          "stream", stream, "data", b64));
}

/* ---- replay --------------------------------------------------------------------------------- */

/* Sends the next piece of w's log (within one run); false when the log cannot be read (the
 * replay then ends where it is: the rest is not there to send). */
static bool replay_chunk(struct agent *a, struct watcher *w)
{
    struct cmd *c = w->cmd;
    char name[64], chunk[AGENT_READ_CHUNK];
    while (w->run + 1 < c->nruns && run_start(c->runs[w->run + 1]) <= w->off)
        w->run++;
    uint64_t end = w->run + 1 < c->nruns ? run_start(c->runs[w->run + 1]) : c->n_log;
    size_t want = (size_t)(end - w->off < sizeof chunk ? end - w->off : sizeof chunk);
    snprintf(name, sizeof name, "%s.log", c->id);
    if (w->fd < 0)
        w->fd = openat(a->logdir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t got = w->fd >= 0 ? pread(w->fd, chunk, want, (off_t)w->off) : -1;
    if (got <= 0)
        return false;
    char *b64 = xmalloc(base64_encoded_len((size_t)got) + 1);
    base64_encode(chunk, (size_t)got, b64);
    bool err = c->nruns > 0 && run_is_err(c->runs[w->run]);
    agent_send(w->conn, json_pack("{s:s, s:s, s:s, s:s}", "ev", "output", "cmd", c->id, "stream",
                                  err ? "stderr" : "stdout", "data", b64));
    free(b64);
    w->off += (uint64_t)got;
    return true;
}

/* Moves w's replay on while its connection has room; false once the command has ended and its
 * exit is sent (the watch is over). */
static bool replay(struct agent *a, struct watcher *w)
{
    struct cmd *c = w->cmd;
    while (w->off < c->n_log && !w->conn->dead && w->conn->wbuf.len < AGENT_WATCH_WBUF)
        if (!replay_chunk(a, w)) {
            w->off = c->n_log;
            break;
        }
    if (w->off < c->n_log)
        return true;
    if (c->state == CMD_RUNNING) {
        w->live = true;
        return true;
    }
    send_exit(w);
    return false;
}

void agent_watch_pump(struct agent *a)
{
    for (struct watcher **pp = &a->watchers; *pp;) {
        struct watcher *w = *pp;
        if (w->live || replay(a, w)) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        watcher_free(a, w);
    }
}

/* ---- the ops -------------------------------------------------------------------------------- */

static bool watched_by(struct agent *a, const struct cmd *c, const struct conn *conn)
{
    for (struct watcher *w = a->watchers; w; w = w->next)
        if (w->cmd == c && w->conn == conn)
            return true;
    return c->watch == conn;
}

/* The reply (the command's status, from which offset the replay starts) goes out before any
 * event: the replay starts at the next turn of the loop (agent_watch_pump). */
json_t *agent_cmd_watch(struct agent *a, struct conn *conn, json_t *req, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(req, "cmd"));
    json_t *off = json_object_get(req, "offset");
    struct cmd *c = agent_cmd_find(a, id);
    if (c == NULL) {
        mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no command '%s' in this sandbox", id ? id : "");
        return NULL;
    }
    if (off && (!json_is_integer(off) || json_integer_value(off) < 0)) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "cmd_watch: offset is a byte count (0 or more)");
        return NULL;
    }
    if (watched_by(a, c, conn)) {
        mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                      "this connection already watches '%s': open another to watch it twice",
                      c->id);
        return NULL;
    }
    if (a->nwatchers >= AGENT_MAX_WATCHERS) {
        mcp_error_set(err, MCP_ERR_LIMIT, 0, "too many watches at once (%d): end one first",
                      AGENT_MAX_WATCHERS);
        return NULL;
    }
    struct watcher *w = xcalloc(1, sizeof *w);
    uint64_t from = off ? (uint64_t)json_integer_value(off) : 0;
    w->conn = conn, w->cmd = c, w->fd = -1;
    w->off = from < c->n_log ? from : c->n_log; /* past the end: from the end */
    w->run = run_at(c, w->off);
    w->next = a->watchers;
    a->watchers = w;
    a->nwatchers++;
    json_t *j = agent_cmd_status_json(c);
    json_object_set_new(j, "offset", json_integer((json_int_t)w->off));
    return j;
}

json_t *agent_cmd_find_label(struct agent *a, json_t *req, struct mcp_error *err)
{
    const char *label = json_string_value(json_object_get(req, "label"));
    if (!agent_label_valid(label)) {
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "cmd_find: a label is 1 to %d characters of A-Z a-z 0-9 _ . : -",
                      AGENT_LABEL_MAX);
        return NULL;
    }
    for (struct cmd *c = a->cmds; c; c = c->next) /* newest first */
        if (c->state == CMD_RUNNING && strcmp(c->label, label) == 0)
            return agent_cmd_status_json(c);
    mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no running command labelled '%s'", label);
    return NULL;
}
