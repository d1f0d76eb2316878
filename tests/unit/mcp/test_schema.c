/* JSON Schema validation of tool arguments: every supported keyword, valid and invalid, and the
 * error message naming the field and the problem. */
#include <jansson.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/util.h"
#include "mcp/embedded_schemas.h"
#include "mcp/schema.h"
#include "test.h"
#include "tests/fixtures/fixtures.h"

/* Validates inst against schema (both JSON text); returns the error message or NULL if valid. */
static const char *check(const char *schema, const char *inst)
{
    static struct mcp_error err;
    json_error_t je;
    json_t *s = json_loads(schema, JSON_DECODE_ANY, &je);
    json_t *i = json_loads(inst, JSON_DECODE_ANY, &je);

    if (!s || !i) {
        printf("# bad test JSON: %s / %s\n", schema, inst);
        abort();
    }
    int r = schema_validate(s, i, "arguments", &err);
    json_decref(s);
    json_decref(i);
    if (r == 0)
        return NULL;
    if (err.code != MCP_ERR_INVALID_PARAMS)
        abort();
    return err.msg;
}

#define VALID(s, i)                                                                                \
    do {                                                                                           \
        const char *_m = check(s, i);                                                              \
        if (_m)                                                                                    \
            TEST_FAIL("expected valid: %s against %s, got: %s", i, s, _m);                        \
    } while (0)
#define INVALID(s, i, msg)                                                                         \
    do {                                                                                           \
        const char *_m = check(s, i);                                                              \
        if (!_m)                                                                                   \
            TEST_FAIL("expected invalid: %s against %s", i, s);                                   \
        ASSERT_STR_EQ(_m, msg);                                                                    \
    } while (0)

TEST(types)
{
    VALID("{\"type\":\"string\"}", "\"x\"");
    INVALID("{\"type\":\"string\"}", "1", "arguments: must be a string, got integer");
    VALID("{\"type\":\"integer\"}", "3");
    VALID("{\"type\":\"integer\"}", "3.0");
    INVALID("{\"type\":\"integer\"}", "3.5", "arguments: must be an integer, got number");
    VALID("{\"type\":\"number\"}", "3");
    VALID("{\"type\":\"number\"}", "3.5");
    INVALID("{\"type\":\"number\"}", "\"3\"", "arguments: must be a number, got string");
    VALID("{\"type\":\"boolean\"}", "false");
    INVALID("{\"type\":\"boolean\"}", "0", "arguments: must be a boolean, got integer");
    VALID("{\"type\":\"null\"}", "null");
    INVALID("{\"type\":\"object\"}", "[]", "arguments: must be an object, got array");
    INVALID("{\"type\":\"array\"}", "{}", "arguments: must be an array, got object");
    VALID("{\"type\":[\"string\",\"null\"]}", "null");
    INVALID("{\"type\":[\"string\",\"null\"]}", "true",
            "arguments: must be one of the types [\"string\",\"null\"], got boolean");
}

TEST(enum_and_const)
{
    VALID("{\"enum\":[\"text\",\"base64\"]}", "\"text\"");
    INVALID("{\"enum\":[\"text\",\"base64\"]}", "\"hex\"",
            "arguments: must be one of [\"text\",\"base64\"] (got \"hex\")");
    VALID("{\"enum\":[1,2]}", "2.0");
    VALID("{\"const\":{\"a\":1}}", "{\"a\":1}");
    INVALID("{\"const\":5}", "6", "arguments: must be 5 (got 6)");
}

TEST(numbers)
{
    const char *s = "{\"type\":\"integer\",\"minimum\":1,\"maximum\":10}";
    VALID(s, "1");
    VALID(s, "10");
    INVALID(s, "0", "arguments: must be >= 1 (got 0)");
    INVALID(s, "11", "arguments: must be <= 10 (got 11)");
    INVALID("{\"exclusiveMinimum\":0}", "0", "arguments: must be > 0 (got 0)");
    INVALID("{\"exclusiveMaximum\":1.5}", "1.5", "arguments: must be < 1.5 (got 1.5)");
    VALID("{\"multipleOf\":0.5}", "2.5");
    INVALID("{\"multipleOf\":3}", "7", "arguments: must be a multiple of 3 (got 7)");
    VALID("{\"minimum\":1}", "\"not a number: minimum does not apply\"");
}

