/* The pure parts of osapi: query strings, Kubernetes quantities, execd's decimal-written
 * modes, and mcpbox's sandbox info and file entries in OpenSandbox's shapes. */
#include <stdlib.h>
#include <string.h>

#include "osapi/osapi-internal.h"
#include "test.h"

TEST(query_values)
{
    const char *q = "state=Running&state=paused&metadata=project%3DApollo%26team%3Dml&x&page=2";
    char *v = osapi_query_get(q, "metadata");
    ASSERT_STR_EQ(v, "project=Apollo&team=ml");
    free(v);
    v = osapi_query_get(q, "x");
    ASSERT_STR_EQ(v, "");
    free(v);
    ASSERT(osapi_query_get(q, "nope") == NULL);
    json_t *all = osapi_query_all(q, "state");
    ASSERT(json_array_size(all) == 2);
    ASSERT_STR_EQ(json_string_value(json_array_get(all, 1)), "paused");
    json_decref(all);
    v = osapi_url_decode("a+b%2Fc%zz%4", 12, true);
    ASSERT_STR_EQ(v, "a b/c%zz%4"); /* bad escapes stay as they are */
    free(v);
    v = osapi_url_decode("a+b", 3, false);
    ASSERT_STR_EQ(v, "a+b");
    free(v);
}

TEST(quantities)
{
    double cpu;
    uint64_t b;
    ASSERT(osapi_parse_cpu("500m", &cpu) == 0 && cpu == 0.5);
    ASSERT(osapi_parse_cpu("2", &cpu) == 0 && cpu == 2);
    ASSERT(osapi_parse_cpu("0", &cpu) < 0);
    ASSERT(osapi_parse_cpu("1x", &cpu) < 0);
    ASSERT(osapi_parse_quantity("512Mi", &b) == 0 && b == 512ull << 20);
    ASSERT(osapi_parse_quantity("2Gi", &b) == 0 && b == 2ull << 30);
    ASSERT(osapi_parse_quantity("1G", &b) == 0 && b == 1000000000ull);
    ASSERT(osapi_parse_quantity("4096", &b) == 0 && b == 4096);
    ASSERT(osapi_parse_quantity("1Zi", &b) < 0);
    ASSERT(osapi_parse_quantity("-1", &b) < 0);
    ASSERT(osapi_parse_quantity("99999999Ti", &b) < 0);
}

TEST(modes)
{
    uint32_t m;
    ASSERT(osapi_mode_to_execd(0755) == 755);
    ASSERT(osapi_mode_to_execd(0640) == 640);
    ASSERT(osapi_mode_to_execd(04755) == 4755);
    ASSERT(osapi_mode_from_execd(755, &m) == 0 && m == 0755);
    ASSERT(osapi_mode_from_execd(600, &m) == 0 && m == 0600);
    ASSERT(osapi_mode_from_execd(789, &m) < 0); /* 8 and 9 are not octal digits */
    ASSERT(osapi_mode_from_execd(-1, &m) < 0);
}

TEST(sandbox_shape)
{
    json_t *info = json_pack("{s:s, s:s, s:s, s:s, s:n, s:{s:s}}", "sandbox_id", "sbx-1", "image",
                             "host", "state", "paused", "created_at", "2026-01-01T00:00:00.000Z",
                             "expires_at", "metadata", "k", "v");
    json_t *sb = osapi_sandbox_json(info, NULL);
    ASSERT_STR_EQ(json_string_value(json_object_get(sb, "id")), "sbx-1");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(sb, "status"), "state")),
                  "Paused");
    ASSERT(json_object_get(sb, "expiresAt") == NULL); /* no expiry: absent, as the spec wants */
    ASSERT(json_array_size(json_object_get(sb, "entrypoint")) == 3);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(sb, "image"), "uri")), "host");
    json_decref(sb);
    json_decref(info);
    ASSERT_STR_EQ(osapi_state_name("expired"), "Terminated");
    ASSERT_STR_EQ(osapi_state_name("creating"), "Pending");
    ASSERT_STR_EQ(osapi_state_name("weird"), "Unknown");
}

TEST(file_info_shape)
{
    json_t *e = json_pack("{s:s, s:s, s:i, s:i, s:s}", "path", "/w/a", "type", "fifo", "size", 3,
                          "mode", 0644, "mtime", "2026-01-01T00:00:00.000Z");
    json_t *fi = osapi_file_info(e, NULL);
    ASSERT_STR_EQ(json_string_value(json_object_get(fi, "type")), "other");
    ASSERT(json_integer_value(json_object_get(fi, "mode")) == 644);
    ASSERT_STR_EQ(json_string_value(json_object_get(fi, "created_at")), "2026-01-01T00:00:00.000Z");
    ASSERT(json_is_string(json_object_get(fi, "owner")));
    json_decref(fi);
    json_decref(e);
}

/* The egress sidecar's merge rules (osapi_egress.c), and its status shape. */
TEST(egress_merge_and_status)
{
    json_t *cur = json_loads("[{\"action\":\"allow\",\"target\":\"a.org\"},"
                             "{\"action\":\"allow\",\"target\":\"b.org\"}]", 0, NULL);
    json_t *patch = json_loads("[{\"action\":\"deny\",\"target\":\"b.org\"},"
                               "{\"action\":\"allow\",\"target\":\"c.org\"},"
                               "{\"action\":\"allow\",\"target\":\"b.org\"}]", 0, NULL);
    json_t *m = osapi_egress_merge(cur, patch, true);
    char *t = json_dumps(m, JSON_COMPACT);
    /* incoming first, the first b.org wins, a.org keeps its place after them */
    ASSERT_STR_EQ(t, "[{\"action\":\"deny\",\"target\":\"b.org\"},{\"action\":\"allow\","
                     "\"target\":\"c.org\"},{\"action\":\"allow\",\"target\":\"a.org\"}]");
    free(t);
    json_decref(m);
    json_t *del = json_loads("[\"a.org\", \"nothere.org\"]", 0, NULL);
    m = osapi_egress_merge(cur, del, false);
    ASSERT_EQ(json_array_size(m), 1);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(m, 0), "target")), "b.org");
    json_decref(m);
    json_decref(del);
    json_decref(patch);
    json_decref(cur);

    json_t *info = json_loads("{\"network\":true,\"network_policy\":{\"default_action\":\"deny\","
                              "\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\"},"
                              "{\"action\":\"allow\",\"target\":\"b.org\",\"ports\":[443]}]}}",
                              0, NULL);
    json_t *st = osapi_egress_status(info);
    ASSERT_STR_EQ(json_string_value(json_object_get(st, "mode")), "deny_all");
    ASSERT_EQ(json_array_size(json_object_get(json_object_get(st, "policy"), "egress")), 1);
    ASSERT_CONTAINS(json_string_value(json_object_get(st, "reason")), "1 rule(s) limited to ports");
    json_decref(st);
    json_decref(info);
    info = json_loads("{\"network\":true,\"network_policy\":null}", 0, NULL);
    st = osapi_egress_status(info);
    ASSERT_STR_EQ(json_string_value(json_object_get(st, "mode")), "allow_all");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(st, "policy"), "defaultAction")),
                  "allow");
    ASSERT_CONTAINS(json_string_value(json_object_get(st, "reason")), "without a network policy");
    json_decref(st);
    json_decref(info);
}

int main(void)
{
    RUN(query_values);
    RUN(quantities);
    RUN(modes);
    RUN(sandbox_shape);
    RUN(file_info_shape);
    RUN(egress_merge_and_status);
    return test_done();
}
