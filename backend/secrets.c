/* The person's secret definitions (secrets.h): the file beside the state, checks, values. */
#include "backend/secrets.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/egress_policy.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

bool secret_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > SECRET_NAME_MAX || !isalpha((unsigned char)name[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return false;
    return true;
}

void secret_placeholder(const char *name, char out[SECRET_PLACEHOLDER_MAX])
{
    size_t k = strlen(SECRET_PLACEHOLDER_PREFIX);
    memcpy(out, SECRET_PLACEHOLDER_PREFIX, k);
    for (size_t i = 0; name[i] && i < SECRET_NAME_MAX; i++)
        out[k++] = (char)toupper((unsigned char)name[i]);
    out[k] = '\0';
}

static void secrets_path(const char *state_dir, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", state_dir, SECRETS_FILE);
}

/* Refuses a file others could read or replace: the values (from --from-env) are in it. */
static int check_private(int fd, const char *path, struct mcp_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "reading %s", path);
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
        return mcp_error_set(err, MCP_ERR_IO, 0,
                             "%s must be a regular file of yours with mode 0600 (it holds "
                             "secrets); fix it with chmod 600, or remove it and add the secrets "
                             "again with `mcpbox secret add`",
                             path);
    return 0;
}

void secrets_no_core_dumps(void)
{
    static atomic_bool done;
    if (atomic_exchange(&done, true))
        return;
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) < 0)
        log_warn("could not turn core dumps off (%s): a crash could write secrets to disk",
                 strerror(errno));
}

json_t *secrets_load(const char *state_dir, struct mcp_error *err)
{
    char path[4096];
    secrets_path(state_dir, path, sizeof path);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return json_object();
    if (fd < 0) {
        mcp_error_set(err, MCP_ERR_IO, errno, "opening %s", path);
        return NULL;
    }
    if (check_private(fd, path, err) < 0)
        return NULL;
    json_error_t je;
    json_t *all = json_loadfd(fd, 0, &je);
    json_t *defs = json_object_get(all, "secrets");
    if (!json_is_object(defs)) {
        json_decref(all);
        mcp_error_set(err, MCP_ERR_IO, 0,
                      "%s is not a secrets file (%s); remove it and add the "
                      "secrets again with `mcpbox secret add`",
                      path, je.text);
        return NULL;
    }
    if (json_object_size(defs) > 0) /* values (--from-env) are in this process's memory now */
        secrets_no_core_dumps();
    json_incref(defs);
    json_decref(all);
    return defs;
}

int secrets_save(const char *state_dir, const json_t *defs, struct mcp_error *err)
{
    char path[4096], tmp[4200];
    secrets_path(state_dir, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "writing %s", tmp);
    json_t *all = json_pack("{s:i, s:O}", "version", 1, "secrets", (json_t *)defs);
    int rc = json_dumpfd(all, fd, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(all);
    if (rc < 0 || fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return mcp_error_set(err, MCP_ERR_IO, e, "writing %s", path);
    }
    return 0;
}

/* ---- checks -------------------------------------------------------------------------------- */

static int check_host(const char *name, const json_t *h, struct mcp_error *err)
{
    const char *s = json_string_value(h);
    char norm[EGRESS_NAME_MAX + 1];
    if (s && strncmp(s, "*.", 2) == 0)
        s += 2;
    if (s == NULL || !egress_name_normalize(s, norm) || strchr(s, '*') != NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "secret %s: each host must be a domain name (api.github.com) or a "
                             "wildcard (*.example.com), without scheme, path or port",
                             name);
    return 0;
}

static int check_header(const char *name, const json_t *def, struct mcp_error *err)
{
    const json_t *h = json_object_get(def, "header");
    const char *s = json_string_value(h);
    if (h == NULL)
        return 0;
    const char *colon = s ? strchr(s, ':') : NULL;
    bool ok = colon && colon > s && strstr(s, "{}") != NULL && strpbrk(s, "\r\n") == NULL;
    for (const char *p = s; ok && p < colon; p++)
        ok = isalnum((unsigned char)*p) || *p == '-' || *p == '_';
    if (!ok)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "secret %s: the header must read \"Name: template\" with {} where "
                             "the value goes, e.g. \"Authorization: Bearer {}\"",
                             name);
    return 0;
}

static int check_from(const char *name, const json_t *def, struct mcp_error *err)
{
    const json_t *from = json_object_get(def, "from");
    int kinds = json_is_string(json_object_get(from, "value")) +
                json_is_string(json_object_get(from, "file")) +
                json_is_string(json_object_get(from, "command"));
    if (kinds != 1)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "secret %s needs exactly one source: --from-env VAR, --from-file "
                             "FILE or --from-command CMD",
                             name);
    return 0;
}

int secret_def_check(const char *name, const json_t *def, struct mcp_error *err)
{
    if (!secret_name_ok(name))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "a secret's name is letters, digits and '_' (at most %d), starting "
                             "with a letter: e.g. github or NPM_TOKEN",
                             SECRET_NAME_MAX);
    const json_t *hosts = json_object_get(def, "hosts");
    size_t n = json_array_size(hosts);
    if (n == 0 || n > SECRET_HOSTS_MAX)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "secret %s needs 1 to %d hosts it may be sent to (--host "
                             "api.example.com)",
                             name, SECRET_HOSTS_MAX);
    for (size_t i = 0; i < n; i++)
        if (check_host(name, json_array_get(hosts, i), err) < 0)
            return -1;
    if (!json_object_get(def, "header") && !json_is_true(json_object_get(def, "placeholder")))
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "secret %s has neither a header nor a placeholder: give --header or "
                             "--placeholder",
                             name);
    return check_header(name, def, err) < 0 ? -1 : check_from(name, def, err);
}