TEST(strings)
{
    VALID("{\"minLength\":2,\"maxLength\":3}", "\"ab\"");
    INVALID("{\"minLength\":2}", "\"a\"", "arguments: must be at least 2 characters long (got 1)");
    INVALID("{\"maxLength\":3}", "\"abcd\"", "arguments: must be at most 3 characters long (got 4)");
    /* characters, not bytes: 3 two-byte characters */
    VALID("{\"maxLength\":3}", "\"\\u00e9\\u00e9\\u00e9\"");
    VALID("{\"pattern\":\"^[a-z]+$\"}", "\"abc\"");
    INVALID("{\"pattern\":\"^[a-z]+$\"}", "\"ab1\"", "arguments: must match the pattern ^[a-z]+$");
}

TEST(objects)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                    "\"n\":{\"type\":\"integer\"}},\"required\":[\"path\"],"
                    "\"additionalProperties\":false}";
    VALID(s, "{\"path\":\"/a\"}");
    VALID(s, "{\"path\":\"/a\",\"n\":2}");
    INVALID(s, "{}", "arguments: missing required property \"path\"");
    INVALID(s, "{\"path\":1}", "arguments.path: must be a string, got integer");
    INVALID(s, "{\"path\":\"/a\",\"x\":1}",
            "arguments: unknown property \"x\" (allowed: see the tool's inputSchema)");
    INVALID("{\"additionalProperties\":false}", "{\"x\":1}",
            "arguments: unknown property \"x\" (allowed: none)");
    INVALID("{\"additionalProperties\":{\"type\":\"string\"}}", "{\"x\":1}",
            "arguments.x: must be a string, got integer");
    INVALID("{\"minProperties\":1}", "{}", "arguments: must have at least 1 properties");
    INVALID("{\"maxProperties\":0}", "{\"a\":1}", "arguments: must have at most 0 properties");
}

TEST(nested_paths)
{
    const char *s = "{\"properties\":{\"limits\":{\"properties\":{\"cpu\":{\"type\":\"number\","
                    "\"minimum\":0.1}}},\"env\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
                    "\"required\":[\"name\"]}}}}";
    INVALID(s, "{\"limits\":{\"cpu\":0}}", "arguments.limits.cpu: must be >= 0.1 (got 0)");
    INVALID(s, "{\"env\":[{\"name\":\"a\"},{}]}",
            "arguments.env[1]: missing required property \"name\"");
}

TEST(arrays)
{
    const char *s = "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
                    "\"maxItems\":2,\"uniqueItems\":true}";
    VALID(s, "[\"a\",\"b\"]");
    INVALID(s, "[]", "arguments: must have at least 1 items (got 0)");
    INVALID(s, "[\"a\",\"b\",\"c\"]", "arguments: must have at most 2 items (got 3)");
    INVALID(s, "[\"a\",\"a\"]", "arguments: items [0] and [1] are equal; items must be unique");
    INVALID(s, "[\"a\",2]", "arguments[1]: must be a string, got integer");
    VALID("{\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"string\"}}",
          "[1,\"a\"]");
    INVALID("{\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"string\"}}",
            "[\"a\"]", "arguments[0]: must be an integer, got string");
}

TEST(refs)
{
    const char *s = "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":"
                    "\"object\",\"$defs\":{\"address\":{\"type\":\"object\",\"properties\":{"
                    "\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}},"
                    "\"properties\":{\"name\":{\"type\":\"string\"},\"address\":{\"$ref\":"
                    "\"#/$defs/address\"}},\"additionalProperties\":false}";
    VALID(s, "{\"name\":\"a\",\"address\":{\"street\":\"s\",\"city\":\"c\"}}");
    INVALID(s, "{\"address\":{\"city\":5}}", "arguments.address.city: must be a string, got integer");
    INVALID("{\"properties\":{\"a\":{\"$ref\":\"#/$defs/missing\"}}}", "{\"a\":1}",
            "arguments.a: the schema's $ref \"#/$defs/missing\" cannot be resolved");
    INVALID("{\"$ref\":\"#\"}", "1", "arguments: is nested too deeply (or the schema's $refs loop)");
    /* recursion through $ref that terminates */
    const char *tree = "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"c\":{\"$ref\":"
                       "\"#/$defs/n\"}}}},\"$ref\":\"#/$defs/n\"}";
    VALID(tree, "{\"c\":{\"c\":{}}}");
    INVALID(tree, "{\"c\":{\"c\":3}}", "arguments.c.c: must be an object, got integer");
    VALID("{\"$defs\":{\"a/b\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a~1b\"}", "\"x\"");
}

