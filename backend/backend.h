/* The backend layer: one vtable, and a table of the backends a process runs with.
 *
 * mcp/ never knows which backend it talks to. Each backend's ops name it and the prefix of its
 * sandbox ids (ops->name, ops->id_prefix); the composition root (cli/backends.c) puts every backend
 * this build has into one struct backend_set, in the order create_sandbox prefers them, and the
 * tool layer looks them up by name or by a sandbox id's prefix (backend_by_name,
 * backend_for_sandbox_id).
 *
 * Contract, as in libuv:
 *  - Every operation runs on the server's libuv loop thread and never blocks it for long.
 *  - An operation that returns 0 calls its completion callback exactly once, later, never from
 *    inside the call that started it. An operation that returns -1 has filled err and will
 *    never call the callback.
 *  - Pointer arguments (strings, json) are borrowed and need only stay valid for the duration
 *    of the call that takes them; a backend copies what it keeps.
 *  - Results passed to callbacks are borrowed: valid during the callback only (json_incref to
 *    keep one).
 *  - Errors use struct mcp_error with a domain code (MCP_ERR_NOT_FOUND, MCP_ERR_CONFLICT, ...)
 *    and a message an agent can act on ("sandbox sbx-12ab is paused; call update_sandbox with
 *    paused: false first").
 *
 * Ownership (who may touch a sandbox) is checked by the tool layer through the store before
 * a backend is called; backends record owner on create and filter list by owner.
 *
 * JSON shapes. Results are JSON objects whose fields are exactly those of the matching tool's
 * structuredContent (schemas/tools/<tool>.json); the tool layer adds nothing but presentation.
 * In particular a "sandbox info" object (create, get, list items, renew, pause, resume) is:
 *   {sandbox_id, backend, image, state, created_at, expires_at|null, idle_timeout_seconds,
 *    limits:{cpu, memory_bytes, pids, disk_bytes}, network, network_policy|null, metadata:{},
 *    usage?:{...}}
 * with times in RFC 3339 UTC and state one of sandbox_state_name(). network is true when the
 * sandbox has any egress (unfiltered or by policy); network_policy is the policy in force in the
 * normalized form of egress_policy_to_json (egress_policy.h), null without one.
 */
#ifndef MCPBOX_BACKEND_H
#define MCPBOX_BACKEND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "backend/egress_policy.h"
#include "lib/base/error.h"

struct backend;
struct store;

enum sandbox_state {
    SANDBOX_CREATING,
    SANDBOX_RUNNING,
    SANDBOX_PAUSED,
    SANDBOX_STOPPED,   /* init exited; record kept for diagnosis until destroyed or reaped */
    SANDBOX_EXPIRED,   /* TTL or idle timeout passed */
    SANDBOX_FAILED,    /* could not start */
    SANDBOX_DESTROYED, /* only ever seen in diagnosis/audit */
};

/* "creating", "running", "paused", "stopped", "expired", "failed", "destroyed" */
const char *sandbox_state_name(enum sandbox_state state);
int sandbox_state_parse(const char *name, enum sandbox_state *out);

struct snap_inline;

