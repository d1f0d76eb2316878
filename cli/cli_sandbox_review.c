/* `mcpbox sandbox diff ID [PATH...]` and `mcpbox sandbox apply ID [PATH...]`: the review and
 * apply of a sandbox's copy-on-write mounts (the backend's "workspace" operation, as the
 * review_changes and apply_changes tools). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_sandbox.h"
#include "cli/cli_util.h"
#include "lib/base/utf8.h"
#include "server/config.h"

#define CLI_DIFF_PAGE (1u << 20)

/* The apply's own flags, which only the person at the CLI gives (never an agent). */
struct apply_flags {
    bool group_write;
    uint64_t max_bytes; /* 0: the default */
    const char *review; /* --review TOKEN: apply what that review read */
    bool yes;           /* --yes: review now and apply what that review read */
};

/* ID and the paths after it (argv[optind..]); -1 to go on, else the exit code. af (NULL for diff)
 * takes --group-write, --max-bytes, --review and --yes. */
static int review_opts(struct cli_sandbox *c, int argc, char **argv, const char *usage, bool *flag,
                       const char *flag_name, struct apply_flags *af, json_t **paths)
{
    const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                      {"output", required_argument, NULL, 'o'},
                                      {flag_name, no_argument, NULL, 'f'},
                                      {af ? "group-write" : NULL, no_argument, NULL, 'g'},
                                      {af ? "max-bytes" : NULL, required_argument, NULL, 'b'},
                                      {"review", required_argument, NULL, 'r'},
                                      {"yes", no_argument, NULL, 'y'},
                                      {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        if (opt == 'f')
            *flag = true;
        else if (opt == 'g' && af)
            af->group_write = true;
        else if (opt == 'r' && af)
            af->review = optarg;
        else if (opt == 'y' && af)
            af->yes = true;
        else if (opt == 'b' && af && config_parse_bytes(optarg, &af->max_bytes) == 0)
            continue;
        else if (opt == 'o' && cli_parse_output(optarg, &c->json) == 0)
            continue;
        else {
            if (opt == 'b')
                fprintf(stderr, "--max-bytes must be a size such as 1073741824, 512M or 4G\n");
            fputs(usage, opt == 'h' ? stdout : stderr);
            return opt == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    *paths = json_array();
    for (int i = optind + 1; i < argc; i++)
        json_array_append_new(*paths, json_string(argv[i]));
    return -1;
}

static int workspace_call(struct cli_sandbox *c, const char *id, const char *action, json_t *args)
{
    cli_sandbox_op_reset(c);
    if (c->be->ops->workspace(c->be, id, action, args, cli_sandbox_op_cb, c, &c->err) < 0 ||
        cli_sandbox_wait(c) < 0)
        return -1;
    return 0;
}

/* The engine's messages name the sandbox's paths ("cannot open PATH"): one that holds a control
 * character is printed quoted whole, never raw. */
static int review_fail(const char *cmd, const struct mcp_error *err)
{
    struct mcp_error shown = *err;
    char *q = utf8_c_quote(err->msg);
    bool raw = false;
    for (const unsigned char *p = (const unsigned char *)err->msg; *p; p++)
        raw = raw || *p < 0x20 || *p == 0x7f || (p[0] == 0xC2 && p[1] >= 0x80 && p[1] < 0xA0);
    if (raw) /* cut at the end of the buffer when long: still no raw byte */
        snprintf(shown.msg, sizeof shown.msg, "%s", q);
    free(q);
    return cli_sandbox_fail(cmd, &shown);
}

static char change_letter(json_t *ch)
{
    const char *k = json_string_value(json_object_get(ch, "change"));
    if (k == NULL)
        return '?';
    if (strcmp(k, "mode") == 0)
        return 'm';
    return k[0] == 'a' ? 'A' : k[0] == 'd' ? 'D' : 'M';
}

/* A path from the sandbox as a person may read it: quoted when it has control characters (a
 * name chosen by the sandbox must not erase or forge lines). */
static char *shown_path(json_t *j)
{
    const char *p = json_string_value(json_object_get(j, "path"));
    return utf8_c_quote(p ? p : "?");
}

/* " (mode 755 -> 777)" when the permission bits differ, else "". */
static void mode_note(json_t *j, char *out, size_t size)
{
    const char *om = json_string_value(json_object_get(j, "old_mode"));
    const char *nm = json_string_value(json_object_get(j, "mode"));
    out[0] = '\0';
    if (om && nm && strcmp(om, nm) != 0)
        snprintf(out, size, " (mode %s -> %s)", om, nm);
    else if (!om && nm && json_object_get(j, "held_back"))
        snprintf(out, size, " (mode %s)", nm);
}

/* " (binary, 4096 -> 268435456 bytes)" for a file, else "". */
static void size_note(json_t *ch, char *out, size_t size)
{
    const char *type = json_string_value(json_object_get(ch, "type"));
    out[0] = '\0';
    if (type == NULL || strcmp(type, "file") != 0)
        return;
    snprintf(out, size, " (%s%" JSON_INTEGER_FORMAT " -> %" JSON_INTEGER_FORMAT " bytes)",
             json_is_true(json_object_get(ch, "binary")) ? "binary, " : "",
             json_integer_value(json_object_get(ch, "old_size")),
             json_integer_value(json_object_get(ch, "size")));
}

/* The diff as is into a pipe (`| git apply` must get the bytes), but on a terminal the sandbox's
 * file contents must not drive it: control characters but tab and newline are shown as cat -v
 * does (^[, ^M, M-^[ for C1), bidirectional overrides as <U+202E>. */
static void print_diff(const char *d, bool terminal)
{
    if (d == NULL)
        return;
    if (!terminal) {
        fputs(d, stdout);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)d; *p; p++) {
        if (*p == '\n' || *p == '\t' || (*p >= 0x20 && *p != 0x7f && *p != 0xC2 && *p != 0xE2))
            putchar(*p);
        else if (*p < 0x20 || *p == 0x7f)
            printf("^%c", *p == 0x7f ? '?' : *p + 0x40);
        else if (*p == 0xC2 && p[1] >= 0x80 && p[1] < 0xA0)
            printf("M-^%c", *++p - 0x80 + 0x40);
        else if (*p == 0xE2 && ((p[1] == 0x80 && p[2] >= 0xAA && p[2] <= 0xAE) ||
                                (p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9))) {
            printf("<U+%04X>", 0x2000 | ((p[1] & 0x3f) << 6) | (p[2] & 0x3f));
            p += 2;
        } else
            putchar(*p);
    }
}

static void print_stat(json_t *res)
{
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(res, "changes"), i, ch)
    {
        char *path = shown_path(ch);
        char mode[64], sizes[96];
        mode_note(ch, mode, sizeof mode);
        size_note(ch, sizes, sizeof sizes);
        printf("%c %s%s%s%s%s\n", change_letter(ch), path, mode, sizes,
               json_is_false(json_object_get(ch, "applicable")) ? " (not applicable)" : "",
               json_is_true(json_object_get(ch, "conflict")) ? " (changed on the host: conflict)"
                                                             : "");
        free(path);
    }
    const char *more = json_string_value(json_object_get(res, "changes_note"));
    if (more) /* not all listed: say so, and how to see the rest */
        fprintf(stderr, "%s\n", more);
}

