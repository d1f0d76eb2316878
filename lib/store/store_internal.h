/* Shared between the store's own files: the handle, the statement cache and SQL helpers. */
#ifndef MCPBOX_STORE_INTERNAL_H
#define MCPBOX_STORE_INTERNAL_H

#include <sqlite3.h>

#include "lib/base/error.h"
#include "lib/base/util.h"

#define STORE_DB_NAME "mcpbox.db"
#define STORE_MODULE "store"
#define STORE_DIR_MODE 0700
#define STORE_FILE_MODE 0600
/* Calls run on the loop thread: wait for another process's write at most this long. */
#define STORE_BUSY_TIMEOUT_MS 5000
/* The newest events kept per sandbox; older ones are dropped as new ones arrive. */
#define STORE_EVENTS_PER_SANDBOX_MAX 500
/* Events of destroyed sandboxes and audit rows are dropped (at open) after these ages. */
#define STORE_EVENT_RETENTION_MS (7LL * 24 * 3600 * 1000)
#define STORE_AUDIT_RETENTION_MS (90LL * 24 * 3600 * 1000)
/* The longest audit detail kept (it never holds file contents or command output anyway). */
#define STORE_AUDIT_DETAIL_MAX 1024

enum store_stmt {
    STORE_STMT_VERSION_GET,
    STORE_STMT_VERSION_SET,
    STORE_STMT_SANDBOX_INSERT,
    STORE_STMT_SANDBOX_UPDATE,
    STORE_STMT_SANDBOX_SET_STATE,
    STORE_STMT_SANDBOX_TOUCH,
    STORE_STMT_SANDBOX_GET,
    STORE_STMT_SANDBOX_LIST,
    STORE_STMT_SANDBOX_DELETE,
    STORE_STMT_SLOT_OF,
    STORE_STMT_SLOT_FREE,
    STORE_STMT_SLOT_INSERT,
    STORE_STMT_SLOT_DELETE,
    STORE_STMT_SLOT_CLAIM,
    STORE_STMT_EVENT_INSERT,
    STORE_STMT_EVENT_PRUNE,
    STORE_STMT_EVENT_LIST,
    STORE_STMT_EVENT_MERGE,
    STORE_STMT_AUDIT_INSERT,
    STORE_STMT_AUDIT_OWNED,
    STORE_STMT_BEGIN,
    STORE_STMT_COMMIT,
    STORE_STMT_COUNT
};

struct store {
    char *state_dir;
    char *db_path;
    sqlite3 *db;
    sqlite3_stmt *stmts[STORE_STMT_COUNT]; /* prepared on first use, kept until close */
};

/* Fills err from a SQLite result code (with the database path and what was being done). */
int store_fail(struct store *st, int rc, const char *what, struct mcp_error *err);
/* The cached statement, reset and with bindings cleared; NULL with err filled. */
sqlite3_stmt *store_stmt(struct store *st, enum store_stmt id, struct mcp_error *err);
int store_step_done(struct store *st, sqlite3_stmt *s, const char *what, struct mcp_error *err);
int store_exec(struct store *st, const char *sql, const char *what, struct mcp_error *err);
int store_begin(struct store *st, struct mcp_error *err); /* BEGIN IMMEDIATE */
int store_commit(struct store *st, struct mcp_error *err); /* rolls back if COMMIT fails */
void store_rollback(struct store *st);                     /* no-op outside a transaction */

#endif