/* What create_sandbox asks for. Zero means "the backend's default". */
struct sandbox_spec {
    const char *owner;        /* who creates it (tool layer's caller identity) */
    const char *image;        /* NULL: "host" locally, the configured default remotely */
    /* "user:password" for the registry of image (OpenSandbox's image.auth), or NULL: the
     * user's credential files, as `mcpbox image pull` uses (docs/images.md). Local only. */
    const char *registry_auth;
    json_t *env;              /* object of string values, or NULL */
    json_t *metadata;         /* object of string values, or NULL */
    double cpu;               /* CPUs (0.5 = half a core) */
    uint64_t memory_bytes;
    uint64_t disk_bytes;      /* writable space (workspace + tmp) */
    uint32_t pids;
    bool network;             /* false: loopback only; true: egress (public internet only) */
    /* Host directories to mount: [{source, target, mode: "ro"|"rw"|"copy-on-write"}], or NULL.
     * Only the local backend mounts; the others refuse a non-empty list. */
    json_t *mounts;
    /* The client's MCP roots as host paths (array of strings), or NULL when it has none to
     * say: every mount source must then also lie within one of them (roots only narrow). */
    json_t *roots;
    /* Egress by policy (egress_policy.h), borrowed; NULL: none, network decides. The tool layer
     * sets network false whenever it sets a policy, so code that knows only network fails
     * closed (loopback only); a backend that takes the policy copies what it keeps
     * (egress_policy_ref, or its JSON). */
    const struct egress_policy *network_policy;
    /* Secrets to bind (backend/secrets.h): an array of the person's secret names, or NULL. The
     * local backend's egress proxy adds their values to requests to their hosts; binding one
     * allows egress to its hosts unless the person defined it with egress false. A backend
     * without injection refuses a non-empty list. */
    json_t *secrets;
    /* OpenSandbox's credentialProxy: the sandbox trusts the egress proxy's CA so that its
     * Credential Vault (credential_vault) can inject over TLS; egress goes by policy (allow all
     * when it has none). A backend without injection refuses it. */
    bool credential_proxy;
    int64_t timeout_seconds;  /* absolute TTL from now; 0 = default; < 0 = none */
    int64_t idle_timeout_seconds; /* 0 = default; < 0 = none */
    /* Restore from this snapshot instead of image (only backends with ops->snapshot; the tool
     * layer refuses it for the others). Owner-checked by the backend. */
    const char *snapshot_id;
    /* Optional: called while the create waits for something slow (an image pull), with bytes
     * done of total (total 0 while unknown) and what it is doing. */
    void (*progress)(void *progress_arg, uint64_t done, uint64_t total, const char *what);
    void *progress_arg;
    /* The local backend's own, set by its restore only: a small snapshot's files for the new
     * sandbox's setup to write (backend/local/snapshot_inline.h), or NULL. */
    struct snap_inline *local_restore;
};

/* Completion for most operations: exactly one of result/err is non-NULL. Both borrowed. */
typedef void backend_cb(void *arg, json_t *result, const struct mcp_error *err);

/* ---- commands ---------------------------------------------------------------------------- */

struct exec_request {
    const char *command;    /* run by /bin/sh -c inside the sandbox */
    const char *cwd;        /* NULL: the workspace directory */
    json_t *env;            /* extra environment, object of strings, or NULL */
    const char *stdin_data; /* bytes fed to stdin, then EOF; NULL: stdin is /dev/null */
    size_t stdin_len;
    int64_t timeout_ms;     /* kill the command after this long; 0 = never */
    /* Interactive commands (command_input, command_resize). stdin_open: stdin stays open after
     * stdin_data until command_input with eof (or the command's exit). A pty when pty_rows and
     * pty_cols are both non-zero: the command leads a new session whose controlling terminal is
     * a fresh pseudo-terminal of that size, on its stdin, stdout and stderr; its output comes as
     * EXEC_STDOUT (the terminal's bytes: "\r\n" line ends, echo); stdin is then open whatever
     * stdin_open says; TERM is xterm-256color unless an env sets it. Backends without
     * command_input refuse both with MCP_ERR_UNSUPPORTED. */
    bool stdin_open;
    uint16_t pty_rows, pty_cols;
    /* A name the backend keeps with the command (command_find looks it up; command_get and the
     * agent's lists report it): NULL for none, else 1 to BACKEND_LABEL_MAX bytes of
     * [A-Za-z0-9_.:-] (anything else: MCP_ERR_INVALID). A backend without command_find
     * (opensandbox) ignores it. */
    const char *label;
    /* Terminals (mcp/tools/terminal_pty.c): nobody watches the command. on_started is the last
     * callback (on_done only when it could not be started; the handle is gone after on_started,
     * so pass out NULL) and the output is read with command_get. Backends without
     * command_input may ignore it (they watch as ever). */
    bool unwatched;
};
#define BACKEND_LABEL_MAX 64

