/* Internals of the OpenSandbox backend, shared only inside backend/opensandbox/. */
#ifndef OSB_INTERNAL_H
#define OSB_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "lib/httpc/httpc.h"
#include "backend/opensandbox/opensandbox.h"
#include "backend/opensandbox/vault_patch.h"
#include "lib/base/error.h"

#define OSB_ID_PREFIX "osb-"
#define OSB_REMOTE_ID_MAX 128
#define OSB_EXECD_PORT 44772
/* execd's total of a command's output so far, sent with a page of its logs. */
#define OSB_TAIL_CURSOR_HEADER "execd-commands-tail-cursor"
#define OSB_WORKSPACE "/workspace"
#define OSB_DEFAULT_IMAGE "ubuntu:24.04"
#define OSB_DEFAULT_TIMEOUT_S 600   /* the SDKs' default sandbox lifetime */
#define OSB_MIN_TIMEOUT_S 60        /* the server rejects less */
#define OSB_RENEW_MAX_S (10 * 365 * 86400) /* beyond any server's maximum; keeps times sane */
#define OSB_DEFAULT_CPU "1"
#define OSB_DEFAULT_MEMORY "2Gi"
#define OSB_OWNER_KEY "mcpbox-owner" /* remote metadata label holding hash(owner) */
#define OSB_META_PREFIX "mcpbox-"    /* our labels; hidden from the user's metadata */
#define OSB_JSON_BODY_MAX (8u << 20) /* any JSON answer */
#define OSB_ERROR_BODY_MAX (64u << 10)
#define OSB_FILE_MAX (64u << 20)     /* the most a read/write/replace moves in one call */
#define OSB_READ_DEFAULT (1u << 20)  /* length 0 on file_read means this much */
#define OSB_STDIN_MAX (64u << 10)    /* stdin is inlined into the command line (base64) */
#define OSB_CMD_LOG_MAX (8u << 20)   /* retained output per watched command (the tail) */
#define OSB_CMDS_RETAINED 64         /* finished commands kept for command_get */
#define OSB_LIST_PAGE_SIZE 200       /* the server's maximum */
#define OSB_LIST_PAGES_MAX 20
#define OSB_ENTRIES_MAX 10000
#define OSB_DIAG_MAX (1u << 20)

struct osb_endpoint {
    struct osb_endpoint *next;
    char *rid;
    char *base;    /* "http://host:port/path" without a trailing slash */
    json_t *headers; /* object of strings sent on every execd request */
};

struct osb_cmd; /* a command this process watches or watched (exec.c) */

struct osb_backend {
    struct backend base;
    struct httpc *http;
    char *protocol;        /* "http" / "https" */
    char *domain;          /* host[:port][/prefix] */
    char *base_url;        /* protocol://domain/v1 */
    char *api_key;         /* never logged, never put into an error or a sandbox */
    bool use_server_proxy;
    struct opensandbox_tuning t;
    struct osb_endpoint *endpoints;
    struct osb_cmd *cmds;
    size_t ncmds;
    bool closing;
    /* Prism (contract mocks) flags requests that break the spec with `sl-violations`; a real
     * server never sends it. Counted and logged so tests and operators see it. */
    unsigned contract_violations;
    bool snapshots_migrated; /* the snapshot owner table exists (snapshot_store.c) */
    bool sessions_migrated;  /* the session table exists (session_store.c) */
    json_t *sessions;        /* without a store: {"<sandbox>/<name>": execd session id} */
    json_t *no_sessions;     /* {sandbox_id: true}: its execd answered 404/501 on /session */
    char last_violation[HTTPC_HDR_VALUE_MAX + 160];
};

static inline struct osb_backend *osb_of(struct backend *be)
{
    return (struct osb_backend *)be;
}

/* ---- client.c: requests ------------------------------------------------------------------ */

/* Completion of an API call: err is NULL on 2xx, else the mapped error. */
typedef void osb_call_fn(void *arg, struct httpc_response *resp, const struct mcp_error *err);

struct osb_call_opts {
    const char *method;
    const char *what;       /* "creating the sandbox", for error messages */
    const char *sandbox_id; /* "osb-..." or NULL, for error messages */
    json_t *json;           /* body (sent as application/json), or NULL */
    const char *raw;        /* or a raw body */
    size_t raw_len;
    curl_mime *(*mime_build)(void *arg, CURL *easy);
    enum httpc_retry retry;
    size_t body_cap;        /* 0: OSB_JSON_BODY_MAX */
    uint32_t deadline_ms;   /* 0: the request timeout */
    bool stream;            /* no deadline, low-speed limit */
    const char *range;      /* "bytes=a-b" or NULL */
    httpc_sink_fn *sink;
    /* The body carries secret values (vault.c): a contract report on it is counted, not
     * logged or kept (a server may repeat the request there). */
    bool sensitive;
};

