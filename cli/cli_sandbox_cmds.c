/* `mcpbox sandbox create|ls|get|rm|logs|pause|resume`. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/backends.h"
#include "cli/cli_sandbox.h"
#include "cli/cli_util.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

#define CLI_SIZE_TEXT_MAX 32

int cli_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || v < 0)
        return -1;
    static const char units[] = "KMGT";
    uint64_t mult = 1;
    if (*end != '\0') {
        const char *u = strchr(units, *end >= 'a' ? *end - 32 : *end);
        if (u == NULL)
            return -1;
        mult = 1ull << (10 * (u - units + 1));
        end++;
        if (*end == 'i')
            end++;
        if (*end == 'B')
            end++;
    }
    if (*end != '\0' || v * (double)mult > 1.8e19)
        return -1;
    *out = (uint64_t)(v * (double)mult);
    return 0;
}

static void cli_format_size(uint64_t bytes, char out[CLI_SIZE_TEXT_MAX])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024 && u + 1 < ARRAY_SIZE(units)) {
        v /= 1024;
        u++;
    }
    snprintf(out, CLI_SIZE_TEXT_MAX, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
}

/* ---- sandbox info output -------------------------------------------------------------------- */

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "-";
}

static void cli_info_row(struct cli_table *t, const json_t *sb)
{
    const json_t *limits = json_object_get(sb, "limits");
    char cpu[32], mem[CLI_SIZE_TEXT_MAX], pids[32];
    snprintf(cpu, sizeof(cpu), "%g", json_number_value(json_object_get(limits, "cpu")));
    cli_format_size((uint64_t)json_integer_value(json_object_get(limits, "memory_bytes")), mem);
    snprintf(pids, sizeof(pids), "%" JSON_INTEGER_FORMAT,
             json_integer_value(json_object_get(limits, "pids")));
    const char *row[] = {jstr(sb, "sandbox_id"), jstr(sb, "state"),   jstr(sb, "image"),
                         jstr(sb, "created_at"), jstr(sb, "expires_at"), cpu, mem, pids,
                         json_is_true(json_object_get(sb, "network")) ? "egress" : "loopback",
                         jstr(sb, "owner")};
    cli_table_add(t, row);
}

/* With owners (ls --all), a last OWNER column. */
static void cli_print_infos_owned(const json_t *list, bool owners)
{
    static const char *const header[] = {"ID",  "STATE",  "IMAGE", "CREATED", "EXPIRES",
                                         "CPU", "MEMORY", "PIDS",  "NETWORK", "OWNER"};
    struct cli_table t;
    cli_table_init(&t, ARRAY_SIZE(header) - (owners ? 0 : 1), header);
    size_t i;
    json_t *sb;
    json_array_foreach(list, i, sb)
        cli_info_row(&t, sb);
    cli_table_print(&t, stdout);
    cli_table_release(&t);
}

static void cli_print_infos(const json_t *list)
{
    cli_print_infos_owned(list, false);
}

static void cli_print_info(struct cli_sandbox *c, const json_t *sb)
{
    if (c->json) {
        cli_print_json(sb);
        return;
    }
    json_t *one = json_pack("[O]", sb);
    cli_print_infos(one);
    json_decref(one);
}

/* ---- create --------------------------------------------------------------------------------- */

struct cli_create_opts {
    struct sandbox_spec spec;
    json_t *env, *metadata, *mounts;
    json_t *secrets;              /* --secret NAME... (docs/secrets.md) */
    struct egress_policy *policy; /* --network-policy */
    bool table;                   /* -o table: the table `get` prints instead of the id */
};

/* A network policy given on the command line: inline JSON (it starts with '{') or a file's
 * name ("-": standard input). NULL after printing why it cannot be used. */
static struct egress_policy *cli_policy_arg(const char *cmd, const char *arg)
{
    json_error_t jerr;
    const char *p = arg;
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    json_t *j = *p == '{'                ? json_loads(arg, 0, &jerr)
                : strcmp(arg, "-") == 0 ? json_loadf(stdin, 0, &jerr)
                                         : json_load_file(arg, 0, &jerr);
    if (j == NULL) {
        char where[32] = "";
        if (jerr.line > 0)
            snprintf(where, sizeof(where), " (line %d)", jerr.line);
        fprintf(stderr, "mcpbox sandbox %s: --network-policy %s: %s%s; give a JSON object like "
                        "{\"egress\":[{\"action\":\"allow\",\"target\":\"pypi.org\"}]} "
                        "or a file holding one\n",
                cmd, *p == '{' ? "(inline JSON)" : arg, jerr.text, where);
        return NULL;
    }
    struct mcp_error err;
    struct egress_policy *policy = egress_policy_parse(j, "network policy", &err);
    json_decref(j);
    if (policy == NULL)
        fprintf(stderr, "mcpbox sandbox %s: %s\n", cmd, err.msg);
    return policy;
}

