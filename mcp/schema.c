/* JSON Schema validation (see schema.h). Recursive descent over schema keywords; the first
 * violation found is reported with the instance path. */
#include "mcp/schema.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/json_kind.h"
#include "lib/base/xalloc.h"
#include "mcp/limits.h"

#define SCHEMA_PATH_MAX 256
#define SCHEMA_ENUM_SHOWN 8

struct vctx {
    const json_t *root;
    char path[SCHEMA_PATH_MAX];
    size_t path_len;
    int depth;
    struct mcp_error *err;
};

static int fail(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct vctx *c, const char *fmt, ...)
{
    char msg[MCP_ERROR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->err)
        mcp_error_set(c->err, MCP_ERR_INVALID_PARAMS, 0, "%s: %s", c->path, msg);
    return -1;
}

/* A short rendering of a value for messages. */
static void render(const json_t *v, char *out, size_t size)
{
    cleanup_free char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    snprintf(out, size, "%s", s ? s : "?");
    if (s && strlen(s) >= size && size > 4)
        strcpy(out + size - 4, "...");
}

/* ---- path bookkeeping ------------------------------------------------------------------------- */

static size_t path_push_key(struct vctx *c, const char *key)
{
    size_t saved = c->path_len;
    int n = snprintf(c->path + saved, sizeof(c->path) - saved, ".%s", key);

    c->path_len = n < 0 ? saved : saved + (size_t)n;
    if (c->path_len >= sizeof(c->path))
        c->path_len = sizeof(c->path) - 1;
    return saved;
}

static size_t path_push_index(struct vctx *c, size_t i)
{
    char key[32];
    size_t saved = c->path_len;

    snprintf(key, sizeof(key), "[%zu]", i);
    int n = snprintf(c->path + saved, sizeof(c->path) - saved, "%s", key);
    c->path_len = n < 0 ? saved : saved + (size_t)n;
    if (c->path_len >= sizeof(c->path))
        c->path_len = sizeof(c->path) - 1;
    return saved;
}

static void path_pop(struct vctx *c, size_t saved)
{
    c->path_len = saved;
    c->path[saved] = '\0';
}

static int validate(struct vctx *c, const json_t *schema, const json_t *inst);

static int validate_child_key(struct vctx *c, const json_t *schema, const json_t *inst,
                              const char *key)
{
    size_t saved = path_push_key(c, key);
    int r = validate(c, schema, inst);

    path_pop(c, saved);
    return r;
}

static int validate_child_index(struct vctx *c, const json_t *schema, const json_t *inst,
                                size_t i)
{
    size_t saved = path_push_index(c, i);
    int r = validate(c, schema, inst);

    path_pop(c, saved);
    return r;
}

/* Runs validate without reporting (for anyOf/oneOf/not branches). */
static bool matches(struct vctx *c, const json_t *schema, const json_t *inst)
{
    struct mcp_error *saved = c->err;

    c->err = NULL;
    int r = validate(c, schema, inst);
    c->err = saved;
    return r == 0;
}

/* ---- $ref ----------------------------------------------------------------------------------- */

/* Keywords whose values are instances, not schemas (an "$anchor" inside them names nothing). */
static bool is_data_keyword(const char *key)
{
    return strcmp(key, "const") == 0 || strcmp(key, "enum") == 0 ||
           strcmp(key, "default") == 0 || strcmp(key, "examples") == 0;
}

/* The subschema of root (searched depth-first, at most MCP_SCHEMA_MAX_DEPTH levels down)
 * whose "$anchor" is name, or NULL. */
static const json_t *find_anchor(const json_t *node, const char *name, int depth)
{
    const json_t *v, *hit;
    const char *key;
    size_t i;

    if (depth > MCP_SCHEMA_MAX_DEPTH)
        return NULL;
    if (json_is_object(node)) {
        const char *anchor = json_string_value(json_object_get(node, "$anchor"));
        if (anchor && strcmp(anchor, name) == 0)
            return node;
        json_object_foreach((json_t *)node, key, v) {
            if (!is_data_keyword(key) && (hit = find_anchor(v, name, depth + 1)))
                return hit;
        }
    } else if (json_is_array(node)) {
        json_array_foreach(node, i, v) {
            if ((hit = find_anchor(v, name, depth + 1)))
                return hit;
        }
    }
    return NULL;
}

