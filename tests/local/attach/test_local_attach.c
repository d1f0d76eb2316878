/* command_attach and command_find through the local backend's vtable, in real sandboxes: the
 * primitive that lets a process take up a command another started (issues 34 and 35). A replay
 * after the starting process is gone gives each byte with the stream it was written on; a
 * finished command replays and ends at once; two watchers at once; an offset past the end; a
 * log that hit its cap; bogus ids and labels; a command flooding both streams while watched;
 * another sandbox reaching none of it.
 * As root, and as a user in tests/local/rootless. Skips (77) where the host cannot run
 * sandboxes. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "lib/base/xalloc.h"
#include "proc_driver.h"
#include "test.h"

#define WAIT_MS 20000
#define MiB (1024u * 1024u)
#define LOG_CAP (64u * MiB) /* the agent's AGENT_LOG_CAP */
#define SEQ_MAX (8u * MiB)  /* bytes of the event sequence a watch keeps */

static struct harness h;
static char *sbx;
static unsigned salt;

/* What one observer saw: the sequence of chunks as "O:" / "E:" records (adjacent chunks of one
 * stream merged, since how output is cut into chunks is not part of the contract), bytes per
 * stream, and the end. */
struct watch {
    struct exec_handle *handle;
    char id[32];
    struct buf seq, out, err;
    char last; /* stream of the last record: 'O', 'E' or 0 */
    uint64_t n_out, n_err;
    bool keep; /* keep out and err (else count only) */
    bool started, done, bad_stream;
    const char *only_out, *only_err; /* each chunk of that stream must be made of this text */
    json_t *status;
    struct mcp_error err_at_end;
    bool failed;
};

static void w_started(void *arg, const char *id)
{
    struct watch *w = arg;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->started = true;
}

/* true when data is pattern repeated (possibly cut at both ends) */
static bool made_of(const char *data, size_t len, const char *pattern)
{
    size_t plen = strlen(pattern), phase = 0;
    while (phase < plen && len > 0 && data[0] != pattern[phase])
        phase++;
    for (size_t i = 0; i < len; i++)
        if (data[i] != pattern[(phase + i) % plen])
            return false;
    return true;
}

static void w_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct watch *w = arg;
    char tag = stream == EXEC_STDERR ? 'E' : 'O';
    const char *only = tag == 'E' ? w->only_err : w->only_out;
    if (only && !made_of(data, len, only))
        w->bad_stream = true;
    *(tag == 'E' ? &w->n_err : &w->n_out) += len;
    if (w->keep)
        buf_append(tag == 'E' ? &w->err : &w->out, data, len);
    if (w->seq.len + len + 4 > SEQ_MAX)
        return;
    if (w->last != tag) {
        char rec[4] = {'|', tag, ':', 0};
        buf_append(&w->seq, rec, 3);
    }
    buf_append(&w->seq, data, len);
    w->last = tag;
}

static void w_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct watch *w = arg;
    w->done = true;
    w->failed = err != NULL;
    if (err)
        mcp_error_copy(&w->err_at_end, err);
    else
        w->status = json_incref(result);
}

static void w_init(struct watch *w)
{
    memset(w, 0, sizeof *w);
    buf_init(&w->seq, SEQ_MAX + 64);
    buf_init(&w->out, 128 * MiB);
    buf_init(&w->err, 128 * MiB);
    w->keep = true;
}

static void w_release(struct watch *w)
{
    buf_release(&w->seq);
    buf_release(&w->out);
    buf_release(&w->err);
    json_decref(w->status);
    memset(w, 0, sizeof *w);
}

static struct exec_observer w_obs(struct watch *w)
{
    return (struct exec_observer){
        .on_started = w_started, .on_output = w_output, .on_done = w_done, .arg = w};
}

static bool w_has_ended(void *arg)
{
    return ((struct watch *)arg)->done;
}

static bool w_has_started(void *arg)
{
    struct watch *w = arg;
    return w->started || w->done;
}

/* Runs the loop until check(arg) or ms pass. */
static bool loop_until(bool (*check)(void *), void *arg, uint64_t ms)
{
    for (uint64_t waited = 0; !check(arg) && waited < ms; waited += 10)
        proc_pause(&h, 10);
    return check(arg);
}

/* Starts a command with this observer (stdin open when interactive). */
static int w_exec(struct watch *w, const char *command, const char *label, bool interactive)
{
    w_init(w);
    struct exec_request req = {.command = command, .label = label, .stdin_open = interactive};
    struct exec_observer obs = w_obs(w);
    if (h.be->ops->exec(h.be, sbx, &req, &obs, &w->handle, &h.err) < 0)
        return -1;
    return loop_until(w_has_started, w, WAIT_MS) && w->started ? 0 : -1;
}

