/* The PATCH of a remote Credential Vault that makes mcpbox's entries what a sandbox binds
 * (vault_patch.c). Apart from the rest of the backend so that it can be fuzzed alone. */
#ifndef MCPBOX_OSB_VAULT_PATCH_H
#define MCPBOX_OSB_VAULT_PATCH_H

#include <jansson.h>

#define OSB_VAULT_PREFIX "mcpbox-" /* the vault entries mcpbox writes and may remove */

/* state: the vault as the remote answered GET /credential-vault (less trusted: any JSON).
 * creds, binds: mcpbox's wanted entries (each with a "name" starting with OSB_VAULT_PREFIX).
 * The CredentialVaultMutationRequest that adds the wanted entries the state lacks, replaces those
 * it has, and deletes the other entries named with the prefix, leaving every other entry alone;
 * expectedRevision is the state's revision when it is an integer. NULL when nothing would
 * change. New. */
json_t *osb_vault_patch(const json_t *state, json_t *creds, json_t *binds);

#endif
