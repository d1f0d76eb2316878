/* Live resource use of a local sandbox (the metrics op; diagnose_sandbox what=metrics): memory,
 * pids and CPU time from its cgroups, CPU time sampled twice LOCAL_METRICS_SAMPLE_MS apart for a
 * percentage of the CPUs the sandbox may use. */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define LOCAL_METRICS_SAMPLE_MS 250

struct metrics_op {
    struct local_backend *lb;
    char id[LOCAL_ID_LEN];
    backend_cb *cb;
    void *arg;
    double cpus;      /* the sandbox's CPU limit */
    double cpu0;      /* cpu seconds at the first sample; < 0: unknown */
    uint64_t t0;
    uv_timer_t timer;
};

static void metrics_closed(uv_handle_t *h)
{
    free(h->data);
}

static double cpu_seconds(const struct lsbx *sb, json_t **usage)
{
    *usage = cg_usage(&sb->cg);
    json_t *s = json_object_get(*usage, "cpu_seconds");
    return json_is_number(s) ? json_number_value(s) : -1;
}

static json_t *metrics_result(struct metrics_op *m, const struct lsbx *sb)
{
    json_t *usage;
    double cpu1 = cpu_seconds(sb, &usage);
    double wall_s = (double)(now_mono_ms() - m->t0) / 1000.0;
    uint64_t limit = cg_memory_limit(&sb->cg);
    char when[32];
    format_rfc3339_ms(now_wall_ms(), when);
    json_t *res = json_pack("{s:s,s:f,s:O,s:O,s:s}", "sandbox_id", m->id, "cpu_count", m->cpus,
                            "memory_used_bytes", json_object_get(usage, "memory_bytes"), "pids",
                            json_object_get(usage, "pids"), "timestamp", when);
    json_object_set_new(res, "memory_total_bytes",
                        limit > 0 ? json_integer((json_int_t)limit) : json_null());
    json_object_set_new(res, "cpu_used_pct",
                        m->cpu0 >= 0 && cpu1 >= m->cpu0 && wall_s > 0
                            ? json_real(100.0 * (cpu1 - m->cpu0) / (wall_s * m->cpus))
                            : json_null());
    json_decref(usage);
    return res;
}

static void metrics_sample(uv_timer_t *t)
{
    struct metrics_op *m = t->data;
    struct lsbx *sb = lsbx_find(m->lb, m->id);
    if (sb == NULL) {
        struct mcp_error e;
        mcp_error_set(&e, MCP_ERR_CONFLICT, 0, "sandbox %s stopped while it was being measured; "
                      "call get_sandbox", m->id);
        m->cb(m->arg, NULL, &e);
    } else {
        json_t *res = metrics_result(m, sb);
        m->cb(m->arg, res, NULL);
        json_decref(res);
    }
    uv_close((uv_handle_t *)&m->timer, metrics_closed);
}

int local_metrics(struct backend *be, const char *id, backend_cb *cb, void *arg,
                  struct mcp_error *err)
{
    struct local_backend *lb = (struct local_backend *)be;
    struct lsbx *sb = lsbx_find(lb, id);
    struct store_sandbox rec = {0};
    if (sb == NULL || local_record_get(be->store, id, &rec, err) < 0)
        return sb ? -1 : mcp_error_set(err, MCP_ERR_CONFLICT, 0, "sandbox %s is not running "
                                       "in this mcpbox; call get_sandbox", id);
    struct metrics_op *m = xcalloc(1, sizeof(*m));
    *m = (struct metrics_op){.lb = lb, .cb = cb, .arg = arg, .t0 = now_mono_ms()};
    snprintf(m->id, sizeof(m->id), "%s", id);
    json_t *info = local_info(&rec);
    double cpus = json_number_value(json_object_get(json_object_get(info, "limits"), "cpu"));
    m->cpus = cpus > 0 ? cpus : (double)uv_available_parallelism();
    json_decref(info);
    store_sandbox_release(&rec);
    json_t *usage;
    m->cpu0 = cpu_seconds(sb, &usage);
    json_decref(usage);
    uv_timer_init(be->loop, &m->timer);
    m->timer.data = m;
    uv_timer_start(&m->timer, metrics_sample, LOCAL_METRICS_SAMPLE_MS, 0);
    return 0;
}
