/* The fast path for plain commands: "/usr/bin/python3 -V" needs no shell.
 *
 * /bin/sh -c CMD forks once more for the last command (dash does not exec it in place), so every
 * command paid two execs and a dynamic shell start-up. A command that is nothing but words made
 * of characters the shell treats literally, whose first word is an absolute path, means exactly
 * "execve(word0, words)" to any POSIX shell: no expansion, quoting, redirection, assignment,
 * builtin or function lookup can apply (a name containing '/' is never looked up). Such
 * commands are exec'd directly; if that execve fails, the child falls back to sh -c so the
 * errors and exit statuses (126, 127) stay the shell's. */
#include <stdbool.h>
#include <string.h>

#include "backend/local/agent/agent.h"

/* Characters that are literal in every position of an unquoted POSIX shell word ('=' too: it
 * only makes an assignment before the command name, and the name here starts with '/'). */
static bool argv_literal(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("/._-+,:@%=", ch) != NULL;
}

int agent_plain_argv(const char *command, char *store, size_t store_size, char **argv,
                     size_t max_args)
{
    size_t len = strlen(command), argc = 0;
    if (len == 0 || len >= store_size || max_args < 2)
        return 0;
    memcpy(store, command, len + 1);
    for (char *p = store; *p;) {
        if (*p == ' ' || *p == '\t') {
            *p++ = '\0';
            continue;
        }
        if (!argv_literal(*p) || argc + 1 >= max_args)
            return 0;
        argv[argc++] = p;
        while (*p && argv_literal(*p))
            p++;
        if (*p && *p != ' ' && *p != '\t')
            return 0;
    }
    if (argc == 0 || argv[0][0] != '/')
        return 0;
    argv[argc] = NULL;
    return (int)argc;
}
