/* `mcpbox skill install|uninstall|show|path`: puts the troubleshoot-sandbox skill where Claude
 * Code finds it. The skill text is embedded in the binary at build time (cli/CMakeLists.txt), so
 * an installed mcpbox needs no data file.
 *
 * Where it goes: DIR/troubleshoot-sandbox/SKILL.md (and reference.md, the detail SKILL.md
 * points to, which Claude Code reads only when needed), with DIR
 *   --dir DIR       as given (a skills directory);
 *   --project       ./.claude/skills (the current project);
 *   default         $CLAUDE_CONFIG_DIR/skills if that is set, else ~/.claude/skills.
 *
 * An existing file that differs from ours may hold the user's edits: install and uninstall
 * leave the skill alone unless --force is given. Writes are atomic (temporary file + rename). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/skill_text.h"
#include "lib/base/cleanup.h"
#include "lib/base/error.h"
#include "lib/base/xalloc.h"

#define SKILL_NAME "troubleshoot-sandbox"
#define SKILL_FILE "SKILL.md"
#define SKILL_NFILES 2
#define SKILL_DIR_MODE 0755
#define SKILL_FILE_MODE 0644
/* An installed SKILL.md larger than this is certainly not ours; we do not read it whole. */
#define SKILL_MAX_EXISTING_BYTES (1024 * 1024)

enum skill_exit { SKILL_EXIT_OK = 0, SKILL_EXIT_FAIL = 1, SKILL_EXIT_USAGE = 2 };

/* What is on disk compared with the embedded skill. */
enum skill_disk { SKILL_ABSENT, SKILL_SAME, SKILL_DIFFERENT };

/* The skill's files, as embedded (cli/CMakeLists.txt). */
struct skill_file {
    const char *name;
    const unsigned char *text;
    size_t len;
};

static struct skill_file skill_file_at(size_t i)
{
    if (i == 0)
        return (struct skill_file){SKILL_FILE, skill_text, skill_text_len};
    return (struct skill_file){"reference.md", skill_reference_text, skill_reference_text_len};
}

struct skill_opts {
    const char *action;
    const char *dir;
    bool project;
    bool force;
    bool json;
};

static void skill_usage(FILE *out)
{
    fputs("Usage: mcpbox skill <command> [options]\n"
          "\n"
          "Install the troubleshoot-sandbox skill for Claude Code.\n"
          "\n"
          "Commands:\n"
          "  install     write SKILL.md and reference.md into the skills directory\n"
          "  uninstall   remove it again\n"
          "  show        print the skill this binary carries\n"
          "  path        print where install would put it\n"
          "\n"
          "Options:\n"
          "  --dir DIR     skills directory to use (the skill goes to DIR/" SKILL_NAME "/)\n"
          "  --project     use ./.claude/skills, the current project's skills directory\n"
          "  --force       overwrite or remove skill files that differ from this version\n"
          "  -o, --output FORMAT   text (default) or json\n"
          "  -h, --help    show this help\n"
          "\n"
          "Default directory: $CLAUDE_CONFIG_DIR/skills if set, else ~/.claude/skills.\n"
          "Exit status: 0 done, 1 failed, 2 bad usage.\n",
          out);
}

static int skill_parse_output(const char *val, struct skill_opts *o)
{
    if (strcmp(val, "json") == 0)
        o->json = true;
    else if (strcmp(val, "text") == 0)
        o->json = false;
    else {
        fprintf(stderr, "mcpbox skill: unknown output format '%s' (use text or json)\n", val);
        return -1;
    }
    return 0;
}

/* Returns 0 to go on, 1 after --help, -1 on a usage error (message printed). */
static int skill_parse_args(int argc, char **argv, struct skill_opts *o)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'}, {"project", no_argument, NULL, 'p'},
        {"force", no_argument, NULL, 'f'},     {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0},
    };
    int c;
    optind = 0; /* main() may have run getopt already; 0 also resets GNU getopt's state */
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': o->dir = optarg; break;
        case 'p': o->project = true; break;
        case 'f': o->force = true; break;
        case 'o': if (skill_parse_output(optarg, o) < 0) return -1; break;
        case 'h': skill_usage(stdout); return 1;
        default: return -1;
        }
    }
    if (optind < argc)
        o->action = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "mcpbox skill: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->dir && !*o->dir) {
        fputs("mcpbox skill: --dir needs a directory\n", stderr);
        return -1;
    }
    if (o->dir && o->project) {
        fputs("mcpbox skill: --dir and --project cannot be used together\n", stderr);
        return -1;
    }
    return 0;
}

