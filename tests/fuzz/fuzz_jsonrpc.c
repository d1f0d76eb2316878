/* libFuzzer target: arbitrary bytes as newline-delimited JSON-RPC through a real session of a
 * real server (with the conformance fixtures), as the stdio transport would deliver them.
 * Every outgoing message must serialise and carry "jsonrpc":"2.0". If the first byte is odd, a
 * valid initialize (with sampling and elicitation capabilities) goes first, so the fuzzer
 * reaches the methods behind initialization quickly. */
#include <ftw.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "lib/base/xalloc.h"
#include "server/config.h"
#include "tests/fixtures/fixtures.h"
#include "mcp/jsonrpc.h"
#include "mcp/registry.h"
#include "mcp/server.h"
#include "mcp/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static struct mcp_config cfg;
static struct mcp_server *srv;
static char state_dir[] = "/tmp/mcpbox-fuzz-XXXXXX";

static const char init_line[] =
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-11-25\",\"capabilities\":{\"sampling\":{},\"elicitation\":{}},\"clientInfo\":{"
    "\"name\":\"fuzz\",\"version\":\"1\"}}}";

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void cleanup(void)
{
    nftw(state_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void fuzz_send(void *arg, json_t *msg, const json_t *related, bool final)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    const char *v = json_string_value(json_object_get(msg, "jsonrpc"));

    if (!s || !v || strcmp(v, "2.0") != 0)
        abort();
    *(size_t *)arg += strlen(s);
    free(s);
}

static const struct session_transport_ops fuzz_ops = {.send = fuzz_send};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct mcp_error err;

    xalloc_install();
    log_set_level(LOG_LEVEL_ERROR);
    if (!mkdtemp(state_dir))
        abort();
    atexit(cleanup);
    config_init(&cfg);
    free(cfg.state_dir);
    cfg.state_dir = xstrdup(state_dir);
    cfg.local_enabled = false;
    free(cfg.opensandbox_domain);
    cfg.opensandbox_domain = NULL;
    srv = server_new(&cfg, &err);
    if (!srv || fixtures_register(server_registry(srv), &err) < 0) {
        fprintf(stderr, "fuzz_jsonrpc: %s\n", err.msg);
        abort();
    }
    return 0;
}

static void handle(struct session *s, const char *line, size_t len)
{
    struct jsonrpc_msg msg;

    jsonrpc_parse(line, len, &msg);
    session_handle(s, &msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t sent = 0;
    struct session *s = session_new(srv, &fuzz_ops, &sent, "fuzz");
    const char *p = (const char *)data, *end = p + size;

    if (size > 0 && (data[0] & 1))
        handle(s, init_line, strlen(init_line));
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        handle(s, p, len);
        p += len + (nl ? 1 : 0);
    }
    uv_run(server_loop(srv), UV_RUN_NOWAIT);
    session_close(s);
    uv_run(server_loop(srv), UV_RUN_NOWAIT);
    return 0;
}