static void create_usage(FILE *out)
{
    fputs(
        "Usage: mcpbox sandbox create [options]\n\n"
        "  --image NAME          root filesystem: host (default) or a registered image\n"
        "  --cpu N               CPUs (0.5 = half a core)\n"
        "  --memory SIZE         memory limit, e.g. 512M, 2G\n"
        "  --disk SIZE           writable space (workspace + /tmp)\n"
        "  --pids N              process limit\n"
        "  --network             allow egress to the public internet (default: loopback only)\n"
        "  --network-policy FILE|JSON  egress only as this policy allows, e.g.\n"
        "                        '{\"egress\":[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}'\n"
        "                        (docs/tools-design.md \"Network policy\"; - reads stdin)\n"
        "  --secret NAME         bind a secret of `mcpbox secret ls`: egress adds it to\n"
        "                        requests to its hosts (repeatable; docs/secrets.md)\n"
        "  --timeout SECONDS     lifetime (TTL); -1 = none\n"
        "  --idle-timeout SECONDS  destroy after this long without use; -1 = none\n"
        "  -e, --env KEY=VALUE   environment for every command (repeatable)\n"
        "  -l, --label KEY=VALUE metadata (repeatable)\n"
        "  --mount SRC:DST[:MODE]  host directory SRC at DST inside (under /workspace, /mnt,\n"
        "                        /srv, /opt, /home or /data); MODE ro, rw or copy-on-write\n"
        "                        (default: the sandbox writes to a private layer, the host\n"
        "                        is untouched); repeatable\n"
        "  -q, --quiet           print only the sandbox id (the default)\n"
        "  -o, --output FORMAT   id (default), or table or json as `get` prints\n",
        out);
}

/* --mount SRC:DST[:MODE]: SRC (resolved here: the person named it) is allowed for this create. */
static int parse_mount(struct cli_sandbox *c, struct cli_create_opts *o, const char *arg)
{
    char *copy = xstrdup(arg), *dst = strchr(copy, ':'), *mode = NULL;
    char *real = NULL;
    struct mcp_error err;
    int rc = CLI_EXIT_USAGE;
    if (dst) {
        *dst++ = '\0';
        if ((mode = strchr(dst, ':')) != NULL)
            *mode++ = '\0';
        real = copy[0] ? realpath(copy, NULL) : NULL;
    }
    if (real == NULL) {
        fprintf(stderr, "mcpbox sandbox create: --mount %s: %s\n", arg,
                dst ? "SRC is not an existing directory" : "expected SRC:DST[:MODE]");
    } else if (backends_allow_dir(c->be, real, &err) < 0) {
        fprintf(stderr, "mcpbox sandbox create: %s\n", err.msg);
    } else {
        json_array_append_new(o->mounts, json_pack("{s:s, s:s, s:s}", "source", real, "target",
                                                   dst, "mode", mode ? mode : "copy-on-write"));
        rc = -1;
    }
    free(real);
    free(copy);
    return rc;
}

/* -o id|table|json. Scripts write `id=$(mcpbox sandbox create)`, as with docker or podman: the
 * id is the default, the table only when asked for. */
static int create_output(struct cli_sandbox *c, struct cli_create_opts *o, const char *arg)
{
    if (strcmp(arg, "id") == 0) {
        o->table = c->json = false;
        return -1;
    }
    if (cli_parse_output(arg, &c->json) < 0)
        return CLI_EXIT_USAGE;
    o->table = !c->json;
    return -1;
}

