/* The io.modelcontextprotocol/tasks extension (SEP-2663) for 2026-07-28 clients.
 *
 * The server decides: a tools/call of a task-capable tool (run_command, ...) from a client that
 * declared the extension becomes a task as soon as its handler goes asynchronous. The client
 * gets a CreateTaskResult at once; the request itself moves to a session of its own that has no
 * client (task_send below records what it would send), so the tool runs on unchanged and its
 * reply becomes the task's result. An InputRequiredResult from the tool parks the task in
 * input_required; tasks/update gathers the answers and, once all are in, calls the tool again
 * (MRTR inside a task). tasks/cancel closes the task's session, which cancels the tool.
 * Task records live in memory, per owner, for ttlMs after their last change. */
#define LOG_MODULE "tasks"
#include <stdio.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern-internal.h"
#include "mcp/modern.h"
#include "mcp/request.h"
#include "mcp/server.h"
#include "mcp/session-internal.h"
#include "mcp/session.h"

/* Live task records (a tools/call past this runs without a task). */
#define TASKS_MAX 256
/* How long a task stays readable after its last change, and the poll interval suggested. */
#define TASK_TTL_MS (60 * 60 * 1000)
#define TASK_POLL_INTERVAL_MS 1000
#define TASK_ID_BYTES 16

enum task_status { TASK_WORKING, TASK_INPUT_REQUIRED, TASK_COMPLETED, TASK_FAILED, TASK_CANCELLED };
static const char *const status_names[] = {"working", "input_required", "completed", "failed",
                                           "cancelled"};

struct task {
    char id[2 * TASK_ID_BYTES + 1];
    char *owner;
    enum task_status status;
    int64_t created_ms, updated_ms;
    struct session *session; /* while the tool runs or waits for input; NULL once terminal */
    json_t *call_params;     /* the tools/call params (name, arguments, _meta) for re-runs */
    json_t *result;          /* completed: the CallToolResult */
    json_t *error;           /* failed: {code, message} */
    json_t *input_requests;  /* input_required: the still unanswered requests */
    json_t *responses;       /* answers gathered by tasks/update for the next round */
    char *request_state;     /* the sealed requestState of the last InputRequiredResult */
    char *status_message;
    json_int_t next_id;
    struct task *next;
};

static struct {
    struct task *list;
    size_t count;
    bool hooked;
} tasks;

/* Tools that may run as tasks (TASK_SUPPORT_REQUIRED: only as tasks). */
#define MODERN_MAX_TASK_TOOLS 16
static struct {
    const char *name;
    enum modern_task_support support;
} task_tools[MODERN_MAX_TASK_TOOLS] = {{"run_command", TASK_SUPPORT_OPTIONAL}};

void modern_task_tool_add(const char *name, enum modern_task_support support)
{
    for (size_t i = 0; i < MODERN_MAX_TASK_TOOLS; i++) {
        if (!task_tools[i].name || strcmp(task_tools[i].name, name) == 0) {
            task_tools[i].name = name;
            task_tools[i].support = support;
            return;
        }
    }
}

enum modern_task_support modern_task_tool_support(const char *name)
{
    for (size_t i = 0; name && i < MODERN_MAX_TASK_TOOLS && task_tools[i].name; i++)
        if (strcmp(task_tools[i].name, name) == 0)
            return task_tools[i].support;
    return TASK_SUPPORT_NONE;
}

/* ---- records ------------------------------------------------------------------------------ */

static bool is_terminal(const struct task *t)
{
    return t->status >= TASK_COMPLETED;
}

static void task_free(struct task *t)
{
    free(t->owner);
    json_decref(t->call_params);
    json_decref(t->result);
    json_decref(t->error);
    json_decref(t->input_requests);
    json_decref(t->responses);
    free(t->request_state);
    free(t->status_message);
    free(t);
}

static void task_end_session(struct task *t);

/* Drops records idle past their TTL: terminal tasks, and tasks still waiting for input that
 * nobody answered (those are cancelled). Working tasks stay until they end. */
static void tasks_expire(void)
{
    int64_t now = now_wall_ms();
    for (struct task **pp = &tasks.list; *pp;) {
        struct task *t = *pp;
        bool idle = now - t->updated_ms > TASK_TTL_MS;
        if (idle && (is_terminal(t) || t->status == TASK_INPUT_REQUIRED)) {
            *pp = t->next;
            tasks.count--;
            if (!is_terminal(t))
                log_info("task %.8s: no answer within %d s; cancelled", t->id,
                         TASK_TTL_MS / 1000);
            task_end_session(t);
            task_free(t);
        } else {
            pp = &t->next;
        }
    }
}

