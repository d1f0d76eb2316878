/* `mcpbox image pull|ls|rm|prune`: the OCI image store of the local backend from the shell
 * (docs/images.md). Each invocation runs its own loop over the same store a server uses. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "cli/backends.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "lib/base/util.h"
#include "lib/store/store.h"

#define BAR_WIDTH 30

struct cli_image {
    uv_loop_t loop;
    struct store *store;
    struct backends_images *images;
    char *state_dir;
    bool json, tty, done;
    json_t *result;
    struct mcp_error err;
    const char *ref;
};

static void usage(FILE *out)
{
    fputs("Usage: mcpbox image [--state-dir DIR] [-o table|json] COMMAND [ARGS]\n\n"
          "OCI images of the local backend (create_sandbox {\"image\": \"python:3.12-slim\"}).\n\n"
          "Commands:\n"
          "  pull REF...   pull (again) from the registry, with a progress bar on a terminal\n"
          "  ls            list pulled images, sandbox snapshots and the store's usage\n"
          "  rm REF...     forget images (their layers go with the next prune or eviction)\n"
          "  prune         remove layers no image and no sandbox uses\n\n"
          "Exit status: 0 ok, 1 failed, 2 usage, 3 not found.\n",
          out);
}

static void progress(void *arg, uint64_t done, uint64_t total, const char *what)
{
    struct cli_image *c = arg;
    if (!c->tty || c->json)
        return;
    int fill = total ? (int)(done * BAR_WIDTH / total) : 0;
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    /* what is "layer i of n (digest, size): how far; all: ...": the layer's part fits a line */
    int len = (int)strcspn(what, ";");
    if (total)
        fprintf(stderr, "\r\033[K%s [%s] %3d%% %.*s", c->ref, bar, (int)(done * 100 / total),
                len < 70 ? len : 70, what);
    else
        fprintf(stderr, "\r\033[K%s %.70s", c->ref, what);
    fflush(stderr);
}

static void done_cb(void *arg, json_t *image, const struct mcp_error *err)
{
    struct cli_image *c = arg;
    c->done = true;
    if (err)
        mcp_error_copy(&c->err, err);
    else
        c->result = json_incref(image);
}

static int fail(const char *cmd, const struct mcp_error *err)
{
    fprintf(stderr, "mcpbox image %s: %s\n", cmd, err->msg);
    return cli_exit_for_error(err->code);
}

static int cmd_pull(struct cli_image *c, int argc, char **argv)
{
    int rc = CLI_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        c->ref = argv[i], c->done = false;
        json_decref(c->result);
        c->result = NULL;
        if (backends_images_pull(c->images, argv[i], progress, done_cb, c, &c->err) < 0)
            return fail("pull", &c->err);
        while (!c->done && uv_run(&c->loop, UV_RUN_ONCE) != 0) {
        }
        if (c->tty && !c->json)
            fputs("\n", stderr);
        if (!c->done || c->result == NULL) {
            rc = fail("pull", &c->err);
            continue;
        }
        if (c->json)
            cli_print_json(c->result);
        else
            printf("%s %s\n", json_string_value(json_object_get(c->result, "reference")),
                   json_string_value(json_object_get(c->result, "digest")));
    }
    return rc;
}

