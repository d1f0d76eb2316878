/* The state store: one SQLite file (WAL) in the state directory, shared by every mcpbox process
 * on the machine (a stdio server per Claude Code conversation, an HTTP server, the CLI).
 *
 * It holds the sandboxes of every backend (id, backend, owner, state, times and a JSON record
 * with the rest), the local backend's uid/gid slots, a per-sandbox event log (for
 * diagnose_sandbox) and the audit log of tool calls. Calls are synchronous and short (WAL,
 * synchronous=NORMAL, busy_timeout); they run on the loop thread.
 *
 * Modules may keep tables of their own: store_migrate_module() applies their numbered
 * migrations once, under the same versioning as the store's own.
 */
#ifndef MCPBOX_STORE_H
#define MCPBOX_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

struct store;
struct sqlite3;

/* Opens (creating if needed, mode 0700) state_dir and state_dir/mcpbox.db, applies migrations. */
struct store *store_open(const char *state_dir, struct mcp_error *err);
/* What store_open checks of state_dir (created mode 0700 if missing; a directory of this user)
 * without opening the database: a cheap check at start for a server that opens it later. */
int store_check_state_dir(const char *state_dir, struct mcp_error *err);
void store_close(struct store *st);
const char *store_state_dir(const struct store *st);
/* The raw handle, for modules with their own tables. Borrowed. */
struct sqlite3 *store_db(struct store *st);

/* Applies migrations[version..n-1] of module (each one SQL script, run in a transaction). */
int store_migrate_module(struct store *st, const char *module, const char *const *migrations,
                         size_t n, struct mcp_error *err);

/* ---- sandboxes ------------------------------------------------------------------------------ */

struct store_sandbox {
    char *id;      /* owned */
    char *backend; /* owned: "local", "opensandbox" */
    char *owner;   /* owned */
    char *state;   /* owned: sandbox_state_name() */
    int64_t created_at_ms;
    int64_t expires_at_ms; /* 0: no TTL */
    int64_t idle_timeout_s; /* 0: none */
    int64_t last_active_ms;
    json_t *record; /* owned: everything else the backend wants to keep (image, limits, ...) */
};

void store_sandbox_release(struct store_sandbox *sb); /* frees fields; sb itself not freed */

/* MCP_ERR_CONFLICT if the id exists. */
int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, struct mcp_error *err);
/* The same, with the slot it holds (store_slot_claim) in one transaction: one commit. */
int store_sandbox_insert_with_slot(struct store *st, const struct store_sandbox *sb,
                                   uint32_t slot, struct mcp_error *err);
/* Rewrites every column of an existing row; MCP_ERR_NOT_FOUND if absent. */
int store_sandbox_update(struct store *st, const struct store_sandbox *sb, struct mcp_error *err);
int store_sandbox_set_state(struct store *st, const char *id, const char *state,
                            struct mcp_error *err);
/* Sets last_active_ms = now. */
int store_sandbox_touch(struct store *st, const char *id, struct mcp_error *err);
/* MCP_ERR_NOT_FOUND if absent (message names the id and suggests list_sandboxes). */
int store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out,
                      struct mcp_error *err);
/* The same without the record (out->record NULL): for the checks made on every tool call,
 * which need the owner and state only. */
int store_sandbox_peek(struct store *st, const char *id, struct store_sandbox *out,
                       struct mcp_error *err);
/* backend/owner NULL = any. *out is a malloc'd array of *n entries; free with
 * store_sandbox_list_free. Ordered by created_at. */
int store_sandbox_list(struct store *st, const char *backend, const char *owner,
                       struct store_sandbox **out, size_t *n, struct mcp_error *err);
void store_sandbox_list_free(struct store_sandbox *list, size_t n);
int store_sandbox_delete(struct store *st, const char *id, struct mcp_error *err);

/* ---- uid/gid slots (local backend): slot k maps sandbox root to host uid 100000+65536*k ---- */

/* Atomically takes the lowest free slot for sandbox_id. MCP_ERR_LIMIT when all are used. */
int store_slot_acquire(struct store *st, const char *sandbox_id, uint32_t max_slots,
                       uint32_t *slot, struct mcp_error *err);
int store_slot_release(struct store *st, const char *sandbox_id, struct mcp_error *err);
/* Records that sandbox_id holds `slot` (leased host-wide by the caller); replaces any row that
 * names the same slot or sandbox. */
int store_slot_claim(struct store *st, const char *sandbox_id, uint32_t slot,
                     struct mcp_error *err);
/* 1 and *slot when sandbox_id holds a slot, 0 when it holds none, -1 on error. */
int store_slot_of(struct store *st, const char *sandbox_id, uint32_t *slot, struct mcp_error *err);

/* ---- per-sandbox events (kept after destroy for a while, for diagnosis) ---------------------- */

/* kind: "created", "state", "oom_kill", "exit", "seccomp", "expired", ...; data may be NULL. */
int store_event_add(struct store *st, const char *sandbox_id, const char *kind, json_t *data,
                    struct mcp_error *err);
/* store_event_add, and the new event's number in *seq (for store_event_merge). */
int store_event_add_seq(struct store *st, const char *sandbox_id, const char *kind, json_t *data,
                        int64_t *seq, struct mcp_error *err);
/* Merges the object `fields` into event seq's data (a key set to null is removed): 1 when done,
 * 0 when that event is no longer kept (pruned by newer ones), -1 on error. */
int store_event_merge(struct store *st, int64_t seq, json_t *fields, struct mcp_error *err);
/* The newest `limit` events, oldest first: [{time, kind, data}] (new reference in *out). */
int store_event_list(struct store *st, const char *sandbox_id, size_t limit, json_t **out,
                     struct mcp_error *err);

/* ---- audit ------------------------------------------------------------------------------------ */

/* One row per tool call: who, what, when, outcome. Never file contents or command output. */
int store_audit(struct store *st, const char *owner, const char *tool, const char *sandbox_id,
                const char *outcome, int64_t duration_ms, const char *detail,
                struct mcp_error *err);
/* Whether owner created or destroyed sandbox_id through the tools (its audit rows, kept as long
 * as the audit log keeps them): 1 yes, 0 no, -1 with err. */
int store_audit_owned(struct store *st, const char *owner, const char *sandbox_id,
                      struct mcp_error *err);

#endif