enum exec_stream { EXEC_STDOUT = 1, EXEC_STDERR = 2 };

/* Watches one running command. on_started is called once when the command has a command_id
 * (before any output); on_output for every chunk as it arrives; on_done exactly once at the end
 * with the final status object:
 *   {command_id, status:"exited"|"killed"|"timed_out"|"oom_killed"|"lost", exit_code|null,
 *    signal|null, duration_ms, stdout_bytes, stderr_bytes}
 * or with err if the command could not be started. */
struct exec_observer {
    void (*on_started)(void *arg, const char *command_id);
    void (*on_output)(void *arg, enum exec_stream stream, const char *data, size_t len);
    backend_cb *on_done;
    void *arg;
};

/* A started command being watched. Backends keep every command's full output (stdout, stderr and
 * the interleaved log) so command_get can return any part of it later, in this or another
 * mcpbox process. */
struct exec_handle;

/* ---- files --------------------------------------------------------------------------------- */

/* Raw bytes of a read. data is borrowed (valid during the callback). */
struct file_read_result {
    const char *data;
    size_t len;      /* bytes returned */
    uint64_t size;   /* the whole file's size */
    uint64_t offset; /* where data starts */
    uint32_t mode;   /* permission bits */
    bool truncated;  /* more bytes follow offset+len */
};
typedef void backend_read_cb(void *arg, const struct file_read_result *res,
                             const struct mcp_error *err);

/* Generic file operations, by name. args are the tool's validated arguments (minus sandbox_id);
 * results are the tool's structuredContent:
 *   "list"    {path, depth?}               -> {path, entries:[{path, type, size, mode, mtime}], truncated}
 *   "search"  {path, pattern, max_results?}-> {path, pattern, matches:[path...], truncated}
 *   "replace" {path, old, new, count?, unique?} -> {path, replacements, size, sha256}
 *                                            (unique: more than one occurrence is a conflict)
 *   "move"    {source, destination, overwrite?} -> {source, destination}
 *   "delete"  {path, recursive?}           -> {path, deleted}
 *   "mkdir"   {path, parents?, mode?}      -> {path, created}
 *   "stat"    {path}                       -> {path, type, size, mode, mtime, target?}
 * Paths are resolved inside the sandbox (relative paths from the workspace); no operation may
 * follow a symlink out of the sandbox. */
typedef int backend_file_op_fn(struct backend *be, const char *sandbox_id, const char *op,
                               json_t *args, backend_cb *cb, void *arg, struct mcp_error *err);

