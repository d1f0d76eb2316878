/* Who owns which snapshot. OpenSandbox snapshots carry no metadata, so the owner is recorded in
 * the state store when mcpbox creates one; list, delete and restore only see the caller's own
 * snapshots (another owner's snapshot is reported exactly like a missing one). Without a store
 * (contract tests) nothing is recorded and nothing is filtered. */
#include <sqlite3.h>
#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/util.h"
#include "lib/store/store.h"

static const char *const snap_migrations[] = {
    "CREATE TABLE osb_snapshots (id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
    " sandbox_id TEXT NOT NULL, created_at_ms INTEGER NOT NULL);",
};

static int snap_db(struct osb_backend *b, sqlite3 **db, struct mcp_error *err)
{
    struct store *st = b->base.store;
    if (!b->snapshots_migrated &&
        store_migrate_module(st, "opensandbox_snapshots", snap_migrations,
                             sizeof(snap_migrations) / sizeof(snap_migrations[0]), err) != 0)
        return mcp_error_prefix(err, "preparing the snapshot table");
    b->snapshots_migrated = true;
    *db = store_db(st);
    return 0;
}

static int snap_exec(struct osb_backend *b, const char *sql, const char *a, const char *o,
                     const char *s, struct mcp_error *err)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (snap_db(b, &db, err) != 0)
        return -1;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
        if (o != NULL)
            sqlite3_bind_text(st, 2, o, -1, SQLITE_STATIC);
        if (s != NULL) {
            sqlite3_bind_text(st, 3, s, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 4, now_wall_ms());
        }
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return mcp_error_set(err, MCP_ERR_IO, 0, "snapshot table: %s",
                             sqlite3_errmsg(db));
    return rc == SQLITE_ROW ? 1 : 0;
}

int osb_snap_record(struct osb_backend *b, const char *id, const char *owner, const char *sid,
                    struct mcp_error *err)
{
    if (b->base.store == NULL)
        return 0;
    return snap_exec(b, "INSERT OR REPLACE INTO osb_snapshots VALUES (?1, ?2, ?3, ?4)", id,
                     owner, sid, err) < 0 ? -1 : 0;
}

int osb_snap_owned(struct osb_backend *b, const char *id, const char *owner,
                   struct mcp_error *err)
{
    if (b->base.store == NULL)
        return 0;
    int rc = snap_exec(b, "SELECT 1 FROM osb_snapshots WHERE id = ?1 AND owner = ?2", id, owner,
                       NULL, err);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                             "no snapshot %s (of yours); call snapshot_sandbox with action "
                             "\"list\"", id);
    return 0;
}

void osb_snap_forget(struct osb_backend *b, const char *id)
{
    struct mcp_error e;
    if (b->base.store != NULL)
        snap_exec(b, "DELETE FROM osb_snapshots WHERE id = ?1", id, NULL, NULL, &e);
}

json_t *osb_snap_owned_set(struct osb_backend *b, const char *owner, struct mcp_error *err)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (b->base.store == NULL)
        return json_null();
    if (snap_db(b, &db, err) != 0)
        return NULL;
    if (sqlite3_prepare_v2(db, "SELECT id FROM osb_snapshots WHERE owner = ?1", -1, &st, NULL) !=
        SQLITE_OK) {
        mcp_error_set(err, MCP_ERR_IO, 0, "snapshot table: %s", sqlite3_errmsg(db));
        return NULL;
    }
    sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
    json_t *set = json_object();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        json_object_set_new(set, (const char *)sqlite3_column_text(st, 0), json_true());
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) { /* a partial set would hide the owner's other snapshots */
        json_decref(set);
        mcp_error_set(err, MCP_ERR_IO, 0, "snapshot table: %s", sqlite3_errmsg(db));
        return NULL;
    }
    return set;
}
