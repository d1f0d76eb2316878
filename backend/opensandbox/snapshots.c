/* Snapshots on the OpenSandbox server (docs/internals/opensandbox-wire.md §6):
 * create (202 Creating, then poll
 * GET /snapshots/{id} until Ready or Failed), list (sandboxId/state filters, pages), delete
 * (409 while still creating). Restoring is create_sandbox with a snapshot id (lifecycle.c). */
#define LOG_MODULE "opensandbox"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

/* How long create waits for Ready: below the 60 s many MCP clients wait for a reply. A snapshot
 * still Creating then is returned as it is, with a note to list it until it is ready. */
#define OSB_SNAPSHOT_WAIT_MS 45000u

struct snap_op {
    struct osb_backend *b;
    backend_cb *cb;
    void *arg;
    char *owner, *sid, *snap_id;
    char *query;      /* list: filters, without page */
    json_t *acc;      /* list: accumulated infos */
    json_t *owned;    /* list: owner's snapshot ids (null: no store, keep all) */
    int page;
    uint64_t deadline_ms;
    bool unrecorded;              /* create: the owner could not be recorded */
    struct mcp_error record_err;
    uv_timer_t timer;
};

static void snap_closed(uv_handle_t *h)
{
    struct snap_op *op = h->data;
    free(op->owner);
    free(op->sid);
    free(op->snap_id);
    free(op->query);
    json_decref(op->acc);
    json_decref(op->owned);
    free(op);
}

static struct snap_op *snap_new(struct osb_backend *b, const char *owner, backend_cb *cb,
                                void *arg)
{
    struct snap_op *op = xcalloc(1, sizeof(*op));
    op->b = b;
    op->cb = cb;
    op->arg = arg;
    op->owner = xstrdup(owner ? owner : "");
    uv_timer_init(b->base.loop, &op->timer);
    op->timer.data = op;
    return op;
}

static void orphan_deleted(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    char *id = arg;
    if (err != NULL)
        log_warn("deleting snapshot %s, whose owner was not recorded: %s", id, err->msg);
    free(id);
}

/* A snapshot whose owner could not be recorded would be invisible to its owner and never
 * cleaned up: delete it (best effort; once it left Creating, since the server refuses before). */
static void orphan_delete(struct snap_op *op)
{
    cleanup_free char *path = xasprintf("/snapshots/%s", op->snap_id);
    struct osb_call_opts o = {.method = "DELETE", .what = "deleting an unrecorded snapshot",
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    char *id = xstrdup(op->snap_id);
    struct mcp_error e;
    if (osb_lifecycle_call(op->b, path, &o, orphan_deleted, id, &e) != 0) {
        log_warn("deleting snapshot %s, whose owner was not recorded: %s", id, e.msg);
        free(id);
    }
}

static void snap_finish(struct snap_op *op, json_t *result, const struct mcp_error *err)
{
    struct mcp_error e;
    if (op->unrecorded) {
        orphan_delete(op);
        mcp_error_set(&e, op->record_err.code, 0,
                      "snapshotting sandbox %s: mcpbox could not "
                      "record snapshot %s as yours (%s) and asked the server to delete it; try "
                      "again, and if this persists call diagnose_sandbox without a sandbox_id",
                      op->sid, op->snap_id, op->record_err.msg);
        err = &e;
    }
    op->cb(op->arg, err ? NULL : result, err);
    json_decref(result);
    uv_close((uv_handle_t *)&op->timer, snap_closed);
}

static int snap_abandon(struct snap_op *op)
{
    uv_close((uv_handle_t *)&op->timer, snap_closed);
    return -1;
}

int osb_snapshot_id_check(const char *id, struct mcp_error *err)
{
    size_t n = id ? strlen(id) : 0;
    bool ok = n > 0 && n <= OSB_REMOTE_ID_MAX && strcmp(id, ".") != 0 && strcmp(id, "..") != 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)id[i]) || strchr("-_.", id[i]) != NULL;
    if (!ok)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0, "no snapshot \"%s\": malformed id; call "
                             "snapshot_sandbox with action \"list\"", id ? id : "");
    return 0;
}

