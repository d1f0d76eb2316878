/* The pieces of apply that decide what reaches the host (issue 32, items 7, 8 and 9): the mode an
 * entry gets (ws_applied_mode), the sparse copy and its chunk callback (ws_copy_sparse,
 * ws_data_bytes), the quoting of names a person reads (utf8_c_quote) and the sizes a person
 * gives (config_parse_bytes). No sandbox needed; the end-to-end test is local_ws_apply. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/workspace_review.h"
#include "lib/base/utf8.h"
#include "server/config.h"
#include "test.h"

TEST(applied_mode_holds_back_group_and_other_write)
{
    /* a directory: never, whatever the person allows; what the host had stays */
    ASSERT_EQ(ws_applied_mode(S_IFDIR | 0777, S_IFDIR | 0755, true), 0755);
    ASSERT_EQ(ws_applied_mode(S_IFDIR | 0777, S_IFDIR | 0775, false), 0775);
    ASSERT_EQ(ws_applied_mode(S_IFDIR | 01777, 0, true), 01755);
    /* a file: only with group_write; a new entry lacked every write bit but the owner's */
    ASSERT_EQ(ws_applied_mode(S_IFREG | 0666, S_IFREG | 0644, false), 0644);
    ASSERT_EQ(ws_applied_mode(S_IFREG | 0666, S_IFREG | 0644, true), 0666);
    ASSERT_EQ(ws_applied_mode(S_IFREG | 0777, 0, false), 0755);
    ASSERT_EQ(ws_applied_mode(S_IFREG | 06755, 0, false), 0755); /* no set-id */
    ASSERT_EQ(ws_applied_mode(S_IFREG | 0600, S_IFREG | 0666, false), 0600); /* removed: fine */
}

static char tmp_dir[] = "/tmp/test-ws-apply-XXXXXX";

static int make_file(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

struct counted {
    uint64_t bytes, stop_after;
};

static int count(void *ctx, off_t at, const char *data, size_t len)
{
    (void)at, (void)data;
    struct counted *c = ctx;
    if (c->stop_after && c->bytes + len > c->stop_after) {
        errno = EFBIG;
        return -1;
    }
    c->bytes += len;
    return 0;
}

TEST(sparse_copy_keeps_holes_and_reports_chunks)
{
    int in = make_file("in"), out = make_file("out");
    ASSERT(in >= 0 && out >= 0);
    off_t size = 64ll << 20;
    ASSERT_EQ(ftruncate(in, size), 0);
    ASSERT_EQ(pwrite(in, "head", 4, 0), 4);
    ASSERT_EQ(pwrite(in, "middle", 6, size / 2), 6);
    ASSERT_EQ(pwrite(in, "tail", 4, size - 4), 4);
    uint64_t data = ws_data_bytes(in);
    ASSERT(data >= 14 && data <= 3 * 65536);
    struct counted c = {0};
    ASSERT_EQ(ws_copy_sparse(in, out, count, &c), 0);
    ASSERT_EQ(c.bytes, data);
    struct stat st;
    ASSERT_EQ(fstat(out, &st), 0);
    ASSERT_EQ(st.st_size, size);
    ASSERT((uint64_t)st.st_blocks * 512 <= 3 * 65536 + 3 * 4096);
    char buf[8] = {0};
    ASSERT_EQ(pread(out, buf, 6, size / 2), 6);
    ASSERT_STR_EQ(buf, "middle");
    ASSERT_EQ(pread(out, buf, 4, size - 4), 4);
    ASSERT(memcmp(buf, "tail", 4) == 0);
    /* a callback that says stop stops the copy with its errno */
    ASSERT_EQ(ftruncate(out, 0), 0);
    struct counted limited = {.stop_after = 8};
    errno = 0;
    ASSERT_EQ(ws_copy_sparse(in, out, count, &limited), -1);
    ASSERT_EQ(errno, EFBIG);
    close(in);
    close(out);
}

TEST(names_are_quoted_for_a_terminal)
{
    char *q = utf8_c_quote("src/main.c");
    ASSERT_STR_EQ(q, "src/main.c");
    free(q);
    q = utf8_c_quote("zz-backdoor\r\033[2K\nM ");
    ASSERT_STR_EQ(q, "\"zz-backdoor\\r\\033[2K\\nM \"");
    free(q);
    q = utf8_c_quote("caf\xc3\xa9 \xff"); /* UTF-8 stays, an invalid byte is escaped */
    ASSERT_STR_EQ(q, "\"caf\xc3\xa9 \\377\"");
    free(q);
    q = utf8_c_quote("a\xc2\x9b" "2Kb"); /* U+009B, a C1 CSI */
    ASSERT_STR_EQ(q, "\"a\\302\\2332Kb\"");
    free(q);
    q = utf8_c_quote("x\xe2\x80\xaetxt.sh"); /* U+202E, right-to-left override */
    ASSERT_STR_EQ(q, "\"x\\342\\200\\256txt.sh\"");
    free(q);
}

TEST(sizes_a_person_writes)
{
    uint64_t n = 0;
    ASSERT_EQ(config_parse_bytes("1048576", &n), 0);
    ASSERT_EQ(n, 1048576u);
    ASSERT_EQ(config_parse_bytes("512M", &n), 0);
    ASSERT_EQ(n, 512ull << 20);
    ASSERT_EQ(config_parse_bytes("4GiB", &n), 0);
    ASSERT_EQ(n, 4ull << 30);
    ASSERT_EQ(config_parse_bytes("2t", &n), 0);
    ASSERT_EQ(n, 2ull << 40);
    ASSERT_EQ(config_parse_bytes("0", &n), -1);
    ASSERT_EQ(config_parse_bytes("-1", &n), -1);
    ASSERT_EQ(config_parse_bytes("1X", &n), -1);
    ASSERT_EQ(config_parse_bytes("1Mx", &n), -1);
    ASSERT_EQ(config_parse_bytes("", &n), -1);
    ASSERT_EQ(config_parse_bytes("99999999999T", &n), -1);
    ASSERT_EQ(config_parse_bytes("10000000000000000000", &n), -1); /* beyond INT64_MAX */
}

int main(void)
{
    if (mkdtemp(tmp_dir) == NULL)
        return 1;
    RUN(applied_mode_holds_back_group_and_other_write);
    RUN(sparse_copy_keeps_holes_and_reports_chunks);
    RUN(names_are_quoted_for_a_terminal);
    RUN(sizes_a_person_writes);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0)
        return 1;
    return test_done();
}