static struct task *task_find(const char *id, const char *owner)
{
    tasks_expire();
    for (struct task *t = tasks.list; t && id; t = t->next)
        if (strcmp(t->id, id) == 0 && strcmp(t->owner, owner) == 0)
            return t;
    return NULL;
}

static void task_touch(struct task *t, enum task_status status)
{
    t->status = status;
    t->updated_ms = now_wall_ms();
}

/* The Task fields every task reply carries. */
static json_t *task_envelope(const struct task *t, const char *result_type)
{
    char created[32], updated[32];
    format_rfc3339_ms(t->created_ms, created);
    format_rfc3339_ms(t->updated_ms, updated);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i}", "resultType", result_type,
                          "taskId", t->id, "status", status_names[t->status], "createdAt",
                          created, "lastUpdatedAt", updated, "ttlMs", TASK_TTL_MS,
                          "pollIntervalMs", TASK_POLL_INTERVAL_MS);
    if (t->status_message)
        json_object_set_new(o, "statusMessage", json_string(t->status_message));
    return o;
}

/* ---- the task's own session: what the tool sends ------------------------------------------- */

static void task_end_session(struct task *t)
{
    struct session *s = t->session;
    t->session = NULL;
    if (s)
        session_close(s); /* cancels whatever still runs; no send() after this */
}

static void task_record_final(struct task *t, json_t *msg)
{
    json_t *result = json_object_get(msg, "result");
    json_t *error = json_object_get(msg, "error");
    const char *type = json_string_value(json_object_get(result, "resultType"));

    if (error) {
        t->error = json_pack("{s:O, s:O}", "code", json_object_get(error, "code"), "message",
                             json_object_get(error, "message"));
        task_touch(t, TASK_FAILED);
    } else if (type && strcmp(type, "input_required") == 0) {
        json_decref(t->input_requests);
        t->input_requests = json_incref(json_object_get(result, "inputRequests"));
        free(t->request_state);
        t->request_state = json_is_string(json_object_get(result, "requestState"))
            ? xstrdup(json_string_value(json_object_get(result, "requestState"))) : NULL;
        json_object_clear(t->responses);
        task_touch(t, TASK_INPUT_REQUIRED);
        return;
    } else {
        t->result = json_deep_copy(result);
        json_object_del(t->result, "resultType");
        task_touch(t, TASK_COMPLETED);
    }
}

static void task_send(void *arg, json_t *msg, const json_t *related, bool final)
{
    struct task *t = arg;
    const char *method = json_string_value(json_object_get(msg, "method"));

    if (is_terminal(t))
        return;
    if (final) {
        task_record_final(t, msg);
        if (is_terminal(t))
            task_end_session(t); /* the request is answered: nothing is cancelled */
        return;
    }
    if (method && strcmp(method, "notifications/progress") == 0) {
        const char *m = json_string_value(json_object_get(json_object_get(msg, "params"),
                                                          "message"));
        if (m) {
            free(t->status_message);
            t->status_message = xstrdup(m);
        }
    }
}

static const struct session_transport_ops task_ops = {.send = task_send};

static void tasks_stop(void *arg)
{
    while (tasks.list) {
        struct task *t = tasks.list;
        tasks.list = t->next;
        if (!is_terminal(t))
            task_touch(t, TASK_CANCELLED);
        task_end_session(t);
        task_free(t);
    }
    tasks.count = 0;
}

static struct task *task_new(struct request *req)
{
    tasks_expire();
    if (tasks.count >= TASKS_MAX)
        return NULL;
    struct task *t = xcalloc(1, sizeof(*t));
    random_id(t->id, sizeof(t->id), "", TASK_ID_BYTES);
    t->owner = xstrdup(request_owner(req));
    t->created_ms = t->updated_ms = now_wall_ms();
    t->call_params = json_deep_copy(request_params(req));
    t->responses = json_object();
    t->next_id = 1;
    t->session = session_new(request_server(req), &task_ops, t, t->owner);
    session_set_stateless(t->session);
    t->next = tasks.list;
    tasks.list = t;
    tasks.count++;
    if (!tasks.hooked) {
        server_on_stop(request_server(req), tasks_stop, NULL);
        tasks.hooked = true;
    }
    return t;
}

