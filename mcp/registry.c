/* The registry of tools, resources, templates, prompts and completions (see registry.h). */
#define LOG_MODULE "registry"
#include "mcp/registry.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "mcp/embedded_schemas.h"

#define TOOL_NAME_MAX 128

struct resource_entry {
    json_t *def; /* owned */
    const char *key; /* borrowed from def: uri or uriTemplate */
    resource_read_fn *fn;
    void *arg;
};

struct prompt_entry {
    json_t *def; /* owned */
    const char *name;
    prompt_get_fn *fn;
    void *arg;
};

struct completion_entry {
    char *ref_type; /* owned */
    char *ref_name; /* owned, or NULL for any */
    completion_fn *fn;
    void *arg;
};

/* A growable array of fixed-size entries. */
struct vec {
    void *items;
    size_t n, cap, size;
};

struct registry {
    struct vec tools;     /* struct registry_tool, kept sorted by name */
    struct vec resources; /* struct resource_entry */
    struct vec templates; /* struct resource_entry */
    struct vec prompts;   /* struct prompt_entry */
    struct vec completions;
    registry_change_fn *on_change;
    void *on_change_arg;
};

static void *vec_push(struct vec *v)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 8;
        v->items = xrealloc(v->items, v->cap * v->size);
    }
    void *slot = (char *)v->items + v->n * v->size;
    memset(slot, 0, v->size);
    v->n++;
    return slot;
}

static void *vec_at(const struct vec *v, size_t i)
{
    return (char *)v->items + i * v->size;
}

static void vec_remove(struct vec *v, size_t i)
{
    memmove(vec_at(v, i), vec_at(v, i + 1), (v->n - i - 1) * v->size);
    v->n--;
}

static void changed(struct registry *reg, const char *what)
{
    if (reg->on_change)
        reg->on_change(reg->on_change_arg, what);
}

struct registry *registry_new(registry_change_fn *on_change, void *arg)
{
    struct registry *reg = xcalloc(1, sizeof(*reg));

    reg->tools.size = sizeof(struct registry_tool);
    reg->resources.size = sizeof(struct resource_entry);
    reg->templates.size = sizeof(struct resource_entry);
    reg->prompts.size = sizeof(struct prompt_entry);
    reg->completions.size = sizeof(struct completion_entry);
    reg->on_change = on_change;
    reg->on_change_arg = arg;
    return reg;
}

void registry_free(struct registry *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->tools.n; i++)
        json_decref(((struct registry_tool *)vec_at(&reg->tools, i))->def);
    for (size_t i = 0; i < reg->resources.n; i++)
        json_decref(((struct resource_entry *)vec_at(&reg->resources, i))->def);
    for (size_t i = 0; i < reg->templates.n; i++)
        json_decref(((struct resource_entry *)vec_at(&reg->templates, i))->def);
    for (size_t i = 0; i < reg->prompts.n; i++)
        json_decref(((struct prompt_entry *)vec_at(&reg->prompts, i))->def);
    for (size_t i = 0; i < reg->completions.n; i++) {
        struct completion_entry *c = vec_at(&reg->completions, i);
        free(c->ref_type);
        free(c->ref_name);
    }
    free(reg->tools.items);
    free(reg->resources.items);
    free(reg->templates.items);
    free(reg->prompts.items);
    free(reg->completions.items);
    free(reg);
}

/* ---- tools ------------------------------------------------------------------------------- */

static bool tool_name_is_valid(const char *name)
{
    size_t len = strlen(name);

    if (len == 0 || len > TOOL_NAME_MAX)
        return false;
    return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == len;
}

static int check_tool_def(json_t *def, struct mcp_error *err)
{
    const char *name = json_string_value(json_object_get(def, "name"));
    const char *desc = json_string_value(json_object_get(def, "description"));
    json_t *out = json_object_get(def, "outputSchema");

    if (!json_is_object(def) || !name || !tool_name_is_valid(name))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "tool definition needs a \"name\" of 1-%d characters [A-Za-z0-9_.-]",
                             TOOL_NAME_MAX);
    if (!desc || !*desc)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "tool %s needs a non-empty description",
                             name);
    if (!json_is_object(json_object_get(def, "inputSchema")))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "tool %s: inputSchema must be an object",
                             name);
    if (out && !json_is_object(out))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "tool %s: outputSchema must be an object",
                             name);
    return 0;
}