static int w_attach(struct watch *w, const char *cmd, uint64_t offset)
{
    w_init(w);
    struct exec_observer obs = w_obs(w);
    if (h.be->ops->command_attach(h.be, sbx, cmd, offset, &obs, &w->handle, &h.err) < 0)
        return -1;
    return loop_until(w_has_started, w, WAIT_MS) && w->started ? 0 : -1;
}

static int find(const char *label)
{
    harness_reset(&h);
    if (h.be->ops->command_find(h.be, sbx, label, harness_cb, &h, &h.err) < 0)
        return -1;
    return harness_wait(&h);
}

static const char *status_of(json_t *j)
{
    return json_string_value(json_object_get(j, "status"));
}

/* The interleaved log as command_get has it (all of it, page by page). */
static char *whole_log(const char *cmd, size_t *len)
{
    struct buf all;
    buf_init(&all, 128 * MiB);
    for (uint64_t off = 0;;) {
        harness_reset(&h);
        if (h.be->ops->command_get(h.be, sbx, cmd, off, 0, harness_cb, &h, &h.err) < 0 ||
            harness_wait(&h) < 0)
            break;
        const char *out = json_string_value(json_object_get(h.result, "output"));
        buf_append(&all, out, strlen(out));
        uint64_t next = (uint64_t)json_integer_value(json_object_get(h.result, "next_offset"));
        if (next <= off || json_is_true(json_object_get(h.result, "eof")))
            break;
        off = next;
    }
    *len = all.len;
    char *s = xstrdup(buf_cstr(&all));
    buf_release(&all);
    return s;
}

static void label_for(char *out, size_t size, const char *what)
{
    snprintf(out, size, "t.attach:%s-%u", what, salt);
}

/* The mcpbox that started the command goes away (the backend is freed and opened again on the
 * same store, as a restarted server would be); the new one finds it by label, attaches from 0
 * and sees what the first saw, each byte on its stream, then the live rest and the exit. */
TEST(replay_with_streams_after_a_restart)
{
    static struct watch first, again; /* static: a failed test leaves them to later callbacks */
    char label[64], id[32];
    label_for(label, sizeof label, "restart");
    ASSERT_EQ(w_exec(&first,
                     "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.02; done; "
                     "printf 'no newline'; read x; echo after-$x; echo bye >&2",
                     label, true),
              0);
    snprintf(id, sizeof id, "%s", first.id);
    for (int i = 0; i < 500 && !strstr(buf_cstr(&first.out), "no newline"); i++)
        proc_pause(&h, 10);
    ASSERT_CONTAINS(buf_cstr(&first.out), "no newline");
    char *expected = xstrdup(buf_cstr(&first.seq));
    ASSERT_EQ(harness_reopen_backend(&h, 0), 0);
    ASSERT_EQ(find(label), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "command_id")), id);
    ASSERT_STR_EQ(status_of(h.result), "running");
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "label")), label);
    ASSERT_EQ(w_attach(&again, id, 0), 0);
    ASSERT_STR_EQ(again.id, id);
    for (int i = 0; i < 500 && strlen(buf_cstr(&again.seq)) < strlen(expected); i++)
        proc_pause(&h, 10);
    ASSERT_STR_EQ(buf_cstr(&again.seq), expected);
    ASSERT_STR_EQ(buf_cstr(&again.err), "err1\nerr2\nerr3\nerr4\nerr5\n");
    ASSERT_EQ(proc_input(&h, sbx, id, "x\n", 2, true), 0); /* live from here */
    ASSERT(loop_until(w_has_ended, &again, WAIT_MS));
    ASSERT_STR_EQ(buf_cstr(&again.out), "out1\nout2\nout3\nout4\nout5\nno newlineafter-x\n");
    ASSERT_STR_EQ(buf_cstr(&again.err), "err1\nerr2\nerr3\nerr4\nerr5\nbye\n");
    ASSERT_STR_EQ(status_of(again.status), "exited");
    ASSERT_EQ(json_integer_value(json_object_get(again.status, "exit_code")), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(again.status, "command_id")), id);
    size_t n;
    char *log = whole_log(id, &n);
    ASSERT_STR_EQ(log, "out1\nerr1\nout2\nerr2\nout3\nerr3\nout4\nerr4\nout5\nerr5\n"
                       "no newlineafter-x\nbye\n");
    free(log);
    ASSERT_EQ(find(label), -1); /* it has ended: no running command has the label */
    ASSERT_EQ(h.err.code, MCP_ERR_NOT_FOUND);
    free(expected);
    w_release(&first);
    w_release(&again);
}