/* ---- optional operations: snapshots, metrics, code interpreter, host checks ------------------
 * A backend that cannot do these puts the default slot there (backend_def_*, below), which fails
 * with MCP_ERR_UNSUPPORTED naming the backend; the tool layer adds what to use instead. No slot
 * is ever NULL, so callers never test for one.
 *
 * snapshot(owner, action, args): args are the snapshot tool's arguments.
 *   "create" {sandbox_id, name?}  -> snapshot info, once ready (state "creating" with a note when
 *                                    it is not ready within the backend's wait; err if it failed)
 *   "list"   {sandbox_id?, state?} -> {snapshots:[info...]} of owner's snapshots
 *   "delete" {snapshot_id}         -> {snapshot_id, deleted:true}
 * snapshot info: {snapshot_id, sandbox_id, name|null, state:"creating"|"ready"|"failed"|
 *                 "deleting"|other lower-case, reason?, message?, created_at}
 *
 * metrics -> {sandbox_id, cpu_count|null, cpu_used_pct|null, memory_used_bytes,
 *             memory_total_bytes|null, pids?, timestamp} (RFC 3339; null: not known)
 *
 * code_context(action, args) on a sandbox whose image has a code interpreter:
 *   "create"    {language?}   -> {context_id, language} (a fresh context)
 *   "list"      {language?}   -> {contexts:[{context_id, language}]}
 *   "delete"    {context_id}  -> {context_id, deleted:true}
 *   "interrupt" {context_id}  -> {context_id, interrupted:true}
 * code_run: on_started(context_id) once the code runs, on_output per chunk, on_done with
 *   {context_id, language, status:"ok"|"error"|"interrupted"|"timed_out"|"lost",
 *    execution_count|null, results:[{mime type: value}...] (capped: 1 MiB on opensandbox),
 *    results_dropped (how many did not fit), error:{name, value, traceback:[]}|null, duration_ms}
 * or err (no interpreter in the image, unknown context, ...). No context_id: the language's
 * default context, created on demand. Cancel by code_context "interrupt".
 *
 * workspace(action, args): review and apply of the sandbox's copy-on-write mounts (issue 13).
 *   "review" {paths?, offset?, max_bytes?} -> {changes:[{path, host_path, change:"added"|
 *            "modified"|"deleted"|"mode", type, old_type?, mode|null, old_mode|null, size,
 *            old_size, binary?, conflict?, applicable?, diff_cut?, same_as?, diff_offset}] (at
 *            most 500), changes_total, changes_note?, diff (unified, from offset, at most
 *            max_bytes), diff_bytes, offset, next_offset|null, truncated, note?, review (the
 *            token of what this review read)}
 *   "apply"  {paths?, overwrite?, review?, apply_max_bytes?, group_write?} -> {results:[{path,
 *            change, status:"applied"|"conflict"|"skipped"|"failed"|"refused", reason?, mode?,
 *            old_mode?, held_back?}] (at most 500), applied, conflicts, skipped, failed,
 *            refused, bytes, results_note?}; review is required unless the server was started
 *            with --apply-unreviewed; apply_max_bytes and group_write are the person's own
 *            choices (the CLI's flags), which the tools never pass on from an agent.
 * paths are sandbox (or host) paths; a directory selects everything below it. */
struct code_request {
    const char *language;   /* "python" (default), "javascript", "bash", ... */
    const char *code;
    const char *context_id; /* NULL: the language's default context */
    int64_t timeout_ms;     /* interrupt after this long; 0 = never */
};

/* ---- the vtable ------------------------------------------------------------------------------ */

struct shell_session_request; /* backend/shell_session_proc.h */
struct shell_session_result;  /* backend/shell_session.h */

struct backend_ops {
    const char *name;      /* "local", "opensandbox" */
    const char *id_prefix; /* "sbx-", "osb-": every sandbox id of this backend starts with it */
    /* Told to whoever asks for this backend while it is not running ("set OPEN_SANDBOX_DOMAIN
     * ... and restart mcpbox"). */
    const char *enable_hint;

    void (*shutdown)(struct backend *be); /* stop watching; sandboxes keep running */
    /* Releases what shutdown left (calls shutdown first if it was not); the loop must run once
     * more to finish closing handles. */
    void (*free)(struct backend *be);

    int (*create)(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb, void *arg,
                  struct mcp_error *err);
    int (*destroy)(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                   struct mcp_error *err);
    /* filter: {state?, metadata?:{k:v}}; result {sandboxes:[info...]} of owner's sandboxes. */
    int (*list)(struct backend *be, const char *owner, json_t *filter, backend_cb *cb, void *arg,
                struct mcp_error *err);
    int (*get)(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
               struct mcp_error *err);
    int (*renew)(struct backend *be, const char *sandbox_id, int64_t timeout_seconds,
                 backend_cb *cb, void *arg, struct mcp_error *err);
    int (*pause)(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                 struct mcp_error *err);
    int (*resume)(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                  struct mcp_error *err);

