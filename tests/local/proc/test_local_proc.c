/* Interactive commands through the local backend's vtable, in real sandboxes (issues 34, 35):
 * stdin kept open (cat echoes, eof ends it), a pty (isatty, its size, resize, Ctrl-C and SIGINT
 * to the foreground group), the refusals (exited, not interactive, ended, too big, the 33rd),
 * a flood to a command that never reads (the agent goes on serving), a second backend instance
 * writing to a command the first started, and each sandbox's own devpts and commands. As root,
 * and as a user in tests/local/rootless. Skips (77) where the host cannot run sandboxes. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lib/base/xalloc.h"
#include "proc_driver.h"
#include "test.h"

#define WAIT_MS 10000
#define MAX_INTERACTIVE 32 /* the agent's limit, AGENT_MAX_INTERACTIVE */
#define MiB (1024u * 1024u)

static struct harness h;
static char *sbx;

#define INPUT(p, s) ASSERT_EQ(proc_input(&h, sbx, (p)->id, (s), strlen(s), false), 0)

static void expect_refused(int rc, enum mcp_error_code code, const char *words)
{
    if (rc == 0)
        TEST_FAIL("accepted; expected an error saying \"%s\"", words);
    if (h.err.code != code)
        TEST_FAIL("error %d (%s), expected %d", h.err.code, h.err.msg, code);
    ASSERT_CONTAINS(h.err.msg, words);
}

TEST(cat_echoes_and_eof_ends_it)
{
    static struct proc p; /* static: a failed test leaves it to callbacks that come later */
    ASSERT_EQ(proc_start(&p, &h, sbx, "cat", 0, 0), 0);
    ASSERT_EQ(proc_input(&h, sbx, p.id, "hello\n", 6, false), 0);
    ASSERT_EQ(json_integer_value(json_object_get(h.result, "written")), 6);
    ASSERT(proc_wait_output(&p, "hello\n", WAIT_MS));
    INPUT(&p, "second line\n");
    ASSERT(proc_wait_output(&p, "second line\n", WAIT_MS));
    ASSERT_EQ(proc_get(&h, sbx, p.id), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "status")), "running");
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "output")), "hello\nsecond line\n");
    ASSERT_EQ(proc_input(&h, sbx, p.id, NULL, 0, true), 0);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    ASSERT_STR_EQ(json_string_value(json_object_get(p.status, "status")), "exited");
    ASSERT_EQ(json_integer_value(json_object_get(p.status, "exit_code")), 0);
    proc_release(&p);
}

/* Output of `expr` with a marker, so the terminal's echo of the typed line never matches. */
TEST(pty_is_a_terminal_of_its_size)
{
    static struct proc p; /* static: a failed test leaves it to callbacks that come later */
    ASSERT_EQ(proc_start(&p, &h, sbx, "/bin/sh", 30, 100), 0);
    INPUT(&p, "test -t 0 && test -t 1 && test -t 2 && echo tty-$((6*7))\n");
    ASSERT(proc_wait_output(&p, "tty-42", WAIT_MS));
    INPUT(&p, "echo size-$(stty size | tr ' ' x) term-$TERM-$((1))\n");
    ASSERT(proc_wait_output(&p, "size-30x100 term-xterm-256color-1", WAIT_MS));
    ASSERT_EQ(proc_resize(&h, sbx, p.id, 40, 120), 0);
    ASSERT_EQ(json_integer_value(json_object_get(h.result, "rows")), 40);
    INPUT(&p, "echo size-$(stty size | tr ' ' x)-$((2))\n");
    ASSERT(proc_wait_output(&p, "size-40x120-2", WAIT_MS));
    INPUT(&p, "exit 3\n");
    ASSERT(proc_wait_done(&p, WAIT_MS));
    ASSERT_EQ(json_integer_value(json_object_get(p.status, "exit_code")), 3);
    proc_release(&p);
}

/* A long command in the pty's shell, then Ctrl-C (typed, or command_kill SIGINT): the command
 * ends and the shell answers again, well before sleep's 100 s. */
