/* Image references as Docker reads them (backend/local/image/reference.h). */
#include "backend/local/image/reference.h"
#include "test.h"

static struct image_ref parse_ok(const char *text)
{
    struct image_ref r;
    struct mcp_error err = {0};
    if (image_ref_parse(text, &r, &err) < 0)
        TEST_FAIL("'%s' refused: %s", text, err.msg);
    return r;
}

static void expect(const char *text, const char *registry, const char *repo, const char *tag,
                   const char *digest)
{
    struct image_ref r = parse_ok(text);
    ASSERT_STR_EQ(r.registry, registry);
    ASSERT_STR_EQ(r.repository, repo);
    ASSERT_STR_EQ(r.tag, tag);
    ASSERT_STR_EQ(r.digest, digest);
}

#define D "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

TEST(docker_hub_defaults)
{
    expect("python:3.12-slim", "docker.io", "library/python", "3.12-slim", "");
    expect("python", "docker.io", "library/python", "latest", "");
    expect("org/tool", "docker.io", "org/tool", "latest", "");
    expect("docker.io/python", "docker.io", "library/python", "latest", "");
    expect("index.docker.io/library/node:22", "docker.io", "library/node", "22", "");
}

TEST(registry_with_port_and_paths)
{
    expect("127.0.0.1:5000/test/bb:2", "127.0.0.1:5000", "test/bb", "2", "");
    expect("localhost/a", "localhost", "a", "latest", "");
    expect("localhost:5000/a/b/c", "localhost:5000", "a/b/c", "latest", "");
    expect("ghcr.io/org/tool-x_y.z__w:v1.2", "ghcr.io", "org/tool-x_y.z__w", "v1.2", "");
    expect("[::1]:5000/x:1", "[::1]:5000", "x", "1", "");
    expect("Registry/x", "Registry", "x", "latest", "");
    /* no slash: "localhost:5000" is the name localhost with tag 5000, as in Docker */
    expect("localhost:5000", "docker.io", "library/localhost", "5000", "");
}

TEST(digests)
{
    expect("ghcr.io/org/tool@" D, "ghcr.io", "org/tool", "latest", D);
    expect("python:3.12@" D, "docker.io", "library/python", "3.12", D);
    struct image_ref r = parse_ok("h:1/a@" D);
    ASSERT_STR_EQ(image_ref_manifest_ref(&r), D);
    r = parse_ok("h:1/a:t");
    ASSERT_STR_EQ(image_ref_manifest_ref(&r), "t");
}

static void refused(const char *text, const char *why)
{
    struct image_ref r;
    struct mcp_error err = {0};
    if (image_ref_parse(text, &r, &err) == 0)
        TEST_FAIL("'%s' accepted", text);
    ASSERT_EQ(err.code, MCP_ERR_INVALID);
    ASSERT_CONTAINS(err.msg, why);
    ASSERT_CONTAINS(err.msg, "e.g. python:3.12-slim");
}

TEST(invalid_references)
{
    refused("", "empty");
    refused("Python", "lower-case");
    refused("a//b", "lower-case");
    refused("a/", "lower-case");
    refused("a/-b", "lower-case");
    refused("a..b", "lower-case");
    refused("a___b", "lower-case");
    refused("a:", "tag");
    refused("a:.x", "tag");
    refused("a@sha256:abc", "64 lower-case hex");
    refused("a@md5:abcd", "only sha256");
    refused("a@" "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", "hex");
    refused("-h:5/a", "registry");
    refused("h:123456/a", "registry");
    refused("h:/a", "registry");
    refused("h./a", "registry");
    refused("[zz]:5/a", "registry");
    refused("../etc", "registry");
    refused("a/../etc", "lower-case");
}

TEST(separators)
{
    expect("a/b---c", "docker.io", "a/b---c", "latest", "");
    expect("a.b_c__d-e", "docker.io", "library/a.b_c__d-e", "latest", "");
}

TEST(lengths)
{
    char name[300];
    memset(name, 'a', 256);
    name[256] = '\0';
    refused(name, "longer than 255");
    name[255] = '\0';
    struct image_ref r;
    struct mcp_error err;
    ASSERT_EQ(image_ref_parse(name, &r, &err), -1); /* library/ + 255 is over the limit */
    memset(name, 'a', 200);
    name[200] = '\0';
    ASSERT_EQ(image_ref_parse(name, &r, &err), 0);
    char tag[200] = "a:";
    memset(tag + 2, 't', 129);
    tag[131] = '\0';
    refused(tag, "tag");
}

TEST(format_round_trip)
{
    char out[IMAGE_REF_TEXT_MAX];
    struct image_ref r = parse_ok("python:3.12-slim");
    image_ref_format(&r, out, sizeof out);
    ASSERT_STR_EQ(out, "docker.io/library/python:3.12-slim");
    ASSERT_STR_EQ(image_ref_api_host(&r), "registry-1.docker.io");
    r = parse_ok("127.0.0.1:5000/test/bb@" D);
    image_ref_format(&r, out, sizeof out);
    ASSERT_STR_EQ(out, "127.0.0.1:5000/test/bb@" D);
    ASSERT_STR_EQ(image_ref_api_host(&r), "127.0.0.1:5000");
    struct image_ref again = parse_ok(out);
    ASSERT_STR_EQ(again.digest, D);
}

TEST(plain_http_policy)
{
    struct image_ref r = parse_ok("127.0.0.1:5000/a");
    ASSERT(image_ref_plain_http_ok(&r, NULL));
    r = parse_ok("127.9.8.7/a");
    ASSERT(image_ref_plain_http_ok(&r, NULL));
    r = parse_ok("localhost:1/a");
    ASSERT(image_ref_plain_http_ok(&r, NULL));
    r = parse_ok("[::1]:5000/a");
    ASSERT(image_ref_plain_http_ok(&r, ""));
    r = parse_ok("127.0.0.1.evil.com/a");
    ASSERT(!image_ref_plain_http_ok(&r, NULL));
    r = parse_ok("reg.lan:5000/a");
    ASSERT(!image_ref_plain_http_ok(&r, NULL));
    ASSERT(!image_ref_plain_http_ok(&r, "reg.lan:5001"));
    ASSERT(!image_ref_plain_http_ok(&r, "reg.la"));
    ASSERT(image_ref_plain_http_ok(&r, "x.y, reg.lan:5000"));
    ASSERT(image_ref_plain_http_ok(&r, "reg.lan"));
    r = parse_ok("python");
    ASSERT(!image_ref_plain_http_ok(&r, "reg.lan"));
}

int main(void)
{
    RUN(docker_hub_defaults);
    RUN(registry_with_port_and_paths);
    RUN(digests);
    RUN(invalid_references);
    RUN(separators);
    RUN(lengths);
    RUN(format_round_trip);
    RUN(plain_http_policy);
    return test_done();
}
