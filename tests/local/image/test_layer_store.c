/* The layer store's eviction: least recently used first, never a layer named in use, and none at
 * all when which layers are in use is unknown (in_use NULL: the state store could not be read;
 * before, that read as "none in use" and a prune or a full store removed layers of live
 * sandboxes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/local/image/layer_store.h"
#include "test.h"

static char state[64];
static struct layer_store store;

static const char *digest(int i)
{
    static char d[2][72];
    snprintf(d[i], sizeof d[i], "sha256:%064d", i + 1);
    return d[i];
}

/* Two layers of 100 bytes each, as a pull commits them. */
static void fill_store(void)
{
    struct mcp_error err;
    snprintf(state, sizeof state, "/tmp/mcpbox-layerstore-XXXXXX");
    ASSERT(mkdtemp(state) != NULL);
    ASSERT_EQ(layer_store_open(&store, state, NULL, &err), 0);
    for (int i = 0; i < 2; i++) {
        char tmp[LAYER_STORE_PATH_MAX + 100];
        struct unpack_result res = {.bytes = 100, .entries = 1};
        snprintf(res.diff_id, sizeof res.diff_id, "%s", digest(i));
        ASSERT_EQ(layer_store_begin(&store, digest(i), tmp, sizeof tmp, &err), 0);
        ASSERT_EQ(layer_store_commit(&store, digest(i), tmp, &res, &err), 0);
    }
    ASSERT_EQ(layer_store_usage(&store), 200);
}

static bool present(int i)
{
    char root[LAYER_STORE_PATH_MAX + 100];
    return layer_store_lookup(&store, digest(i), root, sizeof root);
}

static void empty_store(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s", state);
    layer_store_remove_tree(path);
}

TEST(unknown_in_use_evicts_nothing)
{
    struct mcp_error err;
    fill_store();
    store.cap_bytes = 0; /* as a prune does: make room for everything */
    ASSERT_EQ(layer_store_make_room(&store, 0, NULL, &err), -1);
    ASSERT(present(0) && present(1));
    ASSERT(strstr(err.msg, "the image store is full") != NULL);
    empty_store();
}

TEST(named_layers_are_kept_the_rest_evicted)
{
    struct mcp_error err;
    fill_store();
    store.cap_bytes = 0;
    json_t *in_use = json_pack("[s]", digest(1));
    ASSERT_EQ(layer_store_make_room(&store, 0, in_use, &err), -1); /* the kept one is over 0 */
    json_decref(in_use);
    ASSERT(!present(0) && present(1));
    in_use = json_array();
    ASSERT_EQ(layer_store_make_room(&store, 0, in_use, &err), 0);
    json_decref(in_use);
    ASSERT(!present(1));
    empty_store();
}

int main(void)
{
    RUN(unknown_in_use_evicts_nothing);
    RUN(named_layers_are_kept_the_rest_evicted);
    return test_done();
}