/* Remote Snapshot -> {snapshot_id, sandbox_id, name, state, reason?, message?, created_at}. */
json_t *osb_snapshot_info(json_t *remote)
{
    json_t *status = json_object_get(remote, "status");
    const char *rs = json_string_value(json_object_get(status, "state"));
    cleanup_free char *state = xstrdup(rs ? rs : "unknown");
    for (char *p = state; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    const char *sbx = json_string_value(json_object_get(remote, "sandboxId"));
    cleanup_free char *sid = sbx ? xasprintf(OSB_ID_PREFIX "%s", sbx) : NULL;
    const char *name = json_string_value(json_object_get(remote, "name"));
    int64_t ms = 0;
    char created[32] = "";
    const char *ca = json_string_value(json_object_get(remote, "createdAt"));
    if (ca != NULL && parse_rfc3339_ms(ca, &ms) == 0)
        format_rfc3339_ms(ms, created);
    const char *id = json_string_value(json_object_get(remote, "id"));
    json_t *j = json_pack("{s:s,s:s,s:o,s:s,s:o}", "snapshot_id", id ? id : "", "sandbox_id",
                          sid ? sid : "", "name", name ? json_string(name) : json_null(),
                          "state", state, "created_at",
                          created[0] ? json_string(created) : json_null());
    const char *keys[] = {"reason", "message"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(status, keys[i]);
        if (json_is_string(v))
            json_object_set(j, keys[i], v);
    }
    return j;
}

/* ---- create: POST, then poll until Ready or Failed ------------------------------------------ */

static void snap_poll(struct snap_op *op);

static void on_poll_timer(uv_timer_t *t)
{
    snap_poll(t->data);
}

static void snap_state_check(struct snap_op *op, json_t *remote)
{
    json_t *info = osb_snapshot_info(remote);
    const char *st = json_string_value(json_object_get(info, "state"));
    struct mcp_error e;
    if (strcmp(st, "failed") == 0) {
        const char *why = json_string_value(json_object_get(info, "message"));
        const char *reason = json_string_value(json_object_get(info, "reason"));
        mcp_error_set(&e, MCP_ERR_BACKEND, 0, "snapshot %s of sandbox %s failed (%s: %s); the "
                      "sandbox is unchanged: try again, or call diagnose_sandbox", op->snap_id,
                      op->sid, reason ? reason : "no reason given", why ? why : "no details");
        json_decref(info);
        snap_finish(op, NULL, &e);
        return;
    }
    if (strcmp(st, "creating") != 0 || now_mono_ms() + op->b->t.state_poll_ms >= op->deadline_ms) {
        if (strcmp(st, "creating") == 0)
            json_object_set_new(info, "note", json_string(
                "still being created; call snapshot_sandbox with action \"list\" until it is "
                "ready, then restore it with create_sandbox snapshot_id"));
        snap_finish(op, info, NULL);
        return;
    }
    json_decref(info);
    uv_timer_start(&op->timer, on_poll_timer, op->b->t.state_poll_ms, 0);
}

static void poll_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct snap_op *op = arg;
    struct mcp_error e;
    if (err != NULL) {
        snap_finish(op, NULL, err);
        return;
    }
    cleanup_json json_t *j = osb_resp_json(resp, "waiting for the snapshot", &e);
    if (j == NULL) {
        snap_finish(op, NULL, &e);
        return;
    }
    snap_state_check(op, j);
}