    /* Start a command; *out (may be NULL if the caller never detaches) receives the handle. */
    int (*exec)(struct backend *be, const char *sandbox_id, const struct exec_request *req,
                const struct exec_observer *obs, struct exec_handle **out, struct mcp_error *err);
    /* Stop watching: no observer callback is called after this returns, the command goes on
     * running in the background and the handle is freed. */
    void (*exec_detach)(struct exec_handle *h);
    /* {command_id, status:"running"|..., exit_code, signal, duration_ms, output, offset,
     *  next_offset, total_bytes, eof, label?} where output is the interleaved log from offset, at most
     * limit bytes (valid UTF-8; invalid bytes replaced). */
    int (*command_get)(struct backend *be, const char *sandbox_id, const char *command_id,
                       uint64_t offset, uint64_t limit, backend_cb *cb, void *arg,
                       struct mcp_error *err);
    /* {command_id, signal, status}. The signal goes to the command's process group (the
     * command leads its own session and group; what it starts in other groups, as a job-control
     * shell does, is not reached), except that SIGINT, SIGQUIT and SIGTSTP to a pty command go
     * to its terminal's foreground process group, as Ctrl-C, Ctrl-\ and Ctrl-Z do. */
    int (*command_kill)(struct backend *be, const char *sandbox_id, const char *command_id,
                        int signal, backend_cb *cb, void *arg, struct mcp_error *err);

    int (*file_read)(struct backend *be, const char *sandbox_id, const char *path,
                     uint64_t offset, uint64_t length, backend_read_cb *cb, void *arg,
                     struct mcp_error *err);
    /* Writes len bytes (creating parents); result {path, size, sha256} of the whole file. */
    int (*file_write)(struct backend *be, const char *sandbox_id, const char *path,
                      const void *data, size_t len, uint32_t mode, bool append, backend_cb *cb,
                      void *arg, struct mcp_error *err);
    backend_file_op_fn *file_op;

    /* {sandbox_id, port, url, headers:{}, reachable_from:"host"|...} */
    int (*endpoint)(struct backend *be, const char *sandbox_id, int port, backend_cb *cb,
                    void *arg, struct mcp_error *err);
    /* what: "summary"|"logs"|"events"|"inspect" */
    int (*diagnose)(struct backend *be, const char *sandbox_id, const char *what, backend_cb *cb,
                    void *arg, struct mcp_error *err);

    /* Optional (backend_def_* when unsupported); shapes above the vtable. */
    int (*snapshot)(struct backend *be, const char *owner, const char *action, json_t *args,
                    backend_cb *cb, void *arg, struct mcp_error *err);
    int (*metrics)(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                   struct mcp_error *err);
    int (*code_context)(struct backend *be, const char *sandbox_id, const char *action,
                        json_t *args, backend_cb *cb, void *arg, struct mcp_error *err);
    int (*code_run)(struct backend *be, const char *sandbox_id, const struct code_request *req,
                    const struct exec_observer *obs, struct mcp_error *err);
    /* Can this host run the backend, and if not, what exactly to do: {ok, checks:[{name, ok,
     * required, detail, fix|null}], note?}, or NULL when the backend has no host checks. Blocks
     * (forks probes): call it off the loop thread. Needs no instance, so it also explains a
     * backend that could not start. */
    json_t *(*host_check)(const char *state_dir);
    int (*workspace)(struct backend *be, const char *sandbox_id, const char *action,
                     json_t *args, backend_cb *cb, void *arg, struct mcp_error *err);
    /* Replaces the egress policy of a live sandbox made with one (create's network_policy);
     * new connections follow it at once, open ones are left alone. Result: sandbox info.
     * MCP_ERR_CONFLICT for a sandbox made without a policy (network true/false), which has no
     * policy path to change; MCP_ERR_UNSUPPORTED for what the backend cannot express. */
    int (*set_network_policy)(struct backend *be, const char *sandbox_id,
                              const struct egress_policy *policy, backend_cb *cb, void *arg,
                              struct mcp_error *err);