/* Resolves a local JSON pointer ("#", "#/$defs/address") or a plain-name fragment naming a
 * "$anchor" ("#addressDef") against the root schema. */
static const json_t *resolve_ref(const json_t *root, const char *ref)
{
    const json_t *cur = root;

    if (ref[0] != '#')
        return NULL;
    ref++;
    if (*ref != '\0' && *ref != '/')
        return find_anchor(root, ref, 0);
    while (*ref == '/') {
        ref++;
        size_t n = strcspn(ref, "/");
        cleanup_free char *tok = xmalloc(n + 1);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (ref[i] == '~' && i + 1 < n && (ref[i + 1] == '0' || ref[i + 1] == '1'))
                tok[k++] = ref[++i] == '0' ? '~' : '/';
            else
                tok[k++] = ref[i];
        }
        tok[k] = '\0';
        if (json_is_object(cur))
            cur = json_object_get(cur, tok);
        else if (json_is_array(cur))
            cur = json_array_get(cur, strtoul(tok, NULL, 10));
        else
            cur = NULL;
        if (!cur)
            return NULL;
        ref += n;
    }
    return *ref ? NULL : cur;
}

static int check_ref(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const char *ref = json_string_value(json_object_get(schema, "$ref"));

    if (!ref)
        return 0;
    const json_t *target = resolve_ref(c->root, ref);
    if (!target)
        return fail(c, "the schema's $ref \"%s\" cannot be resolved", ref);
    return validate(c, target, inst);
}

/* ---- type, enum, const ------------------------------------------------------------------------ */

static bool is_integral(const json_t *v)
{
    if (json_is_integer(v))
        return true;
    if (!json_is_real(v))
        return false;
    double d = json_real_value(v);
    return isfinite(d) && floor(d) == d;
}

static bool type_matches(const char *type, const json_t *v)
{
    if (strcmp(type, "integer") == 0)
        return is_integral(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    return strcmp(type, json_kind_name(v)) == 0;
}

static int check_type(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const json_t *type = json_object_get(schema, "type");
    size_t i;
    json_t *t;

    if (json_is_string(type)) {
        if (type_matches(json_string_value(type), inst))
            return 0;
        return fail(c, "must be %s %s, got %s", strchr("aeiou", json_string_value(type)[0])
                                                   ? "an" : "a",
                    json_string_value(type), json_kind_name(inst));
    }
    if (!json_is_array(type))
        return 0;
    json_array_foreach(type, i, t) {
        if (json_is_string(t) && type_matches(json_string_value(t), inst))
            return 0;
    }
    char allowed[128];
    render(type, allowed, sizeof(allowed));
    return fail(c, "must be one of the types %s, got %s", allowed, json_kind_name(inst));
}

static bool values_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

static int check_enum_const(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const json_t *en = json_object_get(schema, "enum");
    const json_t *cst = json_object_get(schema, "const");
    char got[96], want[256];
    size_t i;
    json_t *v;

    if (cst && !values_equal(cst, inst)) {
        render(cst, want, sizeof(want));
        render(inst, got, sizeof(got));
        return fail(c, "must be %s (got %s)", want, got);
    }
    if (!json_is_array(en))
        return 0;
    json_array_foreach(en, i, v) {
        if (values_equal(v, inst))
            return 0;
    }
    render(en, want, sizeof(want));
    render(inst, got, sizeof(got));
    return fail(c, "must be one of %s (got %s)", want, got);
}

/* ---- numbers and strings ---------------------------------------------------------------------- */

static int check_number(struct vctx *c, const json_t *schema, const json_t *inst)
{
    double v = json_number_value(inst);
    const json_t *k;

    if ((k = json_object_get(schema, "minimum")) && json_is_number(k) &&
        v < json_number_value(k))
        return fail(c, "must be >= %g (got %g)", json_number_value(k), v);
    if ((k = json_object_get(schema, "maximum")) && json_is_number(k) &&
        v > json_number_value(k))
        return fail(c, "must be <= %g (got %g)", json_number_value(k), v);
    if ((k = json_object_get(schema, "exclusiveMinimum")) && json_is_number(k) &&
        v <= json_number_value(k))
        return fail(c, "must be > %g (got %g)", json_number_value(k), v);
    if ((k = json_object_get(schema, "exclusiveMaximum")) && json_is_number(k) &&
        v >= json_number_value(k))
        return fail(c, "must be < %g (got %g)", json_number_value(k), v);
    if ((k = json_object_get(schema, "multipleOf")) && json_is_number(k) &&
        json_number_value(k) > 0) {
        double q = v / json_number_value(k);
        if (!isfinite(q) || fabs(q - nearbyint(q)) > 1e-9)
            return fail(c, "must be a multiple of %g (got %g)", json_number_value(k), v);
    }
    return 0;
}

/* Length in code points (JSON Schema counts characters, not bytes). */
static size_t utf8_length(const char *s, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            n++;
    }
    return n;
}

