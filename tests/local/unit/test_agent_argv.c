/* agent_plain_argv: which commands the agent may exec without /bin/sh. Any doubt means "use the
 * shell" (0), so the cases below are mostly things that must NOT be split. */
#include <string.h>

#include "backend/local/agent/agent.h"
#include "test.h"

#define ARGS_MAX 8

static int split(const char *cmd, char **argv)
{
    static char store[256];
    return agent_plain_argv(cmd, store, sizeof store, argv, ARGS_MAX);
}

TEST(plain_commands_split)
{
    char *argv[ARGS_MAX];
    ASSERT_EQ(split("/bin/true", argv), 1);
    ASSERT_STR_EQ(argv[0], "/bin/true");
    ASSERT(argv[1] == NULL);
    ASSERT_EQ(split("  /usr/bin/python3\t-c  x=1,y:2@3%4+5  ", argv), 3);
    ASSERT_STR_EQ(argv[1], "-c");
    ASSERT_STR_EQ(argv[2], "x=1,y:2@3%4+5");
    ASSERT(argv[3] == NULL);
}

TEST(shell_syntax_goes_to_the_shell)
{
    static const char *const shell[] = {
        "", "   ", "true", "ls -l", "./run.sh", "X=1 /bin/env", "/bin/echo $HOME",
        "/bin/echo 'a b'", "/bin/echo \"a\"", "/bin/ls *", "/bin/ls ?", "/bin/ls [a]",
        "/bin/ls ~", "/bin/true; /bin/false", "/bin/true && x", "/bin/true | x", "/bin/cat <f",
        "/bin/echo >f", "/bin/echo `id`", "/bin/echo a\\ b", "/bin/true # c", "/bin/echo {a,b}",
        "/bin/true\n/bin/false", "/bin/true &", "(/bin/true)", "/bin/echo !x", "/bin/echo a=(b)",
        "/a /b /c /d /e /f /g /h", /* more words than argv has room for */
    };
    char *argv[ARGS_MAX];
    for (size_t i = 0; i < sizeof shell / sizeof shell[0]; i++)
        if (split(shell[i], argv) != 0)
            TEST_FAIL("'%s' was split without the shell", shell[i]);
}

TEST(too_long_goes_to_the_shell)
{
    char cmd[512], *argv[ARGS_MAX];
    memset(cmd, 'a', sizeof cmd - 1);
    cmd[0] = '/';
    cmd[sizeof cmd - 1] = '\0';
    ASSERT_EQ(split(cmd, argv), 0);
}

int main(void)
{
    RUN(plain_commands_split);
    RUN(shell_syntax_goes_to_the_shell);
    RUN(too_long_goes_to_the_shell);
    return test_done();
}