static const char *str_or_empty(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* Snapshots of sandboxes (issue 36) share the store: one row each, LAYERS "snapshot". */
static void add_snapshot_rows(struct cli_table *t, json_t *all)
{
    size_t i;
    json_t *snap;
    json_array_foreach(json_object_get(all, "snapshots"), i, snap)
    {
        char ref[96], digest[20], size[32];
        const char *name = str_or_empty(snap, "name");
        snprintf(ref, sizeof ref, "%s%s%s%s", str_or_empty(snap, "snapshot_id"),
                 name[0] ? " (" : "", name, name[0] ? ")" : "");
        snprintf(digest, sizeof digest, "%.19s", str_or_empty(snap, "layer"));
        snprintf(size, sizeof size, "%.1f MB",
                 (double)json_integer_value(json_object_get(snap, "size_bytes")) / 1e6);
        const char *row[] = {ref, digest, "snapshot", size, str_or_empty(snap, "created_at")};
        cli_table_add(t, row);
    }
}

static int cmd_ls(struct cli_image *c)
{
    json_t *all = backends_images_list(c->images), *img;
    if (c->json) {
        cli_print_json(all);
        json_decref(all);
        return CLI_EXIT_OK;
    }
    static const char *const head[] = {"REFERENCE", "DIGEST", "LAYERS", "SIZE", "PULLED"};
    struct cli_table t;
    cli_table_init(&t, 5, head);
    size_t i;
    json_array_foreach(json_object_get(all, "images"), i, img) {
        char digest[20], layers[16], size[32], pulled[32];
        snprintf(digest, sizeof digest, "%.19s", str_or_empty(img, "digest"));
        snprintf(layers, sizeof layers, "%zu", json_array_size(json_object_get(img, "layers")));
        snprintf(size, sizeof size, "%.1f MB",
                 (double)json_integer_value(json_object_get(img, "size")) / 1e6);
        format_rfc3339_ms(json_integer_value(json_object_get(img, "pulled_at_ms")), pulled);
        const char *row[] = {str_or_empty(img, "reference"), digest, layers, size, pulled};
        cli_table_add(&t, row);
    }
    add_snapshot_rows(&t, all);
    cli_table_print(&t, stdout);
    cli_table_release(&t);
    printf("store %s: %.1f MB unpacked of a %.1f MB cap\n",
           json_string_value(json_object_get(all, "store")),
           (double)json_integer_value(json_object_get(all, "store_bytes")) / 1e6,
           (double)json_integer_value(json_object_get(all, "cap_bytes")) / 1e6);
    json_decref(all);
    return CLI_EXIT_OK;
}

static int cmd_rm(struct cli_image *c, int argc, char **argv)
{
    int rc = CLI_EXIT_OK;
    for (int i = 1; i < argc; i++)
        if (backends_images_remove(c->images, argv[i], &c->err) < 0)
            rc = fail("rm", &c->err);
    return rc;
}

static int cmd_prune(struct cli_image *c)
{
    json_t *r = backends_images_prune(c->images, &c->err);
    if (r == NULL)
        return fail("prune", &c->err);
    if (c->json)
        cli_print_json(r);
    else
        printf("freed %.1f MB; the store holds %.1f MB\n",
               (double)json_integer_value(json_object_get(r, "freed_bytes")) / 1e6,
               (double)json_integer_value(json_object_get(r, "store_bytes")) / 1e6);
    json_decref(r);
    return CLI_EXIT_OK;
}

static int run(struct cli_image *c, int argc, char **argv)
{
    const char *cmd = argv[0];
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
    if (strcmp(cmd, "pull") == 0 || strcmp(cmd, "rm") == 0) {
        if (argc < 2) {
            fprintf(stderr, "mcpbox image %s: name at least one image reference\n", cmd);
            return CLI_EXIT_USAGE;
        }
        return cmd[0] == 'p' ? cmd_pull(c, argc, argv) : cmd_rm(c, argc, argv);
    }
    if (strcmp(cmd, "ls") == 0)
        return cmd_ls(c);
    if (strcmp(cmd, "prune") == 0)
        return cmd_prune(c);
    fprintf(stderr, "mcpbox image: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int cli_image_main(int argc, char **argv)
{
    struct cli_image c;
    memset(&c, 0, sizeof c);
    const char *state_flag = NULL;
    int rc, at = cli_parse_globals(argc, argv, &state_flag, &c.json, usage, &rc);
    if (at < 0)
        return rc;
    c.tty = isatty(STDERR_FILENO);
    c.state_dir = cli_state_dir(state_flag);
    uv_loop_init(&c.loop);
    c.store = store_open(c.state_dir, &c.err);
    if (c.store)
        c.images = backends_images_open(&c.loop, c.state_dir, c.store, &c.err);
    rc = c.images ? run(&c, argc - at, argv + at) : fail("open", &c.err);
    backends_images_close(c.images);
    uv_run(&c.loop, UV_RUN_NOWAIT);
    uv_walk(&c.loop, close_walk, NULL);
    uv_run(&c.loop, UV_RUN_DEFAULT);
    uv_loop_close(&c.loop);
    store_close(c.store);
    json_decref(c.result);
    free(c.state_dir);
    return rc;
}