int cli_sandbox_diff(struct cli_sandbox *c, int argc, char **argv)
{
    static const char usage[] =
        "Usage: mcpbox sandbox diff ID [PATH...] [--stat] [-o table|json]\n"
        "What the sandbox changed in its copy-on-write mounts, as a unified diff against the\n"
        "host (--stat: one line per changed path: A added, M modified, D deleted, m mode).\n";
    bool stat = false;
    json_t *paths = NULL;
    int rc = review_opts(c, argc, argv, usage, &stat, "stat", NULL, &paths);
    if (rc >= 0)
        return rc;
    const char *id = argv[optind];
    char review[64] = "";
    for (json_int_t offset = 0; offset >= 0;) {
        json_t *args = json_pack("{s:O, s:I, s:I}", "paths", paths, "offset", offset, "max_bytes",
                                 (json_int_t)CLI_DIFF_PAGE);
        rc = workspace_call(c, id, "review", args);
        json_decref(args);
        if (rc < 0) {
            json_decref(paths);
            return review_fail("diff", &c->err);
        }
        /* Each page is a review of every change: the last one's token covers all it read. */
        const char *token = json_string_value(json_object_get(c->result, "review"));
        snprintf(review, sizeof review, "%s", token ? token : "");
        if (c->json || stat) { /* the list is whole in every page */
            if (c->json)
                cli_print_json(c->result);
            else
                print_stat(c->result);
            break;
        }
        print_diff(json_string_value(json_object_get(c->result, "diff")), isatty(STDOUT_FILENO));
        json_t *next = json_object_get(c->result, "next_offset");
        offset = json_is_integer(next) ? json_integer_value(next) : -1;
    }
    json_decref(paths);
    if (review[0] && !c->json) /* stderr: the diff on stdout stays a patch */
        fprintf(stderr,
                "review %s: to apply what this showed, mcpbox sandbox apply %s --review %s\n",
                review, id, review);
    return CLI_EXIT_OK;
}

