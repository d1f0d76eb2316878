/* The store's tables: sandboxes, uid/gid slots, per-sandbox events and the audit log. */
#define LOG_MODULE "store"
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "lib/store/store_internal.h"

/* ---- sandboxes ------------------------------------------------------------------------------ */

void store_sandbox_release(struct store_sandbox *sb)
{
    if (sb == NULL)
        return;
    free(sb->id);
    free(sb->backend);
    free(sb->owner);
    free(sb->state);
    json_decref(sb->record);
    memset(sb, 0, sizeof(*sb));
}

static int store_sandbox_check(const struct store_sandbox *sb, struct mcp_error *err)
{
    if (sb == NULL || sb->id == NULL || sb->backend == NULL || sb->owner == NULL ||
        sb->state == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "sandbox record needs id, backend, owner and state");
    if (sb->record != NULL && !json_is_object(sb->record))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "sandbox %s: record must be a JSON object", sb->id);
    return 0;
}

/* Binds ?1..?9 in the column order shared by insert and update. */
static void store_sandbox_bind(sqlite3_stmt *s, const struct store_sandbox *sb, char *record)
{
    sqlite3_bind_text(s, 1, sb->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, sb->backend, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, sb->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, sb->state, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, sb->created_at_ms);
    sqlite3_bind_int64(s, 6, sb->expires_at_ms);
    sqlite3_bind_int64(s, 7, sb->idle_timeout_s);
    sqlite3_bind_int64(s, 8, sb->last_active_ms);
    sqlite3_bind_text(s, 9, record, -1, SQLITE_STATIC);
}

static char *store_record_text(const struct store_sandbox *sb)
{
    if (sb->record == NULL)
        return xstrdup("{}");
    return json_dumps(sb->record, JSON_COMPACT | JSON_SORT_KEYS);
}

int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, struct mcp_error *err)
{
    if (store_sandbox_check(sb, err) < 0)
        return -1;
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SANDBOX_INSERT, err);
    if (s == NULL)
        return -1;
    cleanup_free char *record = store_record_text(sb);
    store_sandbox_bind(s, sb, record);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "sandbox %s already exists", sb->id);
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, "inserting a sandbox", err);
    return 0;
}

static int store_not_found(const char *id, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                         "no sandbox %s; call list_sandboxes to see the sandboxes you have", id);
}

/* Steps a one-row UPDATE/DELETE keyed by id: NOT_FOUND if it matched no row. */
static int store_step_one(struct store *st, sqlite3_stmt *s, const char *id, const char *what,
                          struct mcp_error *err)
{
    if (store_step_done(st, s, what, err) < 0)
        return -1;
    if (sqlite3_changes(st->db) == 0)
        return store_not_found(id, err);
    return 0;
}

int store_sandbox_update(struct store *st, const struct store_sandbox *sb, struct mcp_error *err)
{
    if (store_sandbox_check(sb, err) < 0)
        return -1;
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SANDBOX_UPDATE, err);
    if (s == NULL)
        return -1;
    cleanup_free char *record = store_record_text(sb);
    store_sandbox_bind(s, sb, record);
    return store_step_one(st, s, sb->id, "updating a sandbox", err);
}

int store_sandbox_set_state(struct store *st, const char *id, const char *state,
                            struct mcp_error *err)
{
    if (id == NULL || state == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "set_state needs an id and a state");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SANDBOX_SET_STATE, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, state, -1, SQLITE_STATIC);
    return store_step_one(st, s, id, "setting a sandbox's state", err);
}

int store_sandbox_touch(struct store *st, const char *id, struct mcp_error *err)
{
    if (id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "touch needs an id");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SANDBOX_TOUCH, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_wall_ms());
    return store_step_one(st, s, id, "touching a sandbox", err);
}

static char *store_col_text(sqlite3_stmt *s, int col)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    return xstrdup(t != NULL ? (const char *)t : "");
}

/* Reads the row the statement is on (columns in the SELECT order of get/list); the record
 * only if asked (its JSON parse is most of a get's cost). */
static void store_sandbox_read(sqlite3_stmt *s, struct store_sandbox *out, bool with_record)
{
    out->id = store_col_text(s, 0);
    out->backend = store_col_text(s, 1);
    out->owner = store_col_text(s, 2);
    out->state = store_col_text(s, 3);
    out->created_at_ms = sqlite3_column_int64(s, 4);
    out->expires_at_ms = sqlite3_column_int64(s, 5);
    out->idle_timeout_s = sqlite3_column_int64(s, 6);
    out->last_active_ms = sqlite3_column_int64(s, 7);
    if (!with_record)
        return;
    const char *rec = (const char *)sqlite3_column_text(s, 8);
    out->record = rec != NULL ? json_loads(rec, 0, NULL) : NULL;
    if (!json_is_object(out->record)) {
        /* Only a hand-edited database gets here; keep the row usable. */
        log_warn("sandbox %s: stored record is not a JSON object; using {}", out->id);
        json_decref(out->record);
        out->record = json_object();
    }
}