/* A command that has ended replays its log and ends at once, from any offset; one beyond the
 * end replays nothing. */
TEST(attach_to_a_finished_command)
{
    static struct watch run, all, from2, past;
    ASSERT_EQ(w_exec(&run, "printf ab; sleep 0.05; printf cd >&2; sleep 0.05; printf ef; exit 7",
                     NULL, false),
              0);
    ASSERT(loop_until(w_has_ended, &run, WAIT_MS));
    ASSERT_STR_EQ(buf_cstr(&run.seq), "|O:ab|E:cd|O:ef");
    ASSERT_EQ(w_attach(&all, run.id, 0), 0);
    ASSERT(loop_until(w_has_ended, &all, WAIT_MS));
    ASSERT_STR_EQ(buf_cstr(&all.seq), "|O:ab|E:cd|O:ef");
    ASSERT_STR_EQ(status_of(all.status), "exited");
    ASSERT_EQ(json_integer_value(json_object_get(all.status, "exit_code")), 7);
    ASSERT_EQ(json_integer_value(json_object_get(all.status, "stderr_bytes")), 2);
    ASSERT_EQ(w_attach(&from2, run.id, 3), 0); /* from the middle of a run */
    ASSERT(loop_until(w_has_ended, &from2, WAIT_MS));
    ASSERT_STR_EQ(buf_cstr(&from2.seq), "|E:d|O:ef");
    ASSERT_EQ(w_attach(&past, run.id, 1000000), 0);
    ASSERT(loop_until(w_has_ended, &past, WAIT_MS));
    ASSERT_STR_EQ(buf_cstr(&past.seq), "");
    ASSERT_EQ(json_integer_value(json_object_get(past.status, "exit_code")), 7);
    w_release(&run), w_release(&all), w_release(&from2), w_release(&past);
}

/* Past the end of a running command's log: nothing replayed, its live output still comes. */
TEST(offset_past_the_end_of_a_running_command)
{
    static struct proc p;
    static struct watch w;
    ASSERT_EQ(proc_start(&p, &h, sbx, "cat", 0, 0), 0);
    ASSERT_EQ(proc_input(&h, sbx, p.id, "before\n", 7, false), 0);
    ASSERT(proc_wait_output(&p, "before\n", WAIT_MS));
    ASSERT_EQ(w_attach(&w, p.id, UINT64_MAX), 0);
    ASSERT_EQ(proc_input(&h, sbx, p.id, "live\n", 5, true), 0);
    ASSERT(loop_until(w_has_ended, &w, WAIT_MS));
    ASSERT_STR_EQ(buf_cstr(&w.seq), "|O:live\n");
    ASSERT(proc_wait_done(&p, WAIT_MS));
    proc_release(&p);
    w_release(&w);
}

/* Two watchers at once see the same bytes; one detached hears nothing more while the other
 * goes on to the end. */
TEST(two_watchers_at_once)
{
    static struct proc p;
    static struct watch a, b;
    ASSERT_EQ(proc_start(&p, &h, sbx, "while read l; do echo o-$l; echo e-$l >&2; done", 0, 0), 0);
    ASSERT_EQ(proc_input(&h, sbx, p.id, "1\n", 2, false), 0);
    ASSERT(proc_wait_output(&p, "o-1", WAIT_MS));
    ASSERT_EQ(w_attach(&a, p.id, 0), 0);
    ASSERT_EQ(w_attach(&b, p.id, 0), 0);
    ASSERT_EQ(proc_input(&h, sbx, p.id, "2\n", 2, false), 0);
    for (int i = 0;
         i < 1000 && (!strstr(buf_cstr(&a.err), "e-2") || !strstr(buf_cstr(&b.err), "e-2")); i++)
        proc_pause(&h, 10);
    ASSERT_STR_EQ(buf_cstr(&a.out), "o-1\no-2\n");
    ASSERT_STR_EQ(buf_cstr(&b.out), "o-1\no-2\n");
    ASSERT_STR_EQ(buf_cstr(&a.err), "e-1\ne-2\n");
    ASSERT_STR_EQ(buf_cstr(&b.err), "e-1\ne-2\n");
    h.be->ops->exec_detach(b.handle);
    ASSERT_EQ(proc_input(&h, sbx, p.id, "3\n", 2, true), 0);
    ASSERT(loop_until(w_has_ended, &a, WAIT_MS));
    proc_pause(&h, 100);
    ASSERT_STR_EQ(buf_cstr(&a.out), "o-1\no-2\no-3\n");
    ASSERT_STR_EQ(buf_cstr(&b.out), "o-1\no-2\n"); /* nothing after its detach */
    ASSERT(!b.done);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    proc_release(&p);
    w_release(&a), w_release(&b);
}

