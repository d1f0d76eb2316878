/* `mcpbox sandbox diff ID [PATH...]` and `mcpbox sandbox apply ID [PATH...]`: the review and
 * apply of a sandbox's copy-on-write mounts (the backend's "workspace" operation, as the
 * review_changes and apply_changes tools). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_sandbox.h"
#include "cli/cli_util.h"

#define CLI_DIFF_PAGE (1u << 20)

/* What apply takes beyond diff's options (NULL for diff). */
struct apply_opts {
    const char *review; /* --review TOKEN */
    bool yes;           /* --yes: review now and apply what that review read */
};

/* ID and the paths after it (argv[optind..]); -1 to go on, else the exit code. */
static int review_opts(struct cli_sandbox *c, int argc, char **argv, const char *usage, bool *flag,
                       const char *flag_name, json_t **paths, struct apply_opts *ao)
{
    struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},    {"output", required_argument, NULL, 'o'},
        {flag_name, no_argument, NULL, 'f'}, {"review", required_argument, NULL, 'r'},
        {"yes", no_argument, NULL, 'y'},     {NULL, 0, NULL, 0}};
    if (ao == NULL) /* diff: no --review, no --yes */
        longopts[3] = (struct option){NULL, 0, NULL, 0};
    int opt;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        if (opt == 'f')
            *flag = true;
        else if (opt == 'r' && ao)
            ao->review = optarg;
        else if (opt == 'y' && ao)
            ao->yes = true;
        else if (opt == 'o' && cli_parse_output(optarg, &c->json) == 0)
            continue;
        else {
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

static char change_letter(json_t *ch)
{
    const char *k = json_string_value(json_object_get(ch, "change"));
    if (k == NULL)
        return '?';
    if (strcmp(k, "mode") == 0)
        return 'm';
    return k[0] == 'a' ? 'A' : k[0] == 'd' ? 'D' : 'M';
}

static void print_stat(json_t *res)
{
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(res, "changes"), i, ch)
    {
        printf("%c %s%s%s%s\n", change_letter(ch), json_string_value(json_object_get(ch, "path")),
               json_is_true(json_object_get(ch, "binary")) ? " (binary)" : "",
               json_is_false(json_object_get(ch, "applicable")) ? " (not applicable)" : "",
               json_is_true(json_object_get(ch, "conflict")) ? " (changed on the host: conflict)"
                                                             : "");
    }
}

int cli_sandbox_diff(struct cli_sandbox *c, int argc, char **argv)
{
    static const char usage[] =
        "Usage: mcpbox sandbox diff ID [PATH...] [--stat] [-o table|json]\n"
        "What the sandbox changed in its copy-on-write mounts, as a unified diff against the\n"
        "host (--stat: one line per changed path: A added, M modified, D deleted, m mode).\n";
    bool stat = false;
    json_t *paths = NULL;
    int rc = review_opts(c, argc, argv, usage, &stat, "stat", &paths, NULL);
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
            return cli_sandbox_fail("diff", &c->err);
        }
        /* Each page is a review of every change: the last one's token covers all it read. */
        snprintf(review, sizeof review, "%s",
                 json_string_value(json_object_get(c->result, "review"))
                     ? json_string_value(json_object_get(c->result, "review"))
                     : "");
        if (c->json || stat) { /* the list is whole in every page */
            if (c->json)
                cli_print_json(c->result);
            else
                print_stat(c->result);
            break;
        }
        fputs(json_string_value(json_object_get(c->result, "diff")), stdout);
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

int cli_sandbox_apply(struct cli_sandbox *c, int argc, char **argv)
{
    static const char usage[] =
        "Usage: mcpbox sandbox apply ID [PATH...] (--review TOKEN | --yes) [--overwrite]\n"
        "                           [-o table|json]\n"
        "Writes the sandbox's copy-on-write changes (all, or those at or below PATHs) to the\n"
        "host, as the review `mcpbox sandbox diff ID` printed the TOKEN of showed them: a file\n"
        "the sandbox changed since is refused. --yes applies what is there now, unseen. A file\n"
        "changed on the host since the sandbox saw it is refused (a conflict) unless\n"
        "--overwrite. Exit status 1 when anything was refused or failed.\n";
    bool overwrite = false;
    json_t *paths = NULL;
    struct apply_opts ao = {0};
    char ao_token[64];
    int rc = review_opts(c, argc, argv, usage, &overwrite, "overwrite", &paths, &ao);
    if (rc >= 0)
        return rc;
    if (!ao.review && !ao.yes) {
        json_decref(paths);
        fprintf(stderr,
                "mcpbox sandbox apply: name the review you read: run mcpbox sandbox diff "
                "%s, then apply with the --review TOKEN it prints (or --yes to apply "
                "what is there now without reading it)\n",
                argv[optind]);
        return CLI_EXIT_USAGE;
    }
    if (!ao.review) { /* --yes: a review of its own, so that apply still checks each copy */
        json_t *args = json_pack("{s:O, s:I}", "paths", paths, "max_bytes", (json_int_t)256);
        rc = workspace_call(c, argv[optind], "review", args);
        json_decref(args);
        if (rc < 0) {
            json_decref(paths);
            return cli_sandbox_fail("apply", &c->err);
        }
        snprintf(ao_token, sizeof ao_token, "%s",
                 json_string_value(json_object_get(c->result, "review"))
                     ? json_string_value(json_object_get(c->result, "review"))
                     : "");
        ao.review = ao_token;
    }
    json_t *args =
        json_pack("{s:o, s:b, s:s}", "paths", paths, "overwrite", overwrite, "review", ao.review);
    rc = workspace_call(c, argv[optind], "apply", args);
    json_decref(args);
    if (rc < 0)
        return cli_sandbox_fail("apply", &c->err);
    if (c->json) {
        cli_print_json(c->result);
    } else {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(c->result, "results"), i, r)
        {
            const char *why = json_string_value(json_object_get(r, "reason"));
            printf("%-8s %s%s%s\n", json_string_value(json_object_get(r, "status")),
                   json_string_value(json_object_get(r, "path")), why ? ": " : "", why ? why : "");
        }
    }
    bool clean = json_integer_value(json_object_get(c->result, "conflicts")) == 0 &&
                 json_integer_value(json_object_get(c->result, "failed")) == 0 &&
                 json_integer_value(json_object_get(c->result, "refused")) == 0;
    return clean ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
