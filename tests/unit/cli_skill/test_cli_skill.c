/* `mcpbox skill`: install, reinstall, conflicts with local edits, uninstall, the three ways of
 * choosing the directory, and bad usage. Runs cli_skill_main in a scratch directory. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/skill_text.h"
#include "test.h"
#include "lib/base/rmtree.h"

int cli_skill_main(int argc, char **argv);

#define SKILL_REL "troubleshoot-sandbox/SKILL.md"
#define MAX_ARGS 8

static char scratch[] = "/tmp/mcpbox-skill-test-XXXXXX";

/* Runs `mcpbox skill ARGS...` (NULL-terminated). */
static int run(const char *first, ...)
{
    char *argv[MAX_ARGS + 1] = {(char *)"skill"};
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < MAX_ARGS; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    return cli_skill_main(argc, argv);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char data[1 << 20];
    *len = fread(data, 1, sizeof data - 1, f);
    data[*len] = '\0';
    fclose(f);
    return data;
}

static void assert_installed(const char *path)
{
    size_t len = 0;
    char *data = slurp(path, &len);
    ASSERT(data != NULL);
    ASSERT_EQ(len, skill_text_len);
    ASSERT(memcmp(data, skill_text, len) == 0);
    struct stat st;
    ASSERT_EQ(stat(path, &st), 0);
    ASSERT_EQ(st.st_mode & 0777, 0644);
}

static void overwrite(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

TEST(embedded_matches_source)
{
    size_t len = 0;
    char *src = slurp(MCPBOX_SKILL_SOURCE, &len);
    ASSERT(src != NULL);
    ASSERT_EQ(len, skill_text_len);
    ASSERT(memcmp(src, skill_text, len) == 0);
    ASSERT_EQ(skill_text[skill_text_len], 0);
    ASSERT(strncmp((const char *)skill_text, "---\nname: troubleshoot-sandbox\n", 31) == 0);
    ASSERT_CONTAINS((const char *)skill_text, "\nuser-invocable: true\n");
    ASSERT_CONTAINS((const char *)skill_text, "\nargument-hint: ");
    src = slurp(MCPBOX_SKILL_REFERENCE, &len);
    ASSERT(src != NULL);
    ASSERT_EQ(len, skill_reference_text_len);
    ASSERT(memcmp(src, skill_reference_text, len) == 0);
    ASSERT_CONTAINS((const char *)skill_text, "`reference.md`"); /* the skill points to it */
}

/* A second install after reference.md was edited keeps the edit, like SKILL.md. */
TEST(edited_reference_is_kept)
{
    char dir[256], path[320];
    snprintf(dir, sizeof dir, "%s/ref/skills", scratch);
    ASSERT_EQ(run("install", "--dir", dir, NULL), 0);
    snprintf(path, sizeof path, "%s/troubleshoot-sandbox/reference.md", dir);
    size_t len;
    char *data = slurp(path, &len);
    ASSERT(data != NULL);
    ASSERT_EQ(len, skill_reference_text_len);
    overwrite(path, "my notes\n");
    ASSERT_EQ(run("install", "--dir", dir, NULL), 1);
    ASSERT_STR_EQ(slurp(path, &len), "my notes\n");
    ASSERT_EQ(run("--force", "install", "--dir", dir, NULL), 0);
    ASSERT_EQ(slurp(path, &len) != NULL && len == skill_reference_text_len, 1);
    ASSERT_EQ(run("uninstall", "--dir", dir, NULL), 0);
    ASSERT(access(path, F_OK) != 0);
}

TEST(install_dir_then_reinstall_then_edit)
{
    char dir[256], path[320];
    snprintf(dir, sizeof dir, "%s/a/b/skills", scratch);
    snprintf(path, sizeof path, "%s/%s", dir, SKILL_REL);
    ASSERT_EQ(run("install", "--dir", dir, NULL), 0);
    assert_installed(path);
    ASSERT_EQ(run("install", "--dir", dir, "-o", "json", NULL), 0); /* unchanged */
    assert_installed(path);
    overwrite(path, "my own notes\n");
    ASSERT_EQ(run("install", "--dir", dir, NULL), 1); /* keeps the user's edit */
    size_t len;
    ASSERT_STR_EQ(slurp(path, &len), "my own notes\n");
    ASSERT_EQ(run("uninstall", "--dir", dir, NULL), 1);
    ASSERT_EQ(access(path, F_OK), 0);
    ASSERT_EQ(run("--force", "install", "--dir", dir, NULL), 0);
    assert_installed(path);
    ASSERT_EQ(run("uninstall", "--dir", dir, NULL), 0);
    ASSERT(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/troubleshoot-sandbox", dir);
    ASSERT(access(path, F_OK) != 0); /* the empty skill directory went too */
    ASSERT_EQ(run("uninstall", "--dir", dir, NULL), 0); /* nothing to do */
}

TEST(project_home_and_config_dir)
{
    char want[320], cfg[256];
    ASSERT_EQ(chdir(scratch), 0);
    ASSERT_EQ(run("install", "--project", NULL), 0);
    snprintf(want, sizeof want, "%s/.claude/skills/%s", scratch, SKILL_REL);
    assert_installed(want);
    ASSERT_EQ(unlink(want), 0);

    setenv("HOME", scratch, 1);
    unsetenv("CLAUDE_CONFIG_DIR");
    ASSERT_EQ(run("install", NULL), 0);
    assert_installed(want);

    snprintf(cfg, sizeof cfg, "%s/cfg", scratch);
    setenv("CLAUDE_CONFIG_DIR", cfg, 1);
    ASSERT_EQ(run("install", NULL), 0);
    snprintf(want, sizeof want, "%s/skills/%s", cfg, SKILL_REL);
    assert_installed(want);
    unsetenv("CLAUDE_CONFIG_DIR");
}

TEST(blocked_by_a_file)
{
    char file[256];
    snprintf(file, sizeof file, "%s/plainfile", scratch);
    overwrite(file, "x");
    ASSERT_EQ(run("install", "--dir", file, NULL), 1);
}

TEST(bad_usage)
{
    ASSERT_EQ(run(NULL), 2);
    ASSERT_EQ(run("frobnicate", NULL), 2);
    ASSERT_EQ(run("install", "--dir", "/x", "--project", NULL), 2);
    ASSERT_EQ(run("install", "--dir", "", NULL), 2);
    ASSERT_EQ(run("install", "--bogus", NULL), 2);
    ASSERT_EQ(run("install", "extra", NULL), 2);
    ASSERT_EQ(run("install", "-o", "yaml", NULL), 2);
    ASSERT_EQ(run("--help", NULL), 0);
}

int main(void)
{
    if (!mkdtemp(scratch)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(embedded_matches_source);
    RUN(install_dir_then_reinstall_then_edit);
    RUN(edited_reference_is_kept);
    RUN(project_home_and_config_dir);
    RUN(blocked_by_a_file);
    RUN(bad_usage);
    if (rmtree(scratch) < 0)
        fprintf(stderr, "could not remove %s\n", scratch);
    return test_done();
}