TEST(combinators)
{
    const char *any = "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}";
    VALID(any, "1");
    INVALID(any, "true", "arguments: does not match any of the allowed forms (anyOf)");
    const char *one = "{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}";
    VALID(one, "1.5");
    INVALID(one, "1", "arguments: must match exactly one of the allowed forms (oneOf), matches 2");
    INVALID(one, "\"x\"",
            "arguments: must match exactly one of the allowed forms (oneOf), matches 0");
    VALID("{\"allOf\":[{\"minimum\":1},{\"maximum\":3}]}", "2");
    INVALID("{\"allOf\":[{\"minimum\":1},{\"maximum\":3}]}", "4", "arguments: must be <= 3 (got 4)");
    INVALID("{\"not\":{\"const\":1}}", "1", "arguments: matches a form that is not allowed (not)");
}

TEST(conditionals)
{
    const char *s = "{\"type\":\"object\",\"if\":{\"properties\":{\"m\":{\"const\":\"phone\"}},"
                    "\"required\":[\"m\"]},\"then\":{\"required\":[\"phone\"]},\"else\":{"
                    "\"required\":[\"email\"]}}";
    VALID(s, "{\"m\":\"phone\",\"phone\":\"1\"}");
    INVALID(s, "{\"m\":\"phone\",\"email\":\"e\"}",
            "arguments: missing required property \"phone\"");
    VALID(s, "{\"m\":\"email\",\"email\":\"e\"}");
    INVALID(s, "{\"phone\":\"1\"}", "arguments: missing required property \"email\"");
    /* an absent branch allows anything; then/else without if mean nothing */
    VALID("{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":2}}", "5");
    INVALID("{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":2}}", "\"a\"",
            "arguments: must be at least 2 characters long (got 1)");
    VALID("{\"then\":false,\"else\":false}", "1");
    /* nested: the branch's own errors name the field */
    INVALID("{\"properties\":{\"a\":{\"if\":true,\"then\":{\"type\":\"integer\"}}}}",
            "{\"a\":\"x\"}", "arguments.a: must be an integer, got string");
}

TEST(anchors)
{
    const char *s = "{\"$defs\":{\"address\":{\"$anchor\":\"addressDef\",\"type\":\"object\","
                    "\"properties\":{\"city\":{\"type\":\"string\"}}}},\"properties\":{"
                    "\"home\":{\"$ref\":\"#addressDef\"},\"work\":{\"$ref\":\"#/$defs/address\"}}}";
    VALID(s, "{\"home\":{\"city\":\"c\"},\"work\":{\"city\":\"d\"}}");
    INVALID(s, "{\"home\":{\"city\":1}}", "arguments.home.city: must be a string, got integer");
    INVALID(s, "{\"work\":[]}", "arguments.work: must be an object, got array");
    INVALID("{\"properties\":{\"a\":{\"$ref\":\"#nowhere\"}}}", "{\"a\":1}",
            "arguments.a: the schema's $ref \"#nowhere\" cannot be resolved");
    /* an "$anchor" inside data (const, enum, default, examples) names no schema */
    INVALID("{\"default\":{\"$anchor\":\"d\",\"type\":\"string\"},\"$ref\":\"#d\"}", "1",
            "arguments: the schema's $ref \"#d\" cannot be resolved");
}

TEST(boolean_schemas_and_annotations)
{
    VALID("true", "{\"anything\":1}");
    INVALID("false", "1", "arguments: is not allowed");
    INVALID("{\"properties\":{\"x\":false}}", "{\"x\":1}", "arguments.x: is not allowed");
    VALID("{\"title\":\"t\",\"description\":\"d\",\"default\":1,\"format\":\"uri\","
          "\"examples\":[1]}",
          "\"not a uri\"");
}

/* The product's tool schemas (schemas/) and the conformance fixtures' (tests/fixtures/schemas/,
 * in the test binaries only): each table ends with a NULL path. */
static const struct embedded_schema *const schema_tables[] = {embedded_schemas, fixture_schemas};