bool secret_host_matches(const json_t *def, const char *host)
{
    size_t i, hl = strlen(host);
    const json_t *h;
    json_array_foreach(json_object_get(def, "hosts"), i, h)
    {
        const char *s = json_string_value(h);
        char norm[EGRESS_NAME_MAX + 1];
        bool wild = s && strncmp(s, "*.", 2) == 0;
        if (s == NULL || !egress_name_normalize(wild ? s + 2 : s, norm))
            continue;
        size_t nl = strlen(norm);
        if (!wild && strcmp(norm, host) == 0)
            return true;
        if (wild && hl > nl + 1 && host[hl - nl - 1] == '.' && strcmp(host + hl - nl, norm) == 0)
            return true;
    }
    return false;
}

/* ---- values -------------------------------------------------------------------------------- */

static char *read_fd_bounded(int fd, size_t *len)
{
    char *buf = xmalloc(SECRET_VALUE_MAX + 2);
    size_t n = 0;
    ssize_t r;
    while (n <= SECRET_VALUE_MAX && (r = read(fd, buf + n, SECRET_VALUE_MAX + 1 - n)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The command's stdout (stderr goes to ours; never the value). */
static char *run_command(const char *cmd, size_t *len, int *status)
{
    FILE *p = popen(cmd, "re");
    if (p == NULL)
        return NULL;
    char *out = read_fd_bounded(fileno(p), len);
    *status = pclose(p);
    return out;
}

static char *value_raw(const char *name, const json_t *from, size_t *len, struct mcp_error *err)
{
    const char *v = json_string_value(json_object_get(from, "value"));
    const char *file = json_string_value(json_object_get(from, "file"));
    const char *cmd = json_string_value(json_object_get(from, "command"));
    if (v != NULL) {
        *len = strlen(v);
        return xstrdup(v);
    }
    if (file != NULL) {
        cleanup_close int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            mcp_error_set(err, MCP_ERR_IO, errno, "secret %s: reading %s", name, file);
            return NULL;
        }
        return read_fd_bounded(fd, len);
    }
    int status = -1;
    char *out = cmd ? run_command(cmd, len, &status) : NULL;
    if (out == NULL || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(out);
        mcp_error_set(err, MCP_ERR_IO, 0,
                      "secret %s: its command failed (exit status %d); run it yourself to see why",
                      name, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return NULL;
    }
    return out;
}

char *secret_value(const json_t *def, size_t *len, struct mcp_error *err)
{
    const char *name = json_string_value(json_object_get(def, "name"));
    name = name ? name : "(unnamed)";
    char *v = value_raw(name, json_object_get(def, "from"), len, err);
    if (v == NULL)
        return NULL;
    while (*len > 0 && (v[*len - 1] == '\n' || v[*len - 1] == '\r')) /* a file's last newline */
        v[--*len] = '\0';
    bool bad = *len == 0 || *len > SECRET_VALUE_MAX || memchr(v, '\n', *len) ||
               memchr(v, '\r', *len) || memchr(v, '\0', *len);
    if (bad) {
        explicit_bzero(v, *len);
        free(v);
        mcp_error_set(err, MCP_ERR_INVALID, 0,
                      "secret %s: its value must be 1 to %d bytes on one line (no CR, LF or NUL)",
                      name, SECRET_VALUE_MAX);
        return NULL;
    }
    return v;
}

/* ---- listings ------------------------------------------------------------------------------ */

json_t *secrets_bound_list(const json_t *names, const json_t *defs)
{
    json_t *bound = json_array();
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        json_t *def = json_object_get(defs, json_string_value(n));
        json_array_append_new(bound,
                              json_pack("{s:O, s:O*, s:b}", "name", n, "hosts",
                                        json_object_get(def, "hosts"), "defined", def != NULL));
    }
    return bound;
}

json_t *secrets_describe(const json_t *defs)
{
    json_t *out = json_array();
    const char *name;
    json_t *def;
    json_object_foreach((json_t *)defs, name, def)
    {
        json_t *d =
            json_pack("{s:s, s:O, s:b}", "name", name, "hosts", json_object_get(def, "hosts"),
                      "egress", !json_is_false(json_object_get(def, "egress")));
        const char *h = json_string_value(json_object_get(def, "header"));
        if (h != NULL)
            json_object_set_new(d, "header", json_stringn(h, (size_t)(strchr(h, ':') - h)));
        if (json_is_true(json_object_get(def, "placeholder"))) {
            char ph[SECRET_PLACEHOLDER_MAX];
            secret_placeholder(name, ph);
            json_object_set_new(d, "placeholder", json_string(ph));
        }
        json_array_append_new(out, d);
    }
    return out;
}

char *secrets_names_text(const json_t *defs)
{
    if (json_object_size(defs) == 0)
        return xstrdup("none (the person adds them with `mcpbox secret add`)");
    size_t cap = 1;
    const char *name;
    json_t *def;
    json_object_foreach((json_t *)defs, name, def) cap += strlen(name) + 2;
    char *out = xmalloc(cap);
    out[0] = '\0';
    json_object_foreach((json_t *)defs, name, def)
    {
        if (out[0])
            strcat(out, ", ");
        strcat(out, name);
    }
    return out;
}
