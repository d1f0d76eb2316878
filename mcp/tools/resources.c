/* Around the tools: files in a sandbox as a resource template, the troubleshooting workflow as a
 * prompt, and completions for sandbox ids. */
#define LOG_MODULE "tools"
#include "mcp/tools/tools.h"

#include <ctype.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/context.h"
#include "mcp/registry.h"
#include "lib/store/store.h"
#include "mcp/tools/tools-internal.h"

#define FILE_URI_TEMPLATE "sandbox://{sandbox_id}/{+path}"
#define PROMPT_NAME "troubleshoot_sandbox"

/* ---- resource template: sandbox://{sandbox_id}/{+path} --------------------------------------- */

struct res_read {
    struct resource_read *rr;
    char *uri;
};

static int hexval(int c)
{
    return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* "/" + the percent-decoded path part of the URI (the path is absolute inside the sandbox). */
static char *uri_path(const char *enc)
{
    size_t n = strlen(enc);
    char *out = xmalloc(n + 2), *o = out;
    *o++ = '/';
    for (size_t i = 0; i < n; i++) {
        if (enc[i] == '%' && i + 2 < n && isxdigit((unsigned char)enc[i + 1]) &&
            isxdigit((unsigned char)enc[i + 2])) {
            int hi = hexval((unsigned char)enc[i + 1]), lo = hexval((unsigned char)enc[i + 2]);
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = enc[i];
        }
    }
    *o = '\0';
    return out;
}

static void res_read_done(void *arg, const struct file_read_result *res,
                          const struct mcp_error *err)
{
    struct res_read *r = arg;
    struct mcp_error e;
    if (err != NULL) {
        resource_read_fail(r->rr, err);
    } else if (res->truncated) {
        mcp_error_set(&e, MCP_ERR_LIMIT, 0,
                      "%s is %llu bytes, over the %u KiB a resource read returns; use the "
                      "read_file tool with offset and length",
                      r->uri, (unsigned long long)res->size, TOOLS_RESOURCE_MAX_BYTES >> 10);
        resource_read_fail(r->rr, &e);
    } else if (utf8_is_text(res->data, res->len)) {
        resource_read_finish(r->rr, json_pack("[{s:s, s:s, s:s%}]", "uri", r->uri, "mimeType",
                                              "text/plain", "text", res->data, res->len));
    } else {
        char *b64 = xmalloc(base64_encoded_len(res->len) + 1);
        base64_encode(res->data, res->len, b64);
        resource_read_finish(r->rr, json_pack("[{s:s, s:s, s:s}]", "uri", r->uri, "mimeType",
                                              "application/octet-stream", "blob", b64));
        free(b64);
    }
    free(r->uri);
    free(r);
}

static void file_resource_read(struct resource_read *rr, const char *uri, json_t *vars, void *arg)
{
    struct mcp_context *ctx = resource_read_context(rr);
    const char *id = json_string_value(json_object_get(vars, "sandbox_id"));
    const char *enc_path = json_string_value(json_object_get(vars, "path"));
    struct backend *be = NULL;
    struct mcp_error err;
    if (id == NULL || enc_path == NULL) {
        mcp_error_set(&err, MCP_ERR_INVALID, 0, "use sandbox://<sandbox_id>/<path>");
        resource_read_fail(rr, &err);
        return;
    }
    const char *owner = resource_read_owner(rr);
    if (tools_check_sandbox(ctx, owner, id, TOOL_NEED_RUNNING, &be, &err) < 0) {
        resource_read_fail(rr, &err);
        return;
    }
    struct res_read *r = xcalloc(1, sizeof(*r));
    r->rr = rr;
    r->uri = xstrdup(uri);
    char *path = uri_path(enc_path);
    int rc = be->ops->file_read(be, id, path, 0, TOOLS_RESOURCE_MAX_BYTES, res_read_done, r, &err);
    free(path);
    if (rc < 0)
        res_read_done(r, NULL, &err);
}

/* ---- prompt: troubleshoot_sandbox ------------------------------------------------------------ */

static const char prompt_text[] =
    "Find out why sandbox %s went wrong and fix it. Work from evidence: read each tool result "
    "before choosing the next call.\n"
    "\n"
    "1. get_sandbox: note state, image, limits, network and expires_at. If it is paused, "
    "update_sandbox with paused: false first. If it is not found, it was destroyed, expired or belongs to another "
    "client: list_sandboxes shows yours.\n"
    "2. diagnose_sandbox with what=\"summary\": recent state changes and failed_commands, the "
    "last commands that failed (exit code, signal, timeout, kill, OOM kill) with their last "
    "output. diagnose_sandbox with command_id shows one command. If that is not enough, ask for "
    "what=\"events\", then \"logs\", then \"inspect\".\n"
    "3. For one command, get_command gives its status, exit code and output (offset reads what "
    "run_command cut).\n"
    "4. If creating a local sandbox fails, or the cause is on the host (namespaces, cgroups, "
    "seccomp, network helper), call diagnose_sandbox without a sandbox_id and quote the fix of each failing check: it needs "
    "root on the host.\n"
    "5. Match the evidence to a cause. Exit code 128+N means signal N (137 = SIGKILL, 159 = "
    "SIGSYS). oom_killed: more memory or less parallelism; /tmp counts as memory. timed_out: "
    "larger timeout_seconds or background:true and poll get_command. 127: the program is not "
    "in the image (host's /usr is read-only). 126: not executable (chmod +x or mode \"755\"). "
    "EPERM or SIGSYS from mount, unshare, io_uring or 32-bit code: seccomp, change the approach. "
    "EAGAIN on fork: the pids limit. ENOSPC: delete files or a larger disk. No network: create "
    "a sandbox with network:true. Some hosts unreachable and egress_refused in the summary: the "
    "network_policy refused them; tell the person which name and port, and only with their "
    "agreement add an allow rule with update_sandbox network_policy. Expired: update_sandbox "
    "timeout_seconds before "
    "expires_at next time.\n"
    "\n"
    "End with one concrete fix, applied or proposed, and the evidence for it.";

static int troubleshoot_get(void *arg, struct mcp_context *ctx, const char *owner, json_t *args,
                            json_t **result, struct mcp_error *err)
{
    const char *id = json_string_value(json_object_get(args, "sandbox_id"));
    if (id == NULL || *id == '\0')
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "sandbox_id is required");
    if (tools_check_sandbox(ctx, owner, id, TOOL_NEED_ANY, NULL, err) < 0)
        return -1;
    char *text = xasprintf(prompt_text, id);
    *result = json_pack("{s:s, s:[{s:s, s:{s:s, s:s}}]}", "description",
                        "Troubleshoot a sandbox with mcpbox's diagnostics tools", "messages",
                        "role", "user", "content", "type", "text", "text", text);
    free(text);
    return 0;
}