/* path is appended to the lifecycle base URL ("/sandboxes/..."). */
int osb_lifecycle_call(struct osb_backend *b, const char *path, const struct osb_call_opts *o,
                       osb_call_fn *done, void *arg, struct mcp_error *err);
/* path is appended to the execd endpoint of ep. */
struct httpc_req *osb_execd_call(struct osb_backend *b, const struct osb_endpoint *ep,
                               const char *path, const struct osb_call_opts *o, osb_call_fn *done,
                               void *arg, struct mcp_error *err);

/* The execd endpoint of a sandbox (cached). cb may be called synchronously (cache hit). */
typedef void osb_endpoint_fn(void *arg, const struct osb_endpoint *ep, const struct mcp_error *err);
int osb_endpoint_resolve(struct osb_backend *b, const char *sandbox_id, osb_endpoint_fn *cb,
                         void *arg, struct mcp_error *err);
void osb_endpoint_forget(struct osb_backend *b, const char *rid);
void osb_endpoints_free(struct osb_backend *b);
/* "osb-abc" -> "abc" (validated: letters, digits, '-', '_', '.'); NULL with err otherwise. */
const char *osb_remote_id(const char *sandbox_id, struct mcp_error *err);
/* Percent-encodes s (new string). */
char *osb_escape(const char *s);
/* Parses a 2xx JSON body; NULL with err if it is not JSON. */
json_t *osb_resp_json(struct httpc_response *resp, const char *what, struct mcp_error *err);
/* The answer's member `field` if it has the JSON type `type` (borrowed from *doc), else NULL with
 * err set: malformed JSON, or the member missing. *doc owns the parsed answer either way. */
json_t *osb_resp_member(struct httpc_response *resp, const char *what, const char *field,
                        json_type type, json_t **doc, struct mcp_error *err);
/* A url like "http://h:p/x" from an endpoint string, which may lack a scheme and carry a path. */
char *osb_endpoint_url(const char *protocol, const char *endpoint);

/* ---- errors.c -------------------------------------------------------------------------------- */

void osb_error_from_response(const struct osb_backend *b, const struct httpc_response *resp,
                             const char *what, const char *sandbox_id, bool execd,
                             struct mcp_error *err);
/* Removes the API key from a message, should a server ever echo it. */
void osb_error_scrub(const struct osb_backend *b, struct mcp_error *err);

/* ---- lifecycle.c ----------------------------------------------------------------------------- */

int osb_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb, void *arg,
               struct mcp_error *err);
int osb_destroy(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                struct mcp_error *err);
int osb_list(struct backend *be, const char *owner, json_t *filter, backend_cb *cb, void *arg,
             struct mcp_error *err);
int osb_get(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
            struct mcp_error *err);
int osb_renew(struct backend *be, const char *sandbox_id, int64_t timeout_seconds, backend_cb *cb,
              void *arg, struct mcp_error *err);
int osb_pause(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
              struct mcp_error *err);
int osb_resume(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
               struct mcp_error *err);
/* Remote Sandbox JSON -> mcpbox sandbox info (store record fills limits, network). */
json_t *osb_sandbox_info(struct osb_backend *b, json_t *remote);
/* "500m" -> 0.5, "2" -> 2; "512Mi" -> bytes. -1 if malformed. */
double osb_parse_cpu(const char *s);
int64_t osb_parse_quantity(const char *s);
/* Remote state name -> mcpbox state. */
enum sandbox_state osb_state_map(const char *remote);
/* The label value identifying owner in remote metadata (16 hex of sha256). out: 17 bytes. */
void osb_owner_label(const char *owner, char out[17]);

/* ---- egress.c: network_policy (egress_policy.h) ----------------------------------------------- */

#define OSB_EGRESS_PORT 18080 /* the egress sidecar's API (specs/egress-api.yaml) */
/* The lifecycle API's networkPolicy for p; NULL with err (UNSUPPORTED) if a rule has ports. */
json_t *osb_network_policy_body(const struct egress_policy *p, struct mcp_error *err);
/* credentialProxy relayed from an API client (issue 37): the refusal, saying what to do
 * instead; always -1. */
int osb_credential_proxy_refused(struct mcp_error *err);
int osb_set_network_policy(struct backend *be, const char *sandbox_id,
                           const struct egress_policy *policy, backend_cb *cb, void *arg,
                           struct mcp_error *err);

