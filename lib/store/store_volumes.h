/* Named volumes' records (issue 36): one row per volume, in the state store, so that every
 * mcpbox process on the state directory (stdio servers, an HTTP server, the CLI) sees the same
 * volumes. A volume belongs to one owner (the sandbox owner model: docs/security.md); its name
 * is unique per owner, and another owner's volume is reported exactly like a missing one.
 * The files themselves are the local backend's (backend/local/volume.c). */
#ifndef MCPBOX_STORE_VOLUMES_H
#define MCPBOX_STORE_VOLUMES_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"

struct store;

struct store_volume {
    char id[40];   /* "vol-" + hex: its directory's name (never derived from the name) */
    char name[64]; /* the owner's name for it */
    char *owner;   /* owned */
    uint64_t size_limit;
    int64_t created_at_ms;
};

void store_volume_release(struct store_volume *v); /* frees fields; v itself not freed */
/* MCP_ERR_CONFLICT when owner already has a volume of that name. */
int store_volume_insert(struct store *st, const struct store_volume *v, struct mcp_error *err);
/* 1 and *out (release it) when owner has a volume called name, 0 when not, -1 on error. */
int store_volume_get(struct store *st, const char *owner, const char *name,
                     struct store_volume *out, struct mcp_error *err);
/* owner's volumes by name (owner NULL: everyone's, for the server's own sweeps). */
int store_volume_list(struct store *st, const char *owner, struct store_volume **out, size_t *n,
                      struct mcp_error *err);
void store_volume_list_free(struct store_volume *list, size_t n);
int store_volume_delete(struct store *st, const char *id, struct mcp_error *err);

#endif