/* Returns -1 to go on, else an exit code. */
static int create_opt(struct cli_sandbox *c, struct cli_create_opts *o, int opt, const char *arg)
{
    uint64_t size;
    int64_t ms;
    switch (opt) {
    case 'i': o->spec.image = arg; return -1;
    case 'c': o->spec.cpu = atof(arg); return o->spec.cpu > 0 ? -1 : CLI_EXIT_USAGE;
    case 'm': return cli_parse_size(arg, &size) == 0 ? (o->spec.memory_bytes = size, -1) : 2;
    case 'd': return cli_parse_size(arg, &size) == 0 ? (o->spec.disk_bytes = size, -1) : 2;
    case 'p': o->spec.pids = (uint32_t)strtoul(arg, NULL, 10); return -1;
    case 'n': o->spec.network = true; return -1;
    case 'P':
        egress_policy_unref(o->policy);
        o->policy = cli_policy_arg("create", arg);
        return o->policy != NULL ? -1 : CLI_EXIT_USAGE;
    case 't':
        return cli_parse_seconds(arg, &ms) == 0 ? (o->spec.timeout_seconds = ms / 1000, -1)
                                                 : CLI_EXIT_USAGE;
    case 'T':
        return cli_parse_seconds(arg, &ms) == 0 ? (o->spec.idle_timeout_seconds = ms / 1000, -1)
                                                 : CLI_EXIT_USAGE;
    case 'e': return cli_parse_kv(o->env, arg) == 0 ? -1 : CLI_EXIT_USAGE;
    case 'l': return cli_parse_kv(o->metadata, arg) == 0 ? -1 : CLI_EXIT_USAGE;
    case 'q': return create_output(c, o, "id");
    case 'M': return parse_mount(c, o, arg);
    case 'S':
        return json_array_append_new(o->secrets, json_string(arg)) == 0 ? -1 : 2;
    case 'o': return create_output(c, o, arg);
    case 'h': create_usage(stdout); return CLI_EXIT_OK;
    default: return CLI_EXIT_USAGE;
    }
}