static char *skill_home_dir(struct mcp_error *err)
{
    const char *home = getenv("HOME");
    if (home && *home)
        return xstrdup(home);
    struct passwd *pw = getpwuid(getuid());
    if (pw && pw->pw_dir && *pw->pw_dir)
        return xstrdup(pw->pw_dir);
    mcp_error_set(err, MCP_ERR_INVALID, 0,
                  "cannot find your home directory: set HOME or pass --dir DIR");
    return NULL;
}

/* The skills directory chosen by the options (owned string), or NULL with err filled. */
static char *skill_base_dir(const struct skill_opts *o, struct mcp_error *err)
{
    if (o->dir)
        return xstrdup(o->dir);
    if (o->project) {
        cleanup_free char *cwd = getcwd(NULL, 0);
        if (!cwd) {
            mcp_error_set(err, MCP_ERR_IO, errno, "cannot read the current directory");
            return NULL;
        }
        return xasprintf("%s/.claude/skills", cwd);
    }
    const char *conf = getenv("CLAUDE_CONFIG_DIR");
    if (conf && *conf)
        return xasprintf("%s/skills", conf);
    cleanup_free char *home = skill_home_dir(err);
    return home ? xasprintf("%s/.claude/skills", home) : NULL;
}

/* Creates one directory; an existing directory is fine, anything else in the way is an error. */
static int skill_mkdir_one(const char *p, struct mcp_error *err)
{
    struct stat st;
    if (mkdir(p, SKILL_DIR_MODE) == 0)
        return 0;
    int e = errno;
    if (e == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    if (e == EEXIST)
        e = ENOTDIR;
    return mcp_error_set(err, MCP_ERR_IO, e, "cannot create directory %s", p);
}

/* mkdir -p */
static int skill_mkdir_p(const char *path, struct mcp_error *err)
{
    cleanup_free char *p = xstrdup(path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (skill_mkdir_one(p, err) < 0)
            return -1;
        *s = saved;
        if (saved == '\0')
            return 0;
    }
}

/* Compares path with an embedded file. */
static int skill_compare(const char *path, const struct skill_file *sf, enum skill_disk *out,
                         struct mcp_error *err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        *out = SKILL_ABSENT;
        return 0;
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot read %s", path);
    if (!S_ISREG(st.st_mode))
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "%s is not a regular file", path);
    *out = SKILL_DIFFERENT;
    if ((size_t)st.st_size != sf->len || st.st_size > SKILL_MAX_EXISTING_BYTES)
        return 0;
    cleanup_free char *data = xmalloc(sf->len + 1);
    ssize_t n = read(fd, data, sf->len + 1);
    if (n < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot read %s", path);
    if ((size_t)n == sf->len && memcmp(data, sf->text, sf->len) == 0)
        *out = SKILL_SAME;
    return 0;
}

static int skill_write_all(int fd, const unsigned char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes an embedded file to path through a temporary file in the same directory, so a crash
 * never leaves a half-written one. */
static int skill_write_file(const char *path, const struct skill_file *sf, struct mcp_error *err)
{
    cleanup_free char *tmp = xasprintf("%s.tmp-XXXXXX", path);
    cleanup_close int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot create a file next to %s",
                             path);
    if (skill_write_all(fd, sf->text, sf->len) < 0 ||
        fchmod(fd, SKILL_FILE_MODE) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return mcp_error_set(err, MCP_ERR_IO, e, "cannot write %s", path);
    }
    return 0;
}

static void skill_report(const struct skill_opts *o, const char *path, const char *status,
                         const char *text)
{
    if (o->json) {
        json_t *j = json_pack("{s:s, s:s}", "path", path, "status", status);
        json_dumpf(j, stdout, JSON_COMPACT);
        fputc('\n', stdout);
        json_decref(j);
    } else if (*text) {
        printf("%s %s\n", text, path);
    } else {
        printf("%s\n", path);
    }
}

/* Compares every file of the skill in dir; the first one that differs, if any, in *differs. */
static int skill_compare_all(const char *dir, enum skill_disk disk[SKILL_NFILES],
                             const char **differs, struct mcp_error *err)
{
    *differs = NULL;
    for (size_t i = 0; i < SKILL_NFILES; i++) {
        struct skill_file sf = skill_file_at(i);
        cleanup_free char *path = xasprintf("%s/%s", dir, sf.name);
        if (skill_compare(path, &sf, &disk[i], err) < 0)
            return -1;
        if (disk[i] == SKILL_DIFFERENT && *differs == NULL)
            *differs = sf.name;
    }
    return 0;
}

static bool skill_all(const enum skill_disk disk[SKILL_NFILES], enum skill_disk want)
{
    for (size_t i = 0; i < SKILL_NFILES; i++)
        if (disk[i] != want)
            return false;
    return true;
}

static int skill_install(const struct skill_opts *o, const char *dir, const char *path,
                         struct mcp_error *err)
{
    enum skill_disk disk[SKILL_NFILES];
    const char *differs;
    if (skill_mkdir_p(dir, err) < 0 || skill_compare_all(dir, disk, &differs, err) < 0)
        return -1;
    if (skill_all(disk, SKILL_SAME)) {
        skill_report(o, path, "unchanged", "already up to date:");
        return 0;
    }
    if (differs != NULL && !o->force)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "%s/%s exists and differs from this version (your edits?); "
                             "pass --force to replace it", dir, differs);
    for (size_t i = 0; i < SKILL_NFILES; i++) {
        struct skill_file sf = skill_file_at(i);
        cleanup_free char *file = xasprintf("%s/%s", dir, sf.name);
        if (disk[i] != SKILL_SAME && skill_write_file(file, &sf, err) < 0)
            return -1;
    }
    bool fresh = skill_all(disk, SKILL_ABSENT);
    skill_report(o, path, fresh ? "installed" : "updated", fresh ? "installed" : "updated");
    return 0;
}

