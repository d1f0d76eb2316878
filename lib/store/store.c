/* The state store on SQLite: connection setup, migrations and the statement cache.
 * Table access lives in store_tables.c. See store.h for the contract. */
#define LOG_MODULE "store"
#include "lib/store/store.h"
#include "lib/store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

/* The store's own schema, one script per version (never edit a shipped entry: append). */
static const char *const store_migrations[] = {
    /* 1: sandboxes, slots, events, audit */
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  backend TEXT NOT NULL,"
    "  owner TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  created_at_ms INTEGER NOT NULL,"
    "  expires_at_ms INTEGER NOT NULL DEFAULT 0,"
    "  idle_timeout_s INTEGER NOT NULL DEFAULT 0,"
    "  last_active_ms INTEGER NOT NULL DEFAULT 0,"
    "  record TEXT NOT NULL DEFAULT '{}'"
    ") STRICT;"
    "CREATE INDEX sandboxes_by_created ON sandboxes(created_at_ms, id);"
    "CREATE INDEX sandboxes_by_owner ON sandboxes(owner, created_at_ms);"
    /* A slot may be taken before the sandbox row exists (create allocates it first), so no
     * foreign key to sandboxes; the UNIQUE constraint keeps one slot per sandbox. */
    "CREATE TABLE slots ("
    "  slot INTEGER PRIMARY KEY NOT NULL CHECK (slot >= 0),"
    "  sandbox_id TEXT NOT NULL UNIQUE,"
    "  acquired_at_ms INTEGER NOT NULL"
    ") STRICT;"
    /* Events outlive their sandbox (diagnosis after destroy): no foreign key either. */
    "CREATE TABLE events ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  sandbox_id TEXT NOT NULL,"
    "  time_ms INTEGER NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  data TEXT"
    ") STRICT;"
    "CREATE INDEX events_by_sandbox ON events(sandbox_id, seq);"
    "CREATE INDEX events_by_time ON events(time_ms);"
    "CREATE TABLE audit ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  time_ms INTEGER NOT NULL,"
    "  owner TEXT NOT NULL,"
    "  tool TEXT NOT NULL,"
    "  sandbox_id TEXT,"
    "  outcome TEXT NOT NULL,"
    "  duration_ms INTEGER NOT NULL,"
    "  detail TEXT"
    ") STRICT;"
    "CREATE INDEX audit_by_time ON audit(time_ms);",
};

