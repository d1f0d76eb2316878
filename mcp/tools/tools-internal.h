/* Shared by the files of mcp/tools/ only. */
#ifndef MCPBOX_TOOLS_INTERNAL_H
#define MCPBOX_TOOLS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "lib/base/error.h"
#include "lib/base/utf8.h"
#include "mcp/tool.h"

struct mcp_context;
struct store;

/* ---- limits and defaults ------------------------------------------------------------------ */

#define TOOLS_DEFAULT_OUTPUT_CAP     16384u       /* run_command, per stream */
#define TOOLS_MIN_OUTPUT_CAP         256u
#define TOOLS_MAX_OUTPUT_CAP         (1u << 20)
#define TOOLS_DEFAULT_WAIT_S         50           /* below the common 60 s client timeouts */
#define TOOLS_MAX_WAIT_S             3600
/* The longest a call waits without a progress token: clients time a request out at about 60 s
 * (the TypeScript SDK, Claude Code) unless progress notifications reset their timer. */
#define TOOLS_UNHEARD_WAIT_S         TOOLS_DEFAULT_WAIT_S
#define TOOLS_PROGRESS_INTERVAL_MS   2000u        /* progress heartbeat while a command runs */
#define TOOLS_PROGRESS_TAIL_BYTES    240u         /* output tail carried in a progress message */
#define TOOLS_DEFAULT_GET_LIMIT      16384u       /* get_command output bytes */
#define TOOLS_MAX_GET_LIMIT          (1u << 20)
#define TOOLS_GET_POLL_MS            250u         /* get_command wait_seconds polling interval */
#define TOOLS_MAX_GET_WAIT_S         600          /* get_command wait_seconds (its schema's max) */
#define TOOLS_KILL_WAIT_MS           2000u        /* kill_command waits for the end this long */
#define TOOLS_KILL_POLL_MS           50u          /* ... polling the backend this often */
#define TOOLS_DEFAULT_READ_LENGTH    65536u       /* read_file */
/* 7 MiB: its base64 (9.3 MiB) still fits the 10 MiB message limit of the official SDK's stdio
 * client, which closes the connection on anything larger. */
#define TOOLS_MAX_READ_LENGTH        (7u << 20)
#define TOOLS_TEXT_MAX               65536u       /* text block repeats results up to this size */
#define TOOLS_TEXT_FIELD_MAX         1024u        /* longer strings are named, not repeated */
#define TOOLS_MAX_WRITE_BYTES        (24u << 20)  /* decoded write_file payload */
#define TOOLS_DEFAULT_LIST_ENTRIES   500
#define TOOLS_DEFAULT_SEARCH_RESULTS 200
#define TOOLS_DEFAULT_CODE_TIMEOUT_S 50          /* run_code: interrupted after this */
#define TOOLS_RESOURCE_MAX_BYTES     (1u << 20)   /* resources/read of a sandbox file */

/* ---- one tool call in progress ------------------------------------------------------------ */

struct tool_job {
    struct tool_call *call;  /* borrowed until finished */
    struct mcp_context *ctx; /* borrowed */
    struct backend *be;      /* the sandbox's backend, once bound */
    char *sandbox_id;        /* owned, NULL for calls on no sandbox */
    char *owner;             /* owned copy of tool_call_owner() */
    char *detail;            /* owned audit detail, or NULL */
    json_t *args;            /* own reference */
    uint64_t started_ms;     /* monotonic */
};

struct tool_job *tool_job_new(struct tool_call *call, json_t *args);
/* Success: audits, finishes the call with structured (stolen) and frees the job. */
void tool_job_finish(struct tool_job *job, json_t *structured);
/* The same with its own text (NULL: the result rendered) and more content blocks (stolen, NULL:
 * none) after it. */
void tool_job_finish_blocks(struct tool_job *job, json_t *structured, const char *own_text,
                            json_t *blocks);
/* Tool error: audits, finishes with an isError result whose text is err's message, frees. */
void tool_job_fail(struct tool_job *job, const struct mcp_error *err);
/* The call was already answered (an approval's InputRequiredResult, 2026-07-28): audits tool's
 * row as "input_required" and frees the job without touching the call. */