/* A log that hit its cap (64 MiB) replays what it kept, no more, paced by the reader. */
TEST(a_log_that_hit_its_cap)
{
    static struct watch run, tail, all;
    ASSERT_EQ(
        w_exec(&run, "head -c 70m /dev/zero | tr '\\000' z; echo beyond-the-cap >&2", NULL, false),
        0);
    run.keep = false;
    ASSERT(loop_until(w_has_ended, &run, 4 * WAIT_MS));
    ASSERT_EQ(run.n_out, 70u * MiB); /* live watchers get it all */
    ASSERT_EQ(w_attach(&tail, run.id, LOG_CAP - 5), 0);
    ASSERT(loop_until(w_has_ended, &tail, WAIT_MS));
    ASSERT_EQ(tail.n_out, 5);
    ASSERT_EQ(tail.n_err, 0); /* stderr came after the cap: not kept, not replayed */
    ASSERT_EQ(w_attach(&all, run.id, 0), 0);
    all.keep = false;
    all.only_out = "z";
    ASSERT(loop_until(w_has_ended, &all, 4 * WAIT_MS));
    ASSERT_EQ(all.n_out, LOG_CAP);
    ASSERT(!all.bad_stream);
    w_release(&run), w_release(&tail), w_release(&all);
}

static void expect_invalid_label(const char *label)
{
    ASSERT_EQ(find(label), -1);
    ASSERT_EQ(h.err.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(h.err.msg, "label is 1 to 64");
    struct exec_request req = {.command = "true", .label = label};
    struct exec_observer obs = {0};
    ASSERT_EQ(h.be->ops->exec(h.be, sbx, &req, &obs, NULL, &h.err), -1);
    ASSERT_EQ(h.err.code, MCP_ERR_INVALID);
}

/* Bogus ids and labels: clear errors, and nothing is left watching. */
TEST(bogus_ids_and_labels)
{
    static struct watch w;
    ASSERT_EQ(w_attach(&w, "cmd-nosuch", 0), -1);
    ASSERT(w.failed);
    ASSERT_EQ(w.err_at_end.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(w.err_at_end.msg, "no command 'cmd-nosuch'");
    w_release(&w);
    char longid[200];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    ASSERT_EQ(w_attach(&w, longid, 0), -1);
    ASSERT_EQ(h.err.code, MCP_ERR_NOT_FOUND);
    w_release(&w);
    ASSERT_EQ(w_attach(&w, "../../etc/passwd", 0), -1);
    ASSERT_EQ(w.err_at_end.code, MCP_ERR_NOT_FOUND);
    w_release(&w);
    char long_label[66];
    memset(long_label, 'a', 65);
    long_label[65] = '\0';
    expect_invalid_label(long_label);
    expect_invalid_label("");
    expect_invalid_label("has space");
    expect_invalid_label("semi;colon");
    expect_invalid_label("caf\xc3\xa9");
    long_label[64] = '\0'; /* 64 is allowed */
    ASSERT_EQ(find(long_label), -1);
    ASSERT_EQ(h.err.code, MCP_ERR_NOT_FOUND);
    ASSERT_CONTAINS(h.err.msg, "no running command labelled");
}

/* The newest running command with a label wins; list and status report labels. */
TEST(find_takes_the_newest_running)
{
    static struct proc old, young;
    char label[64];
    label_for(label, sizeof label, "newest");
    struct exec_request req = {.command = "cat", .stdin_open = true, .label = label};
    ASSERT_EQ(proc_start_req(&old, &h, sbx, &req), 0);
    ASSERT_EQ(proc_start_req(&young, &h, sbx, &req), 0);
    ASSERT_EQ(find(label), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "command_id")), young.id);
    ASSERT_EQ(proc_input(&h, sbx, young.id, NULL, 0, true), 0);
    ASSERT(proc_wait_done(&young, WAIT_MS));
    ASSERT_EQ(find(label), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "command_id")), old.id);
    ASSERT_EQ(proc_input(&h, sbx, old.id, NULL, 0, true), 0);
    ASSERT(proc_wait_done(&old, WAIT_MS));
    ASSERT_EQ(find(label), -1);
    ASSERT_EQ(h.err.code, MCP_ERR_NOT_FOUND);
    proc_release(&old), proc_release(&young);
}

/* A hostile command floods both streams as fast as it can while two watchers take it: every
 * chunk each sees is of its stream (no stdout byte reported as stderr), the agent answers
 * other requests meanwhile, a replay afterwards agrees with the log, and the watches end. */
