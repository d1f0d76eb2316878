/* Which execd session an MCP session name of a sandbox maps to (session.c). Kept in the state
 * store, so that a restarted mcpbox finds the session its predecessor started; without a store
 * (contract tests) in memory only. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "backend/opensandbox/osb.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

static const char *const sess_migrations[] = {
    "CREATE TABLE osb_sessions (sandbox_id TEXT NOT NULL, name TEXT NOT NULL,"
    " session_id TEXT NOT NULL, PRIMARY KEY (sandbox_id, name));",
};

/* The prepared statement with ?1..?3 bound to a, n, id (NULL: unbound), or NULL. */
static sqlite3_stmt *sess_stmt(struct osb_backend *b, const char *sql, const char *a, const char *n,
                               const char *id)
{
    struct mcp_error err;
    if (!b->sessions_migrated &&
        store_migrate_module(b->base.store, "opensandbox_sessions", sess_migrations,
                             sizeof(sess_migrations) / sizeof(sess_migrations[0]), &err) != 0)
        return NULL;
    b->sessions_migrated = true;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(store_db(b->base.store), sql, -1, &st, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
    if (n != NULL)
        sqlite3_bind_text(st, 2, n, -1, SQLITE_STATIC);
    if (id != NULL)
        sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    return st;
}

static char *mem_key(const char *sid, const char *name)
{
    return xasprintf("%s/%s", sid, name);
}

char *osb_sess_lookup(struct osb_backend *b, const char *sid, const char *name)
{
    if (b->base.store == NULL) {
        char *k = mem_key(sid, name);
        const char *id = json_string_value(json_object_get(b->sessions, k));
        free(k);
        return id ? xstrdup(id) : NULL;
    }
    sqlite3_stmt *st =
        sess_stmt(b, "SELECT session_id FROM osb_sessions WHERE sandbox_id = ?1 AND name = ?2", sid,
                  name, NULL);
    char *id = NULL;
    if (st != NULL && sqlite3_step(st) == SQLITE_ROW)
        id = xstrdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return id;
}

void osb_sess_record(struct osb_backend *b, const char *sid, const char *name, const char *id)
{
    if (b->base.store == NULL) {
        if (b->sessions == NULL)
            b->sessions = json_object();
        char *k = mem_key(sid, name);
        json_object_set_new(b->sessions, k, json_string(id));
        free(k);
        return;
    }
    sqlite3_stmt *st =
        sess_stmt(b, "INSERT OR REPLACE INTO osb_sessions VALUES (?1, ?2, ?3)", sid, name, id);
    if (st != NULL)
        sqlite3_step(st);
    sqlite3_finalize(st);
}

void osb_sess_forget(struct osb_backend *b, const char *sid, const char *name)
{
    if (b->base.store == NULL) {
        char *k = mem_key(sid, name);
        json_object_del(b->sessions, k);
        free(k);
        return;
    }
    sqlite3_stmt *st = sess_stmt(b, "DELETE FROM osb_sessions WHERE sandbox_id = ?1 AND name = ?2",
                                 sid, name, NULL);
    if (st != NULL)
        sqlite3_step(st);
    sqlite3_finalize(st);
}

int osb_sess_count(struct osb_backend *b, const char *sid)
{
    int n = 0;
    if (b->base.store == NULL) {
        size_t len = strlen(sid);
        const char *k;
        json_t *v;
        json_object_foreach(b->sessions, k, v) n += strncmp(k, sid, len) == 0 && k[len] == '/';
        return n;
    }
    sqlite3_stmt *st =
        sess_stmt(b, "SELECT count(*) FROM osb_sessions WHERE sandbox_id = ?1", sid, NULL, NULL);
    if (st != NULL && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

void osb_sess_forget_id(struct osb_backend *b, const char *sid, const char *session_id)
{
    if (b->base.store == NULL) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(b->sessions, tmp, k, v)
        {
            if (strncmp(k, sid, strlen(sid)) == 0 && k[strlen(sid)] == '/' &&
                strcmp(json_string_value(v), session_id) == 0)
                json_object_del(b->sessions, k);
        }
        return;
    }
    sqlite3_stmt *st =
        sess_stmt(b, "DELETE FROM osb_sessions WHERE sandbox_id = ?1 AND session_id = ?2", sid,
                  session_id, NULL);
    if (st != NULL)
        sqlite3_step(st);
    sqlite3_finalize(st);
}
