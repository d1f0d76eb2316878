/* Shared by the files of osapi/ only.
 *
 *   osapi_route.c      paths to handlers, authentication, the request object, replies, errors
 *   osapi_query.c      query strings (repeated and percent-encoded parameters)
 *   osapi_json.c       mcpbox's sandbox info and errors to OpenSandbox's JSON shapes
 *   osapi_multipart.c  multipart/form-data bodies (uploads)
 *   osapi_lifecycle.c  /v1/sandboxes: create, get, list, delete, renew, pause, resume, endpoints
 *   osapi_commands.c   execd /command (the streamed event format), status, logs, interrupt
 *   osapi_files.c      execd /files/..., /directories/..., /metrics, /ping
 *   osapi_code.c       execd /code and its contexts (the code interpreter)
 *   osapi_proxy.c      the server proxy for any other port (HTTP, WebSocket) */
#ifndef MCPBOX_OSAPI_INTERNAL_H
#define MCPBOX_OSAPI_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "lib/base/buf.h"
#include "lib/base/error.h"
#include "server/http/http_ext.h"

/* execd's port inside an OpenSandbox sandbox, and the egress sidecar's. */
#define OSAPI_EXECD_PORT 44772
#define OSAPI_EGRESS_PORT 18080
/* execd sends a ping event this often on a command stream. */
#define OSAPI_PING_MS 3000u
/* OpenSandbox's server caps pageSize at 200. */
#define OSAPI_MAX_PAGE_SIZE 200
/* A download is answered in one response: at most this much. */
#define OSAPI_MAX_DOWNLOAD (64u << 20)
/* Commands whose text and start time are remembered for /command/status (then forgotten). */
#define OSAPI_MAX_COMMANDS 4096

struct osapi {
    struct mcp_server *srv;
    struct http_extension ext;
    char *api_key;         /* NULL: no authentication (loopback only) */
    char key_owner[64];    /* with a key: every request's owner in the store */
    char token_secret[65]; /* execd access tokens are derived from it */
    json_t *entrypoints;   /* sandbox id -> entrypoint array given at create */
    json_t *commands;      /* command id -> {content, started_ms} (for /command/status) */
    struct osapi_req *reqs; /* requests in progress (stopped with the server) */
    bool stopping;
};

/* One request being answered (possibly later, from a backend callback). */
struct osapi_req {
    struct osapi *api;
    struct osapi_req *prev, *next;
    struct http_conn *conn; /* NULL once the client is gone */
    char request_id[37]; /* X-Request-ID: the client's, or a new UUID */
    char owner[64];      /* the caller's identity in the store (osapi_req_identify) */
    bool execd;             /* answer with execd's error codes */
    bool body_streaming;    /* taken before its body (osapi_route_head): the proxy streams it */
    char *sandbox_id;
    struct backend *be;
    /* what the handler keeps between the call and its callback */
    void *state;
    void (*on_abort)(struct osapi_req *req); /* the client went away (optional) */
    void (*free_state)(void *state);
};

/* osapi_route.c */
void osapi_free(struct osapi *api);
struct osapi_req *osapi_req_new(struct osapi *api, struct http_conn *c);
void osapi_req_free(struct osapi_req *req);
const struct http_request *osapi_req_http(struct osapi_req *req);
/* The request's query string (after '?'), or "". */
const char *osapi_req_query(struct osapi_req *req);
/* The body as JSON (object or array), or NULL after answering 400. */
json_t *osapi_req_json(struct osapi_req *req);
/* Answers (when the client is still there) and frees req. body is stolen (may be NULL: empty). */
void osapi_reply_json(struct osapi_req *req, int status, json_t *body, const char *extra);
void osapi_reply_raw(struct osapi_req *req, int status, const char *content_type,
                     const char *extra, const char *body, size_t len);