bool modern_task_wanted(struct request *req, const char *tool)
{
    const json_t *meta = request_modern_meta(req);
    tasks_expire();
    return meta && tasks.count < TASKS_MAX &&
           modern_task_tool_support(tool) != TASK_SUPPORT_NONE &&
           modern_meta_has_capability(meta, "extensions/" MODERN_TASKS_EXTENSION) &&
           session_task_of(request_session(req)) == NULL;
}

void modern_task_escalate(struct request *req)
{
    struct task *t = task_new(req);
    if (!t)
        return; /* too many tasks: the call simply runs on and answers when done */
    log_info("task %.8s: %s runs as a task", t->id,
             json_string_value(json_object_get(t->call_params, "name")));
    request_hand_over(req, task_envelope(t, "task"), t->session);
}

/* Each task's session is known by its transport argument. */
struct task *session_task_of(struct session *s)
{
    for (struct task *t = tasks.list; t; t = t->next)
        if (t->session == s)
            return t;
    return NULL;
}

/* ---- tasks/get, tasks/update, tasks/cancel -------------------------------------------------- */

/* The task named by params.taskId for this caller; answers and returns NULL when the client
 * lacks the extension or the task is unknown. */
static struct task *task_for(struct request *req, json_t *params)
{
    if (!modern_meta_has_capability(request_modern_meta(req),
                                    "extensions/" MODERN_TASKS_EXTENSION)) {
        modern_missing_extension(req, MODERN_TASKS_EXTENSION);
        return NULL;
    }
    const char *id = json_string_value(json_object_get(params, "taskId"));
    struct task *t = task_find(id, request_owner(req));
    if (!t)
        request_error(req, MCP_ERR_INVALID_PARAMS, NULL,
                      "Invalid params: unknown taskId%s%s (tasks expire %d s after they end)",
                      id ? " " : "", id ? id : "", TASK_TTL_MS / 1000);
    return t;
}

void modern_method_tasks_get(struct request *req, json_t *params)
{
    struct task *t = task_for(req, params);
    if (!t)
        return;
    json_t *o = task_envelope(t, "complete");
    if (t->status == TASK_COMPLETED)
        json_object_set(o, "result", t->result);
    else if (t->status == TASK_FAILED)
        json_object_set(o, "error", t->error);
    else if (t->status == TASK_INPUT_REQUIRED)
        json_object_set(o, "inputRequests", t->input_requests);
    request_reply(req, o);
}

/* All answers are in: call the tool again on the task's session with them. */
static void task_rerun(struct task *t)
{
    json_t *params = json_deep_copy(t->call_params);
    json_object_set(params, "inputResponses", t->responses);
    if (t->request_state)
        json_object_set_new(params, "requestState", json_string(t->request_state));
    else
        json_object_del(params, "requestState");
    json_object_clear(t->input_requests);
    task_touch(t, TASK_WORKING);
    json_auto_t *id = json_integer(++t->next_id);
    json_auto_t *msg = jsonrpc_request(id, "tools/call", params);
    cleanup_free char *text = json_dumps(msg, JSON_COMPACT);
    struct jsonrpc_msg parsed;
    jsonrpc_parse(text, strlen(text), &parsed);
    session_handle(t->session, &parsed);
}

void modern_method_tasks_update(struct request *req, json_t *params)
{
    struct task *t = task_for(req, params);
    if (!t)
        return;
    json_t *responses = json_object_get(params, "inputResponses");
    if (!json_is_object(responses)) {
        request_error(req, MCP_ERR_INVALID_PARAMS, NULL,
                      "Invalid params: \"inputResponses\" must be an object");
        return;
    }
    const char *key;
    json_t *value;
    bool answered = false;
    json_object_foreach(responses, key, value) {
        if (t->status != TASK_INPUT_REQUIRED || !json_object_get(t->input_requests, key))
            continue; /* not asked (any more): ignored */
        json_object_set(t->responses, key, value);
        json_object_del(t->input_requests, key);
        answered = true;
    }
    if (answered)
        t->updated_ms = now_wall_ms();
    request_reply(req, json_pack("{s:s}", "resultType", "complete"));
    if (answered && t->status == TASK_INPUT_REQUIRED && json_object_size(t->input_requests) == 0)
        task_rerun(t);
}

void modern_method_tasks_cancel(struct request *req, json_t *params)
{
    struct task *t = task_for(req, params);
    if (!t)
        return;
    if (!is_terminal(t)) {
        task_touch(t, TASK_CANCELLED); /* first: a reply racing the cancel is ignored */
        task_end_session(t);
    }
    request_reply(req, json_pack("{s:s}", "resultType", "complete"));
}
