/* json_in_parse against json_loadb(JSON_REJECT_DUPLICATES | JSON_DECODE_ANY): whatever the
 * fast path accepts, jansson must accept too and build the same tree (same text, same types);
 * typical requests must take the fast path; random mutations of seeds probe the edges. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/base/json_in.h"
#include "test.h"

#define MUTATIONS_PER_SEED 4000
#define MUTATED_MAX 512

static uint32_t rng_state = 4242;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) % n;
}

static const char spaced[] = "{ \"jsonrpc\" : \"2.0\" , \"id\" : \"abc\" , \"method\" : \"x\" ,"
                             " \"params\" : { \"a\" : [ 1 , -2 , 0 , true , false , null , "
                             "{ } , [ ] ] } }\r\n";
static const char *const seeds[] = {
    "{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}",
    spaced,
    "{\"s\":\"caf\xc3\xa9 \\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t \xf0\x9f\x98\x80\",\"n\":-0}",
    "[{\"k\":[[[[\"deep\"]]]]},123456789012345678,\"\"]",
    "{\"u\":\"\\u00e9\",\"r\":1.5,\"e\":1e3}",
};

/* 1 when the fast path's answer is acceptable for this text. */
static int agrees(const char *text, size_t len)
{
    json_t *fast = json_in_parse(text, len);
    if (!fast)
        return 1; /* declining is always allowed: json_loadb decides */
    json_t *slow = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    int ok = slow != NULL && json_equal(fast, slow);
    if (ok) {
        char *a = json_dumps(fast, JSON_COMPACT | JSON_ENCODE_ANY);
        char *b = json_dumps(slow, JSON_COMPACT | JSON_ENCODE_ANY);
        ok = a && b && strcmp(a, b) == 0;
        free(a);
        free(b);
    }
    if (!ok)
        printf("# fast path disagrees on: %.*s\n", (int)len, text);
    json_decref(fast);
    json_decref(slow);
    return ok;
}

TEST(typical_requests_take_the_fast_path)
{
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_in_parse(seeds[i], strlen(seeds[i]));
        ASSERT(v != NULL);
        json_decref(v);
        ASSERT(agrees(seeds[i], strlen(seeds[i])));
    }
}

TEST(declines_what_it_leaves_to_jansson)
{
    const char *const no[] = {
        "", " ", "{", "{\"a\":1,}", "[1,]", "{\"a\":1,\"a\":2}", "01", "-", "1.5", "1e3",
        "\"\\u0041\"", "truex", "nul", "\"a\x01\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "{} x",
        "1234567890123456789", "{\"a\" 1}", "[1 2]", "\"unterminated",
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        ASSERT(json_in_parse(no[i], strlen(no[i])) == NULL);
    ASSERT(json_in_parse("{}\0", 3) == NULL);
}

TEST(random_mutations_agree)
{
    static const char alphabet[] = "{}[]\",:\\/ 0123456789-+.eEtrufalsn\x01\x7f\xc3\xa9\xff\n";
    char text[MUTATED_MAX];
    for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
        for (int m = 0; m < MUTATIONS_PER_SEED; m++) {
            size_t len = strlen(seeds[s]);
            memcpy(text, seeds[s], len);
            for (uint32_t k = rnd(4) + 1; k > 0 && len > 1; k--) {
                size_t at = rnd((uint32_t)len);
                char ch = alphabet[rnd(sizeof(alphabet) - 1)];
                switch (rnd(3)) {
                case 0:
                    text[at] = ch;
                    break;
                case 1:
                    memmove(text + at, text + at + 1, len - at - 1);
                    len--;
                    break;
                default:
                    if (len + 1 < sizeof(text)) {
                        memmove(text + at + 1, text + at, len - at);
                        text[at] = ch;
                        len++;
                    }
                }
            }
            ASSERT(agrees(text, len));
        }
    }
}

int main(void)
{
    RUN(typical_requests_take_the_fast_path);
    RUN(declines_what_it_leaves_to_jansson);
    RUN(random_mutations_agree);
    return test_done();
}