/* --yes: a review of its own (not shown), so that the apply still writes only what one review
 * read. The token goes to out. */
static int review_for_apply(struct cli_sandbox *c, const char *id, json_t *paths, char *out,
                            size_t out_size)
{
    json_t *args = json_pack("{s:O, s:I}", "paths", paths, "max_bytes", (json_int_t)256);
    int rc = workspace_call(c, id, "review", args);
    json_decref(args);
    const char *token = rc == 0 ? json_string_value(json_object_get(c->result, "review")) : NULL;
    snprintf(out, out_size, "%s", token ? token : "");
    return rc;
}

int cli_sandbox_apply(struct cli_sandbox *c, int argc, char **argv)
{
    static const char usage[] =
        "Usage: mcpbox sandbox apply ID [PATH...] (--review TOKEN | --yes) [--overwrite]\n"
        "                            [--group-write] [--max-bytes SIZE] [-o table|json]\n"
        "Writes the sandbox's copy-on-write changes (all, or those at or below PATHs) to the\n"
        "host, as the review whose TOKEN `mcpbox sandbox diff ID` printed showed them: an entry\n"
        "the sandbox changed since is refused. --yes applies what is there now, unread.\n"
        "A file changed on the host since the sandbox saw it is refused (a conflict)\n"
        "unless --overwrite. Group and other write bits the host entry lacked are held back\n"
        "unless --group-write (files only; never on a directory). An apply that would write\n"
        "more than SIZE of file data (default 1G; holes are free) is refused whole.\n"
        "Exit status 1 when anything was refused or failed.\n";
    bool overwrite = false;
    struct apply_flags af = {0};
    json_t *paths = NULL;
    int rc = review_opts(c, argc, argv, usage, &overwrite, "overwrite", &af, &paths);
    if (rc >= 0)
        return rc;
    if (!af.review && !af.yes) {
        json_decref(paths);
        fprintf(stderr,
                "mcpbox sandbox apply: name the review you read: run mcpbox sandbox diff %s, "
                "then apply with the --review TOKEN it prints (or --yes to apply what is there "
                "now without reading it)\n",
                argv[optind]);
        return CLI_EXIT_USAGE;
    }
    char token[64];
    if (!af.review) {
        if (review_for_apply(c, argv[optind], paths, token, sizeof token) < 0) {
            json_decref(paths);
            return review_fail("apply", &c->err);
        }
        af.review = token;
    }
    json_t *args = json_pack("{s:o, s:b, s:b, s:s}", "paths", paths, "overwrite", overwrite,
                             "group_write", af.group_write, "review", af.review);
    if (af.max_bytes)
        json_object_set_new(args, "apply_max_bytes", json_integer((json_int_t)af.max_bytes));
    rc = workspace_call(c, argv[optind], "apply", args);
    json_decref(args);
    if (rc < 0)
        return review_fail("apply", &c->err);
    if (c->json) {
        cli_print_json(c->result);
    } else {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(c->result, "results"), i, r)
        {
            const char *why = json_string_value(json_object_get(r, "reason"));
            char *path = shown_path(r);
            char mode[64];
            mode_note(r, mode, sizeof mode);
            printf("%-8s %s%s%s%s\n", json_string_value(json_object_get(r, "status")), path, mode,
                   why ? ": " : "", why ? why : "");
            free(path);
        }
    }
    bool clean = json_integer_value(json_object_get(c->result, "conflicts")) == 0 &&
                 json_integer_value(json_object_get(c->result, "failed")) == 0 &&
                 json_integer_value(json_object_get(c->result, "refused")) == 0;
    return clean ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