static const char *const store_statement_sql[STORE_STMT_COUNT] = {
    [STORE_STMT_VERSION_GET] = "SELECT version FROM schema_version WHERE module = ?1",
    [STORE_STMT_VERSION_SET] = "INSERT INTO schema_version(module, version) VALUES (?1, ?2) "
                               "ON CONFLICT(module) DO UPDATE SET version = excluded.version",
    [STORE_STMT_SANDBOX_INSERT] =
        "INSERT INTO sandboxes(id, backend, owner, state, created_at_ms, expires_at_ms, "
        "idle_timeout_s, last_active_ms, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [STORE_STMT_SANDBOX_UPDATE] =
        "UPDATE sandboxes SET backend = ?2, owner = ?3, state = ?4, created_at_ms = ?5, "
        "expires_at_ms = ?6, idle_timeout_s = ?7, last_active_ms = ?8, record = ?9 WHERE id = ?1",
    [STORE_STMT_SANDBOX_SET_STATE] = "UPDATE sandboxes SET state = ?2 WHERE id = ?1",
    [STORE_STMT_SANDBOX_TOUCH] = "UPDATE sandboxes SET last_active_ms = ?2 WHERE id = ?1",
    [STORE_STMT_SANDBOX_GET] =
        "SELECT id, backend, owner, state, created_at_ms, expires_at_ms, idle_timeout_s, "
        "last_active_ms, record FROM sandboxes WHERE id = ?1",
    [STORE_STMT_SANDBOX_LIST] =
        "SELECT id, backend, owner, state, created_at_ms, expires_at_ms, idle_timeout_s, "
        "last_active_ms, record FROM sandboxes WHERE (?1 IS NULL OR backend = ?1) "
        "AND (?2 IS NULL OR owner = ?2) ORDER BY created_at_ms, id",
    [STORE_STMT_SANDBOX_DELETE] = "DELETE FROM sandboxes WHERE id = ?1",
    [STORE_STMT_SLOT_OF] = "SELECT slot FROM slots WHERE sandbox_id = ?1",
    /* The lowest slot number not in use: 0 if free, else the smallest k+1 that is free. */
    [STORE_STMT_SLOT_FREE] =
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM slots WHERE slot = 0) THEN 0 "
        "ELSE (SELECT MIN(a.slot + 1) FROM slots a WHERE NOT EXISTS "
        "(SELECT 1 FROM slots b WHERE b.slot = a.slot + 1)) END",
    [STORE_STMT_SLOT_INSERT] =
        "INSERT INTO slots(slot, sandbox_id, acquired_at_ms) VALUES (?1, ?2, ?3)",
    [STORE_STMT_SLOT_DELETE] = "DELETE FROM slots WHERE sandbox_id = ?1",
    /* A slot leased host-wide (backend/local/uid_slots.c): a row of a dead sandbox of this
     * store that still names it is replaced. */
    [STORE_STMT_SLOT_CLAIM] =
        "INSERT OR REPLACE INTO slots(slot, sandbox_id, acquired_at_ms) VALUES (?1, ?2, ?3)",
    [STORE_STMT_EVENT_INSERT] =
        "INSERT INTO events(sandbox_id, time_ms, kind, data) VALUES (?1, ?2, ?3, ?4)",
    /* Keep only the newest ?2 events of one sandbox. */
    [STORE_STMT_EVENT_PRUNE] =
        "DELETE FROM events WHERE sandbox_id = ?1 AND seq <= (SELECT seq FROM events "
        "WHERE sandbox_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
    [STORE_STMT_EVENT_LIST] =
        "SELECT time_ms, kind, data FROM (SELECT seq, time_ms, kind, data FROM events "
        "WHERE sandbox_id = ?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq ASC",
    /* ?2 is a JSON object merged into the event's data (RFC 7396). */
    [STORE_STMT_EVENT_MERGE] =
        "UPDATE events SET data = json_patch(coalesce(data, '{}'), ?2) WHERE seq = ?1",
    [STORE_STMT_AUDIT_INSERT] =
        "INSERT INTO audit(time_ms, owner, tool, sandbox_id, outcome, duration_ms, detail) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    /* Rare (a destroy of a sandbox that is gone): a scan of the audit log is fine. */
    [STORE_STMT_AUDIT_OWNED] =
        "SELECT 1 FROM audit WHERE sandbox_id = ?1 AND owner = ?2 AND outcome = 'ok' AND "
        "tool IN ('create_sandbox', 'destroy_sandbox') LIMIT 1",
    /* Prepared like the others: through sqlite3_exec, parsing "BEGIN IMMEDIATE" and "COMMIT"
     * again cost 2-4 us of the 65 us of a store_event_add (p50). */
    [STORE_STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STORE_STMT_COMMIT] = "COMMIT",
};

/* ---- errors --------------------------------------------------------------------------------- */

static int store_code_for(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return MCP_ERR_UNAVAILABLE;
    case SQLITE_CONSTRAINT: return MCP_ERR_CONFLICT;
    case SQLITE_FULL: return MCP_ERR_LIMIT;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return MCP_ERR_DENIED;
    default: return MCP_ERR_IO;
    }
}

int store_fail(struct store *st, int rc, const char *what, struct mcp_error *err)
{
    int base = rc & 0xff;
    const char *detail = st->db != NULL ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
    if (base == SQLITE_NOTADB || base == SQLITE_CORRUPT)
        return mcp_error_set(err, MCP_ERR_IO, 0,
                             "state database %s is corrupt or not a SQLite database (%s) while "
                             "%s; move it aside (mv %s %s.bad) and mcpbox will start a new one, "
                             "losing its sandbox records",
                             st->db_path, detail, what, st->db_path, st->db_path);
    if (base == SQLITE_BUSY || base == SQLITE_LOCKED)
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                             "state database %s is locked by another mcpbox process (%s) while "
                             "%s; retry",
                             st->db_path, detail, what);
    return mcp_error_set(err, store_code_for(rc), 0, "state database %s: %s while %s",
                         st->db_path, detail, what);
}

/* ---- statements ----------------------------------------------------------------------------- */