static int create_parse(struct cli_sandbox *c, struct cli_create_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"image", required_argument, NULL, 'i'},
        {"cpu", required_argument, NULL, 'c'},
        {"memory", required_argument, NULL, 'm'},
        {"disk", required_argument, NULL, 'd'},
        {"pids", required_argument, NULL, 'p'},
        {"network", no_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'},
        {"idle-timeout", required_argument, NULL, 'T'},
        {"env", required_argument, NULL, 'e'},
        {"label", required_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},
        {"output", required_argument, NULL, 'o'},
        {"mount", required_argument, NULL, 'M'},
        {"network-policy", required_argument, NULL, 'P'},
        {"secret", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "e:l:qo:h", longopts, NULL)) != -1) {
        int rc = create_opt(c, o, opt, optarg);
        if (rc >= 0) {
            if (rc == CLI_EXIT_USAGE && opt != 'M' && opt != 'P') { /* they print why */
                fprintf(stderr, "mcpbox sandbox create: bad option value%s%s\n",
                        optarg ? ": " : "", optarg ? optarg : "");
                create_usage(stderr);
            }
            return rc;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mcpbox sandbox create: unexpected argument '%s'\n", argv[optind]);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

int cli_sandbox_create(struct cli_sandbox *c, int argc, char **argv)
{
    struct cli_create_opts o = {.env = json_object(),
                                .metadata = json_object(),
                                .mounts = json_array(),
                                .secrets = json_array()};
    int rc = create_parse(c, &o, argc, argv);
    o.spec.owner = c->owner;
    o.spec.env = o.env;
    o.spec.metadata = o.metadata;
    o.spec.mounts = o.mounts;
    o.spec.secrets = json_array_size(o.secrets) ? o.secrets : NULL;
    if (o.policy != NULL) { /* egress by the policy only, as create_sandbox does */
        o.spec.network = false;
        o.spec.network_policy = o.policy;
    }
    if (rc < 0) {
        cli_sandbox_op_reset(c);
        if (c->be->ops->create(c->be, &o.spec, cli_sandbox_op_cb, c, &c->err) < 0 ||
            cli_sandbox_wait(c) < 0)
            rc = cli_sandbox_fail("create", &c->err);
        else if (o.table || c->json)
            cli_print_info(c, c->result);
        else
            printf("%s\n", jstr(c->result, "sandbox_id"));
    }
    json_decref(o.env);
    json_decref(o.metadata);
    json_decref(o.mounts);
    json_decref(o.secrets);
    egress_policy_unref(o.policy);
    return rc < 0 ? CLI_EXIT_OK : rc;
}

/* ---- network-policy ------------------------------------------------------------------------ */

int cli_sandbox_network_policy(struct cli_sandbox *c, int argc, char **argv)
{
    static const char usage[] =
        "Usage: mcpbox sandbox network-policy ID [FILE|JSON] [-o table|json]\n"
        "  without FILE|JSON: print the sandbox's policy; with one: replace it (- reads stdin)\n";
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        if (opt == 'o' && cli_parse_output(optarg, &c->json) == 0)
            continue;
        fputs(usage, opt == 'h' ? stdout : stderr);
        return opt == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (argc - optind < 1 || argc - optind > 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *id = argv[optind];
    struct egress_policy *policy = NULL;
    if (argc - optind == 2 && (policy = cli_policy_arg("network-policy", argv[optind + 1])) == NULL)
        return CLI_EXIT_USAGE;
    cli_sandbox_op_reset(c);
    int r = policy ? c->be->ops->set_network_policy(c->be, id, policy, cli_sandbox_op_cb, c, &c->err)
                   : c->be->ops->get(c->be, id, cli_sandbox_op_cb, c, &c->err);
    egress_policy_unref(policy);
    if (r < 0 || cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("network-policy", &c->err);
    json_t *np = json_object_get(c->result, "network_policy");
    if (c->json || json_is_object(np))
        cli_print_json(np ? np : json_null());
    else
        printf("%s has no network policy (network: %s)\n", id,
               json_is_true(json_object_get(c->result, "network")) ? "every public address"
                                                                    : "loopback only");
    return CLI_EXIT_OK;
}

/* ---- ls / get ------------------------------------------------------------------------------- */

/* Parses only -o/-h (and --state for ls); returns -1 to go on, else an exit code. */
static int simple_opts(struct cli_sandbox *c, int argc, char **argv, const char *usage,
                       const char **state)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"state", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        if (opt == 'o' && cli_parse_output(optarg, &c->json) == 0)
            continue;
        if (opt == 's' && state != NULL) {
            *state = optarg;
            continue;
        }
        fprintf(opt == 'h' ? stdout : stderr, "%s", usage);
        return opt == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    return -1;
}

/* simple_opts, then exactly one operand, the sandbox id: returns -1 with *id set to go on, else
 * an exit code. */
static int one_id_opts(struct cli_sandbox *c, int argc, char **argv, const char *usage,
                       const char **id)
{
    int rc = simple_opts(c, argc, argv, usage, NULL);
    if (rc >= 0)
        return rc;
    if (optind + 1 != argc) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    *id = argv[optind];
    return -1;
}

/* Removes a flag of ours from argv (getopt sees the rest); true if it was there. */
static bool take_flag(int *argc, char **argv, const char *flag)
{
    for (int i = 1; i < *argc; i++)
        if (strcmp(argv[i], flag) == 0) {
            memmove(&argv[i], &argv[i + 1], (size_t)(*argc - i) * sizeof(char *));
            (*argc)--;
            return true;
        }
    return false;
}

/* --all: every owner's sandboxes (HTTP clients of other users on a server run by this one);
 * root only, since the others' sandboxes are theirs. */
static int all_owners_allowed(const char *cmd)
{
    if (geteuid() == 0)
        return 0;
    fprintf(stderr, "mcpbox sandbox %s --all: only root may act on every user's sandboxes; "
                    "without --all it acts on yours\n", cmd);
    return -1;
}

/* The sandboxes of owner (NULL: everyone's) into c->result. */
static int cli_list(struct cli_sandbox *c, const char *owner, const char *state)
{
    json_t *filter = state ? json_pack("{s:s}", "state", state) : json_object();
    cli_sandbox_op_reset(c);
    int r = c->be->ops->list(c->be, owner, filter, cli_sandbox_op_cb, c, &c->err);
    json_decref(filter);
    return r < 0 || cli_sandbox_wait(c) < 0 ? -1 : 0;
}

int cli_sandbox_ls(struct cli_sandbox *c, int argc, char **argv)
{
    const char *state = NULL;
    bool all = take_flag(&argc, argv, "--all");
    int rc = simple_opts(c, argc, argv,
                         "Usage: mcpbox sandbox ls [--all] [--state STATE] [-o table|json]\n"
                         "  Lists this user's sandboxes (owner local:uid:UID, as a stdio server "
                         "has,\n  and an HTTP server without a token gives this user's "
                         "clients).\n"
                         "  --all (root): every owner's, with an OWNER column.\n",
                         &state);
    if (rc >= 0)
        return rc;
    if (all && all_owners_allowed("ls") < 0)
        return CLI_EXIT_USAGE;
    if (cli_list(c, all ? NULL : c->owner, state) < 0)
        return cli_sandbox_fail("ls", &c->err);
    if (c->json)
        cli_print_json(c->result);
    else
        cli_print_infos_owned(json_object_get(c->result, "sandboxes"), all);
    return CLI_EXIT_OK;
}

int cli_sandbox_get(struct cli_sandbox *c, int argc, char **argv)
{
    const char *id;
    int rc = one_id_opts(c, argc, argv, "Usage: mcpbox sandbox get ID [-o table|json]\n", &id);
    if (rc >= 0)
        return rc;
    cli_sandbox_op_reset(c);
    if (c->be->ops->get(c->be, id, cli_sandbox_op_cb, c, &c->err) < 0 ||
        cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("get", &c->err);
    cli_print_info(c, c->result);
    return CLI_EXIT_OK;
}

/* ---- rm / pause / resume -------------------------------------------------------------------- */

static int cli_rm_one(struct cli_sandbox *c, const char *id)
{
    cli_sandbox_op_reset(c);
    if (c->be->ops->destroy(c->be, id, cli_sandbox_op_cb, c, &c->err) < 0 ||
        cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("rm", &c->err);
    if (c->json)
        cli_print_json(c->result);
    else
        printf("%s\n", id);
    return CLI_EXIT_OK;
}

/* rm --all: every owner's sandboxes (root). */
static int cli_rm_all(struct cli_sandbox *c)
{
    if (all_owners_allowed("rm") < 0)
        return CLI_EXIT_USAGE;
    if (cli_list(c, NULL, NULL) < 0)
        return cli_sandbox_fail("rm", &c->err);
    json_t *list = json_incref(json_object_get(c->result, "sandboxes"));
    int rc = CLI_EXIT_OK;
    size_t i;
    json_t *sb;
    json_array_foreach(list, i, sb) {
        int r = cli_rm_one(c, jstr(sb, "sandbox_id"));
        rc = rc == CLI_EXIT_OK ? r : rc;
    }
    json_decref(list);
    return rc;
}

int cli_sandbox_rm(struct cli_sandbox *c, int argc, char **argv)
{
    const char *usage = "Usage: mcpbox sandbox rm ID... [-o table|json]\n"
                        "       mcpbox sandbox rm --all   (root: every owner's sandboxes)\n";
    bool all = take_flag(&argc, argv, "--all");
    int rc = simple_opts(c, argc, argv, usage, NULL);
    if (rc >= 0)
        return rc;
    if (all != (optind >= argc)) { /* IDs, or --all alone */
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    if (all)
        return cli_rm_all(c);
    rc = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int r = cli_rm_one(c, argv[i]);
        rc = rc == CLI_EXIT_OK ? r : rc;
    }
    return rc;
}

int cli_sandbox_pause(struct cli_sandbox *c, int argc, char **argv)
{
    bool resume = strcmp(argv[0], "resume") == 0;
    const char *usage = resume ? "Usage: mcpbox sandbox resume ID [-o table|json]\n"
                               : "Usage: mcpbox sandbox pause ID [-o table|json]\n";
    const char *id;
    int rc = one_id_opts(c, argc, argv, usage, &id);
    if (rc >= 0)
        return rc;
    cli_sandbox_op_reset(c);
    int r = resume ? c->be->ops->resume(c->be, id, cli_sandbox_op_cb, c, &c->err)
                   : c->be->ops->pause(c->be, id, cli_sandbox_op_cb, c, &c->err);
    if (r < 0 || cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail(argv[0], &c->err);
    cli_print_info(c, c->result);
    return CLI_EXIT_OK;
}

/* ---- logs ----------------------------------------------------------------------------------- */

static void cli_print_events(const json_t *res)
{
    static const char *const header[] = {"TIME", "KIND", "DATA"};
    struct cli_table t;
    cli_table_init(&t, ARRAY_SIZE(header), header);
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(res, "events"), i, ev) {
        json_t *data = json_object_get(ev, "data");
        cleanup_free char *text =
            data && !json_is_null(data) ? json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        const char *row[] = {jstr(ev, "time"), jstr(ev, "kind"), text};
        cli_table_add(&t, row);
    }
    printf("sandbox %s (%s)\n", jstr(res, "sandbox_id"), jstr(res, "state"));
    cli_table_print(&t, stdout);
    cli_table_release(&t);
    const char *hint = json_string_value(json_object_get(res, "hint"));
    if (hint != NULL)
        printf("\n%s\n", hint);
}

/* The agent's recent commands (newest first), from diagnose "logs". */
static void cli_print_commands(const json_t *res)
{
    static const char *const header[] = {"COMMAND_ID", "STATUS", "EXIT", "COMMAND"};
    const json_t *cmds = json_object_get(res, "commands");
    if (!json_is_array(cmds))
        return;
    struct cli_table t;
    cli_table_init(&t, ARRAY_SIZE(header), header);
    size_t i;
    json_t *cmd;
    json_array_foreach(cmds, i, cmd) {
        char code[32] = "-";
        json_t *ec = json_object_get(cmd, "exit_code"), *sig = json_object_get(cmd, "signal");
        if (json_is_integer(ec))
            snprintf(code, sizeof code, "%" JSON_INTEGER_FORMAT, json_integer_value(ec));
        else if (json_is_integer(sig))
            snprintf(code, sizeof code, "signal %" JSON_INTEGER_FORMAT, json_integer_value(sig));
        const char *row[] = {jstr(cmd, "command_id"), jstr(cmd, "status"), code,
                             jstr(cmd, "command")};
        cli_table_add(&t, row);
    }
    printf("\ncommands (newest first; `mcpbox sandbox logs %s COMMAND_ID` shows one's output):\n",
           jstr(res, "sandbox_id"));
    cli_table_print(&t, stdout);
    cli_table_release(&t);
}

#define CLI_LOGS_CHUNK (64u * 1024u)
#define CLI_LOGS_POLL_US 250000

/* One command's output (stdout and stderr as they came) from the start; with follow, until the
 * command ends. */
static int cli_command_output(struct cli_sandbox *c, const char *id, const char *cmd, bool follow)
{
    uint64_t offset = 0;
    for (;;) {
        cli_sandbox_op_reset(c);
        if (c->be->ops->command_get(c->be, id, cmd, offset, CLI_LOGS_CHUNK, cli_sandbox_op_cb, c,
                                    &c->err) < 0 ||
            cli_sandbox_wait(c) < 0)
            return cli_sandbox_fail("logs", &c->err);
        json_t *out = json_object_get(c->result, "output");
        fwrite(json_string_value(out), 1, json_string_length(out), stdout);
        json_int_t next = json_integer_value(json_object_get(c->result, "next_offset"));
        bool eof = json_is_true(json_object_get(c->result, "eof"));
        const char *status = jstr(c->result, "status");
        offset = next > (json_int_t)offset ? (uint64_t)next : offset;
        if (!eof)
            continue; /* more is there already */
        if (!follow || strcmp(status, "running") != 0)
            break;
        fflush(stdout);
        usleep(CLI_LOGS_POLL_US);
    }
    fflush(stdout);
    return CLI_EXIT_OK;
}

int cli_sandbox_logs(struct cli_sandbox *c, int argc, char **argv)
{
    const char *usage =
        "Usage: mcpbox sandbox logs ID [--events] [-o table|json]\n"
        "       mcpbox sandbox logs ID COMMAND_ID [-f|--follow]\n"
        "  Without COMMAND_ID: the sandbox's events and its recent commands (ids, status, exit\n"
        "  code). With it: that command's output (stdout and stderr as they came); -f follows it\n"
        "  until the command ends.\n";
    bool events = take_flag(&argc, argv, "--events");
    bool follow = take_flag(&argc, argv, "-f");
    follow = take_flag(&argc, argv, "--follow") || follow;
    int rc = simple_opts(c, argc, argv, usage, NULL);
    if (rc >= 0)
        return rc;
    if (optind >= argc || argc - optind > 2 || (follow && argc - optind != 2)) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *id = argv[optind];
    if (argc - optind == 2)
        return cli_command_output(c, id, argv[optind + 1], follow);
    const char *what = events ? "events" : "logs";
    cli_sandbox_op_reset(c);
    if (c->be->ops->diagnose(c->be, id, what, cli_sandbox_op_cb, c, &c->err) < 0 ||
        cli_sandbox_wait(c) < 0)
        return cli_sandbox_fail("logs", &c->err);
    if (c->json) {
        cli_print_json(c->result);
    } else {
        cli_print_events(c->result);
        cli_print_commands(c->result);
    }
    return CLI_EXIT_OK;
}