/* OpenSandbox's error shape {"code","message"}. */
void osapi_reply_error(struct osapi_req *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A backend error in OpenSandbox's shape (status and code from err->code). */
void osapi_reply_mcp_error(struct osapi_req *req, const struct mcp_error *err);
/* Something the local backend or this server cannot do: 400 API_NOT_SUPPORTED (lifecycle) or
 * 501 NOT_SUPPORTED (execd), with what is missing. */
void osapi_reply_unsupported(struct osapi_req *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Checks that id is one of the owner's sandboxes (a foreign one is reported as missing) in a
 * state that allows running (need_running); sets req->sandbox_id and req->be. Answers and
 * returns -1 otherwise. *state_out (if not NULL) gets the stored state (static storage). */
int osapi_bind(struct osapi_req *req, const char *id, bool need_running, const char **state_out);
/* The store and backends (opened on first use). NULL after answering 500. */
struct mcp_context *osapi_context(struct osapi_req *req);
/* The execd access token of a sandbox (32 hex characters). */
void osapi_execd_token(const struct osapi *api, const char *sandbox_id, char out[33]);

/* osapi_query.c: the first value of name (decoded, malloc'd) or NULL; all values as a JSON
 * array of strings. '+' is a space, %XX a byte. */
char *osapi_query_get(const char *query, const char *name);
json_t *osapi_query_all(const char *query, const char *name);
/* Percent-decodes s[0..len) into a malloc'd string (plus_is_space: form encoding). */
char *osapi_url_decode(const char *s, size_t len, bool plus_is_space);

/* osapi_multipart.c: one part of a multipart/form-data body (data points into the body). */
struct osapi_part {
    char name[32]; /* the name="..." of its Content-Disposition, cut to 31 bytes */
    const char *data;
    size_t len;
};
/* The boundary parameter of a multipart/form-data Content-Type into out; -1 if none. */
int osapi_multipart_boundary(const char *content_type, char *out, size_t size);
/* Splits body into at most max parts; how many, or -1 on a malformed body. */
int osapi_multipart_parts(const char *body, size_t len, const char *boundary,
                          struct osapi_part *parts, int max);

/* osapi_json.c */
/* mcpbox's sandbox info -> OpenSandbox's Sandbox (entrypoint: borrowed array or NULL). */
json_t *osapi_sandbox_json(json_t *info, json_t *entrypoint);
/* OpenSandbox state name of an mcpbox state ("running" -> "Running", ...). */
const char *osapi_state_name(const char *mcpbox_state);
/* "500m", "1", "2.5" -> CPUs; "512Mi", "2Gi", "1G", "1048576" -> bytes. -1 on bad input. */
int osapi_parse_cpu(const char *s, double *out);
int osapi_parse_quantity(const char *s, uint64_t *out);

/* osapi_volumes.c: CreateSandboxRequest.volumes (issue 36). What mcpbox cannot mount (ossfs, a
 * pvc's deleteOnSandboxTermination or subPath), or NULL. */
const char *osapi_volumes_unsupported(json_t *volumes);
/* volumes -> the backend's mounts list (*out: new reference, NULL without volumes); or what is
 * wrong with them. */
const char *osapi_volumes_mounts(json_t *volumes, json_t **out);
/* mcpbox's file entry {path,type,size,mode,mtime} -> execd's FileInfo. */
json_t *osapi_file_info(json_t *entry, const char *path);
/* Permission bits -> execd's decimal-written octal (0755 -> 755), and back. */
int osapi_mode_to_execd(uint32_t mode);
int osapi_mode_from_execd(json_int_t v, uint32_t *out);

/* Handlers: path is what follows /v1/sandboxes (lifecycle) or the proxy prefix (execd). */
void osapi_lifecycle(struct osapi_req *req, const char *rest);
void osapi_execd(struct osapi_req *req, const char *sandbox_id, const char *rest);
/* osapi_commands.c: /command... (true when the path was one of them) */
bool osapi_commands_route(struct osapi_req *req, const char *path);
/* execd's bash sessions (osapi_session.c): /session, /session/{id}/run, DELETE /session/{id}. */
bool osapi_session_route(struct osapi_req *req, const char *path);
struct shell_session_tail;
struct shell_session_request;
/* Streams er's events in execd's format as POST /command does (content: what status reports);
 * tail (taken; NULL for a plain command) makes it a session command whose trailer is cut off
 * and whose session failures end the stream with an error event. */
void osapi_cmd_stream(struct osapi_req *req, const char *content, const struct exec_request *er,
                      bool background, struct shell_session_tail *tail);
/* The same for a session command on the proc primitive (backend/shell_session_proc.h), for
 * backends with command_input. */
void osapi_cmd_stream_session(struct osapi_req *req, const struct shell_session_request *sr);
/* osapi_snapshots.c: /snapshots[/{id}] (rest: what follows /snapshots), and POST
 * /sandboxes/{id}/snapshots once osapi_bind has bound the sandbox (issue 36). */
void osapi_snapshots(struct osapi_req *req, const char *rest);
void osapi_snapshot_create(struct osapi_req *req);
/* osapi_files.c: /files..., /directories..., /metrics */
bool osapi_files_route(struct osapi_req *req, const char *path);
/* osapi_code.c: /code with a context, /code/context(s)... (false: POST /code without a context,
 * the stateless form osapi_commands_route runs as a shell command) */
bool osapi_code_route(struct osapi_req *req, const char *path);
/* osapi_proxy.c: /sandboxes/{id}/proxy/{port}/rest for any other port: HTTP and WebSocket
 * upgrades relayed to that port inside the sandbox (authenticated by the caller). */
void osapi_proxy(struct osapi_req *req, const char *sandbox_id, long port, const char *rest);
/* osapi_proxy_head.c: the head of a sandbox's reply to the proxy, header by header (fed from
 * http_parser's callbacks), checked and filtered: lines holds "Name: value\r\n" for each header
 * kept; bad says why the head is refused ("" while it is fine). */
#define OSAPI_HEAD_MAX_BYTES HTTP_MAX_HEADER_BYTES /* names and values */
#define OSAPI_HEAD_MAX_LINES HTTP_MAX_HEADERS
struct osapi_head {
    struct buf name, value; /* the header being read */
    bool in_value;
    size_t bytes;
    unsigned count;
    bool upgrade_websocket; /* Upgrade: websocket was among them */
    struct buf lines;
    char bad[160];
};
void osapi_head_init(struct osapi_head *h);
void osapi_head_release(struct osapi_head *h);
/* Forgets an interim (1xx) head. */
void osapi_head_reset(struct osapi_head *h);
/* A piece of a name or a value; -1 past the size limit (bad says so). */
int osapi_head_field(struct osapi_head *h, const char *at, size_t len);
int osapi_head_value(struct osapi_head *h, const char *at, size_t len);
/* The head is complete (takes the last header); -1 if it is refused. */
int osapi_head_end(struct osapi_head *h);
/* Whether a response header is left out (it acts on the whole origin, or is hop-by-hop). */
bool osapi_head_dropped(const char *name);
/* name (any case) is one of the space-separated words of list (" a b c "). */
bool osapi_word_in(const char *name, const char *list);
/* RFC 9110 token; the comma/space-separated list holds token (any case). */
bool osapi_is_token(const char *s, size_t len);
bool osapi_has_token(const char *list, const char *token);

/* osapi_approval.c: -1 with err (a refusal that names the person's option) when policy (or
 * full_network) reaches beyond the person's egress list and their settings refuse it. */
struct egress_policy;
int osapi_approval_egress(const struct egress_policy *policy, bool full_network,
                          struct mcp_error *err);

/* osapi_egress.c: the egress sidecar's /policy (port 18080) over the sandbox's network_policy */
void osapi_egress(struct osapi_req *req, const char *sandbox_id, const char *rest);
/* The sidecar's /credential-vault (osapi_vault.c); sub is what follows it. */
void osapi_vault(struct osapi_req *req, const char *sandbox_id, const char *sub);
/* The sidecar's merge of rules in force (current) with a PATCH body (rules) or a DELETE body
 * (targets). New array. */
json_t *osapi_egress_merge(json_t *current, json_t *body, bool patch);
/* mcpbox's sandbox info (network, network_policy) -> the sidecar's PolicyStatusResponse. */
json_t *osapi_egress_status(json_t *info);

#endif
