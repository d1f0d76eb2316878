/* Approvals (issue 38): before a tool call crosses from a sandbox into the person's world
 * (apply_changes, egress beyond the person's list, a rw mount, binding a secret), the person's
 * settings (backend/approval_rules.h) decide, or the person is asked through MCP elicitation:
 * elicitation/create on 2025-11-25, an InputRequiredResult on 2026-07-28. Every question and
 * answer goes into the audit log and, for a sandbox, its events (diagnose_sandbox).
 * docs/security.md, "Approvals". */
#ifndef MCPBOX_APPROVAL_H
#define MCPBOX_APPROVAL_H

#include <jansson.h>
#include <stdbool.h>

#include "backend/approval_rules.h"
#include "lib/base/error.h"

struct tool_call;

struct approval_question {
    enum approval_kind kind;
    const char *sandbox_id; /* NULL: a sandbox being created */
    const char *what;       /* "write 3 files into /home/me/app": the first line of the form */
    const char *details;    /* the rest of the screen: files and lines, names, the path */
    /* What an "allow for this sandbox/session" answer covers (borrowed array of strings:
     * egress names, mount paths); NULL: every question of this kind. */
    json_t *subjects;
};

/* allowed, or refused with refusal (an error for the agent that says what to do next). */
typedef void approval_done_fn(void *arg, bool allowed, const struct mcp_error *refusal);

/* Decides q for call. Returns 0 when done will be called exactly once (now or later, on the
 * loop); a refusal must end the call before done returns. Returns 1 when the call was already
 * answered (an InputRequiredResult for a 2026-07-28 client, or a protocol error): done is
 * never called, and the caller frees its state without answering. */
int approval_ask(struct tool_call *call, const struct approval_question *q, approval_done_fn *done,
                 void *arg);

/* s for the form, as one line the person can trust: control characters and the Unicode
 * controls that hide or reorder text become \xNN and \u{NNNN} (a new string). Whatever the
 * sandbox or the agent named (files, paths, secrets) goes through it. */
char *approval_safe_text(const char *s);

/* The person's settings for call (all-allow where the server has no configuration: the CLI,
 * handler tests). */
const struct approval_settings *approval_settings_of(struct tool_call *call);

/* The form's schema: one required string "answer", an enum of the choices (offer_sandbox adds
 * "Allow for this sandbox"). New reference. For tests and docs. */
json_t *approval_form_schema(bool offer_sandbox);

#endif
