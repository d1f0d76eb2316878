/* Resource usage of a sandbox from execd's GET /metrics (docs/internals/opensandbox-wire.md §8):
 * {cpu_count, cpu_used_pct, mem_total_mib, mem_used_mib, timestamp (Unix ms)}. */
#include <math.h>
#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define OSB_MIB 1048576.0

struct metrics_op {
    struct osb_backend *b;
    char *sid;
    backend_cb *cb;
    void *arg;
};

static void metrics_free(struct metrics_op *m)
{
    free(m->sid);
    free(m);
}

static json_t *number_or_null(json_t *v, double scale)
{
    if (!json_is_number(v) || json_number_value(v) < 0)
        return json_null();
    double x = json_number_value(v) * scale;
    return scale == 1.0 ? json_real(x) : json_integer((json_int_t)llround(x));
}

/* execd's answer -> the backend's metrics shape (backend.h). */
json_t *osb_metrics_info(const char *sandbox_id, json_t *j)
{
    json_t *ts = json_object_get(j, "timestamp");
    char when[32];
    format_rfc3339_ms(json_is_integer(ts) ? json_integer_value(ts) : now_wall_ms(), when);
    json_t *count = json_object_get(j, "cpu_count");
    return json_pack("{s:s,s:o,s:o,s:o,s:o,s:s}", "sandbox_id", sandbox_id, "cpu_count",
                     json_is_number(count) ? json_integer((json_int_t)llround(
                                                 json_number_value(count)))
                                           : json_null(),
                     "cpu_used_pct", number_or_null(json_object_get(j, "cpu_used_pct"), 1.0),
                     "memory_used_bytes",
                     number_or_null(json_object_get(j, "mem_used_mib"), OSB_MIB),
                     "memory_total_bytes",
                     number_or_null(json_object_get(j, "mem_total_mib"), OSB_MIB), "timestamp",
                     when);
}

static void metrics_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct metrics_op *m = arg;
    struct mcp_error e;
    cleanup_json json_t *j = err ? NULL : osb_resp_json(resp, "reading the metrics", &e);
    if (j != NULL && !json_is_number(json_object_get(j, "mem_used_mib"))) {
        mcp_error_set(&e, MCP_ERR_BACKEND, 0, "reading the metrics: execd's answer has no "
                      "\"mem_used_mib\" (an execd without metrics?); read usage inside the "
                      "sandbox instead with run_command (cat /proc/meminfo, top -bn1), or call "
                      "get_sandbox for its limits");
        json_decref(steal_ptr(&j));
    }
    if (j == NULL) {
        m->cb(m->arg, NULL, err ? err : &e);
        metrics_free(m);
        return;
    }
    cleanup_json json_t *res = osb_metrics_info(m->sid, j);
    m->cb(m->arg, res, NULL);
    metrics_free(m);
}

static void metrics_with_endpoint(void *arg, const struct osb_endpoint *ep,
                                  const struct mcp_error *err)
{
    struct metrics_op *m = arg;
    struct mcp_error e;
    if (err != NULL) {
        backend_defer(&m->b->base, m->cb, m->arg, NULL, err);
        metrics_free(m);
        return;
    }
    struct osb_call_opts o = {.method = "GET", .what = "reading the metrics",
                              .sandbox_id = m->sid, .retry = HTTPC_RETRY_IDEMPOTENT};
    if (osb_execd_call(m->b, ep, "/metrics", &o, metrics_done, m, &e) == NULL) {
        backend_defer(&m->b->base, m->cb, m->arg, NULL, &e);
        metrics_free(m);
    }
}

int osb_metrics(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    if (osb_remote_id(sandbox_id, err) == NULL)
        return -1;
    struct metrics_op *m = xcalloc(1, sizeof(*m));
    *m = (struct metrics_op){b, xstrdup(sandbox_id), cb, arg};
    if (osb_endpoint_resolve(b, sandbox_id, metrics_with_endpoint, m, err) != 0) {
        metrics_free(m);
        return -1;
    }
    return 0;
}