/* Index of the first tool whose name is >= name (binary search over the sorted array). */
static size_t tool_lower_bound(const struct registry *reg, const char *name)
{
    size_t lo = 0, hi = reg->tools.n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct registry_tool *t = vec_at(&reg->tools, mid);
        if (strcmp(t->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int registry_add_tool(struct registry *reg, json_t *def, tool_handler_fn *handler,
                      struct mcp_error *err)
{
    if (check_tool_def(def, err) < 0)
        return -1;
    const char *name = json_string_value(json_object_get(def, "name"));
    if (registry_find_tool(reg, name))
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "tool %s is already registered", name);
    size_t at = tool_lower_bound(reg, name);
    vec_push(&reg->tools);
    memmove(vec_at(&reg->tools, at + 1), vec_at(&reg->tools, at),
            (reg->tools.n - at - 1) * reg->tools.size);
    struct registry_tool *t = vec_at(&reg->tools, at);
    t->def = json_incref(def);
    t->name = name;
    t->input_schema = json_object_get(def, "inputSchema");
    t->output_schema = json_object_get(def, "outputSchema");
    t->handler = handler;
    t->needs_sandboxes = false;
    changed(reg, "tools");
    return 0;
}

int registry_remove_tool(struct registry *reg, const char *name)
{
    size_t at = tool_lower_bound(reg, name);
    struct registry_tool *t = at < reg->tools.n ? vec_at(&reg->tools, at) : NULL;

    if (!t || strcmp(t->name, name) != 0)
        return -1;
    json_decref(t->def);
    vec_remove(&reg->tools, at);
    changed(reg, "tools");
    return 0;
}

const struct registry_tool *registry_find_tool(const struct registry *reg, const char *name)
{
    size_t at = tool_lower_bound(reg, name);
    const struct registry_tool *t = at < reg->tools.n ? vec_at(&reg->tools, at) : NULL;

    return t && strcmp(t->name, name) == 0 ? t : NULL;
}

size_t registry_tool_count(const struct registry *reg)
{
    return reg->tools.n;
}

json_t *registry_tools_json(const struct registry *reg)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < reg->tools.n; i++) {
        const struct registry_tool *t = vec_at(&reg->tools, i);
        json_array_append(arr, t->def);
    }
    return arr;
}

/* The file at path in table (ended by a NULL path), or NULL. */
static const struct embedded_schema *schema_find(const struct embedded_schema *table,
                                                 const char *path)
{
    for (; table->path != NULL; table++) {
        if (strcmp(table->path, path) == 0)
            return table;
    }
    return NULL;
}

const struct embedded_schema *embedded_schema_find(const char *path)
{
    return schema_find(embedded_schemas, path);
}

static json_t *load_embedded(const struct embedded_schema *table, const char *dir, const char *name,
                             struct mcp_error *err)
{
    cleanup_free char *path = xasprintf("%s/%s.json", dir, name);
    const struct embedded_schema *es = schema_find(table, path);
    json_error_t jerr;

    if (!es) {
        mcp_error_set(err, MCP_ERR_INVALID, 0, "no schema file schemas/%s for tool %s", path,
                      name);
        return NULL;
    }
    json_t *def = json_loadb(es->data, es->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!def)
        mcp_error_set(err, MCP_ERR_INVALID, 0, "schemas/%s: %s (line %d)", path, jerr.text,
                      jerr.line);
    return def;
}

static bool has_handler(const struct tool_def *defs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(defs[i].name, name) == 0)
            return true;
    }
    return false;
}

/* Logs schema files in dir that no handler claims (a tool without code is not served). */
static void warn_orphan_schemas(const struct embedded_schema *table, const char *dir,
                                const struct tool_def *defs, size_t n)
{
    size_t dlen = strlen(dir);

    for (; table->path != NULL; table++) {
        const char *path = table->path;
        if (strncmp(path, dir, dlen) != 0 || path[dlen] != '/')
            continue;
        cleanup_free char *name = xstrdup(path + dlen + 1);
        char *dot = strrchr(name, '.');
        if (dot)
            *dot = '\0';
        if (!has_handler(defs, n, name))
            log_warn("schemas/%s has no handler; tool %s is not served", path, name);
    }
}

int registry_load_tools(struct registry *reg, const char *dir, const struct tool_def *defs,
                        size_t n, struct mcp_error *err)
{
    return registry_load_tools_from(reg, embedded_schemas, dir, defs, n, err);
}

