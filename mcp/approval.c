/* Approvals: the person's settings, remembered answers, the question's text and the audit
 * (approval.h). Asking itself is approval_elicit.c. */
#define LOG_MODULE "approval"
#include "mcp/approval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"
#include "mcp/approval-internal.h"
#include "server/config.h"
#include "server/context.h"
#include "mcp/tool.h"

/* ---- remembered answers ("allow for this sandbox" / "for this session") --------------------
 * Per process, per caller (tool_call_owner: one stdio client, one HTTP token or session), and
 * per subject (an egress name, a mount path), so a remembered "yes" to pypi.org never covers
 * evil.example. Bounded: the oldest goes when full. */
#define REMEMBERED_MAX 1024

struct remembered {
    char *owner;
    uint64_t session; /* session_serial; 0 for 2026-07-28 callers, who have no session */
    enum approval_kind kind;
    char *sandbox_id; /* NULL: the whole session */
    char *subject;    /* NULL: every question of the kind */
};

static struct remembered remembered[REMEMBERED_MAX];
static size_t n_remembered;

static void remember_one(const struct approval_ask *a, bool session, const char *subject)
{
    if (n_remembered == REMEMBERED_MAX) {
        free(remembered[0].owner), free(remembered[0].sandbox_id), free(remembered[0].subject);
        memmove(remembered, remembered + 1, (REMEMBERED_MAX - 1) * sizeof remembered[0]);
        n_remembered--;
    }
    struct remembered *r = &remembered[n_remembered++];
    r->owner = xstrdup(a->owner);
    r->session = a->session;
    r->kind = a->kind;
    r->sandbox_id = session || !a->sandbox_id ? NULL : xstrdup(a->sandbox_id);
    r->subject = subject ? xstrdup(subject) : NULL;
}

static void remember(const struct approval_ask *a, bool session)
{
    size_t i;
    json_t *s;
    if (a->subjects == NULL) {
        remember_one(a, session, NULL);
        return;
    }
    json_array_foreach(a->subjects, i, s) remember_one(a, session, json_string_value(s));
}

static bool covered(const struct approval_ask *a, const char *subject)
{
    for (size_t i = 0; i < n_remembered; i++) {
        const struct remembered *r = &remembered[i];
        if (r->kind != a->kind || r->session != a->session || strcmp(r->owner, a->owner) != 0)
            continue;
        if (r->sandbox_id && (!a->sandbox_id || strcmp(r->sandbox_id, a->sandbox_id) != 0))
            continue;
        if (r->subject == NULL || (subject && strcmp(r->subject, subject) == 0))
            return true;
    }
    return false;
}

static bool remembered_allows(const struct approval_ask *a)
{
    size_t i;
    json_t *s;
    if (a->subjects == NULL)
        return covered(a, NULL);
    json_array_foreach(a->subjects, i, s) if (!covered(a, json_string_value(s))) return false;
    return json_array_size(a->subjects) > 0;
}

/* ---- audit ------------------------------------------------------------------------------------ */

static void audit(const struct approval_ask *a, const char *outcome, const char *by)
{
    struct mcp_context *ctx = tool_call_context(a->call);
    struct mcp_error err;
    cleanup_free char *subjects = a->subjects ? json_dumps(a->subjects, JSON_COMPACT) : NULL;
    cleanup_free char *detail =
        xasprintf("kind=%s tool=%s by=%s what=%s%s%s", approval_kind_name(a->kind),
                  tool_call_tool_name(a->call), by, a->what, subjects ? " subjects=" : "",
                  subjects ? subjects : "");
    int64_t ms = (int64_t)(now_mono_ms() - a->started_ms);
    if (store_audit(ctx->store, a->owner, "approval", a->sandbox_id, outcome, ms, detail, &err) < 0)
        log_warn("audit of an approval failed: %s", err.msg);
    if (a->sandbox_id == NULL)
        return;
    json_t *data =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", approval_kind_name(a->kind), "tool",
                  tool_call_tool_name(a->call), "question", a->what, "answer", outcome, "by", by);
    if (a->subjects)
        json_object_set(data, "subjects", a->subjects);
    if (store_event_add(ctx->store, a->sandbox_id, "approval", data, &err) < 0)
        log_warn("recording an approval event failed: %s", err.msg);
    json_decref(data);
}

void approval_audit_asked(const struct approval_ask *a, const char *how)
{
    audit(a, "asked", how);
}

/* U+200B..U+200F (zero-width marks), U+202A..U+202E (bidi embeddings and overrides) and
 * U+2066..U+2069 (bidi isolates), in UTF-8. */