/* ---- completions: the caller's sandbox ids --------------------------------------------------- */

static int complete_sandbox_id(void *arg, struct mcp_context *ctx, const char *owner,
                               const char *arg_name, const char *value, json_t *context_args,
                               json_t *values, struct mcp_error *err)
{
    if (strcmp(arg_name, "sandbox_id") != 0)
        return 0;
    struct store_sandbox *list = NULL;
    size_t n = 0;
    if (store_sandbox_list(ctx->store, NULL, owner, &list, &n, err) < 0)
        return -1;
    size_t plen = value ? strlen(value) : 0;
    for (size_t i = n; i-- > 0;) { /* newest first; pool records (owner "") are nobody's yet */
        if (strcmp(list[i].state, "destroyed") != 0 && strcmp(list[i].state, "pooled") != 0 &&
            strncmp(list[i].id, value ? value : "", plen) == 0)
            json_array_append_new(values, json_string(list[i].id));
    }
    store_sandbox_list_free(list, n);
    return 0;
}

void sandbox_tools_register(struct registry *reg, struct mcp_context *ctx)
{
    struct mcp_error err;
    json_t *tmpl = json_pack("{s:s, s:s, s:s, s:s}", "uriTemplate", FILE_URI_TEMPLATE, "name",
                             "sandbox_file", "title", "File in a sandbox", "description",
                             "A file inside one of your sandboxes; the path is absolute "
                             "(sandbox://sbx-.../etc/os-release). Up to 1 MiB; larger files: "
                             "read_file.");
    if (registry_add_resource_template(reg, tmpl, file_resource_read, NULL, &err) < 0)
        log_warn("resource template: %s", err.msg);
    json_decref(tmpl);
    json_t *prompt = json_pack(
        "{s:s, s:s, s:s, s:[{s:s, s:s, s:b}]}", "name", PROMPT_NAME, "title",
        "Troubleshoot a sandbox", "description",
        "Find out why a sandbox or a command in it failed, and fix it", "arguments", "name",
        "sandbox_id", "description", "The sandbox to troubleshoot", "required", 1);
    if (registry_add_prompt(reg, prompt, troubleshoot_get, NULL, &err) < 0)
        log_warn("prompt: %s", err.msg);
    json_decref(prompt);
    if (registry_add_completion(reg, "ref/prompt", PROMPT_NAME, complete_sandbox_id, NULL,
                                &err) < 0 ||
        registry_add_completion(reg, "ref/resource", FILE_URI_TEMPLATE, complete_sandbox_id,
                                NULL, &err) < 0)
        log_warn("completion: %s", err.msg);
    (void)ctx;
}