static void snap_poll(struct snap_op *op)
{
    cleanup_free char *path = xasprintf("/snapshots/%s", op->snap_id);
    struct osb_call_opts o = {.method = "GET", .what = "waiting for the snapshot",
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    struct mcp_error e;
    if (osb_lifecycle_call(op->b, path, &o, poll_done, op, &e) != 0)
        snap_finish(op, NULL, &e);
}

static void create_posted(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct snap_op *op = arg;
    struct mcp_error e;
    if (err != NULL) {
        snap_finish(op, NULL, err);
        return;
    }
    cleanup_json json_t *j = osb_resp_json(resp, "snapshotting the sandbox", &e);
    const char *id = json_string_value(json_object_get(j, "id"));
    if (j == NULL || id == NULL || osb_snapshot_id_check(id, &e) != 0) {
        if (j != NULL)
            mcp_error_set(&e, MCP_ERR_BACKEND, 0, "snapshotting the sandbox: the server's "
                          "answer has no usable snapshot \"id\"");
        snap_finish(op, NULL, &e);
        return;
    }
    op->snap_id = xstrdup(id);
    if (osb_snap_record(op->b, id, op->owner, op->sid, &op->record_err) != 0)
        op->unrecorded = true; /* failed once the server is done with it (snap_finish) */
    uint32_t wait = op->b->t.ready_timeout_ms < OSB_SNAPSHOT_WAIT_MS ? op->b->t.ready_timeout_ms
                                                                       : OSB_SNAPSHOT_WAIT_MS;
    op->deadline_ms = now_mono_ms() + wait;
    snap_state_check(op, j);
}

static int snap_create(struct snap_op *op, json_t *args, struct mcp_error *err)
{
    const char *sid = json_string_value(json_object_get(args, "sandbox_id"));
    const char *rid = osb_remote_id(sid, err);
    if (rid == NULL)
        return -1;
    op->sid = xstrdup(sid);
    const char *name = json_string_value(json_object_get(args, "name"));
    cleanup_json json_t *body = name && *name ? json_pack("{s:s}", "name", name) : json_object();
    cleanup_free char *path = xasprintf("/sandboxes/%s/snapshots", rid);
    struct osb_call_opts o = {.method = "POST", .what = "snapshotting the sandbox",
                              .sandbox_id = sid, .json = body, .retry = HTTPC_RETRY_SAFE};
    return osb_lifecycle_call(op->b, path, &o, create_posted, op, err);
}

/* ---- list ------------------------------------------------------------------------------------ */

static void list_page(struct snap_op *op);

static void list_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct snap_op *op = arg;
    struct mcp_error e;
    if (err != NULL) {
        snap_finish(op, NULL, err);
        return;
    }
    cleanup_json json_t *j = NULL;
    json_t *items = osb_resp_member(resp, "listing snapshots", "items", JSON_ARRAY, &j, &e);
    if (items == NULL) {
        snap_finish(op, NULL, &e);
        return;
    }
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *id = json_string_value(json_object_get(it, "id"));
        if (id != NULL && (json_is_null(op->owned) || json_object_get(op->owned, id) != NULL))
            json_array_append_new(op->acc, osb_snapshot_info(it));
    }
    json_t *pg = json_object_get(j, "pagination");
    if (json_is_true(json_object_get(pg, "hasNextPage")) && op->page < OSB_LIST_PAGES_MAX) {
        op->page++;
        list_page(op);
        return;
    }
    snap_finish(op, json_pack("{s:O}", "snapshots", op->acc), NULL);
}