static int skill_uninstall(const struct skill_opts *o, const char *dir, const char *path,
                           struct mcp_error *err)
{
    enum skill_disk disk[SKILL_NFILES];
    const char *differs;
    if (skill_compare_all(dir, disk, &differs, err) < 0)
        return -1;
    if (skill_all(disk, SKILL_ABSENT)) {
        skill_report(o, path, "absent", "not installed:");
        return 0;
    }
    if (differs != NULL && !o->force)
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0,
                             "%s/%s differs from this version (your edits?); "
                             "pass --force to remove it", dir, differs);
    for (size_t i = 0; i < SKILL_NFILES; i++) {
        cleanup_free char *file = xasprintf("%s/%s", dir, skill_file_at(i).name);
        if (disk[i] != SKILL_ABSENT && unlink(file) < 0)
            return mcp_error_set(err, MCP_ERR_IO, errno, "cannot remove %s", file);
    }
    rmdir(dir); /* only succeeds when nothing else lives there, which is what we want */
    skill_report(o, path, "removed", "removed");
    return 0;
}

static int skill_run(const struct skill_opts *o, struct mcp_error *err)
{
    if (strcmp(o->action, "show") == 0)
        return fwrite(skill_text, 1, skill_text_len, stdout) == skill_text_len ? 0 : -1;
    cleanup_free char *base = skill_base_dir(o, err);
    if (!base)
        return -1;
    cleanup_free char *dir = xasprintf("%s/%s", base, SKILL_NAME);
    cleanup_free char *path = xasprintf("%s/%s", dir, SKILL_FILE);
    if (strcmp(o->action, "path") == 0) {
        skill_report(o, path, "path", "");
        return 0;
    }
    if (strcmp(o->action, "install") == 0)
        return skill_install(o, dir, path, err);
    return skill_uninstall(o, dir, path, err);
}

int cli_skill_main(int argc, char **argv)
{
    struct skill_opts o = {0};
    int r = skill_parse_args(argc, argv, &o);
    if (r != 0)
        return r > 0 ? SKILL_EXIT_OK : SKILL_EXIT_USAGE;
    if (!o.action) {
        skill_usage(stderr);
        return SKILL_EXIT_USAGE;
    }
    if (strcmp(o.action, "install") != 0 && strcmp(o.action, "uninstall") != 0 &&
        strcmp(o.action, "show") != 0 && strcmp(o.action, "path") != 0) {
        fprintf(stderr, "mcpbox skill: unknown command '%s' (install, uninstall, show, path)\n",
                o.action);
        return SKILL_EXIT_USAGE;
    }
    struct mcp_error err = {0};
    if (skill_run(&o, &err) < 0) {
        fprintf(stderr, "mcpbox skill: %s\n", err.msg[0] ? err.msg : strerror(errno));
        return SKILL_EXIT_FAIL;
    }
    return SKILL_EXIT_OK;
}