static int store_sandbox_fetch(struct store *st, const char *id, struct store_sandbox *out,
                               bool with_record, struct mcp_error *err)
{
    memset(out, 0, sizeof(*out));
    if (id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "get needs an id");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SANDBOX_GET, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        store_sandbox_read(s, out, with_record);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE)
        return store_not_found(id, err);
    if (rc != SQLITE_ROW)
        return store_fail(st, rc, "reading a sandbox", err);
    return 0;
}

int store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out,
                      struct mcp_error *err)
{
    return store_sandbox_fetch(st, id, out, true, err);
}

int store_sandbox_peek(struct store *st, const char *id, struct store_sandbox *out,
                       struct mcp_error *err)
{
    return store_sandbox_fetch(st, id, out, false, err);
}

int store_sandbox_list(struct store *st, const char *backend, const char *owner,
                       struct store_sandbox **out, size_t *n, struct mcp_error *err)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SANDBOX_LIST, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, backend, -1, SQLITE_STATIC); /* NULL binds SQL NULL */
    sqlite3_bind_text(s, 2, owner, -1, SQLITE_STATIC);
    struct store_sandbox *list = NULL;
    size_t count = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            list = xrealloc(list, cap * sizeof(*list));
        }
        memset(&list[count], 0, sizeof(list[count]));
        store_sandbox_read(s, &list[count++], true);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        store_sandbox_list_free(list, count);
        return store_fail(st, rc, "listing sandboxes", err);
    }
    *out = list;
    *n = count;
    return 0;
}

void store_sandbox_list_free(struct store_sandbox *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_sandbox_release(&list[i]);
    free(list);
}

int store_sandbox_delete(struct store *st, const char *id, struct mcp_error *err)
{
    if (id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "delete needs an id");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SANDBOX_DELETE, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    return store_step_one(st, s, id, "deleting a sandbox", err);
}

/* ---- slots ---------------------------------------------------------------------------------- */

/* One integer from a single-row query (bound by the caller); 1 = found, 0 = no row. */
static int store_query_int(struct store *st, sqlite3_stmt *s, int64_t *v, const char *what,
                           struct mcp_error *err)
{
    int rc = sqlite3_step(s);
    int found = rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL;
    if (found)
        *v = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(st, rc, what, err);
    return found;
}

/* Inside the transaction: the sandbox's slot if it has one, else the lowest free one taken. */
static int store_slot_take(struct store *st, const char *sandbox_id, uint32_t max_slots,
                           int64_t *slot, struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SLOT_OF, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    int r = store_query_int(st, s, slot, "reading a slot", err);
    if (r != 0)
        return r < 0 ? -1 : 0; /* already holds one: acquiring twice is harmless */
    if ((s = store_stmt(st, STORE_STMT_SLOT_FREE, err)) == NULL ||
        store_query_int(st, s, slot, "finding a free slot", err) < 0)
        return -1;
    if (*slot >= (int64_t)max_slots)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "all %u sandbox uid/gid slots are in use; destroy a sandbox "
                             "(mcpbox sandbox rm ID) and retry",
                             max_slots);
    if ((s = store_stmt(st, STORE_STMT_SLOT_INSERT, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, *slot);
    sqlite3_bind_text(s, 2, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now_wall_ms());
    return store_step_done(st, s, "taking a slot", err);
}

int store_slot_acquire(struct store *st, const char *sandbox_id, uint32_t max_slots,
                       uint32_t *slot, struct mcp_error *err)
{
    if (sandbox_id == NULL || slot == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "slot_acquire needs a sandbox id");
    int64_t v = 0;
    /* BEGIN IMMEDIATE takes the write lock first, so no two processes can see one free slot. */
    if (store_begin(st, err) < 0)
        return -1;
    if (store_slot_take(st, sandbox_id, max_slots, &v, err) < 0 || store_commit(st, err) < 0) {
        store_rollback(st);
        return -1;
    }
    *slot = (uint32_t)v;
    return 0;
}

int store_slot_release(struct store *st, const char *sandbox_id, struct mcp_error *err)
{
    if (sandbox_id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "slot_release needs a sandbox id");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SLOT_DELETE, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    return store_step_done(st, s, "releasing a slot", err); /* releasing twice is harmless */
}

int store_slot_claim(struct store *st, const char *sandbox_id, uint32_t slot,
                     struct mcp_error *err)
{
    if (sandbox_id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "slot_claim needs a sandbox id");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SLOT_CLAIM, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, slot);
    sqlite3_bind_text(s, 2, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now_wall_ms());
    return store_step_done(st, s, "recording a slot", err);
}