static void list_page(struct snap_op *op)
{
    cleanup_free char *path = xasprintf("/snapshots?%spage=%d&pageSize=%d", op->query, op->page,
                                        OSB_LIST_PAGE_SIZE);
    struct osb_call_opts o = {.method = "GET", .what = "listing snapshots",
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    struct mcp_error e;
    if (osb_lifecycle_call(op->b, path, &o, list_done, op, &e) != 0)
        snap_finish(op, NULL, &e);
}

/* "ready" -> "Ready": the server's spelling (it also matches case-insensitively). */
static char *state_query(const char *state)
{
    char *s = xstrdup(state);
    s[0] = (char)toupper((unsigned char)s[0]);
    return s;
}

static int snap_list(struct snap_op *op, json_t *args, struct mcp_error *err)
{
    const char *sid = json_string_value(json_object_get(args, "sandbox_id"));
    const char *state = json_string_value(json_object_get(args, "state"));
    const char *rid = sid ? osb_remote_id(sid, err) : NULL;
    if (sid != NULL && rid == NULL)
        return -1;
    op->owned = osb_snap_owned_set(op->b, op->owner, err);
    if (op->owned == NULL)
        return -1;
    cleanup_free char *erid = rid ? osb_escape(rid) : NULL;
    cleanup_free char *st = state && *state ? state_query(state) : NULL;
    cleanup_free char *est = st ? osb_escape(st) : NULL;
    op->query = xasprintf("%s%s%s%s%s%s", erid ? "sandboxId=" : "", erid ? erid : "",
                          erid ? "&" : "", est ? "state=" : "", est ? est : "", est ? "&" : "");
    op->acc = json_array();
    op->page = 1;
    cleanup_free char *path = xasprintf("/snapshots?%spage=1&pageSize=%d", op->query,
                                        OSB_LIST_PAGE_SIZE);
    struct osb_call_opts o = {.method = "GET", .what = "listing snapshots",
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    return osb_lifecycle_call(op->b, path, &o, list_done, op, err);
}

/* ---- delete ---------------------------------------------------------------------------------- */

static void delete_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct snap_op *op = arg;
    if (err != NULL && err->code == MCP_ERR_NOT_FOUND)
        osb_snap_forget(op->b, op->snap_id); /* gone on the server: gone for its owner too */
    if (err != NULL) {
        snap_finish(op, NULL, err);
        return;
    }
    osb_snap_forget(op->b, op->snap_id);
    snap_finish(op, json_pack("{s:s,s:b}", "snapshot_id", op->snap_id, "deleted", 1), NULL);
}

static int snap_delete(struct snap_op *op, json_t *args, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(args, "snapshot_id"));
    if (id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "action \"delete\" needs snapshot_id");
    if (osb_snapshot_id_check(id, err) != 0 || osb_snap_owned(op->b, id, op->owner, err) != 0)
        return -1;
    op->snap_id = xstrdup(id);
    cleanup_free char *path = xasprintf("/snapshots/%s", id);
    struct osb_call_opts o = {.method = "DELETE", .what = "deleting the snapshot",
                              .retry = HTTPC_RETRY_IDEMPOTENT};
    return osb_lifecycle_call(op->b, path, &o, delete_done, op, err);
}

/* ---- get (issue 36: snapshot_sandbox's get) ---------------------------------------------------- */

static void get_done(void *arg, struct httpc_response *resp, const struct mcp_error *err)
{
    struct snap_op *op = arg;
    struct mcp_error e;
    cleanup_json json_t *j = err ? NULL : osb_resp_json(resp, "reading the snapshot", &e);
    if (j == NULL) {
        snap_finish(op, NULL, err ? err : &e);
        return;
    }
    snap_finish(op, osb_snapshot_info(j), NULL);
}

static int snap_get(struct snap_op *op, json_t *args, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(args, "snapshot_id"));
    if (id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "action \"get\" needs snapshot_id");
    if (osb_snapshot_id_check(id, err) != 0 || osb_snap_owned(op->b, id, op->owner, err) != 0)
        return -1;
    op->snap_id = xstrdup(id);
    cleanup_free char *path = xasprintf("/snapshots/%s", id);
    struct osb_call_opts o = {
        .method = "GET", .what = "reading the snapshot", .retry = HTTPC_RETRY_IDEMPOTENT};
    return osb_lifecycle_call(op->b, path, &o, get_done, op, err);
}

int osb_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                 backend_cb *cb, void *arg, struct mcp_error *err)
{
    struct osb_backend *b = osb_of(be);
    int (*fn)(struct snap_op *, json_t *, struct mcp_error *) =
        strcmp(action, "create") == 0   ? snap_create
        : strcmp(action, "list") == 0   ? snap_list
        : strcmp(action, "delete") == 0 ? snap_delete
        : strcmp(action, "get") == 0    ? snap_get
                                        : NULL;
    if (fn == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "unknown snapshot action \"%s\"; use "
                             "create, list, get or delete (fork and push: local sandboxes only)",
                             action);
    struct snap_op *op = snap_new(b, owner, cb, arg);
    if (fn(op, args, err) != 0)
        return snap_abandon(op);
    return 0;
}