    /* Interactive commands (exec with stdin_open or a pty), by ids: any mcpbox process (a
     * restarted one, the CLI) reaches a command another started, since the sandbox holds it.
     * command_input -> {command_id, written, pending}: len bytes (at most
     * BACKEND_INPUT_MAX) queued whole for the command's stdin, pending of which it has not read
     * yet; eof then ends its input (on a pty: the terminal's Ctrl-D). MCP_ERR_UNAVAILABLE
     * ("busy", nothing written) when more than 4 MiB would wait; MCP_ERR_CONFLICT for a
     * command that has exited, was not started interactive, or whose input ended (eof), and
     * when the command closed its stdin (then this input was not read); MCP_ERR_LIMIT at exec past 32 running interactive commands in one sandbox.
     * command_resize -> {command_id, rows, cols}: a pty command's terminal size (the command
     * gets SIGWINCH); each 1..65535. */
    int (*command_input)(struct backend *be, const char *sandbox_id, const char *command_id,
                         const void *data, size_t len, bool eof, backend_cb *cb, void *arg,
                         struct mcp_error *err);
    int (*command_resize)(struct backend *be, const char *sandbox_id, const char *command_id,
                          unsigned rows, unsigned cols, backend_cb *cb, void *arg,
                          struct mcp_error *err);

    /* ---- named volumes (issue 36; backend/local/volume.c) ----
     * volume(owner, action, args): args are the volume tool's arguments; owner's volumes only
     * (another owner's is reported like a missing one).
     *   "create"  {name, size_bytes?} -> volume info
     *   "list"    {}                  -> {volumes:[volume info...]}
     *   "inspect" {name}              -> volume info with used_bytes, available_bytes|null,
     *                                    used_by:[sandbox_id...]
     *   "delete"  {name}              -> {name, deleted:true}; MCP_ERR_CONFLICT naming the
     *                                    sandboxes that use it
     * volume info: {name, size_limit_bytes, created_at, limit_enforced_by|null, limit_note?}.
     * A create mounts one with a `mounts` item {volume, target, mode:"rw"|"ro" (default ro)}. */
    int (*volume)(struct backend *be, const char *owner, const char *action, json_t *args,
                  backend_cb *cb, void *arg, struct mcp_error *err);
    /* Secrets (backend/secrets.h, issue 37): binds the person's secrets named in names (an
     * array of strings, borrowed) to a live sandbox made with a policy, replacing its list
     * (update_sandbox's secrets), and allows egress to their hosts as create does. Result:
     * sandbox info. MCP_ERR_INVALID for an unknown name (the message lists the names);
     * MCP_ERR_CONFLICT for a sandbox without a policy path. */
    int (*bind_secrets)(struct backend *be, const char *sandbox_id, json_t *names, backend_cb *cb,
                        void *arg, struct mcp_error *err);
    /* OpenSandbox's Credential Vault of one sandbox (osapi/osapi_vault.c, egress-api.yaml):
     * action "create" (body: CredentialVaultCreateRequest), "get", "patch" (body:
     * CredentialVaultMutationRequest) or "delete". Result: the sanitized CredentialVaultState
     * (an empty object after delete); a value never comes back. MCP_ERR_INVALID for a bad body,
     * MCP_ERR_NOT_FOUND for no vault, MCP_ERR_CONFLICT for a vault that exists (create) or a
     * stale expectedRevision. */
    int (*credential_vault)(struct backend *be, const char *sandbox_id, const char *action,
                            json_t *body, backend_cb *cb, void *arg, struct mcp_error *err);

    /* ---- taking up a command another process started (attach; tests/local/attach) ----
     * command_attach watches command_id as exec's observer would, from any mcpbox process:
     * obs->on_started(command_id) once, then on_output for each chunk of the command's kept
     * log from offset on (the interleaved log's offsets, as command_get's; past the end: from
     * the end), each with the stream it was written on, then for its live output, then on_done
     * once with the final status object as exec's (at once after the replay for a command that
     * has ended). Output a cap kept out of the log is not replayed. exec_detach stops it (no
     * callback after). MCP_ERR_NOT_FOUND (through on_done) for an unknown command.
     * command_find -> the status object (command_id, status, label, ...; as command_get without
     * output) of the newest command with that label still running; MCP_ERR_NOT_FOUND when none
     * runs, MCP_ERR_INVALID for a malformed label. */
    int (*command_attach)(struct backend *be, const char *sandbox_id, const char *command_id,
                          uint64_t offset, const struct exec_observer *obs,
                          struct exec_handle **out, struct mcp_error *err);
    int (*command_find)(struct backend *be, const char *sandbox_id, const char *label,
                        backend_cb *cb, void *arg, struct mcp_error *err);