static bool hides_text(const unsigned char *p)
{
    if (p[0] != 0xE2 || p[1] == 0 || p[2] == 0)
        return false;
    return (p[1] == 0x80 && ((p[2] >= 0x8B && p[2] <= 0x8F) || (p[2] >= 0xAA && p[2] <= 0xAE))) ||
           (p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9);
}

/* approval.h: s as one line the person can trust: control characters and the Unicode controls that reorder
 * or hide text are shown as \xNN or \u{NNNN}, so a name the sandbox chose (a file, a path)
 * cannot draw lines of its own on the form. */
char *approval_safe_text(const char *s)
{
    struct buf out;
    buf_init(&out, SIZE_MAX);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (hides_text(p)) {
            buf_printf(&out, "\\u{%04X}", 0x2000u | (unsigned)(p[1] & 0x3F) << 6 | (p[2] & 0x3F));
            p += 2;
        } else if (*p < 0x20 || *p == 0x7F) {
            buf_printf(&out, "\\x%02x", *p);
        } else {
            buf_append(&out, p, 1);
        }
    }
    char *text = xstrdup(buf_cstr(&out));
    buf_release(&out);
    return text;
}

/* ---- the question ----------------------------------------------------------------------------- */

static const char *const why[APPROVAL_KINDS] = {
    "These writes change your real files, outside the sandbox.",
    "A sandbox that can reach these names can send them anything it can read, your code "
    "included.",
    "The sandbox will write this host directory directly, with no review before the writes "
    "land.",
    "The credential leaves your keeping: the sandbox can use it wherever the binding lets it.",
};

#define CHOICE_ONCE "Allow once"
#define CHOICE_SANDBOX "Allow for this sandbox"
#define CHOICE_SESSION "Allow for this session"
#define CHOICE_REFUSE "Refuse"

json_t *approval_form_schema(bool offer_sandbox)
{
    json_t *choices = json_pack("[s]", CHOICE_ONCE);
    if (offer_sandbox)
        json_array_append_new(choices, json_string(CHOICE_SANDBOX));
    json_array_append_new(choices, json_string(CHOICE_SESSION));
    json_array_append_new(choices, json_string(CHOICE_REFUSE));
    return json_pack("{s:s, s:{s:{s:s, s:s, s:s, s:o}}, s:[s]}", "type", "object", "properties",
                     "answer", "type", "string", "title", "Your answer", "description",
                     "Refuse if you did not expect this request.", "enum", choices, "required",
                     "answer");
}

json_t *approval_elicit_params(const struct approval_ask *a)
{
    return json_pack("{s:s, s:o}", "message", a->message, "requestedSchema",
                     approval_form_schema(a->sandbox_id != NULL));
}

static char *question_message(const struct approval_question *q)
{
    char *m = xasprintf("mcpbox: %s %s asks to %s.\n\n%s\n\nWhy it matters: %s",
                        q->sandbox_id ? "sandbox" : "a new sandbox",
                        q->sandbox_id ? q->sandbox_id : "(being created)", q->what,
                        q->details ? q->details : "", why[q->kind]);
    if (strlen(m) > APPROVAL_MESSAGE_MAX) {
        size_t cut = APPROVAL_MESSAGE_MAX - 4;
        while (cut > 0 && ((unsigned char)m[cut] & 0xC0) == 0x80) /* not inside a character */
            cut--;
        strcpy(m + cut, "...");
    }
    return m;
}

/* FNV-1a of the message: binds a 2026-07-28 answer to the question it answered. */
static char *digest_of(const char *owner, const char *message)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = owner; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (const char *p = message; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return xasprintf("%016llx", (unsigned long long)h);
}

static struct approval_ask *ask_new(struct tool_call *call, const struct approval_question *q,
                                    approval_done_fn *done, void *arg)
{
    struct approval_ask *a = xcalloc(1, sizeof *a);
    a->call = call, a->done = done, a->arg = arg, a->kind = q->kind;
    a->owner = xstrdup(tool_call_owner(call));
    a->session = tool_call_is_stateless(call) ? 0 : tool_call_session_serial(call);
    a->sandbox_id = q->sandbox_id ? xstrdup(q->sandbox_id) : NULL;
    a->what = xstrdup(q->what);
    a->message = question_message(q);
    a->digest = digest_of(a->owner, a->message);
    a->subjects = q->subjects ? json_deep_copy(q->subjects) : NULL;
    a->started_ms = now_mono_ms();
    return a;
}

void approval_ask_free(struct approval_ask *a)
{
    free(a->owner), free(a->sandbox_id), free(a->what), free(a->message), free(a->digest);
    json_decref(a->subjects);
    free(a);
}

/* ---- answers ---------------------------------------------------------------------------------- */

