/* json_out_dump must give exactly json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY): fixed cases
 * plus random trees (control characters, NUL, valid and invalid UTF-8, reals, deep nesting). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/base/json_out.h"
#include "test.h"

#define RANDOM_TREES 3000
#define RANDOM_MAX_DEPTH 5
#define RANDOM_MAX_STRING 12

static uint32_t rng_state = 12345;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) % n;
}

/* Compares with jansson; returns 1 if both gave the same text, or both NULL. */
static int same_as_jansson(const json_t *v)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t len = 0;
    char *got = json_out_dump(v, &len);
    int ok = (!want && !got) ||
             (want && got && strcmp(want, got) == 0 && len == strlen(want));
    if (!ok)
        printf("# want %s\n# got  %s\n", want ? want : "(null)", got ? got : "(null)");
    free(want);
    free(got);
    return ok;
}

static json_t *random_string(void)
{
    static const char *const pieces[] = {"a", "\"", "\\", "/", "\n", "\t", "\x01", "\x1f",
                                         "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                         "\xc3", "\xed\xa0\x80", "\xc0\xaf", "\xff", " "};
    char s[RANDOM_MAX_STRING * 4 + 2];
    size_t len = 0, n = rnd(RANDOM_MAX_STRING);
    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[rnd(sizeof(pieces) / sizeof(pieces[0]))];
        memcpy(s + len, p, strlen(p));
        len += strlen(p);
    }
    if (rnd(8) == 0)
        s[len++] = '\0'; /* an embedded NUL */
    return json_stringn_nocheck(s, len);
}

static json_t *random_value(int depth)
{
    switch (rnd(depth >= RANDOM_MAX_DEPTH ? 6 : 8)) {
    case 0:
        return json_integer((json_int_t)rnd(2000000) - 1000000);
    case 1:
        return json_real((double)rnd(100000) / (rnd(7) + 1) * (rnd(2) ? 1e-9 : 1e21));
    case 2:
        return random_string();
    case 3:
        return json_true();
    case 4:
        return rnd(2) ? json_false() : json_null();
    case 5:
        return json_integer(rnd(2) ? INT64_MAX : INT64_MIN);
    case 6: {
        json_t *a = json_array();
        for (uint32_t i = rnd(4); i > 0; i--)
            json_array_append_new(a, random_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (uint32_t i = rnd(4); i > 0; i--) {
            json_t *k = random_string();
            json_object_setn_new_nocheck(o, json_string_value(k), json_string_length(k),
                                         random_value(depth + 1));
            json_decref(k);
        }
        return o;
    }
    }
}

TEST(fixed_cases)
{
    static const char reply[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":"
                                "[{\"type\":\"text\",\"text\":\"hi\"}],\"isError\":false}}";
    const char *docs[] = {
        reply,
        "[]", "{}", "[1,-2,0.5,1e300,-1.5e-7,null,true,false,\"\"]",
        "{\"z\":1,\"a\":{\"b\":[{\"c\":\"\\u0000\\u001f\\\"\\\\/\\b\\f\\n\\r\\t\"}]}}",
        "\"caf\\u00e9 \\u20ac \\ud83d\\ude00\"", "-9223372036854775808", "3.0",
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        ASSERT(v != NULL);
        ASSERT(same_as_jansson(v));
        json_decref(v);
    }
}

TEST(invalid_utf8_is_null)
{
    json_t *v = json_pack("{s:o}", "k", json_stringn_nocheck("a\xc3(", 3));
    ASSERT(json_out_dump(v, NULL) == NULL);
    ASSERT(same_as_jansson(v));
    json_decref(v);
}

TEST(deep_nesting_delegates)
{
    json_t *v = json_string("leaf");
    for (int i = 0; i < JSON_OUT_MAX_DEPTH * 2; i++)
        v = i % 2 ? json_pack("[o]", v) : json_pack("{s:o}", "k", v);
    ASSERT(same_as_jansson(v));
    json_decref(v);
}

TEST(random_trees)
{
    for (int i = 0; i < RANDOM_TREES; i++) {
        json_t *v = random_value(0);
        int ok = same_as_jansson(v);
        json_decref(v);
        ASSERT(ok);
    }
}

int main(void)
{
    RUN(fixed_cases);
    RUN(invalid_utf8_is_null);
    RUN(deep_nesting_delegates);
    RUN(random_trees);
    return test_done();
}
