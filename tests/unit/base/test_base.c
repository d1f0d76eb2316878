#include <stdlib.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/error.h"
#include "lib/base/util.h"
#include "test.h"

TEST(sha256_known_vectors)
{
    char hex[65];
    sha256_hex("", 0, hex);
    ASSERT_STR_EQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    ASSERT_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(two_blocks, strlen(two_blocks), hex);
    ASSERT_STR_EQ(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(base64_round_trip)
{
    for (size_t len = 0; len < 70; len++) {
        unsigned char in[70], out[70];
        for (size_t i = 0; i < len; i++)
            in[i] = (unsigned char)(i * 37 + len);
        char enc[100];
        base64_encode(in, len, enc);
        ASSERT_EQ(strlen(enc), base64_encoded_len(len));
        size_t n = 0;
        ASSERT_EQ(base64_decode(enc, strlen(enc), out, &n), 0);
        ASSERT_EQ(n, len);
        ASSERT(memcmp(in, out, len) == 0);
    }
    unsigned char out[8];
    size_t n;
    ASSERT_EQ(base64_decode("ab$d", 4, out, &n), -1);
    ASSERT_EQ(base64_decode("a", 1, out, &n), -1);
}

TEST(rfc3339_round_trip)
{
    char s[32];
    format_rfc3339_ms(1764108732123LL, s);
    ASSERT_STR_EQ(s, "2025-11-25T22:12:12.123Z");
    int64_t ms = 0;
    ASSERT_EQ(parse_rfc3339_ms(s, &ms), 0);
    ASSERT_EQ(ms, 1764108732123LL);
    ASSERT_EQ(parse_rfc3339_ms("2025-11-25T23:12:12.123456+01:00", &ms), 0);
    ASSERT_EQ(ms, 1764108732123LL);
    ASSERT_EQ(parse_rfc3339_ms("yesterday", &ms), -1);
    ASSERT_EQ(parse_rfc3339_ms("2025-11-25T22:12:12", &ms), -1);
}

TEST(utf8_detection)
{
    ASSERT(utf8_is_text("hello", 5));
    ASSERT(utf8_is_text("h\xc3\xa9llo", 6));
    ASSERT(!utf8_is_text("\xff\xfe", 2));
    ASSERT(!utf8_is_text("a\0b", 3));
    ASSERT(!utf8_is_text("\xc3", 1));
    ASSERT(!utf8_is_text("\xed\xa0\x80", 3)); /* surrogate */
    ASSERT(!utf8_is_text("\xc0\xaf", 2));     /* overlong */
    ASSERT(!utf8_is_text("\xf4\x90\x80\x80", 4)); /* beyond U+10FFFF */
    /* pages end before a split character, unless nothing would be left */
    ASSERT_EQ(utf8_page_end("ab\xe6\x97", 4), 2);
    ASSERT_EQ(utf8_page_end("ab\xe6\x97\xa5", 5), 5);
    ASSERT_EQ(utf8_page_end("\xe6\x97", 2), 2);
    /* one NUL rule: sanitized text replaces it like an invalid byte */
    json_t *j = utf8_json_text("a\0\xff\xe6\x97\xa5", 6);
    ASSERT_STR_EQ(json_string_value(j), "a" UTF8_REPLACEMENT UTF8_REPLACEMENT "\xe6\x97\xa5");
    json_decref(j);
}

TEST(buf_respects_limit)
{
    struct buf b;
    buf_init(&b, 8);
    ASSERT_EQ(buf_append_str(&b, "12345"), 0);
    ASSERT_EQ(buf_append_str(&b, "6789"), -1);
    ASSERT_STR_EQ(buf_cstr(&b), "12345");
    buf_consume(&b, 2);
    ASSERT_STR_EQ(buf_cstr(&b), "345");
    buf_release(&b);
}

/* One word for sh whatever it holds: a quote closes, is escaped and reopens. */
TEST(buf_shell_word_quotes_quotes)
{
    struct buf b;
    buf_init(&b, 64);
    ASSERT_EQ(buf_append_shell_word(&b, "it's $HOME"), 0);
    ASSERT_STR_EQ(buf_cstr(&b), "'it'\\''s $HOME'");
    buf_reset(&b);
    ASSERT_EQ(buf_append_shell_word(&b, ""), 0);
    ASSERT_STR_EQ(buf_cstr(&b), "''");
    buf_release(&b);
}

TEST(error_carries_errno_and_prefix)
{
    struct mcp_error err;
    ASSERT_EQ(mcp_error_set(&err, MCP_ERR_IO, 2, "open %s", "/x"), -1);
    ASSERT_STR_EQ(err.msg, "open /x: No such file or directory");
    mcp_error_prefix(&err, "reading");
    ASSERT_STR_EQ(err.msg, "reading: open /x: No such file or directory");
    ASSERT_STR_EQ(mcp_error_code_name(MCP_ERR_NOT_FOUND), "not_found");
}

TEST(random_ids_differ)
{
    char a[40], b[40];
    random_id(a, sizeof(a), "sbx-", 8);
    random_id(b, sizeof(b), "sbx-", 8);
    ASSERT_EQ(strlen(a), 20);
    ASSERT(strcmp(a, b) != 0);
}

int main(void)
{
    RUN(sha256_known_vectors);
    RUN(base64_round_trip);
    RUN(rfc3339_round_trip);
    RUN(utf8_detection);
    RUN(buf_respects_limit);
    RUN(buf_shell_word_quotes_quotes);
    RUN(error_carries_errno_and_prefix);
    RUN(random_ids_differ);
    return test_done();
}
