/* Manifest/index parsing, platform choice, the image config and credential helpers' answers
 * (manifest.h, image_config.h, credentials.h). */
#include <stdlib.h>

#include "backend/local/image/archive_loader.h"
#include "backend/local/image/credentials.h"
#include "backend/local/image/image_config.h"
#include "backend/local/image/layer_hash.h"
#include "backend/local/image/manifest.h"
#include "lib/base/buf.h"
#include "test.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static const char oci_manifest[] =
    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
    "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" D1
    "\",\"size\":100},\"layers\":["
    "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" D2
    "\",\"size\":2000},"
    "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"" D3
    "\",\"size\":3000}]}";

static void parse_fails(const char *body, const char *ct, const char *why)
{
    struct oci_manifest m;
    struct mcp_error err = {0};
    if (oci_manifest_parse(body, strlen(body), ct, &m, &err) == 0)
        TEST_FAIL("accepted: %s", body);
    ASSERT_CONTAINS(err.msg, why);
    ASSERT(m.entries == NULL);
}

TEST(oci_image_manifest)
{
    struct oci_manifest m;
    struct mcp_error err = {0};
    ASSERT_EQ(oci_manifest_parse(oci_manifest, strlen(oci_manifest), NULL, &m, &err), 0);
    ASSERT(!m.is_index);
    ASSERT_STR_EQ(m.config.digest, D1);
    ASSERT_EQ(m.config.size, 100);
    ASSERT_EQ(m.n_entries, 2);
    ASSERT_STR_EQ(m.entries[0].digest, D2);
    ASSERT_EQ(m.entries[0].compression, OCI_GZIP);
    ASSERT_EQ(m.entries[1].compression, OCI_ZSTD);
    ASSERT_EQ(m.entries[1].size, 3000);
    oci_manifest_free(&m);
}

TEST(docker_schema2_by_content_type)
{
    const char *body =
        "{\"schemaVersion\":2,\"config\":{\"mediaType\":"
        "\"application/vnd.docker.container.image.v1+json\",\"digest\":\"" D1 "\",\"size\":1},"
        "\"layers\":[{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\","
        "\"digest\":\"" D2 "\",\"size\":5}]}";
    struct oci_manifest m;
    struct mcp_error err = {0};
    ASSERT_EQ(oci_manifest_parse(body, strlen(body),
                                 "application/vnd.docker.distribution.manifest.v2+json; x=y", &m,
                                 &err),
              0);
    ASSERT_STR_EQ(m.media_type, "application/vnd.docker.distribution.manifest.v2+json");
    ASSERT_EQ(m.entries[0].compression, OCI_GZIP);
    oci_manifest_free(&m);
}

static const char index_body[] =
    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
    "\"manifests\":["
    "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D1
    "\",\"size\":10,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\","
    "\"variant\":\"v8\"}},"
    "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D2
    "\",\"size\":11,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
    "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D3
    "\",\"size\":12,\"platform\":{\"os\":\"windows\",\"architecture\":\"amd64\"}}]}";

TEST(index_platform_choice)
{
    struct oci_manifest m;
    struct mcp_error err = {0};
    ASSERT_EQ(oci_manifest_parse(index_body, strlen(index_body), NULL, &m, &err), 0);
    ASSERT(m.is_index);
    ASSERT_EQ(m.n_entries, 3);
    const struct oci_descriptor *d = oci_index_choose(&m, "linux", "amd64", "", &err);
    ASSERT(d != NULL);
    ASSERT_STR_EQ(d->digest, D2);
    d = oci_index_choose(&m, "linux", "arm64", "v8", &err);
    ASSERT_STR_EQ(d->digest, D1);
    ASSERT(oci_index_choose(&m, "linux", "s390x", "", &err) == NULL);
    ASSERT_CONTAINS(err.msg, "linux/s390x");
    ASSERT_CONTAINS(err.msg, "linux/arm64/v8, linux/amd64, windows/amd64");
    const char *os, *arch, *variant;
    oci_host_platform(&os, &arch, &variant);
    ASSERT_STR_EQ(os, "linux");
    oci_manifest_free(&m);
}

TEST(refusals)
{
    parse_fails("[]", NULL, "not a JSON object");
    parse_fails("{\"schemaVersion\":1,\"fsLayers\":[]}", NULL, "schema 1");
    parse_fails("{}", "application/vnd.docker.distribution.manifest.v1+prettyjws", "schema 1");
    parse_fails("{\"mediaType\":\"text/html\"}", NULL, "not a container image");
    parse_fails("{\"config\":{\"mediaType\":\"application/vnd.cncf.helm.config.v1+json\","
                "\"digest\":\"" D1 "\",\"size\":1},\"layers\":[]}",
                NULL, "Helm");
    parse_fails("{\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
                "\"digest\":\"sha256:12\",\"size\":1},\"layers\":[]}",
                NULL, "digest");
    parse_fails("{\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
                "\"digest\":\"" D1 "\",\"size\":-1},\"layers\":[]}",
                NULL, "size");
    parse_fails("{\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
                "\"digest\":\"" D1 "\",\"size\":1},\"layers\":[]}",
                NULL, "without layers");
    parse_fails("{\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
                "\"digest\":\"" D1 "\",\"size\":1},\"layers\":[{\"mediaType\":"
                "\"application/vnd.oci.image.layer.v1.tar+bzip2\",\"digest\":\"" D2
                "\",\"size\":1}]}",
                NULL, "tar+zstd");
    parse_fails("{\"manifests\":[{\"digest\":\"" D1 "\",\"size\":1},{\"digest\":\"" D1
                "\",\"size\":1,\"digest\":\"" D2 "\"}]}",
                NULL, "not a JSON object"); /* duplicate keys */
}