int registry_load_tools_from(struct registry *reg, const struct embedded_schema *table,
                             const char *dir, const struct tool_def *defs, size_t n,
                             struct mcp_error *err)
{
    for (size_t i = 0; i < n; i++) {
        json_auto_t *def = load_embedded(table, dir, defs[i].name, err);
        if (!def)
            return -1;
        const char *name = json_string_value(json_object_get(def, "name"));
        if (!name || strcmp(name, defs[i].name) != 0)
            return mcp_error_set(err, MCP_ERR_INVALID, 0,
                                 "schemas/%s/%s.json: \"name\" must be \"%s\"", dir,
                                 defs[i].name, defs[i].name);
        if (registry_add_tool(reg, def, defs[i].handler, err) < 0)
            return mcp_error_prefix(err, "schemas/%s/%s.json", dir, defs[i].name);
        struct registry_tool *t = vec_at(&reg->tools, tool_lower_bound(reg, name));
        t->needs_sandboxes = strcmp(dir, "tools") == 0;
    }
    warn_orphan_schemas(table, dir, defs, n);
    return 0;
}

/* ---- resources and templates -------------------------------------------------------------- */

static struct resource_entry *find_entry(const struct vec *v, const char *key, size_t *at)
{
    for (size_t i = 0; i < v->n; i++) {
        struct resource_entry *e = vec_at(v, i);
        if (strcmp(e->key, key) == 0) {
            if (at)
                *at = i;
            return e;
        }
    }
    return NULL;
}

static int add_resource_entry(struct registry *reg, struct vec *v, json_t *def, const char *keyf,
                              resource_read_fn *fn, void *arg, struct mcp_error *err)
{
    const char *key = json_string_value(json_object_get(def, keyf));
    const char *name = json_string_value(json_object_get(def, "name"));

    if (!json_is_object(def) || !key || !*key || !name || !*name)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "a resource definition needs a \"%s\" and a \"name\"", keyf);
    if (find_entry(v, key, NULL))
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "resource %s is already registered", key);
    struct resource_entry *e = vec_push(v);
    e->def = json_incref(def);
    e->key = key;
    e->fn = fn;
    e->arg = arg;
    changed(reg, "resources");
    return 0;
}

int registry_add_resource(struct registry *reg, json_t *def, resource_read_fn *fn, void *arg,
                          struct mcp_error *err)
{
    return add_resource_entry(reg, &reg->resources, def, "uri", fn, arg, err);
}

int registry_add_resource_template(struct registry *reg, json_t *def, resource_read_fn *fn,
                                   void *arg, struct mcp_error *err)
{
    return add_resource_entry(reg, &reg->templates, def, "uriTemplate", fn, arg, err);
}

int registry_remove_resource(struct registry *reg, const char *uri)
{
    size_t at;
    struct resource_entry *e = find_entry(&reg->resources, uri, &at);

    if (!e)
        return -1;
    json_decref(e->def);
    vec_remove(&reg->resources, at);
    changed(reg, "resources");
    return 0;
}

static json_t *defs_json(const struct vec *v)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < v->n; i++)
        json_array_append(arr, ((struct resource_entry *)vec_at(v, i))->def);
    return arr;
}

json_t *registry_resources_json(const struct registry *reg)
{
    return defs_json(&reg->resources);
}

json_t *registry_templates_json(const struct registry *reg)
{
    return defs_json(&reg->templates);
}

/* Matches one "{name}" or "{+name}" expression at *t against uri at *u; advances both. */
static bool match_expr(const char **t, const char **u, json_t *vars)
{
    const char *close = strchr(*t, '}');
    bool reserved = (*t)[1] == '+';

    if (!close)
        return false;
    const char *name = *t + (reserved ? 2 : 1);
    char stop = close[1]; /* the literal that ends the value ('\0' = end of uri) */
    const char *end = *u;
    while (*end && *end != stop && (reserved || *end != '/'))
        end++;
    if (reserved && stop) {
        const char *last = strrchr(*u, stop); /* let {+var} swallow '/' greedily */
        if (last && last >= end)
            end = last;
    }
    if (end == *u)
        return false;
    char *var = xstrndup(name, (size_t)(close - name));
    json_object_set_new(vars, var, json_stringn(*u, (size_t)(end - *u)));
    free(var);
    *t = close + 1;
    *u = end;
    return true;
}