int store_sandbox_insert_with_slot(struct store *st, const struct store_sandbox *sb,
                                   uint32_t slot, struct mcp_error *err)
{
    if (store_begin(st, err) < 0)
        return -1;
    if (store_sandbox_insert(st, sb, err) < 0 || store_slot_claim(st, sb->id, slot, err) < 0 ||
        store_commit(st, err) < 0) {
        store_rollback(st);
        return -1;
    }
    return 0;
}

int store_slot_of(struct store *st, const char *sandbox_id, uint32_t *slot, struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_SLOT_OF, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    int64_t v = 0;
    int r = store_query_int(st, s, &v, "reading a slot", err);
    if (r == 1)
        *slot = (uint32_t)v;
    return r;
}

/* ---- events --------------------------------------------------------------------------------- */

static int store_event_insert(struct store *st, const char *sandbox_id, const char *kind,
                              const char *data, int64_t *seq, struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_EVENT_INSERT, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_wall_ms());
    sqlite3_bind_text(s, 3, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, data, -1, SQLITE_STATIC);
    if (store_step_done(st, s, "adding an event", err) < 0)
        return -1;
    if (seq != NULL)
        *seq = sqlite3_last_insert_rowid(st->db);
    if ((s = store_stmt(st, STORE_STMT_EVENT_PRUNE, err)) == NULL)
        return -1;
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, STORE_EVENTS_PER_SANDBOX_MAX);
    return store_step_done(st, s, "pruning old events", err);
}

int store_event_add_seq(struct store *st, const char *sandbox_id, const char *kind, json_t *data,
                        int64_t *seq, struct mcp_error *err)
{
    if (sandbox_id == NULL || kind == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "an event needs a sandbox id and a kind");
    cleanup_free char *text = data != NULL ? json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY)
                                           : NULL;
    if (store_begin(st, err) < 0)
        return -1;
    if (store_event_insert(st, sandbox_id, kind, text, seq, err) < 0 || store_commit(st, err) < 0) {
        store_rollback(st);
        return -1;
    }
    return 0;
}

int store_event_add(struct store *st, const char *sandbox_id, const char *kind, json_t *data,
                    struct mcp_error *err)
{
    return store_event_add_seq(st, sandbox_id, kind, data, NULL, err);
}

int store_event_merge(struct store *st, int64_t seq, json_t *fields, struct mcp_error *err)
{
    if (!json_is_object(fields))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "an event merge needs an object");
    cleanup_free char *text = json_dumps(fields, JSON_COMPACT);
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_EVENT_MERGE, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, seq);
    sqlite3_bind_text(s, 2, text, -1, SQLITE_STATIC);
    if (store_step_done(st, s, "updating an event", err) < 0)
        return -1;
    return sqlite3_changes(st->db) > 0 ? 1 : 0;
}

static json_t *store_event_row(sqlite3_stmt *s)
{
    char when[32];
    format_rfc3339_ms(sqlite3_column_int64(s, 0), when);
    const char *data = (const char *)sqlite3_column_text(s, 2);
    json_t *d = data != NULL ? json_loads(data, JSON_DECODE_ANY, NULL) : NULL;
    return json_pack("{s:s, s:s, s:o}", "time", when, "kind",
                     (const char *)sqlite3_column_text(s, 1), "data", d ? d : json_null());
}

int store_event_list(struct store *st, const char *sandbox_id, size_t limit, json_t **out,
                     struct mcp_error *err)
{
    *out = NULL;
    if (sandbox_id == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "event_list needs a sandbox id");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_EVENT_LIST, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, limit > INT64_MAX ? INT64_MAX : (int64_t)limit);
    json_t *list = json_array();
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(list, store_event_row(s));
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        json_decref(list);
        return store_fail(st, rc, "listing events", err);
    }
    *out = list;
    return 0;
}

/* ---- audit ---------------------------------------------------------------------------------- */

int store_audit(struct store *st, const char *owner, const char *tool, const char *sandbox_id,
                const char *outcome, int64_t duration_ms, const char *detail,
                struct mcp_error *err)
{
    if (owner == NULL || tool == NULL || outcome == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "audit needs owner, tool and outcome");
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_AUDIT_INSERT, err);
    if (s == NULL)
        return -1;
    size_t dlen = detail != NULL ? strnlen(detail, STORE_AUDIT_DETAIL_MAX) : 0;
    sqlite3_bind_int64(s, 1, now_wall_ms());
    sqlite3_bind_text(s, 2, owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, tool, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, outcome, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, duration_ms);
    sqlite3_bind_text(s, 7, detail, (int)dlen, SQLITE_STATIC);
    return store_step_done(st, s, "writing the audit log", err);
}

int store_audit_owned(struct store *st, const char *owner, const char *sandbox_id,
                      struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_AUDIT_OWNED, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, owner, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0 : store_fail(st, rc, "reading the audit log", err);
}