    /* ---- shell sessions the remote keeps itself (issue 35; docs/tools-design.md, "Shell
     * sessions") ----
     * session_run runs req (backend/shell_session_proc.h) in the sandbox's session req->name,
     * kept by the remote (OpenSandbox's execd sessions), started on first use: obs and *out as
     * exec's (exec_detach stops watching, command_get and command_kill take the id on_started
     * gives), *res filled just before on_done with how it went (kind, exit status, cwd, and a
     * note for the agent). MCP_ERR_UNSUPPORTED, at once or through on_done before on_started,
     * when the backend or its remote keeps no sessions: the caller runs the session its own way
     * (backend/shell_session*.h). */
    int (*session_run)(struct backend *be, const char *sandbox_id,
                       const struct shell_session_request *req, const struct exec_observer *obs,
                       struct shell_session_result *res, struct exec_handle **out,
                       struct mcp_error *err);
};

/* Default slots for the optional operations: each fails with MCP_ERR_UNSUPPORTED, "the <name>
 * backend has no <what>" (host_check returns NULL). */
int backend_def_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                         backend_cb *cb, void *arg, struct mcp_error *err);
int backend_def_metrics(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                        struct mcp_error *err);
int backend_def_session_run(struct backend *be, const char *sandbox_id,
                            const struct shell_session_request *req,
                            const struct exec_observer *obs, struct shell_session_result *res,
                            struct exec_handle **out, struct mcp_error *err);
int backend_def_code_context(struct backend *be, const char *sandbox_id, const char *action,
                             json_t *args, backend_cb *cb, void *arg, struct mcp_error *err);
int backend_def_code_run(struct backend *be, const char *sandbox_id,
                         const struct code_request *req, const struct exec_observer *obs,
                         struct mcp_error *err);
json_t *backend_def_host_check(const char *state_dir);
int backend_def_workspace(struct backend *be, const char *sandbox_id, const char *action,
                          json_t *args, backend_cb *cb, void *arg, struct mcp_error *err);
int backend_def_set_network_policy(struct backend *be, const char *sandbox_id,
                                   const struct egress_policy *policy, backend_cb *cb, void *arg,
                                   struct mcp_error *err);
int backend_def_command_input(struct backend *be, const char *sandbox_id, const char *command_id,
                              const void *data, size_t len, bool eof, backend_cb *cb, void *arg,
                              struct mcp_error *err);
int backend_def_command_resize(struct backend *be, const char *sandbox_id, const char *command_id,
                               unsigned rows, unsigned cols, backend_cb *cb, void *arg,
                               struct mcp_error *err);
#define BACKEND_INPUT_MAX (1u << 20) /* bytes of one command_input */
int backend_def_volume(struct backend *be, const char *owner, const char *action, json_t *args,
                       backend_cb *cb, void *arg, struct mcp_error *err);
int backend_def_bind_secrets(struct backend *be, const char *sandbox_id, json_t *names,
                             backend_cb *cb, void *arg, struct mcp_error *err);
int backend_def_credential_vault(struct backend *be, const char *sandbox_id, const char *action,
                                 json_t *body, backend_cb *cb, void *arg, struct mcp_error *err);
int backend_def_command_attach(struct backend *be, const char *sandbox_id, const char *command_id,
                               uint64_t offset, const struct exec_observer *obs,
                               struct exec_handle **out, struct mcp_error *err);
int backend_def_command_find(struct backend *be, const char *sandbox_id, const char *label,
                             backend_cb *cb, void *arg, struct mcp_error *err);