void tool_job_abandon(struct tool_job *job, const char *tool);
/* Sets the audit detail (copied; never file contents or command output). */
void tool_job_set_detail(struct tool_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A backend_cb that finishes the job with the result as it is. arg is the job. */
void tool_job_done_cb(void *arg, json_t *result, const struct mcp_error *err);

/* What a tool needs of the sandbox's state before the backend is called. */
enum tool_need {
    TOOL_NEED_ANY,     /* get, destroy, diagnose, renew, pause, resume, get_command */
    TOOL_NEED_RUNNING, /* commands, files, endpoint */
};

/* Looks sandbox_id up in the store, checks it belongs to the caller (another owner's sandbox is
 * reported exactly like a missing one) and that its state allows need; sets job->sandbox_id and
 * job->be. -1 with an actionable err otherwise. */
int tool_job_bind(struct tool_job *job, const char *sandbox_id, enum tool_need need,
                  struct mcp_error *err);
/* The same check without a job (resources, completions). */
int tools_check_sandbox(struct mcp_context *ctx, const char *owner, const char *sandbox_id,
                        enum tool_need need, struct backend **be, struct mcp_error *err);

/* ---- error and argument mapping (common.c) ------------------------------------------------- */

/* A backend called back with neither result nor error (a backend bug): MCP_ERR_BACKEND. */
int tools_no_result(struct mcp_error *err);
/* The one message for "missing or not yours". */
int tools_error_no_sandbox(struct mcp_error *err, const char *sandbox_id);
/* err for a sandbox whose stored state does not allow need, or 0 if it does. */
int tools_state_check(const char *sandbox_id, const char *state, enum tool_need need,
                      struct mcp_error *err);
/* err for an optional backend operation the sandbox's backend lacks: names the backend, what it
 * lacks and what to use instead. */
int tools_unsupported(struct mcp_error *err, const struct backend *be, const char *what,
                      const char *instead);
/* After a backend's default slot answered MCP_ERR_UNSUPPORTED ("the local backend has no
 * snapshots"): adds "; <instead>" so the agent knows what to do. Returns -1. */
int tools_instead(struct mcp_error *err, const char *instead);
/* tools_instead with tools_hint_snapshots / tools_hint_code for the job's backends. */
int tools_instead_snapshots(const struct tool_job *job, struct mcp_error *err);
int tools_instead_code(const struct tool_job *job, struct mcp_error *err);
/* Audit outcome for an error: "error:not_found", ... (static storage). */
const char *tools_outcome(const struct mcp_error *err);

/* Sizes: a JSON integer (bytes) or a string "512m", "1.5g", "2GiB", "100k", "4096". */
int tools_parse_size(json_t *v, const char *field, uint64_t *out, struct mcp_error *err);
/* Replaces args[key], a list of "KEY=VALUE" strings as the schemas advertise env and metadata,
 * with the object {KEY: VALUE} the backends take (args is the call's own copy); the last of two
 * equal keys wins. -1 with err on an entry without "=". */
int tools_pairs_to_object(json_t *args, const char *key, struct mcp_error *err);
/* Octal permission string "755" / "0644" -> bits. */
int tools_parse_mode(const char *s, uint32_t *out, struct mcp_error *err);
/* "KILL", "TERM", ... -> signal number; -1 if unknown. */
int tools_signal_number(const char *name);
/* Integer argument with default and inclusive bounds (schema checked them; this clamps). */
int64_t tools_arg_int(json_t *args, const char *key, int64_t def, int64_t lo, int64_t hi);
/* How long a call may wait (seconds) for args[key] (default def): at most TOOLS_UNHEARD_WAIT_S
 * unless the client sent a progress token (heartbeats reset its timer) or the call runs as a
 * task (no request is open); *capped tells whether the cap cut the client's value. */
int64_t tools_wait_seconds(struct tool_call *call, json_t *args, const char *key, int64_t def,
                           int64_t max, bool *capped);
const char *tools_arg_str(json_t *args, const char *key, const char *def);
bool tools_arg_bool(json_t *args, const char *key, bool def);

/* ---- output capping (output.c) -------------------------------------------------------------- */

/* Keeps the first head_cap and the last tail_cap bytes of a stream, and counts all of it. */
struct out_capture {
    char *head;
    size_t head_len, head_cap;
    char *tail; /* ring */
    size_t tail_start, tail_len, tail_cap;
    uint64_t total;
};

/* cap split evenly between head and tail. */
void out_capture_init(struct out_capture *oc, size_t cap);
void out_capture_init_split(struct out_capture *oc, size_t head_cap, size_t tail_cap);
void out_capture_release(struct out_capture *oc);
void out_capture_add(struct out_capture *oc, const char *data, size_t len);
/* The capped text: valid UTF-8, at most cap bytes plus the cut marker; *truncated says
 * whether anything was left out. Returns a new json string. */
json_t *out_capture_render(const struct out_capture *oc, bool *truncated);

/* The last at most max kept bytes as valid UTF-8 without NUL (malloc'd C string). */
char *out_capture_tail_text(const struct out_capture *oc, size_t max);
/* One progress heartbeat of a running job: "<what> for N s, B bytes of output; last output: ..."
 * with the seconds since started_ms as progress, kept strictly increasing through *last. */
void tools_progress_heartbeat(struct tool_call *call, const char *what, uint64_t started_ms,
                              double *last, const struct out_capture *tail);

/* ---- handlers -------------------------------------------------------------------------------- */

tool_handler_fn tool_create_sandbox, tool_list_sandboxes, tool_get_sandbox, tool_destroy_sandbox,
    tool_update_sandbox;
tool_handler_fn tool_run_command, tool_get_command, tool_kill_command;
tool_handler_fn tool_write_file, tool_read_file, tool_list_files, tool_search_files,
    tool_replace_in_file, tool_move_path, tool_delete_path, tool_make_directory;
tool_handler_fn tool_get_endpoint, tool_diagnose_sandbox;
tool_handler_fn tool_snapshot_sandbox, tool_run_code;
/* terminal.c (issue 35) */
tool_handler_fn tool_terminal;
tool_handler_fn tool_review_changes, tool_apply_changes;
tool_handler_fn tool_volume; /* volumes.c */

/* ---- approvals (approvals.c; mcp/approval.h): the person decides before a call crosses into
 * their world. Each gate calls then(arg, allowed, refusal) exactly once, now or later: allowed;
 * refused with refusal (fail the job with it); or allowed false and refusal NULL when the call
 * was already answered (a 2026-07-28 InputRequiredResult): free your state and
 * tool_job_abandon the job. ---- */
typedef void tools_gate_fn(void *arg, bool allowed, const struct mcp_error *refusal);
/* create_sandbox: egress beyond the person's list (network, network_policy), rw mounts, then
 * the secrets bound (spec->secrets). */
void tools_gate_create(struct tool_job *job, const struct sandbox_spec *spec, tools_gate_fn *then,
                       void *arg);
/* update_sandbox's network_policy (a reference is taken; NULL: kept) and secrets (names, a
 * reference is taken; NULL: none bound) on job's bound sandbox: names its current policy allows
 * already are not asked again. */
void tools_gate_update(struct tool_job *job, struct egress_policy *policy, json_t *secrets,
                       tools_gate_fn *then, void *arg);
/* apply_changes of paths (the backend's absolute paths, borrowed, or NULL): reviews first, then
 * asks. Without a "review" argument it sets job->args "review" to the review the person saw. */
void tools_gate_apply(struct tool_job *job, json_t *paths, tools_gate_fn *then, void *arg);
/* What to use instead of a snapshot / a code context, naming the backend of the table that has
 * them ("...; snapshots need a sandbox on the opensandbox backend (create_sandbox backend
 * \"opensandbox\")"). */
#define TOOLS_HINT_MAX 320
void tools_hint_snapshots(const struct backend_set *set, char *out, size_t size);
void tools_hint_code(const struct backend_set *set, char *out, size_t size);

#endif
