/* Shared by mcp/approval.c (deciding, remembering, auditing) and mcp/approval_elicit.c (asking
 * over either protocol revision). */
#ifndef MCPBOX_APPROVAL_INTERNAL_H
#define MCPBOX_APPROVAL_INTERNAL_H

#include <stdint.h>

#include "mcp/approval.h"

#define APPROVAL_INPUT_KEY "mcpbox_approval" /* the inputRequests key on 2026-07-28 */
#define APPROVAL_HEARTBEAT_MS 5000u          /* progress while the person thinks */
#define APPROVAL_MESSAGE_MAX 4000u

/* One question being decided: what approval_ask copied out of the caller's question. */
struct approval_ask {
    struct tool_call *call;
    approval_done_fn *done;
    void *arg;
    enum approval_kind kind;
    char *owner, *sandbox_id, *what, *message, *digest;
    uint64_t session; /* session_serial of the caller's session, 0 without one */
    json_t *subjects; /* own reference, or NULL */
    uint64_t started_ms;
};

/* How a question ended. */
enum approval_answer {
    ANSWER_ONCE,
    ANSWER_SANDBOX,
    ANSWER_SESSION,
    ANSWER_DECLINED,
    ANSWER_CANCELLED,
    ANSWER_TIMEOUT,
    ANSWER_UNREADABLE,
    ANSWER_BUSY, /* the question could not be sent: too many already wait for the person */
};

/* The client's elicitation result -> answer. */
enum approval_answer approval_read_result(const json_t *result);
/* Ends the question: remembers, audits (by "person"), calls done, frees a. */
void approval_settle(struct approval_ask *a, enum approval_answer answer);
void approval_ask_free(struct approval_ask *a);
/* The elicitation/create params for a (new reference). */
json_t *approval_elicit_params(const struct approval_ask *a);
/* Audits that the person was asked (outcome "asked"). */
void approval_audit_asked(const struct approval_ask *a, const char *how);

/* Asking, by revision (approval_elicit.c): the same return as approval_ask; a is taken. */
int approval_elicit_session(struct approval_ask *a, unsigned timeout_s);
int approval_elicit_stateless(struct approval_ask *a, unsigned timeout_s);

#endif