TEST(a_flood_on_both_streams_while_watched)
{
    static struct watch run, a, b, after;
    ASSERT_EQ(w_exec(&run,
                     "i=0; while [ $i -lt 60000 ]; do echo o; echo e >&2; i=$((i+1)); done; "
                     "yes o | head -c 8m & yes e | head -c 8m >&2; wait",
                     NULL, false),
              0);
    run.keep = false, run.only_out = "o\n", run.only_err = "e\n";
    ASSERT_EQ(w_attach(&a, run.id, 0), 0);
    ASSERT_EQ(w_attach(&b, run.id, 0), 0);
    a.keep = b.keep = false;
    a.only_out = b.only_out = "o\n";
    a.only_err = b.only_err = "e\n";
    struct harness_exec x;
    ASSERT_EQ(harness_exec(&h, sbx, "echo still-serving", &x), 0);
    ASSERT_STR_EQ(buf_cstr(&x.out), "still-serving\n");
    harness_exec_release(&x);
    ASSERT(loop_until(w_has_ended, &run, 6 * WAIT_MS));
    ASSERT(loop_until(w_has_ended, &a, WAIT_MS));
    ASSERT(loop_until(w_has_ended, &b, WAIT_MS));
    ASSERT(!run.bad_stream && !a.bad_stream && !b.bad_stream);
    ASSERT_EQ(a.n_out + a.n_err, b.n_out + b.n_err);
    ASSERT_EQ(a.n_out, run.n_out); /* a log under its cap: the watchers saw all of it */
    ASSERT_EQ(a.n_err, run.n_err);
    ASSERT_EQ(w_attach(&after, run.id, 0), 0);
    after.keep = false, after.only_out = "o\n", after.only_err = "e\n";
    ASSERT(loop_until(w_has_ended, &after, WAIT_MS));
    ASSERT(!after.bad_stream);
    ASSERT_EQ(after.n_out, run.n_out);
    ASSERT_EQ(after.n_err, run.n_err);
    w_release(&run), w_release(&a), w_release(&b), w_release(&after);
}

/* Labels and ids are each sandbox's own: another sandbox neither finds nor attaches to them. */
TEST(another_sandbox_reaches_none_of_it)
{
    static struct proc p;
    static struct watch w;
    char label[64];
    label_for(label, sizeof label, "mine");
    struct exec_request req = {.command = "cat", .stdin_open = true, .label = label};
    ASSERT_EQ(proc_start_req(&p, &h, sbx, &req), 0);
    char *other = harness_create(&h, NULL);
    ASSERT(other != NULL);
    harness_reset(&h);
    ASSERT_EQ(h.be->ops->command_find(h.be, other, label, harness_cb, &h, &h.err), 0);
    ASSERT_EQ(harness_wait(&h), -1);
    ASSERT_EQ(h.err.code, MCP_ERR_NOT_FOUND);
    w_init(&w);
    struct exec_observer obs = w_obs(&w);
    ASSERT_EQ(h.be->ops->command_attach(h.be, other, p.id, 0, &obs, &w.handle, &h.err), 0);
    ASSERT(loop_until(w_has_ended, &w, WAIT_MS));
    ASSERT(w.failed && w.err_at_end.code == MCP_ERR_NOT_FOUND);
    ASSERT_EQ(harness_destroy(&h, other), 0);
    free(other);
    ASSERT_EQ(find(label), 0); /* still there in its own */
    ASSERT_EQ(proc_input(&h, sbx, p.id, NULL, 0, true), 0);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    proc_release(&p);
    w_release(&w);
}

int main(void)
{
    int rc = harness_open_dir(&h, NULL, 0);
    if (rc != 0)
        return rc == 77 ? 77 : 1;
    salt = (unsigned)getpid() ^ (unsigned)time(NULL);
    sbx = harness_create(&h, NULL);
    if (sbx == NULL) {
        printf("# create: %s\n", h.err.msg);
        harness_close(&h);
        return 1;
    }
    RUN(attach_to_a_finished_command);
    RUN(offset_past_the_end_of_a_running_command);
    RUN(two_watchers_at_once);
    RUN(bogus_ids_and_labels);
    RUN(find_takes_the_newest_running);
    RUN(another_sandbox_reaches_none_of_it);
    RUN(a_flood_on_both_streams_while_watched);
    RUN(a_log_that_hit_its_cap);
    RUN(replay_with_streams_after_a_restart);
    harness_destroy(&h, sbx);
    free(sbx);
    harness_close(&h);
    return test_done();
}