static int check_pattern(struct vctx *c, const char *pattern, const char *s)
{
    regex_t re;

    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
        return 0; /* an ECMA-only pattern POSIX cannot compile is not enforced */
    int r = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    if (r != 0)
        return fail(c, "must match the pattern %s", pattern);
    return 0;
}

static int check_string(struct vctx *c, const json_t *schema, const json_t *inst)
{
    size_t len = utf8_length(json_string_value(inst), json_string_length(inst));
    const json_t *k;

    if ((k = json_object_get(schema, "minLength")) && json_is_integer(k) &&
        (json_int_t)len < json_integer_value(k))
        return fail(c, "must be at least %" JSON_INTEGER_FORMAT " characters long (got %zu)",
                    json_integer_value(k), len);
    if ((k = json_object_get(schema, "maxLength")) && json_is_integer(k) &&
        (json_int_t)len > json_integer_value(k))
        return fail(c, "must be at most %" JSON_INTEGER_FORMAT " characters long (got %zu)",
                    json_integer_value(k), len);
    if ((k = json_object_get(schema, "pattern")) && json_is_string(k))
        return check_pattern(c, json_string_value(k), json_string_value(inst));
    return 0;
}

/* ---- arrays ------------------------------------------------------------------------------------ */

static int check_array_size(struct vctx *c, const json_t *schema, const json_t *inst)
{
    json_int_t n = (json_int_t)json_array_size(inst);
    const json_t *k;

    if ((k = json_object_get(schema, "minItems")) && json_is_integer(k) &&
        n < json_integer_value(k))
        return fail(c, "must have at least %" JSON_INTEGER_FORMAT " items (got %" JSON_INTEGER_FORMAT
                       ")", json_integer_value(k), n);
    if ((k = json_object_get(schema, "maxItems")) && json_is_integer(k) &&
        n > json_integer_value(k))
        return fail(c, "must have at most %" JSON_INTEGER_FORMAT " items (got %" JSON_INTEGER_FORMAT
                       ")", json_integer_value(k), n);
    if (json_is_true(json_object_get(schema, "uniqueItems"))) {
        for (size_t i = 0; i < (size_t)n; i++) {
            for (size_t j = i + 1; j < (size_t)n; j++) {
                if (values_equal(json_array_get(inst, i), json_array_get(inst, j)))
                    return fail(c, "items [%zu] and [%zu] are equal; items must be unique", i,
                                j);
            }
        }
    }
    return 0;
}

static int check_array(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const json_t *prefix = json_object_get(schema, "prefixItems");
    const json_t *items = json_object_get(schema, "items");
    size_t first = 0, i;
    json_t *v;

    if (check_array_size(c, schema, inst) < 0)
        return -1;
    if (json_is_array(prefix)) {
        first = json_array_size(prefix);
        for (i = 0; i < first && i < json_array_size(inst); i++) {
            if (validate_child_index(c, json_array_get(prefix, i), json_array_get(inst, i), i) < 0)
                return -1;
        }
    }
    if (!items || json_is_array(items))
        return 0;
    json_array_foreach(inst, i, v) {
        if (i >= first && validate_child_index(c, items, v, i) < 0)
            return -1;
    }
    return 0;
}

/* ---- objects ----------------------------------------------------------------------------------- */

static int check_required(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const json_t *req = json_object_get(schema, "required");
    size_t i;
    json_t *name;

    json_array_foreach(req, i, name) {
        if (json_is_string(name) && !json_object_get(inst, json_string_value(name)))
            return fail(c, "missing required property \"%s\"", json_string_value(name));
    }
    return 0;
}

