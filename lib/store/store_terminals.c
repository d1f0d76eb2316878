/* Terminals' records (store_terminals.h): a module table of the store, migrated on first use. */
#include "lib/store/store_terminals.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "lib/store/store_internal.h"

#define STORE_TERMINAL_START_MS 60000 /* a start not done by then is taken as dead */

static const char *const terminal_migrations[] = {
    "CREATE TABLE terminals (sandbox_id TEXT NOT NULL, terminal_id TEXT NOT NULL,"
    " command_id TEXT NOT NULL, seen INTEGER NOT NULL, exited INTEGER NOT NULL,"
    " reserved_ms INTEGER NOT NULL, PRIMARY KEY (sandbox_id, terminal_id));",
};

static sqlite3 *terminal_db(struct store *st, struct mcp_error *err)
{
    if (store_migrate_module(st, "terminals", terminal_migrations,
                             sizeof terminal_migrations / sizeof terminal_migrations[0], err) < 0) {
        mcp_error_prefix(err, "preparing the terminal table");
        return NULL;
    }
    return store_db(st);
}

static int db_failed(sqlite3 *db, sqlite3_stmt *stmt, struct mcp_error *err)
{
    sqlite3_finalize(stmt);
    return mcp_error_set(err, MCP_ERR_IO, 0, "terminal table: %s", sqlite3_errmsg(db));
}

/* Prepares sql and binds sandbox_id to ?1 and terminal_id (when not NULL) to ?2. */
static sqlite3_stmt *prepare(sqlite3 *db, const char *sql, const char *sandbox_id,
                             const char *terminal_id, struct mcp_error *err)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        db_failed(db, stmt, err);
        return NULL;
    }
    sqlite3_bind_text(stmt, 1, sandbox_id, -1, SQLITE_STATIC);
    if (terminal_id)
        sqlite3_bind_text(stmt, 2, terminal_id, -1, SQLITE_STATIC);
    return stmt;
}

/* Runs a statement that returns no rows; -1 with err. */
static int run(sqlite3 *db, sqlite3_stmt *stmt, struct mcp_error *err)
{
    if (stmt == NULL)
        return -1;
    if (sqlite3_step(stmt) != SQLITE_DONE)
        return db_failed(db, stmt, err);
    sqlite3_finalize(stmt);
    return 0;
}

static int count_live(sqlite3 *db, const char *sandbox_id, struct mcp_error *err)
{
    sqlite3_stmt *stmt = prepare(db,
                                 "SELECT count(*) FROM terminals WHERE sandbox_id = ?1 AND "
                                 "exited = 0",
                                 sandbox_id, NULL, err);
    if (stmt == NULL)
        return -1;
    if (sqlite3_step(stmt) != SQLITE_ROW)
        return db_failed(db, stmt, err);
    int n = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    return n;
}

static int reserve_in(struct store *st, sqlite3 *db, const char *sandbox_id,
                      const char *terminal_id, unsigned max, struct mcp_error *err)
{
    if (store_exec(st, "DELETE FROM terminals WHERE sandbox_id NOT IN (SELECT id FROM sandboxes)",
                   "dropping terminals of gone sandboxes", err) < 0)
        return -1;
    /* a start that never got its command (its process died before the exec was answered) */
    sqlite3_stmt *stale = prepare(db,
                                  "DELETE FROM terminals WHERE sandbox_id = ?1 AND command_id = '' "
                                  "AND reserved_ms < ?2",
                                  sandbox_id, NULL, err);
    if (stale)
        sqlite3_bind_int64(stale, 2, (sqlite3_int64)(now_wall_ms() - STORE_TERMINAL_START_MS));
    if (run(db, stale, err) < 0)
        return -1;
    int live = count_live(db, sandbox_id, err);
    if (live < 0)
        return -1;
    if ((unsigned)live >= max)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "the sandbox has the most terminals it may have (%u) open; close "
                             "one first",
                             max);
    sqlite3_stmt *stmt = prepare(db, "INSERT INTO terminals VALUES (?1, ?2, '', 0, 0, ?3)",
                                 sandbox_id, terminal_id, err);
    if (stmt == NULL)
        return -1;
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)now_wall_ms());
    int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "a terminal with this terminal_id exists already; use it, close it, "
                             "or start one without terminal_id");
    if (rc != SQLITE_DONE)
        return mcp_error_set(err, MCP_ERR_IO, 0, "terminal table: %s", sqlite3_errmsg(db));
    return 0;
}