TEST(too_many_layers)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    buf_printf(&b, "{\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
                   "\"digest\":\"" D1 "\",\"size\":1},\"layers\":[");
    for (int i = 0; i <= OCI_MAX_LAYERS; i++)
        buf_printf(&b, "%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\","
                       "\"digest\":\"" D2 "\",\"size\":1}",
                   i ? "," : "");
    buf_printf(&b, "]}");
    struct oci_manifest m;
    struct mcp_error err;
    ASSERT_EQ(oci_manifest_parse(b.data, b.len, NULL, &m, &err), -1);
    ASSERT_CONTAINS(err.msg, "at most 128");
    buf_release(&b);
}

TEST(config_env_workdir_user)
{
    const char *body = "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":"
                       "[\"PATH=/usr/local/bin:/usr/bin\",\"LANG=C.UTF-8\",\"EMPTY=\",\"X=a=b\"],"
                       "\"WorkingDir\":\"/app\",\"User\":\"1000:1000\"},"
                       "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D1 "\",\"" D2 "\"]}}";
    struct image_config c;
    struct mcp_error err = {0};
    ASSERT_EQ(image_config_parse(body, strlen(body), &c, &err), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(c.env, "PATH")), "/usr/local/bin:/usr/bin");
    ASSERT_STR_EQ(json_string_value(json_object_get(c.env, "EMPTY")), "");
    ASSERT_STR_EQ(json_string_value(json_object_get(c.env, "X")), "a=b");
    ASSERT_STR_EQ(c.workdir, "/app");
    ASSERT_STR_EQ(c.user, "1000:1000");
    ASSERT_EQ(c.n_diff_ids, 2);
    ASSERT_STR_EQ(c.diff_ids[0], D1);
    ASSERT_STR_EQ(c.diff_ids[1], D2);
    json_t *j = image_config_to_json(&c);
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "user")), "1000:1000");
    json_decref(j);
    image_config_free(&c);
    const char *none = "{\"os\":\"linux\"}";
    ASSERT_EQ(image_config_parse(none, strlen(none), &c, &err), 0);
    ASSERT_STR_EQ(c.workdir, "");
    image_config_free(&c);
    const char *win = "{\"os\":\"windows\"}";
    ASSERT_EQ(image_config_parse(win, strlen(win), &c, &err), -1);
    ASSERT_CONTAINS(err.msg, "not Linux");
    const char *rel = "{\"config\":{\"WorkingDir\":\"app\"}}";
    ASSERT_EQ(image_config_parse(rel, strlen(rel), &c, &err), -1);
    ASSERT_CONTAINS(err.msg, "absolute");
    const char *badenv = "{\"config\":{\"Env\":[\"NOEQUALS\"]}}";
    ASSERT_EQ(image_config_parse(badenv, strlen(badenv), &c, &err), -1);
    ASSERT_CONTAINS(err.msg, "NAME=value");
    const char *baddiff = "{\"rootfs\":{\"diff_ids\":[\"" D1 "\",\"sha256:12\"]}}";
    ASSERT_EQ(image_config_parse(baddiff, strlen(baddiff), &c, &err), -1);
    ASSERT_CONTAINS(err.msg, "diff_ids entry is not a sha256 digest");
}

TEST(digest_of)
{
    char d[IMAGE_DIGEST_LEN + 1];
    oci_digest_of("", 0, d);
    ASSERT_STR_EQ(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(credential_helper_answers)
{
    struct mcp_error err = {0};
    const char *ok = "{\"ServerURL\":\"r:5000\",\"Username\":\"u\",\"Secret\":\"s:x\"}";
    char *c = cred_parse_helper_output(ok, strlen(ok), "h", &err);
    ASSERT_STR_EQ(c, "u:s:x");
    free(c);
    const char *tok = "{\"Username\":\"<token>\",\"Secret\":\"refresh\"}";
    c = cred_parse_helper_output(tok, strlen(tok), "h", &err); /* an identity token */
    ASSERT_STR_EQ(c, CRED_IDENTITY_PREFIX "refresh");
    free(c);
    ASSERT(cred_parse_helper_output("not json", 8, "h", &err) == NULL);
    ASSERT_CONTAINS(err.msg, "docker-credential-h");
    char addr[64];
    cred_server_address("docker.io", addr, sizeof addr);
    ASSERT_STR_EQ(addr, "https://index.docker.io/v1/");
    cred_server_address("127.0.0.1:5000", addr, sizeof addr);
    ASSERT_STR_EQ(addr, "127.0.0.1:5000");
}

/* Both hashes give the same digest: the project's own, then libnettle's once libarchive is in. */
TEST(layer_hash_both_ways)
{
    const char *abc = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    char out[72];
    for (int round = 0; round < 2; round++) {
        struct layer_hash h;
        layer_hash_init(&h);
        ASSERT_EQ(h.nettle_in_use, round);
        layer_hash_update(&h, "a", 1);
        layer_hash_update(&h, "bc", 2);
        layer_hash_final(&h, out);
        ASSERT_STR_EQ(out, abc);
        struct mcp_error err;
        ASSERT_EQ(oci_archive_load(&err), 0);
    }
}

int main(void)
{
    RUN(oci_image_manifest);
    RUN(docker_schema2_by_content_type);
    RUN(index_platform_choice);
    RUN(refusals);
    RUN(too_many_layers);
    RUN(config_env_workdir_user);
    RUN(digest_of);
    RUN(credential_helper_answers);
    RUN(layer_hash_both_ways);
    return test_done();
}
