/* Secrets the person defines for egress injection (docs/secrets.md): a name, where its value
 * comes from, the hosts it may be sent to and how (a header, a placeholder). The definitions live
 * in <state_dir>/secrets.json (0600, owner only); the agent binds names to a sandbox and the
 * local backend's egress proxy adds the value to requests to those hosts. A value is never
 * written into a record, a log, an event or a tool result: only names and hosts are. */
#ifndef MCPBOX_BACKEND_SECRETS_H
#define MCPBOX_BACKEND_SECRETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/base/error.h"

#define SECRET_NAME_MAX 64
#define SECRET_VALUE_MAX 8192 /* a value longer than this is refused when read */
#define SECRET_HOSTS_MAX 16
#define SECRET_PLACEHOLDER_PREFIX "MCPBOX_SECRET_"
#define SECRET_PLACEHOLDER_MAX (sizeof SECRET_PLACEHOLDER_PREFIX + SECRET_NAME_MAX)
#define SECRETS_FILE "secrets.json"

/* Letters, digits and '_', starting with a letter, at most SECRET_NAME_MAX. */
bool secret_name_ok(const char *name);
/* MCPBOX_SECRET_<NAME in upper case>: what the sandbox's env carries instead of the value. */
void secret_placeholder(const char *name, char out[SECRET_PLACEHOLDER_MAX]);

/* The definitions, {name: definition} (an empty object when there is no file yet); NULL with err
 * when the file is unreadable, not the owner's, open to others or not JSON. */
json_t *secrets_load(const char *state_dir, struct mcp_error *err);
/* Sets this process's core dump size to 0 (hard limit too), once: called as soon as a value
 * may be in its memory, so a crash never writes one to disk. */
void secrets_no_core_dumps(void);
/* Replaces the file (written 0600 beside it, then renamed). */
int secrets_save(const char *state_dir, const json_t *defs, struct mcp_error *err);

/* Checks one definition: hosts (names or *.suffix), header "Name: ...{}..." (no CR/LF), from
 * {value}|{file}|{command}, placeholder and egress booleans. */
int secret_def_check(const char *name, const json_t *def, struct mcp_error *err);
/* Whether def may be sent to host (a normalized name): one of its hosts, or below a *.suffix. */
bool secret_host_matches(const json_t *def, const char *host);
/* The value, read now (a file read, a command run: blocking, call it off the loop). New string
 * of *len bytes; NULL with err when it cannot be read, is empty, too long or holds CR, LF or NUL
 * (a header must stay one line). The message never holds the value. */
char *secret_value(const json_t *def, size_t *len, struct mcp_error *err);

/* What an agent or a person may see of the definitions: [{name, hosts, header?, placeholder?,
 * egress}], sorted by name, never a value or where it comes from. New array. */
json_t *secrets_describe(const json_t *defs);
/* diagnose_sandbox's list of a sandbox's bound secret names: [{name, hosts, defined}] (defined:
 * false for a name whose definition was removed since). New array. */
json_t *secrets_bound_list(const json_t *names, const json_t *defs);
/* "a, b, c" of the names in defs (for an error that lists them); "none" when empty. New. */
char *secrets_names_text(const json_t *defs);

#endif