int store_terminal_reserve(struct store *st, const char *sandbox_id, const char *terminal_id,
                           unsigned max, struct mcp_error *err)
{
    sqlite3 *db = terminal_db(st, err);
    if (db == NULL || store_begin(st, err) < 0)
        return -1;
    if (reserve_in(st, db, sandbox_id, terminal_id, max, err) < 0) {
        store_rollback(st);
        return -1;
    }
    return store_commit(st, err);
}

int store_terminal_set_command(struct store *st, const char *sandbox_id, const char *terminal_id,
                               const char *command_id, struct mcp_error *err)
{
    sqlite3 *db = terminal_db(st, err);
    sqlite3_stmt *stmt = db ? prepare(db,
                                      "UPDATE terminals SET command_id = ?3 WHERE sandbox_id = ?1 "
                                      "AND terminal_id = ?2",
                                      sandbox_id, terminal_id, err)
                            : NULL;
    if (stmt)
        sqlite3_bind_text(stmt, 3, command_id, -1, SQLITE_STATIC);
    return db ? run(db, stmt, err) : -1;
}

static void row_to_terminal(sqlite3_stmt *stmt, struct store_terminal *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->terminal_id, sizeof t->terminal_id, "%s",
             (const char *)sqlite3_column_text(stmt, 0));
    snprintf(t->command_id, sizeof t->command_id, "%s", (const char *)sqlite3_column_text(stmt, 1));
    t->seen = (uint64_t)sqlite3_column_int64(stmt, 2);
    t->exited = sqlite3_column_int(stmt, 3) != 0;
}

int store_terminal_get(struct store *st, const char *sandbox_id, const char *terminal_id,
                       struct store_terminal *out, struct mcp_error *err)
{
    sqlite3 *db = terminal_db(st, err);
    sqlite3_stmt *stmt = db ? prepare(db,
                                      "SELECT terminal_id, command_id, seen, exited FROM "
                                      "terminals WHERE sandbox_id = ?1 AND terminal_id = ?2",
                                      sandbox_id, terminal_id, err)
                            : NULL;
    if (stmt == NULL)
        return -1;
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        row_to_terminal(stmt, out);
        sqlite3_finalize(stmt);
        return 0;
    }
    if (rc != SQLITE_DONE)
        return db_failed(db, stmt, err);
    sqlite3_finalize(stmt);
    return mcp_error_set(err, MCP_ERR_NOT_FOUND, 0,
                         "no terminal with this terminal_id in the sandbox (it was closed, or "
                         "never started); start one with action start");
}

int store_terminal_set_seen(struct store *st, const char *sandbox_id, const char *terminal_id,
                            uint64_t seen, bool exited, struct mcp_error *err)
{
    sqlite3 *db = terminal_db(st, err);
    sqlite3_stmt *stmt = db ? prepare(db,
                                      "UPDATE terminals SET seen = ?3, exited = ?4 WHERE "
                                      "sandbox_id = ?1 AND terminal_id = ?2",
                                      sandbox_id, terminal_id, err)
                            : NULL;
    if (stmt) {
        sqlite3_bind_int64(stmt, 3, (sqlite3_int64)seen);
        sqlite3_bind_int(stmt, 4, exited ? 1 : 0);
    }
    return db ? run(db, stmt, err) : -1;
}

int store_terminal_delete(struct store *st, const char *sandbox_id, const char *terminal_id,
                          struct mcp_error *err)
{
    sqlite3 *db = terminal_db(st, err);
    sqlite3_stmt *stmt =
        db ? prepare(db, "DELETE FROM terminals WHERE sandbox_id = ?1 AND terminal_id = ?2",
                     sandbox_id, terminal_id, err)
           : NULL;
    return db ? run(db, stmt, err) : -1;
}

int store_terminal_live(struct store *st, const char *sandbox_id, struct store_terminal **out,
                        size_t *n, struct mcp_error *err)
{
    *out = NULL;
    *n = 0;
    sqlite3 *db = terminal_db(st, err);
    sqlite3_stmt *stmt = db ? prepare(db,
                                      "SELECT terminal_id, command_id, seen, exited FROM "
                                      "terminals WHERE sandbox_id = ?1 AND exited = 0",
                                      sandbox_id, NULL, err)
                            : NULL;
    if (stmt == NULL)
        return -1;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        *out = xrealloc(*out, (*n + 1) * sizeof **out);
        row_to_terminal(stmt, &(*out)[(*n)++]);
    }
    if (rc != SQLITE_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return db_failed(db, stmt, err);
    }
    sqlite3_finalize(stmt);
    return 0;
}