bool registry_template_match(const char *tmpl, const char *uri, json_t *vars)
{
    const char *t = tmpl, *u = uri;

    while (*t) {
        if (*t == '{') {
            if (!match_expr(&t, &u, vars))
                return false;
        } else if (*t++ != *u++) {
            return false;
        }
    }
    return *u == '\0';
}

bool registry_match_resource(const struct registry *reg, const char *uri,
                             struct registry_resource_match *out)
{
    struct resource_entry *e = find_entry(&reg->resources, uri, NULL);

    out->vars = json_object();
    if (e) {
        out->fn = e->fn;
        out->arg = e->arg;
        return true;
    }
    for (size_t i = 0; i < reg->templates.n; i++) {
        e = vec_at(&reg->templates, i);
        json_object_clear(out->vars);
        if (registry_template_match(e->key, uri, out->vars)) {
            out->fn = e->fn;
            out->arg = e->arg;
            return true;
        }
    }
    json_decref(out->vars);
    out->vars = NULL;
    return false;
}

/* ---- prompts ------------------------------------------------------------------------------- */

int registry_add_prompt(struct registry *reg, json_t *def, prompt_get_fn *fn, void *arg,
                        struct mcp_error *err)
{
    const char *name = json_string_value(json_object_get(def, "name"));
    json_t *args = json_object_get(def, "arguments");

    if (!json_is_object(def) || !name || !*name)
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "a prompt definition needs a \"name\"");
    if (args && !json_is_array(args))
        return mcp_error_set(err, MCP_ERR_INVALID, 0, "prompt %s: arguments must be an array",
                             name);
    if (registry_find_prompt(reg, name, NULL, NULL))
        return mcp_error_set(err, MCP_ERR_CONFLICT, 0, "prompt %s is already registered", name);
    struct prompt_entry *p = vec_push(&reg->prompts);
    p->def = json_incref(def);
    p->name = name;
    p->fn = fn;
    p->arg = arg;
    changed(reg, "prompts");
    return 0;
}

int registry_remove_prompt(struct registry *reg, const char *name)
{
    for (size_t i = 0; i < reg->prompts.n; i++) {
        struct prompt_entry *p = vec_at(&reg->prompts, i);
        if (strcmp(p->name, name) == 0) {
            json_decref(p->def);
            vec_remove(&reg->prompts, i);
            changed(reg, "prompts");
            return 0;
        }
    }
    return -1;
}

json_t *registry_prompts_json(const struct registry *reg)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < reg->prompts.n; i++)
        json_array_append(arr, ((struct prompt_entry *)vec_at(&reg->prompts, i))->def);
    return arr;
}

json_t *registry_find_prompt(const struct registry *reg, const char *name, prompt_get_fn **fn,
                             void **arg)
{
    for (size_t i = 0; i < reg->prompts.n; i++) {
        struct prompt_entry *p = vec_at(&reg->prompts, i);
        if (strcmp(p->name, name) == 0) {
            if (fn)
                *fn = p->fn;
            if (arg)
                *arg = p->arg;
            return p->def;
        }
    }
    return NULL;
}

/* ---- completions ---------------------------------------------------------------------------- */

int registry_add_completion(struct registry *reg, const char *ref_type, const char *ref_name,
                            completion_fn *fn, void *arg, struct mcp_error *err)
{
    if (!ref_type || (strcmp(ref_type, "ref/prompt") != 0 && strcmp(ref_type, "ref/resource")))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "completion ref type must be \"ref/prompt\" or \"ref/resource\"");
    struct completion_entry *c = vec_push(&reg->completions);
    c->ref_type = xstrdup(ref_type);
    c->ref_name = ref_name ? xstrdup(ref_name) : NULL;
    c->fn = fn;
    c->arg = arg;
    return 0;
}

bool registry_find_completion(const struct registry *reg, const char *ref_type,
                              const char *ref_name, completion_fn **fn, void **arg)
{
    const struct completion_entry *wild = NULL;

    for (size_t i = 0; i < reg->completions.n; i++) {
        const struct completion_entry *c = vec_at(&reg->completions, i);
        if (strcmp(c->ref_type, ref_type) != 0)
            continue;
        if (!c->ref_name && !wild)
            wild = c;
        if (c->ref_name && ref_name && strcmp(c->ref_name, ref_name) == 0) {
            wild = c;
            break;
        }
    }
    if (!wild)
        return false;
    *fn = wild->fn;
    *arg = wild->arg;
    return true;
}
