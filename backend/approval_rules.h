/* The person's approval settings (issue 38): which actions that cross from a sandbox into the
 * person's world are allowed, refused, or asked about, and what "ask" means when nobody can be
 * asked. Set at start (`mcpbox serve --approve ...`, docs/configuration.md) and read-only after:
 * no tool argument and no MCP request can change them.
 *
 * Here because both front-ends decide by them: mcp/approval.c asks the person through MCP
 * elicitation; osapi/ (whose callers are programs) takes the cannot-ask answer. Pure logic, no
 * I/O. The model: docs/security.md, "Approvals". */
#ifndef MCPBOX_APPROVAL_RULES_H
#define MCPBOX_APPROVAL_RULES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "backend/egress_policy.h"
#include "lib/base/error.h"

enum approval_kind {
    APPROVAL_APPLY,    /* apply_changes writes into the person's tree */
    APPROVAL_EGRESS,   /* a sandbox may reach names beyond the person's egress list */
    APPROVAL_RW_MOUNT, /* a sandbox writes a host directory directly */
    APPROVAL_SECRET,   /* a credential is bound to a sandbox (issue 34's secrets) */
    APPROVAL_KINDS
};

/* Zero is "allow": a zeroed struct (unit tests, the CLI) asks nothing, as before approvals. */
enum approval_mode { APPROVAL_MODE_ALLOW = 0, APPROVAL_MODE_ASK, APPROVAL_MODE_REFUSE };

#define APPROVAL_TIMEOUT_DEFAULT_S 120
#define APPROVAL_TIMEOUT_MAX_S 86400
#define APPROVAL_EGRESS_ALLOW_MAX 256

struct approval_settings {
    enum approval_mode mode[APPROVAL_KINDS];
    bool unasked_allow[APPROVAL_KINDS];            /* what ASK gives when the client cannot ask */
    char *egress_allow[APPROVAL_EGRESS_ALLOW_MAX]; /* owned; "name" or "*.suffix", normalized */
    size_t n_egress_allow;
    char *apply_dir;    /* owned; applies whose every file lands below it are allowed, or NULL */
    unsigned timeout_s; /* how long a question waits for the person */
};

/* What `serve` starts with: apply, egress, rw-mount and secret ask; unasked, apply and rw-mount
 * are allowed (the person's --allow-dir already bounds them), egress and secrets refused. */
void approval_settings_defaults(struct approval_settings *s);
void approval_settings_release(struct approval_settings *s);

/* One serve option (name without "--": "approve", "approve-unasked", "approve-egress-allow",
 * "approve-apply-dir", "approve-timeout"). -1 with err naming the option and what to write. */
int approval_settings_option(struct approval_settings *s, const char *name, const char *value,
                             struct mcp_error *err);

/* "apply", "egress", "rw-mount", "secret". */
const char *approval_kind_name(enum approval_kind kind);

/* The allow targets of policy (or everything, when full_network or a default of allow) beyond
 * the person's egress list: a new array of strings ("evil.example", "*.x.org", "*" for
 * everything); empty when nothing widens. policy may be NULL. */
json_t *approval_egress_beyond(const struct approval_settings *s,
                               const struct egress_policy *policy, bool full_network);

/* Whether host_path lies within the person's --approve-apply-dir (false when none is set). */
bool approval_apply_dir_covers(const struct approval_settings *s, const char *host_path);

/* The answer for kind where nobody can be asked (no elicitation, or the OpenSandbox API):
 * true allow; false refuse with err saying which option the person can change. */
bool approval_unattended(const struct approval_settings *s, enum approval_kind kind,
                         const char *what, struct mcp_error *err);

#endif