sqlite3_stmt *store_stmt(struct store *st, enum store_stmt id, struct mcp_error *err)
{
    sqlite3_stmt *s = st->stmts[id];
    if (s != NULL) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        return s;
    }
    int rc = sqlite3_prepare_v3(st->db, store_statement_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                &s, NULL);
    if (rc != SQLITE_OK) {
        store_fail(st, rc, "preparing a statement", err);
        return NULL;
    }
    st->stmts[id] = s;
    return s;
}

/* Steps a statement that returns no rows, then resets it. */
int store_step_done(struct store *st, sqlite3_stmt *s, const char *what, struct mcp_error *err)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store_fail(st, rc, what, err);
    return 0;
}

int store_exec(struct store *st, const char *sql, const char *what, struct mcp_error *err)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, what, err);
    return 0;
}

int store_begin(struct store *st, struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_BEGIN, err);
    return s ? store_step_done(st, s, "starting a transaction", err) : -1;
}

int store_commit(struct store *st, struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_COMMIT, err);
    if (s == NULL || store_step_done(st, s, "committing", err) < 0) {
        store_rollback(st);
        return -1;
    }
    return 0;
}

void store_rollback(struct store *st)
{
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

/* ---- migrations ----------------------------------------------------------------------------- */

static int store_version_get(struct store *st, const char *module, int64_t *version,
                             struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_VERSION_GET, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, module, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    *version = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(st, rc, "reading the schema version", err);
    return 0;
}

static int store_version_set(struct store *st, const char *module, int64_t version,
                             struct mcp_error *err)
{
    sqlite3_stmt *s = store_stmt(st, STORE_STMT_VERSION_SET, err);
    if (s == NULL)
        return -1;
    sqlite3_bind_text(s, 1, module, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, version);
    return store_step_done(st, s, "recording the schema version", err);
}

/* Applies the next migration if one is pending. Returns 1 if one ran, 0 if up to date. Runs
 * under BEGIN IMMEDIATE so two processes opening a fresh file never both apply a script. */
static int store_migrate_step(struct store *st, const char *module,
                              const char *const *migrations, size_t n, struct mcp_error *err)
{
    int64_t version;
    if (store_begin(st, err) < 0)
        return -1;
    if (store_version_get(st, module, &version, err) < 0)
        goto fail;
    if (version > (int64_t)n) {
        mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                      "state database %s has schema version %lld for module '%s' but this "
                      "mcpbox knows only %zu; a newer mcpbox wrote it: upgrade mcpbox or use "
                      "another --state-dir",
                      st->db_path, (long long)version, module, n);
        goto fail;
    }
    if (version == (int64_t)n) {
        store_rollback(st);
        return 0;
    }
    if (store_exec(st, migrations[version], "applying a migration", err) < 0 ||
        store_version_set(st, module, version + 1, err) < 0 || store_commit(st, err) < 0) {
        mcp_error_prefix(err, "migration %lld of module '%s'", (long long)version + 1, module);
        goto fail;
    }
    return 1;
fail:
    store_rollback(st);
    return -1;
}

int store_migrate_module(struct store *st, const char *module, const char *const *migrations,
                         size_t n, struct mcp_error *err)
{
    if (module == NULL || *module == '\0' || (n > 0 && migrations == NULL))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "store_migrate_module: bad arguments");
    for (;;) {
        int r = store_migrate_step(st, module, migrations, n, err);
        if (r <= 0)
            return r;
    }
}

/* ---- open/close ----------------------------------------------------------------------------- */

/* mkdir -p with mode 0700 for every directory it creates. */
static int store_mkdirs(const char *dir, struct mcp_error *err)
{
    cleanup_free char *path = xstrdup(dir);
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, STORE_DIR_MODE) < 0 && errno != EEXIST)
            return mcp_error_set(err, MCP_ERR_IO, errno, "creating state directory %s", path);
        *p = '/';
    }
    if (mkdir(path, STORE_DIR_MODE) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "creating state directory %s", path);
    return 0;
}