/* ---- vault_plan.c, vault.c: secrets through the remote's Credential Vault (issue 37) ------- */

/* Which secrets a sandbox binds and how, without values. */
struct osb_vault_plan {
    json_t *names; /* the names bound, each once */
    json_t *items; /* [{name, def, template, binding}]: binding is the spec's CredentialBinding */
    json_t *allow; /* [{action: allow, target}] for their hosts (egress false: none) */
};
/* NULL with err: no state directory, an unknown name (the message lists them), or a secret the
 * vault cannot express (a placeholder). */
struct osb_vault_plan *osb_vault_plan_new(struct osb_backend *b, json_t *names,
                                          struct mcp_error *err);
void osb_vault_plan_free(struct osb_vault_plan *p);
/* The credentials [{name, source: {type: inline, value}, raw}] with values read now (blocking:
 * off the loop); NULL with err. raw is the value alone, never sent. Wipe before release. */
json_t *osb_vault_credentials(const struct osb_vault_plan *p, struct mcp_error *err);
void osb_vault_wipe(json_t *creds);
/* A create's body and record with secrets: credentialProxy on, allow rules first. */
void osb_vault_apply_body(const struct osb_vault_plan *p, json_t *body, json_t *record);
/* osb_create with plan (NULL: none) and no checks of secrets. */
int osb_create_as(struct backend *be, const struct sandbox_spec *spec,
                  const struct osb_vault_plan *plan, backend_cb *cb, void *arg,
                  struct mcp_error *err);
/* Creates the sandbox, then writes its vault; destroys it if that fails. */
int osb_vault_create(struct backend *be, const struct sandbox_spec *spec, backend_cb *cb, void *arg,
                     struct mcp_error *err);
int osb_bind_secrets(struct backend *be, const char *sandbox_id, json_t *names, backend_cb *cb,
                     void *arg, struct mcp_error *err);
/* diagnose_sandbox: res.secrets = {bound: [{name, hosts, defined}], used: null, note} when the
 * record binds any (the remote's API reports no use of its vault). */
void osb_vault_diagnose(struct osb_backend *b, json_t *record, json_t *res);

/* ---- exec.c ---------------------------------------------------------------------------------- */

int osb_exec(struct backend *be, const char *sandbox_id, const struct exec_request *req,
             const struct exec_observer *obs, struct exec_handle **out, struct mcp_error *err);
void osb_exec_detach(struct exec_handle *h);
int osb_command_get(struct backend *be, const char *sandbox_id, const char *command_id,
                    uint64_t offset, uint64_t limit, backend_cb *cb, void *arg,
                    struct mcp_error *err);
int osb_command_kill(struct backend *be, const char *sandbox_id, const char *command_id,
                     int signal, backend_cb *cb, void *arg, struct mcp_error *err);
void osb_cmds_free(struct osb_backend *b);
/* Builds execd's /command body (exposed for unit tests). */
json_t *osb_command_body(const struct exec_request *req, struct mcp_error *err);

/* ---- session.c, session_store.c: MCP sessions on execd's bash sessions (issue 35) ------- */
struct osb_sess_run; /* one command in a session (session.c) */
int osb_session_run(struct backend *be, const char *sandbox_id,
                    const struct shell_session_request *req, const struct exec_observer *obs,
                    struct shell_session_result *res, struct exec_handle **out,
                    struct mcp_error *err);
/* For exec.c: a command watched as exec's, streamed from a session's run (sess owned by it);
 * started by osb_cmd_start_at, or failed (on_done with err). */
struct osb_cmd *osb_cmd_for_session(struct osb_backend *b, const char *sandbox_id, json_t *body,
                                    int64_t timeout_ms, const struct exec_observer *obs,
                                    struct osb_sess_run *sess);
void osb_cmd_start_at(struct osb_cmd *c, const struct osb_endpoint *ep, const char *path);
void osb_cmd_fail(struct osb_cmd *c, const struct mcp_error *err);
/* After the first step (rc: its result): 0, or -1 with err when the command failed inside the
 * call (then it never calls back). */
int osb_cmd_started(struct osb_cmd *c, int rc, struct mcp_error *err);
/* The command of command_id was ended from here (its session deleted): reported as killed. */
void osb_cmd_killed(struct osb_backend *b, const char *sandbox_id, const char *command_id);
/* Output of c as the command's own (logged, counted, observed). */
void osb_cmd_emit(struct osb_cmd *c, enum exec_stream stream, const char *data, size_t n);
/* exec.c's hooks into a session run: stdout (held back for the end marker), the end (status
 * "exited", "timed_out", ...; exit_code -1 when none), execd refusing the run (the session is
 * gone: forgotten, err says so), the command id, and the free. */
