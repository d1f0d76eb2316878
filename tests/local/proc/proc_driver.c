/* See proc_driver.h. */
#include "proc_driver.h"

#include <stdio.h>
#include <string.h>
#include <uv.h>

#define PROC_OUTPUT_MAX (64u * 1024u * 1024u)
#define PROC_START_MS 20000

static void on_started(void *arg, const char *command_id)
{
    struct proc *p = arg;
    snprintf(p->id, sizeof p->id, "%s", command_id);
    p->started = true;
}

static void on_output(void *arg, enum exec_stream stream, const char *data, size_t len)
{
    struct proc *p = arg;
    buf_append(&p->out, data, len);
}

static void on_done(void *arg, json_t *result, const struct mcp_error *err)
{
    struct proc *p = arg;
    p->done = true;
    if (err)
        mcp_error_copy(&p->err, err);
    else
        p->status = json_incref(result);
}

static void on_timer(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Runs h's loop until *flag or until ms pass. */
static bool run_until(struct harness *h, const bool *flag, uint64_t ms, bool (*check)(void *),
                      void *arg)
{
    bool expired = false;
    uv_timer_t t;
    uv_timer_init(&h->loop, &t);
    t.data = &expired;
    uv_timer_start(&t, on_timer, ms, 0);
    while (!expired && !(flag && *flag) && !(check && check(arg)))
        uv_run(&h->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&h->loop, UV_RUN_NOWAIT);
    return !expired || (flag && *flag) || (check && check(arg));
}

int proc_start(struct proc *p, struct harness *h, const char *sbx, const char *command,
               unsigned rows, unsigned cols)
{
    struct exec_request req = {.command = command,
                               .stdin_open = true,
                               .pty_rows = (uint16_t)rows,
                               .pty_cols = (uint16_t)cols};
    return proc_start_req(p, h, sbx, &req);
}

int proc_start_req(struct proc *p, struct harness *h, const char *sbx,
                   const struct exec_request *req)
{
    memset(p, 0, sizeof *p);
    p->h = h;
    buf_init(&p->out, PROC_OUTPUT_MAX);
    struct exec_observer obs = {
        .on_started = on_started, .on_output = on_output, .on_done = on_done, .arg = p};
    if (h->be->ops->exec(h->be, sbx, req, &obs, NULL, &p->err) < 0)
        return -1;
    run_until(h, &p->started, PROC_START_MS, NULL, NULL);
    while (!p->started && !p->done)
        run_until(h, &p->done, PROC_START_MS, NULL, NULL);
    return p->started ? 0 : -1;
}

struct needle {
    struct proc *p;
    const char *s;
};

static bool has_needle(void *arg)
{
    struct needle *n = arg;
    return strstr(buf_cstr(&n->p->out), n->s) != NULL;
}

bool proc_wait_output(struct proc *p, const char *needle, uint64_t ms)
{
    struct needle n = {p, needle};
    run_until(p->h, NULL, ms, has_needle, &n);
    return has_needle(&n);
}

bool proc_wait_done(struct proc *p, uint64_t ms)
{
    run_until(p->h, &p->done, ms, NULL, NULL);
    return p->done;
}

void proc_release(struct proc *p)
{
    json_decref(p->status);
    buf_release(&p->out);
    memset(p, 0, sizeof *p);
}

int proc_input(struct harness *h, const char *sbx, const char *cmd, const char *data, size_t len,
               bool eof)
{
    harness_reset(h);
    if (h->be->ops->command_input(h->be, sbx, cmd, data, len, eof, harness_cb, h, &h->err) < 0)
        return -1;
    return harness_wait(h);
}

int proc_resize(struct harness *h, const char *sbx, const char *cmd, unsigned rows, unsigned cols)
{
    harness_reset(h);
    if (h->be->ops->command_resize(h->be, sbx, cmd, rows, cols, harness_cb, h, &h->err) < 0)
        return -1;
    return harness_wait(h);
}

int proc_get(struct harness *h, const char *sbx, const char *cmd)
{
    harness_reset(h);
    if (h->be->ops->command_get(h->be, sbx, cmd, 0, 0, harness_cb, h, &h->err) < 0)
        return -1;
    return harness_wait(h);
}

int proc_kill(struct harness *h, const char *sbx, const char *cmd, int sig)
{
    harness_reset(h);
    if (h->be->ops->command_kill(h->be, sbx, cmd, sig, harness_cb, h, &h->err) < 0)
        return -1;
    return harness_wait(h);
}

void proc_pause(struct harness *h, uint64_t ms)
{
    bool never = false;
    run_until(h, &never, ms, NULL, NULL);
}