enum approval_answer approval_read_result(const json_t *result)
{
    const char *action = json_string_value(json_object_get(result, "action"));
    const char *answer =
        json_string_value(json_object_get(json_object_get(result, "content"), "answer"));
    if (action && strcmp(action, "decline") == 0)
        return ANSWER_DECLINED;
    if (action == NULL || strcmp(action, "accept") != 0 || answer == NULL)
        return action && strcmp(action, "cancel") == 0 ? ANSWER_CANCELLED : ANSWER_UNREADABLE;
    if (strcmp(answer, CHOICE_ONCE) == 0)
        return ANSWER_ONCE;
    if (strcmp(answer, CHOICE_SANDBOX) == 0)
        return ANSWER_SANDBOX;
    if (strcmp(answer, CHOICE_SESSION) == 0)
        return ANSWER_SESSION;
    return strcmp(answer, CHOICE_REFUSE) == 0 ? ANSWER_DECLINED : ANSWER_UNREADABLE;
}

static const char *const outcome_names[] = {"allowed",
                                            "allowed-for-sandbox",
                                            "allowed-for-session",
                                            "declined",
                                            "cancelled",
                                            "timeout",
                                            "unreadable",
                                            "busy"};

static void refusal_for(const struct approval_ask *a, enum approval_answer answer,
                        struct mcp_error *err)
{
    unsigned t = approval_settings_of(a->call)->timeout_s;
    if (answer == ANSWER_DECLINED)
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "The person declined: %s. Do not ask for it again now; go on without it, "
                      "or tell the person in the conversation why it is needed",
                      a->what);
    else if (answer == ANSWER_BUSY)
        mcp_error_set(err, MCP_ERR_LIMIT, 0,
                      "Too many questions already wait for the person, so this one was not "
                      "asked and is refused: %s. Wait for their answers before asking again",
                      a->what);
    else if (answer == ANSWER_TIMEOUT)
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "Nobody answered within %u s, so it is refused: %s. Do not repeat it at "
                      "once; tell the person it is waiting for them",
                      t, a->what);
    else
        mcp_error_set(err, MCP_ERR_DENIED, 0,
                      "The question was dismissed without an answer, so it is refused: %s. Do "
                      "not repeat it at once; ask the person in the conversation first",
                      a->what);
}

void approval_settle(struct approval_ask *a, enum approval_answer answer)
{
    bool allowed = answer <= ANSWER_SESSION;
    struct mcp_error err = {0};
    if (answer == ANSWER_SANDBOX || answer == ANSWER_SESSION)
        remember(a, answer == ANSWER_SESSION);
    audit(a, outcome_names[answer], "person");
    if (!allowed)
        refusal_for(a, answer, &err);
    a->done(a->arg, allowed, allowed ? NULL : &err);
    approval_ask_free(a);
}

const struct approval_settings *approval_settings_of(struct tool_call *call)
{
    static const struct approval_settings none; /* zero: every kind allowed */
    const struct mcp_context *ctx = tool_call_context(call);
    return ctx && ctx->config ? &ctx->config->approval : &none;
}

/* ---- deciding --------------------------------------------------------------------------------- */

/* Settled without a question (settings, remembered, unattended): audits and calls done. */
static int settle_quietly(struct approval_ask *a, bool allowed, const char *by,
                          const struct mcp_error *err)
{
    audit(a, allowed ? "allowed" : "refused", by);
    a->done(a->arg, allowed, err);
    approval_ask_free(a);
    return 0;
}

int approval_ask(struct tool_call *call, const struct approval_question *q, approval_done_fn *done,
                 void *arg)
{
    const struct approval_settings *s = approval_settings_of(call);
    struct approval_ask *a = ask_new(call, q, done, arg);
    struct mcp_error err = {0};
    if (s->mode[q->kind] == APPROVAL_MODE_ALLOW)
        return settle_quietly(a, true, "settings", NULL);
    if (s->mode[q->kind] == APPROVAL_MODE_ASK && remembered_allows(a))
        return settle_quietly(a, true, "remembered", NULL);
    if (s->mode[q->kind] == APPROVAL_MODE_ASK && tool_call_client_has(call, "elicitation"))
        return tool_call_is_stateless(call) ? approval_elicit_stateless(a, s->timeout_s)
                                            : approval_elicit_session(a, s->timeout_s);
    cleanup_free char *what = xasprintf("%s (%s)", tool_call_tool_name(call), q->what);
    bool allowed = approval_unattended(s, q->kind, what, &err);
    return settle_quietly(a, allowed,
                          s->mode[q->kind] == APPROVAL_MODE_REFUSE ? "settings" : "unattended",
                          allowed ? NULL : &err);
}
