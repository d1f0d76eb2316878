/* A real server (fixtures on, no backends, state in a temp dir) and a fake transport that
 * records every message a session sends, for the session tests. */
#ifndef MCPBOX_TEST_FAKE_TRANSPORT_H
#define MCPBOX_TEST_FAKE_TRANSPORT_H

#include <jansson.h>
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
#include "lib/base/rmtree.h"

struct fake {
    json_t *sent;    /* array of {msg, related, final} */
    json_t *dropped; /* array of the ids given to request_dropped */
    struct session *s;
};

static struct mcp_config fake_cfg;
static struct mcp_server *fake_srv;
static char fake_dir[] = "/tmp/mcpbox-test-XXXXXX";

static void fake_send(void *arg, json_t *msg, const json_t *related, bool final)
{
    struct fake *f = arg;

    json_array_append_new(f->sent, json_pack("{s:O, s:O?, s:b}", "msg", msg, "related", related,
                                             "final", final));
}

static void fake_dropped(void *arg, const json_t *id)
{
    struct fake *f = arg;

    json_array_append_new(f->dropped, json_deep_copy(id));
}

static const struct session_transport_ops fake_ops = {.send = fake_send,
                                                      .request_dropped = fake_dropped};

static void fake_server_start(void)
{
    struct mcp_error err;

    xalloc_install();
    log_set_level(LOG_LEVEL_ERROR);
    if (!mkdtemp(fake_dir))
        abort();
    config_init(&fake_cfg);
    free(fake_cfg.state_dir);
    fake_cfg.state_dir = xstrdup(fake_dir);
    fake_cfg.local_enabled = false;
    free(fake_cfg.opensandbox_domain);
    fake_cfg.opensandbox_domain = NULL;
    fake_srv = server_new(&fake_cfg, &err);
    if (!fake_srv || fixtures_register(server_registry(fake_srv), &err) < 0) {
        printf("# server_new: %s\n", err.msg);
        abort();
    }
}

static void fake_server_stop(void)
{
    server_stop(fake_srv);
    server_run(fake_srv);
    server_free(fake_srv);
    config_release(&fake_cfg);
    if (rmtree(fake_dir) < 0)
        printf("# could not remove %s\n", fake_dir);
}

static void fake_open(struct fake *f)
{
    f->sent = json_array();
    f->dropped = json_array();
    f->s = session_new(fake_srv, &fake_ops, f, "local:uid:1000");
}

static void fake_close(struct fake *f)
{
    session_close(f->s);
    uv_run(server_loop(fake_srv), UV_RUN_NOWAIT);
    json_decref(f->sent);
    json_decref(f->dropped);
}

static void fake_feed(struct fake *f, const char *line)
{
    struct jsonrpc_msg m;

    jsonrpc_parse(line, strlen(line), &m);
    session_handle(f->s, &m);
}

/* The last message sent whose "id" equals id (integer) and that is a reply, or NULL. */
static json_t *fake_reply(struct fake *f, json_int_t id)
{
    size_t i;
    json_t *e;

    json_array_foreach(f->sent, i, e) {
        json_t *m = json_object_get(e, "msg");
        json_t *mid = json_object_get(m, "id");
        if (json_is_integer(mid) && json_integer_value(mid) == id && !json_object_get(m, "method"))
            return m;
    }
    return NULL;
}

/* Runs the loop until the reply to id arrives (or 5 s pass). */
static json_t *fake_wait(struct fake *f, json_int_t id)
{
    uint64_t deadline = uv_now(server_loop(fake_srv)) + 5000;

    while (!fake_reply(f, id) && uv_now(server_loop(fake_srv)) < deadline)
        uv_run(server_loop(fake_srv), UV_RUN_ONCE);
    return fake_reply(f, id);
}

static size_t fake_count_method(struct fake *f, const char *method)
{
    size_t i, n = 0;
    json_t *e;

    json_array_foreach(f->sent, i, e) {
        const char *m = json_string_value(json_object_get(json_object_get(e, "msg"), "method"));
        n += m && strcmp(m, method) == 0;
    }
    return n;
}

static void fake_initialize(struct fake *f, const char *caps)
{
    char line[512];

    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"2025-11-25\",\"capabilities\":%s,\"clientInfo\":{\"name\":"
             "\"t\",\"version\":\"1\"}}}",
             caps);
    fake_feed(f, line);
    fake_feed(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

static int fake_error_code(json_t *reply)
{
    return (int)json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static const char *fake_error_message(json_t *reply)
{
    return json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
}

#endif