/* The optional operations a backend may lack (its slot holds the default). */
enum backend_optional {
    BACKEND_SNAPSHOTS, /* snapshot (and restoring one at create) */
    BACKEND_METRICS,   /* metrics */
    BACKEND_CODE,      /* code_context and code_run */
};
/* True when ops have what: their slot is not the default. */
bool backend_has(const struct backend_ops *ops, enum backend_optional what);

/* Calls cb(arg, result, err) from the loop soon, never from inside the caller: how an operation
 * that already knows its answer keeps the contract above. Both are borrowed, like every other
 * argument: result gets its own reference (json_incref) and err is copied, so the caller still
 * releases what it passed. */
void backend_defer(struct backend *be, backend_cb *cb, void *arg, json_t *result,
                   const struct mcp_error *err);

/* Implementations embed this first and recover themselves with container_of. */
struct backend {
    const struct backend_ops *ops;
    uv_loop_t *loop;     /* borrowed: the server's loop */
    struct store *store; /* borrowed: the shared state store */
};

/* The backends a process runs with: one slot per backend this build has, in the order
 * create_sandbox prefers them (the first is the default). A slot whose backend is not running
 * (not configured, or it could not start on this host) keeps its ops, so that its name, id
 * prefix, enable_hint and host checks still answer. Filled by the composition root. */
#define BACKEND_SET_MAX 4
struct backend_slot {
    const struct backend_ops *ops;
    struct backend *be; /* owned; NULL: not running */
};
struct backend_set {
    struct backend_slot slots[BACKEND_SET_MAX];
    size_t n;
};

/* Adds a slot (be may be NULL); returns -1 with err when the set is full, a slot of ops is NULL
 * or ops's name or id prefix is taken. */
int backend_set_add(struct backend_set *set, const struct backend_ops *ops, struct backend *be,
                    struct mcp_error *err);
/* Each running backend's shutdown, then free; the slots are emptied. */
void backend_set_shutdown(struct backend_set *set);
void backend_set_free(struct backend_set *set);

/* What exec(2) can pass a sandbox's commands: Linux refuses (E2BIG, "Argument list too long") a
 * single "NAME=value" string longer than MAX_ARG_STRLEN (32 pages: 131072 bytes with its NUL),
 * and arguments plus environment beyond ARG_MAX (a quarter of the stack limit: 2 MiB by
 * default). A sandbox's env goes to every command, so it may use at most half of that, leaving
 * the rest to the command line and the command's own env. */
#define BACKEND_ENV_VAR_MAX (131072 - 1)
#define BACKEND_ENV_TOTAL_MAX (1024 * 1024)
/* Refuses an env (object of strings, or NULL) that would make every command fail, naming the
 * limit and what to do instead; what = the argument's name ("env"). */
int backend_check_env(const json_t *env, const char *what, struct mcp_error *err);

/* The backend that owns a sandbox id, or NULL (err filled: unknown id form / backend disabled). */
struct backend *backend_for_sandbox_id(const struct backend_set *set, const char *sandbox_id,
                                       struct mcp_error *err);
/* The backend called name ("local", "opensandbox"), or NULL with err filled. name NULL: the
 * default (the first slot). */
struct backend *backend_by_name(const struct backend_set *set, const char *name,
                                struct mcp_error *err);
/* The first backend that keeps snapshots (where a restore or a snapshot list without a sandbox
 * goes), or NULL with err saying which to enable. */
struct backend *backend_for_snapshots(const struct backend_set *set, struct mcp_error *err);
/* The first backend that keeps named volumes, or NULL with err saying which to enable. */
struct backend *backend_for_volumes(const struct backend_set *set, struct mcp_error *err);
/* The ops of the first backend of the table, running or not, that has what, or NULL: for a
 * message that names where to go instead. */
const struct backend_ops *backend_set_having(const struct backend_set *set,
                                             enum backend_optional what);

#endif