static void interrupt_sleep(struct proc *p, bool typed, const char *marker)
{
    char line[128];
    snprintf(line, sizeof line, "echo %s-$((0)); sleep 100\n", marker);
    INPUT(p, line);
    snprintf(line, sizeof line, "%s-0", marker);
    ASSERT(proc_wait_output(p, line, WAIT_MS));
    proc_pause(&h, 200); /* sleep has started */
    if (typed)
        INPUT(p, "\003");
    else
        ASSERT_EQ(proc_kill(&h, sbx, p->id, SIGINT), 0);
    snprintf(line, sizeof line, "echo %s-alive-$((1))\n", marker);
    INPUT(p, line);
    snprintf(line, sizeof line, "%s-alive-1", marker);
    if (!proc_wait_output(p, line, WAIT_MS))
        TEST_FAIL("the shell did not answer after %s: %s", typed ? "^C" : "SIGINT",
                  buf_cstr(&p->out));
}

TEST(pty_ctrl_c_and_sigint_interrupt)
{
    static struct proc p; /* static: a failed test leaves it to callbacks that come later */
    ASSERT_EQ(proc_start(&p, &h, sbx, "/bin/sh", 24, 80), 0);
    interrupt_sleep(&p, true, "typed");
    interrupt_sleep(&p, false, "killed");
    ASSERT(!p.done); /* the shell itself lives on, as at a terminal */
    ASSERT_EQ(proc_input(&h, sbx, p.id, NULL, 0, true), 0); /* ^D at an empty prompt */
    ASSERT(proc_wait_done(&p, WAIT_MS));
    proc_release(&p);
}

TEST(refusals)
{
    static struct proc p; /* static: a failed test leaves it to callbacks that come later */
    ASSERT_EQ(proc_start(&p, &h, sbx, "cat; sleep 100", 0, 0), 0); /* outlives its eof */
    char *big = xcalloc(1, MiB + 1);
    expect_refused(proc_input(&h, sbx, p.id, big, MiB + 1, false), MCP_ERR_LIMIT, "at most 1 MiB");
    free(big);
    expect_refused(proc_resize(&h, sbx, p.id, 10, 10), MCP_ERR_CONFLICT, "no terminal");
    ASSERT_EQ(proc_input(&h, sbx, p.id, "x", 1, true), 0);
    expect_refused(proc_input(&h, sbx, p.id, "y", 1, false), MCP_ERR_CONFLICT, "no more input");
    ASSERT_EQ(proc_kill(&h, sbx, p.id, SIGKILL), 0);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    expect_refused(proc_input(&h, sbx, p.id, "z", 1, false), MCP_ERR_CONFLICT, "has exited");
    proc_release(&p);
    /* a command that closes its stdin: the input it can never read is not reported written */
    ASSERT_EQ(proc_start(&p, &h, sbx, "exec 0<&-; echo closed; sleep 100", 0, 0), 0);
    ASSERT(proc_wait_output(&p, "closed", WAIT_MS));
    expect_refused(proc_input(&h, sbx, p.id, "lost", 4, false), MCP_ERR_CONFLICT,
                   "closed its stdin");
    expect_refused(proc_input(&h, sbx, p.id, "z", 1, false), MCP_ERR_CONFLICT, "no more input");
    ASSERT_EQ(proc_kill(&h, sbx, p.id, SIGKILL), 0);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    proc_release(&p);
    expect_refused(proc_input(&h, sbx, "cmd-nosuch", "z", 1, false), MCP_ERR_NOT_FOUND,
                   "no command");
    /* a command started the ordinary way: its stdin was given (none) and is closed */
    struct harness_exec x;
    ASSERT_EQ(harness_exec(&h, sbx, "true", &x), 0);
    const char *plain = json_string_value(json_object_get(x.status, "command_id"));
    expect_refused(proc_input(&h, sbx, plain, "z", 1, false), MCP_ERR_CONFLICT, "not interactive");
    harness_exec_release(&x);
}