void osb_sess_run_stdout(struct osb_sess_run *s, const char *data, size_t n);
void osb_sess_run_end(struct osb_sess_run *s, struct osb_cmd *c, const char *status,
                      int64_t exit_code);
const struct mcp_error *osb_sess_run_refused(struct osb_sess_run *s, const char *why,
                                             struct mcp_error *err);
char *osb_sess_run_command_id(struct osb_sess_run *s);
void osb_sess_run_detach(struct osb_sess_run *s); /* its result goes nowhere from now on */
void osb_sess_run_free(struct osb_sess_run *s);
/* True for a session command's id ("<execd session id>#<n>"): command_get, command_kill. */
bool osb_session_command_id(const char *command_id);
int osb_session_command_kill(struct osb_backend *b, const char *sandbox_id, const char *command_id,
                             backend_cb *cb, void *arg, struct mcp_error *err);
/* The execd session id of (sandbox, name), a new string or NULL; record, forget, count. */
char *osb_sess_lookup(struct osb_backend *b, const char *sid, const char *name);
void osb_sess_record(struct osb_backend *b, const char *sid, const char *name, const char *id);
void osb_sess_forget(struct osb_backend *b, const char *sid, const char *name);
void osb_sess_forget_id(struct osb_backend *b, const char *sid, const char *session_id);
int osb_sess_count(struct osb_backend *b, const char *sid);

/* ---- files.c --------------------------------------------------------------------------------- */

int osb_file_read(struct backend *be, const char *sandbox_id, const char *path, uint64_t offset,
                  uint64_t length, backend_read_cb *cb, void *arg, struct mcp_error *err);
int osb_file_write(struct backend *be, const char *sandbox_id, const char *path, const void *data,
                   size_t len, uint32_t mode, bool append, backend_cb *cb, void *arg,
                   struct mcp_error *err);
int osb_file_op(struct backend *be, const char *sandbox_id, const char *op, json_t *args,
                backend_cb *cb, void *arg, struct mcp_error *err);
/* Absolute path inside the sandbox (relative ones from the workspace). New string. */
char *osb_sandbox_path(const char *path);
/* execd's "mode" (octal digits written as a decimal number, 644) <-> permission bits. */
uint32_t osb_mode_from_execd(int64_t digits);
int64_t osb_mode_to_execd(uint32_t bits);

/* ---- snapshots.c, snapshot_store.c ------------------------------------------------------------ */

int osb_snapshot(struct backend *be, const char *owner, const char *action, json_t *args,
                 backend_cb *cb, void *arg, struct mcp_error *err);
/* Remote Snapshot -> the backend's snapshot info (backend.h). */
json_t *osb_snapshot_info(json_t *remote);
/* Snapshot ids: letters, digits, '-', '_', '.' (they go into URL paths). */
int osb_snapshot_id_check(const char *id, struct mcp_error *err);
/* Owner records (no-ops without a store): record on create, check (NOT_FOUND unless owned),
 * forget on delete, and the set {id:true} of owner's ids (json null without a store). */
int osb_snap_record(struct osb_backend *b, const char *id, const char *owner, const char *sid,
                    struct mcp_error *err);
int osb_snap_owned(struct osb_backend *b, const char *id, const char *owner,
                   struct mcp_error *err);
void osb_snap_forget(struct osb_backend *b, const char *id);
json_t *osb_snap_owned_set(struct osb_backend *b, const char *owner, struct mcp_error *err);

/* ---- metrics.c, code.c ------------------------------------------------------------------------ */

int osb_metrics(struct backend *be, const char *sandbox_id, backend_cb *cb, void *arg,
                struct mcp_error *err);
/* execd's /metrics answer -> the backend's metrics shape (exposed for unit tests). */
json_t *osb_metrics_info(const char *sandbox_id, json_t *execd_metrics);
int osb_code_context(struct backend *be, const char *sandbox_id, const char *action, json_t *args,
                     backend_cb *cb, void *arg, struct mcp_error *err);
int osb_code_run(struct backend *be, const char *sandbox_id, const struct code_request *req,
                 const struct exec_observer *obs, struct mcp_error *err);

/* ---- diag.c ---------------------------------------------------------------------------------- */

int osb_endpoint_op(struct backend *be, const char *sandbox_id, int port, backend_cb *cb, void *arg,
                    struct mcp_error *err);
int osb_diagnose(struct backend *be, const char *sandbox_id, const char *what, backend_cb *cb,
                 void *arg, struct mcp_error *err);

#endif
