/* OpenSandbox's Credential Vault on the local backend (backend.h credential_vault,
 * docs/secrets.md "OpenSandbox's Credential Vault"): credentials the API client gives one
 * sandbox, and bindings that say which hosts get them in which header. Kept in
 * <state_dir>/vaults/<id>.json (0600); the egress proxy injects them as it does the person's
 * secrets (egress_intercept.c). */
#ifndef MCPBOX_LOCAL_VAULT_H
#define MCPBOX_LOCAL_VAULT_H

#include <jansson.h>
#include <stdint.h>

#include "backend/backend.h"

int local_credential_vault(struct backend *be, const char *id, const char *action, json_t *body,
                           backend_cb *cb, void *arg, struct mcp_error *err);
/* For the proxy: definitions (secrets.h shape, with "name" and the value in "from") of the
 * sandbox's vault bindings that match host and port. New array; empty without a vault. */
json_t *local_vault_for_host(const char *state_dir, const char *id, const char *host,
                             uint16_t port);
/* The sandbox is gone: its vault goes too. */
void local_vault_remove(const char *state_dir, const char *id);

#endif