TEST(the_33rd_interactive_command_is_refused)
{
    static struct proc p[MAX_INTERACTIVE + 1];
    for (int i = 0; i < MAX_INTERACTIVE; i++)
        if (proc_start(&p[i], &h, sbx, "cat", 0, 0) < 0)
            TEST_FAIL("interactive command %d refused: %s", i + 1, p[i].err.msg);
    ASSERT_EQ(proc_start(&p[MAX_INTERACTIVE], &h, sbx, "cat", 0, 0), -1);
    ASSERT_EQ(p[MAX_INTERACTIVE].err.code, MCP_ERR_LIMIT);
    ASSERT_CONTAINS(p[MAX_INTERACTIVE].err.msg, "32 interactive commands");
    struct harness_exec x; /* ordinary commands still run */
    ASSERT_EQ(harness_exec(&h, sbx, "echo ok", &x), 0);
    ASSERT_STR_EQ(buf_cstr(&x.out), "ok\n");
    harness_exec_release(&x);
    for (int i = 0; i < MAX_INTERACTIVE; i++)
        ASSERT_EQ(proc_input(&h, sbx, p[i].id, NULL, 0, true), 0);
    for (int i = 0; i < MAX_INTERACTIVE; i++) {
        ASSERT(proc_wait_done(&p[i], WAIT_MS));
        proc_release(&p[i]);
    }
    proc_release(&p[MAX_INTERACTIVE]);
    static struct proc again; /* the slots are free again */
    ASSERT_EQ(proc_start(&again, &h, sbx, "cat", 0, 0), 0);
    ASSERT_EQ(proc_input(&h, sbx, again.id, NULL, 0, true), 0);
    ASSERT(proc_wait_done(&again, WAIT_MS));
    proc_release(&again);
}

/* A command that never reads: its queue fills to the cap, then "busy" with nothing written;
 * meanwhile the agent serves everything else at once. */
TEST(flood_to_a_command_that_never_reads)
{
    static struct proc p; /* static: a failed test leaves it to callbacks that come later */
    ASSERT_EQ(proc_start(&p, &h, sbx, "sleep 1000", 0, 0), 0);
    char *chunk = xcalloc(1, MiB);
    int accepted = 0, rc;
    while ((rc = proc_input(&h, sbx, p.id, chunk, MiB, false)) == 0 && accepted < 64)
        accepted++;
    free(chunk);
    ASSERT(accepted >= 4 && accepted <= 5); /* 4 MiB wait, plus what the pipe holds */
    expect_refused(rc, MCP_ERR_UNAVAILABLE, "busy");
    ASSERT_CONTAINS(h.err.msg, "none of this input was written");
    struct harness_exec x;
    ASSERT_EQ(harness_exec(&h, sbx, "echo still-serving", &x), 0);
    ASSERT_STR_EQ(buf_cstr(&x.out), "still-serving\n");
    harness_exec_release(&x);
    chunk = xcalloc(1, MiB); /* still full: the command has read nothing */
    expect_refused(proc_input(&h, sbx, p.id, chunk, MiB, false), MCP_ERR_UNAVAILABLE, "busy");
    free(chunk);
    ASSERT_EQ(proc_kill(&h, sbx, p.id, SIGKILL), 0);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    proc_release(&p);
}

/* The agent holds the process: a new backend instance (a restarted mcpbox, the CLI) writes to
 * it by ids and reads what it printed. */
TEST(a_second_instance_writes_to_it)
{
    static struct proc p; /* static: a failed test leaves it to callbacks that come later */
    ASSERT_EQ(proc_start(&p, &h, sbx, "cat", 0, 0), 0);
    char id[32];
    snprintf(id, sizeof id, "%s", p.id);
    ASSERT_EQ(harness_reopen_backend(&h, 0), 0);
    proc_pause(&h, 50);
    ASSERT_EQ(proc_input(&h, sbx, id, "from-the-second\n", 16, false), 0);
    for (int i = 0; i < 1000; i++) {
        ASSERT_EQ(proc_get(&h, sbx, id), 0);
        if (strstr(json_string_value(json_object_get(h.result, "output")), "from-the-second"))
            break;
        proc_pause(&h, 10);
    }
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "output")), "from-the-second\n");
    ASSERT_EQ(proc_input(&h, sbx, id, NULL, 0, true), 0);
    for (int i = 0; i < 1000; i++) {
        ASSERT_EQ(proc_get(&h, sbx, id), 0);
        if (strcmp(json_string_value(json_object_get(h.result, "status")), "running") != 0)
            break;
        proc_pause(&h, 10);
    }
    ASSERT_STR_EQ(json_string_value(json_object_get(h.result, "status")), "exited");
    proc_release(&p);
}

