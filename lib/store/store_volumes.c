/* Named volumes' records (store_volumes.h): a module table of the store, migrated on first use. */
#include "lib/store/store_volumes.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"
#include "lib/store/store.h"

static const char *const volume_migrations[] = {
    "CREATE TABLE volumes (id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL,"
    " size_limit INTEGER NOT NULL, created_at_ms INTEGER NOT NULL, UNIQUE (owner, name));",
};

static sqlite3 *volume_db(struct store *st, struct mcp_error *err)
{
    if (store_migrate_module(st, "volumes", volume_migrations,
                             sizeof volume_migrations / sizeof volume_migrations[0], err) < 0) {
        mcp_error_prefix(err, "preparing the volume table");
        return NULL;
    }
    return store_db(st);
}

static int db_failed(sqlite3 *db, sqlite3_stmt *stmt, struct mcp_error *err)
{
    sqlite3_finalize(stmt);
    return mcp_error_set(err, MCP_ERR_IO, 0, "volume table: %s", sqlite3_errmsg(db));
}

void store_volume_release(struct store_volume *v)
{
    free(v->owner);
    v->owner = NULL;
}

int store_volume_insert(struct store *st, const struct store_volume *v, struct mcp_error *err)
{
    sqlite3 *db = volume_db(st, err);
    sqlite3_stmt *stmt = NULL;
    if (db == NULL)
        return -1;
    if (sqlite3_prepare_v2(db, "INSERT INTO volumes VALUES (?1, ?2, ?3, ?4, ?5)", -1, &stmt,
                           NULL) != SQLITE_OK)
        return db_failed(db, stmt, err);
    sqlite3_bind_text(stmt, 1, v->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, v->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 3, v->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 4, (sqlite3_int64)v->size_limit);
    sqlite3_bind_int64(stmt, 5, v->created_at_ms);
    int rc = sqlite3_step(stmt);
    if ((rc & 0xff) == SQLITE_CONSTRAINT) { /* the store turns on extended codes */
        sqlite3_finalize(stmt);
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "you already have a volume called %s: use it, or delete it first",
                             v->name);
    }
    if (rc != SQLITE_DONE)
        return db_failed(db, stmt, err);
    sqlite3_finalize(stmt);
    return 0;
}

static void row_to_volume(sqlite3_stmt *stmt, struct store_volume *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->id, sizeof v->id, "%s", (const char *)sqlite3_column_text(stmt, 0));
    v->owner = xstrdup((const char *)sqlite3_column_text(stmt, 1));
    snprintf(v->name, sizeof v->name, "%s", (const char *)sqlite3_column_text(stmt, 2));
    v->size_limit = (uint64_t)sqlite3_column_int64(stmt, 3);
    v->created_at_ms = sqlite3_column_int64(stmt, 4);
}

int store_volume_get(struct store *st, const char *owner, const char *name,
                     struct store_volume *out, struct mcp_error *err)
{
    sqlite3 *db = volume_db(st, err);
    sqlite3_stmt *stmt = NULL;
    if (db == NULL)
        return -1;
    if (sqlite3_prepare_v2(db, "SELECT * FROM volumes WHERE owner = ?1 AND name = ?2", -1, &stmt,
                           NULL) != SQLITE_OK)
        return db_failed(db, stmt, err);
    sqlite3_bind_text(stmt, 1, owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        row_to_volume(stmt, out);
    else if (rc != SQLITE_DONE)
        return db_failed(db, stmt, err);
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW;
}

int store_volume_list(struct store *st, const char *owner, struct store_volume **out, size_t *n,
                      struct mcp_error *err)
{
    sqlite3 *db = volume_db(st, err);
    sqlite3_stmt *stmt = NULL;
    *out = NULL;
    *n = 0;
    if (db == NULL)
        return -1;
    if (sqlite3_prepare_v2(db, "SELECT * FROM volumes WHERE ?1 IS NULL OR owner = ?1 ORDER BY name",
                           -1, &stmt, NULL) != SQLITE_OK)
        return db_failed(db, stmt, err);
    sqlite3_bind_text(stmt, 1, owner, -1, SQLITE_STATIC);
    int rc;
    size_t cap = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        if (*n == cap)
            *out = xrealloc(*out, (cap = cap ? 2 * cap : 8) * sizeof **out);
        row_to_volume(stmt, &(*out)[(*n)++]);
    }
    if (rc != SQLITE_DONE) {
        store_volume_list_free(*out, *n);
        *out = NULL;
        *n = 0;
        return db_failed(db, stmt, err);
    }
    sqlite3_finalize(stmt);
    return 0;
}

void store_volume_list_free(struct store_volume *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_volume_release(&list[i]);
    free(list);
}

int store_volume_delete(struct store *st, const char *id, struct mcp_error *err)
{
    sqlite3 *db = volume_db(st, err);
    sqlite3_stmt *stmt = NULL;
    if (db == NULL)
        return -1;
    if (sqlite3_prepare_v2(db, "DELETE FROM volumes WHERE id = ?1", -1, &stmt, NULL) != SQLITE_OK)
        return db_failed(db, stmt, err);
    sqlite3_bind_text(stmt, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) != SQLITE_DONE)
        return db_failed(db, stmt, err);
    sqlite3_finalize(stmt);
    return 0;
}