static int store_check_dir(const char *dir, struct mcp_error *err)
{
    struct stat sb;
    if (lstat(dir, &sb) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "state directory %s", dir);
    if (!S_ISDIR(sb.st_mode))
        return mcp_error_set(err, MCP_ERR_IO, ENOTDIR,
                             "state directory %s is not a directory; pass --state-dir DIR", dir);
    if (sb.st_uid != geteuid())
        return mcp_error_set(err, MCP_ERR_DENIED, 0,
                             "state directory %s belongs to uid %u, not to you (uid %u); pass "
                             "--state-dir with a directory of your own",
                             dir, (unsigned)sb.st_uid, (unsigned)geteuid());
    if ((sb.st_mode & 022) != 0)
        log_warn("state directory %s is writable by group or others (mode %03o); "
                 "chmod 700 %s",
                 dir, (unsigned)(sb.st_mode & 0777), dir);
    return 0;
}

/* Creates the database file 0600 ourselves (SQLite would use 0644) and refuses a symlink. */
static int store_create_db_file(const char *path, struct mcp_error *err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, STORE_FILE_MODE);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno,
                             "opening state database %s (it must be a regular file)", path);
    close(fd);
    return 0;
}

/* SQLite's page cache (per connection) keeps every page it has read, up to 2 MiB by default:
 * the events and audit tables grow with every sandbox and call (about 1 KiB per sandbox), so a
 * long-running server's heap grew with them (RssAnon +0.8 KiB per sandbox). Lookups are by key
 * and inserts append: a few hot pages. 256 KiB bounds it; a miss is a read of the OS cache. */
#define STORE_CACHE_PAGES_PRAGMA "-256"

static int store_configure(struct store *st, struct mcp_error *err)
{
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(st->db, 1);
    /* journal_mode is the first statement to read the file header: a corrupt file fails here. */
    if (store_exec(st, "PRAGMA journal_mode=WAL", "enabling WAL", err) < 0 ||
        store_exec(st, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=" STORE_CACHE_PAGES_PRAGMA,
                   "configuring", err) < 0)
        return -1;
    return store_exec(st,
                      "CREATE TABLE IF NOT EXISTS schema_version ("
                      " module TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)",
                      "creating the schema_version table", err);
}

/* Old events of sandboxes that are gone, and old audit rows, are dropped at open. */
static void store_expire_old_rows(struct store *st)
{
    char sql[256];
    int64_t now = now_wall_ms();
    snprintf(sql, sizeof(sql),
             "DELETE FROM events WHERE time_ms < %lld AND sandbox_id NOT IN "
             "(SELECT id FROM sandboxes); DELETE FROM audit WHERE time_ms < %lld",
             (long long)(now - STORE_EVENT_RETENTION_MS), (long long)(now - STORE_AUDIT_RETENTION_MS));
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        log_warn("pruning old events/audit rows: %s", sqlite3_errmsg(st->db));
}

static int store_open_db(struct store *st, struct mcp_error *err)
{
    if (store_create_db_file(st->db_path, err) < 0)
        return -1;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW |
                SQLITE_OPEN_FULLMUTEX;
    int rc = sqlite3_open_v2(st->db_path, &st->db, flags, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "opening", err);
    if (store_configure(st, err) < 0 ||
        store_migrate_module(st, STORE_MODULE, store_migrations, ARRAY_SIZE(store_migrations),
                             err) < 0)
        return -1;
    store_expire_old_rows(st);
    return 0;
}

int store_check_state_dir(const char *state_dir, struct mcp_error *err)
{
    if (state_dir == NULL || *state_dir == '\0')
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "no state directory given");
    if (store_mkdirs(state_dir, err) < 0 || store_check_dir(state_dir, err) < 0)
        return -1;
    return 0;
}

struct store *store_open(const char *state_dir, struct mcp_error *err)
{
    if (store_check_state_dir(state_dir, err) < 0)
        return NULL;
    struct store *st = xcalloc(1, sizeof(*st));
    st->state_dir = xstrdup(state_dir);
    st->db_path = xasprintf("%s/%s", state_dir, STORE_DB_NAME);
    if (store_open_db(st, err) < 0) {
        store_close(st);
        return NULL;
    }
    return st;
}

void store_close(struct store *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < STORE_STMT_COUNT; i++)
        sqlite3_finalize(st->stmts[i]);
    sqlite3_close(st->db);
    free(st->state_dir);
    free(st->db_path);
    free(st);
}

const char *store_state_dir(const struct store *st)
{
    return st->state_dir;
}

struct sqlite3 *store_db(struct store *st)
{
    return st->db;
}
