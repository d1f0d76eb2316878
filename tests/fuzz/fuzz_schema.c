/* libFuzzer target: JSON Schema validation of tool arguments. The input's first line is a
 * schema, the rest an instance; the instance is also validated against the inputSchema of every
 * tool schema: the product's (schemas/tools) and the conformance fixtures' (tests/fixtures/schemas,
 * from the fixtures library). Errors must name a path. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"
#include "mcp/embedded_schemas.h"
#include "mcp/schema.h"
#include "tests/fixtures/fixtures.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static json_t *tool_schemas; /* array of inputSchemas */

/* A table of tool schema files (ends with a NULL path): their inputSchemas to tool_schemas. */
static void add_schemas(const struct embedded_schema *table)
{
    for (const struct embedded_schema *f = table; f->path; f++) {
        json_t *def = json_loadb(f->data, f->len, 0, NULL);
        json_t *in = json_object_get(def, "inputSchema");
        if (in)
            json_array_append(tool_schemas, in);
        json_decref(def);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    xalloc_install();
    tool_schemas = json_array();
    add_schemas(embedded_schemas);
    add_schemas(fixture_schemas);
    return 0;
}

static void check(const json_t *schema, const json_t *inst)
{
    struct mcp_error err;

    if (schema_validate(schema, inst, "arguments", &err) < 0 &&
        (err.code != MCP_ERR_INVALID_PARAMS || strncmp(err.msg, "arguments", 9) != 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    const char *nl = memchr(p, '\n', size);
    size_t first = nl ? (size_t)(nl - p) : size;
    json_t *schema = json_loadb(p, first, JSON_DECODE_ANY, NULL);
    json_t *inst = nl ? json_loadb(nl + 1, size - first - 1, JSON_DECODE_ANY, NULL) : NULL;
    size_t i;
    json_t *ts;

    if (!tool_schemas)
        LLVMFuzzerInitialize(NULL, NULL);
    if (schema && inst)
        check(schema, inst);
    if (schema)
        check(schema, schema); /* a schema validated against itself: $ref paths, recursion */
    json_array_foreach(tool_schemas, i, ts) {
        if (inst)
            check(ts, inst);
        if (schema)
            check(ts, schema);
    }
    json_decref(schema);
    json_decref(inst);
    return 0;
}
