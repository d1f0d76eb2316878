/* The sandbox tools' argument policy (mcp/tool_args.h): null means absent, client-added keys are
 * dropped silently, other unknown keys are dropped and named, older forms become the advertised
 * ones; and every schema file validates what the policy produces from today's forms. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/tool_args.h"
#include "test.h"

static const char *schema_text =
    "{\"type\":\"object\",\"required\":[\"sandbox_id\"],\"additionalProperties\":false,"
    "\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"
    "\"env\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[^=]+=\"}},"
    "\"memory\":{\"type\":\"string\",\"pattern\":\"^[0-9]+[kmg]?$\"},"
    "\"count\":{\"type\":\"integer\"}}}";

/* Normalizes args (JSON text) and returns the result as compact JSON text; *ignored_out gets the
 * ignored names as compact JSON text. Both static. */
static const char *norm(const char *args, const char **ignored_out)
{
    static char out[512], ign[256];
    json_error_t je;
    json_t *schema = json_loads(schema_text, 0, &je);
    json_t *a = json_loads(args, 0, &je);
    json_t *ignored = json_array();

    if (!schema || !a)
        abort();
    json_t *r = tool_args_normalize(schema, a, ignored);
    char *s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
    char *i = json_dumps(ignored, JSON_COMPACT);
    snprintf(out, sizeof(out), "%s", s);
    snprintf(ign, sizeof(ign), "%s", i);
    free(s);
    free(i);
    json_decref(r);
    json_decref(a);
    json_decref(ignored);
    json_decref(schema);
    if (ignored_out)
        *ignored_out = ign;
    return out;
}

TEST(null_means_absent_for_optional_only)
{
    const char *ign;
    ASSERT_STR_EQ(norm("{\"sandbox_id\":\"sbx-1\",\"path\":null,\"count\":null}", &ign),
                  "{\"sandbox_id\":\"sbx-1\"}");
    ASSERT_STR_EQ(ign, "[]");
    /* a required one stays null, so the validator says what is wrong */
    ASSERT_STR_EQ(norm("{\"sandbox_id\":null}", NULL), "{\"sandbox_id\":null}");
}

TEST(client_keys_dropped_silently_others_named)
{
    const char *ign;
    ASSERT_STR_EQ(norm("{\"sandbox_id\":\"s\",\"wait_for_previous\":true,\"pth\":\"x\"}", &ign),
                  "{\"sandbox_id\":\"s\"}");
    ASSERT_STR_EQ(ign, "[\"pth\"]");
}

TEST(older_forms_become_advertised_ones)
{
    ASSERT_STR_EQ(norm("{\"sandbox_id\":\"s\",\"env\":{\"A\":\"1\",\"B\":\"x=y\"}}", NULL),
                  "{\"env\":[\"A=1\",\"B=x=y\"],\"sandbox_id\":\"s\"}");
    ASSERT_STR_EQ(norm("{\"sandbox_id\":\"s\",\"memory\":536870912}", NULL),
                  "{\"memory\":\"536870912\",\"sandbox_id\":\"s\"}");
    /* not an older form: left for the validator to report */
    ASSERT_STR_EQ(norm("{\"sandbox_id\":\"s\",\"env\":{\"A\":1}}", NULL),
                  "{\"env\":{\"A\":1},\"sandbox_id\":\"s\"}");
    ASSERT_STR_EQ(norm("{\"sandbox_id\":\"s\",\"path\":5}", NULL),
                  "{\"path\":5,\"sandbox_id\":\"s\"}");
    ASSERT_STR_EQ(norm("{\"sandbox_id\":\"s\",\"count\":\"5\"}", NULL),
                  "{\"count\":\"5\",\"sandbox_id\":\"s\"}");
}

TEST(note_names_every_ignored_key)
{
    json_t *ign = json_pack("[ss]", "pth", "cmd");
    char *note = tool_args_ignored_note("read_file", ign);
    ASSERT_STR_EQ(note, "ignored unknown arguments \"pth\", \"cmd\": not parameters of read_file "
                        "(check the spelling against its inputSchema)");
    free(note);
    json_array_clear(ign);
    ASSERT(tool_args_ignored_note("read_file", ign) == NULL);
    json_decref(ign);
}

int main(void)
{
    RUN(null_means_absent_for_optional_only);
    RUN(client_keys_dropped_silently_others_named);
    RUN(older_forms_become_advertised_ones);
    RUN(note_names_every_ignored_key);
    return test_done();
}