static void check_accepts_empty_or_names_missing(const struct embedded_schema *f)
{
    json_t *def = json_loadb(f->data, f->len, 0, NULL);
    json_t *in = json_object_get(def, "inputSchema");
    struct mcp_error err;
    if (!json_is_object(in))
        TEST_FAIL("%s has no inputSchema object", f->path);
    json_t *empty = json_object();
    /* json_schema_2020_12_tool wants a phone or an email: an anyOf names no single one */
    if (schema_validate(in, empty, "arguments", &err) < 0 && !strstr(err.msg, "(anyOf)"))
        ASSERT_CONTAINS(err.msg, "arguments: missing required property");
    json_decref(empty);
    json_decref(def);
}

TEST(every_embedded_schema_accepts_an_empty_object_or_names_what_is_missing)
{
    size_t checked = 0;

    for (size_t t = 0; t < ARRAY_SIZE(schema_tables); t++) {
        for (const struct embedded_schema *f = schema_tables[t]; f->path; f++) {
            check_accepts_empty_or_names_missing(f);
            checked++;
        }
    }
    ASSERT(embedded_schemas_count > 0 && fixture_schemas_count > 0);
    ASSERT_EQ(checked, embedded_schemas_count + fixture_schemas_count);
}

/* Issue #18.2: every duration a tool takes (a property named *_seconds) has a maximum no larger
 * than what the code saturates to, and a huge one is refused naming it (2^62 s used to wrap
 * into a deadline in the past). */
TEST(every_duration_is_bounded)
{
    size_t checked = 0;
    for (size_t i = 0; i < embedded_schemas_count; i++) {
        if (strncmp(embedded_schemas[i].path, "tools/", 6) != 0)
            continue;
        json_t *def = json_loadb(embedded_schemas[i].data, embedded_schemas[i].len, 0, NULL);
        json_t *in = json_object_get(def, "inputSchema");
        const char *name;
        json_t *prop;
        json_object_foreach(json_object_get(in, "properties"), name, prop)
        {
            size_t n = strlen(name);
            if (n < 8 || strcmp(name + n - 8, "_seconds") != 0)
                continue;
            json_t *max = json_object_get(prop, "maximum");
            if (!json_is_integer(max) || json_integer_value(max) > MAX_DURATION_S)
                TEST_FAIL("%s: %s has no maximum <= %lld", embedded_schemas[i].path, name,
                          (long long)MAX_DURATION_S);
            json_t *huge = json_pack("{s:I}", name, (json_int_t)1 << 62);
            struct mcp_error err;
            ASSERT_EQ(schema_validate(prop, json_object_get(huge, name), name, &err), -1);
            ASSERT_CONTAINS(err.msg, "must be <=");
            json_decref(huge);
            checked++;
        }
        json_decref(def);
    }
    ASSERT(checked >= 4); /* create (lifetime, idle), renew, run_command, run_code, get_command */
}

/* Issue #18.9: pids 1 passed the schema and failed deep in clone3; the schema says the minimum
 * (LOCAL_MIN_PIDS, which the local backend checks too). */
TEST(too_few_pids_refused_by_the_schema)
{
    const struct embedded_schema *s = embedded_schema_find("tools/create_sandbox.json");
    ASSERT(s != NULL);
    json_t *def = json_loadb(s->data, s->len, 0, NULL);
    json_t *pids = json_object_get(json_object_get(json_object_get(def, "inputSchema"),
                                                   "properties"), "pids");
    json_t *one = json_integer(1), *eight = json_integer(8);
    struct mcp_error err;
    ASSERT_EQ(schema_validate(pids, one, "pids", &err), -1);
    ASSERT_CONTAINS(err.msg, "must be >= 8");
    ASSERT_EQ(schema_validate(pids, eight, "pids", &err), 0);
    json_decref(one);
    json_decref(eight);
    json_decref(def);
}

int main(void)
{
    RUN(types);
    RUN(enum_and_const);
    RUN(numbers);
    RUN(strings);
    RUN(objects);
    RUN(nested_paths);
    RUN(arrays);
    RUN(refs);
    RUN(combinators);
    RUN(conditionals);
    RUN(anchors);
    RUN(boolean_schemas_and_annotations);
    RUN(every_embedded_schema_accepts_an_empty_object_or_names_what_is_missing);
    RUN(every_duration_is_bounded);
    RUN(too_few_pids_refused_by_the_schema);
    return test_done();
}