static int check_object_size(struct vctx *c, const json_t *schema, const json_t *inst)
{
    json_int_t n = (json_int_t)json_object_size(inst);
    const json_t *k;

    if ((k = json_object_get(schema, "minProperties")) && json_is_integer(k) &&
        n < json_integer_value(k))
        return fail(c, "must have at least %" JSON_INTEGER_FORMAT " properties",
                    json_integer_value(k));
    if ((k = json_object_get(schema, "maxProperties")) && json_is_integer(k) &&
        n > json_integer_value(k))
        return fail(c, "must have at most %" JSON_INTEGER_FORMAT " properties",
                    json_integer_value(k));
    return 0;
}

static int check_object(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    const char *key;
    json_t *v;

    if (check_required(c, schema, inst) < 0 || check_object_size(c, schema, inst) < 0)
        return -1;
    json_object_foreach((json_t *)inst, key, v) {
        const json_t *sub = json_object_get(props, key);
        if (sub) {
            if (validate_child_key(c, sub, v, key) < 0)
                return -1;
        } else if (json_is_false(extra)) {
            return fail(c, "unknown property \"%s\" (allowed: %s)", key,
                        props && json_object_size(props) ? "see the tool's inputSchema"
                                                         : "none");
        } else if (json_is_object(extra) && validate_child_key(c, extra, v, key) < 0) {
            return -1;
        }
    }
    return 0;
}

/* ---- combinators ------------------------------------------------------------------------------- */

static int check_combinators(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const json_t *k;
    size_t i, hits = 0;
    json_t *sub;

    json_array_foreach(json_object_get(schema, "allOf"), i, sub) {
        if (validate(c, sub, inst) < 0)
            return -1;
    }
    if ((k = json_object_get(schema, "anyOf")) && json_is_array(k)) {
        json_array_foreach(k, i, sub) {
            if (matches(c, sub, inst))
                break;
        }
        if (i == json_array_size(k))
            return fail(c, "does not match any of the allowed forms (anyOf)");
    }
    if ((k = json_object_get(schema, "oneOf")) && json_is_array(k)) {
        json_array_foreach(k, i, sub)
            hits += matches(c, sub, inst);
        if (hits != 1)
            return fail(c, "must match exactly one of the allowed forms (oneOf), matches %zu",
                        hits);
    }
    if ((k = json_object_get(schema, "not")) && matches(c, k, inst))
        return fail(c, "matches a form that is not allowed (not)");
    return 0;
}

/* if/then/else: the instance must match "then" when it matches "if", else "else" (an absent
 * branch allows anything; "then"/"else" without "if" mean nothing). */
static int check_conditional(struct vctx *c, const json_t *schema, const json_t *inst)
{
    const json_t *cond = json_object_get(schema, "if");

    if (!cond)
        return 0;
    const json_t *branch = json_object_get(schema, matches(c, cond, inst) ? "then" : "else");
    return branch ? validate(c, branch, inst) : 0;
}

static int validate(struct vctx *c, const json_t *schema, const json_t *inst)
{
    if (json_is_true(schema))
        return 0;
    if (json_is_false(schema))
        return fail(c, "is not allowed");
    if (!json_is_object(schema))
        return 0; /* not a schema: nothing to enforce */
    if (++c->depth > MCP_SCHEMA_MAX_DEPTH) {
        c->depth--;
        return fail(c, "is nested too deeply (or the schema's $refs loop)");
    }
    int r = -1;
    if (check_ref(c, schema, inst) < 0 || check_type(c, schema, inst) < 0 ||
        check_enum_const(c, schema, inst) < 0)
        goto out;
    if (json_is_number(inst) && check_number(c, schema, inst) < 0)
        goto out;
    if (json_is_string(inst) && check_string(c, schema, inst) < 0)
        goto out;
    if (json_is_array(inst) && check_array(c, schema, inst) < 0)
        goto out;
    if (json_is_object(inst) && check_object(c, schema, inst) < 0)
        goto out;
    if (check_combinators(c, schema, inst) < 0)
        goto out;
    r = check_conditional(c, schema, inst);
out:
    c->depth--;
    return r;
}

int schema_validate(const json_t *schema, const json_t *instance, const char *root_name,
                    struct mcp_error *err)
{
    struct vctx c = {.root = schema, .err = err};

    snprintf(c.path, sizeof(c.path), "%s", root_name ? root_name : "value");
    c.path_len = strlen(c.path);
    return validate(&c, schema, instance);
}