/* stdin bytes whose base64 is "pipe" are still bytes, then EOF: "pipe" opens stdin only as the
 * agent's keyword, and mcpbox sends such bytes in stdin_data. */
TEST(stdin_bytes_spelled_pipe_stay_bytes)
{
    static struct proc p;
    struct exec_request req = {
        .command = "od -An -tx1", .stdin_data = "\xa6\x2a\x5e", .stdin_len = 3};
    ASSERT_EQ(proc_start_req(&p, &h, sbx, &req), 0);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    ASSERT_STR_EQ(buf_cstr(&p.out), " a6 2a 5e\n");
    proc_release(&p);
}

/* Each sandbox has a devpts of its own (newinstance, ptmxmode=0666): another sandbox's open
 * terminal is not there to open. */
TEST(each_sandbox_has_its_own_devpts)
{
    struct harness_exec x;
    ASSERT_EQ(harness_exec(&h, sbx, "grep devpts /proc/mounts", &x), 0);
    ASSERT_CONTAINS(buf_cstr(&x.out), "ptmxmode=666");
    harness_exec_release(&x);
    static struct proc p; /* static: a failed test leaves it to callbacks that come later */
    ASSERT_EQ(proc_start(&p, &h, sbx, "/bin/sh", 24, 80), 0);
    INPUT(&p, "echo pts-$((5)) $(ls /dev/pts | tr '\\n' ' ')end\n");
    ASSERT(proc_wait_output(&p, "pts-5 0 ptmx end", WAIT_MS));
    char *other = harness_create(&h, NULL);
    ASSERT(other != NULL);
    ASSERT_EQ(harness_exec(&h, other, "ls /dev/pts | tr '\\n' ' '", &x), 0);
    ASSERT_STR_EQ(buf_cstr(&x.out), "ptmx ");
    harness_exec_release(&x);
    /* nor are its commands: ids are per sandbox */
    expect_refused(proc_input(&h, other, p.id, "x", 1, false), MCP_ERR_NOT_FOUND, "no command");
    expect_refused(proc_resize(&h, other, p.id, 5, 5), MCP_ERR_NOT_FOUND, "no command");
    ASSERT_EQ(harness_destroy(&h, other), 0);
    free(other);
    ASSERT_EQ(proc_input(&h, sbx, p.id, "exit\n", 5, false), 0);
    ASSERT(proc_wait_done(&p, WAIT_MS));
    proc_release(&p);
}

int main(void)
{
    int rc = harness_open_dir(&h, NULL, 0);
    if (rc != 0)
        return rc == 77 ? 77 : 1;
    sbx = harness_create(&h, NULL);
    if (sbx == NULL) {
        printf("# create: %s\n", h.err.msg);
        harness_close(&h);
        return 1;
    }
    RUN(cat_echoes_and_eof_ends_it);
    RUN(pty_is_a_terminal_of_its_size);
    RUN(pty_ctrl_c_and_sigint_interrupt);
    RUN(refusals);
    RUN(the_33rd_interactive_command_is_refused);
    RUN(flood_to_a_command_that_never_reads);
    RUN(a_second_instance_writes_to_it);
    RUN(each_sandbox_has_its_own_devpts);
    RUN(stdin_bytes_spelled_pipe_stay_bytes);
    harness_destroy(&h, sbx);
    free(sbx);
    harness_close(&h);
    return test_done();
}
