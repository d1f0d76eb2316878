/* The root directory of a host-mode sandbox (root_template.h).
 *
 * A create used to make all of this on a fresh tmpfs in the child: 12 directories, 6 generated
 * files, up to 11 mount points and 10 links, 5-10 us each on these VMs (0.35-0.4 ms of a 2.5 ms
 * cold create). None of it depends on the sandbox but the owner and whether it has a network,
 * so it is made once per (layout, network, owner) and bound read-only as the root of every
 * later sandbox with that owner. The owner is the host uid of the sandbox's root, so that the
 * files show as root's inside, as they did on the tmpfs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/rmtree.h"
#include "lib/base/buf.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_spawn.h"
#include "backend/local/root_template.h"
#include "lib/base/util.h"

#define ROOT_FORMAT "mcpbox root template 1" /* change when the entries below change */
#define ROOT_NEW_PREFIX ".new-"
/* A maker builds its copy in milliseconds: one this old was left by a maker that died. */
#define ROOT_NEW_ABANDONED_S 60

const char *const root_usr_links[ROOT_USR_LINKS] = {"bin", "sbin", "lib", "lib64", "lib32",
                                                    "libx32"};
/* Host paths shown read-only (public data: no secrets live there). */
const char *const root_etc_binds[ROOT_ETC_BINDS] = {"etc/alternatives", "etc/ssl/certs",
                                                    "etc/ld.so.cache", "etc/ca-certificates",
                                                    "etc/localtime"};
const char *const root_dev_nodes[ROOT_DEV_NODES] = {"null", "zero", "full", "random", "urandom",
                                                    "tty"};

static const char etc_passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
                                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n";
static const char etc_nsswitch[] = "passwd: files\ngroup: files\nshadow: files\n"
                                   "hosts: files dns\nnetworks: files\n";
const char root_etc_hosts[] = "127.0.0.1\tlocalhost " ROOT_HOSTNAME "\n::1\tlocalhost "
                              "ip6-localhost ip6-loopback\n";
const char root_etc_hostname[] = ROOT_HOSTNAME "\n";

const char *root_resolv_conf(bool network)
{
    return network ? "nameserver " LOCAL_DNS_ADDR "\n"
                   : "# this sandbox has no network (create it with network: true)\n";
}

/* ---- the layout ---------------------------------------------------------------------------- */

static struct root_layout layout;
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

/* Where the host's /bin, /lib... point (symlinks into /usr on merged-/usr systems). */
static void read_usr_links(struct root_layout *l)
{
    for (size_t i = 0; i < ROOT_USR_LINKS; i++) {
        char host[64], *t = l->usr_target[i];
        struct stat st;
        snprintf(host, sizeof host, "/%s", root_usr_links[i]);
        ssize_t n = readlink(host, t, sizeof l->usr_target[i] - 1);
        if (n > 0)
            t[n] = '\0';
        else if (lstat(host, &st) == 0 && S_ISDIR(st.st_mode))
            t[0] = '\0';
        else
            snprintf(t, sizeof l->usr_target[i], "-");
    }
}

/* The name covers everything the entries depend on but the network and the owner. */
static void name_layout(struct root_layout *l)
{
    const char *const texts[] = {ROOT_FORMAT, etc_passwd, etc_group, etc_nsswitch,
                                 root_etc_hosts, root_etc_hostname};
    char buf[2048], digest[65];
    size_t n = 0;
    memcpy(buf, l->usr_target, sizeof l->usr_target);
    n += sizeof l->usr_target;
    memcpy(buf + n, l->etc_kind, sizeof l->etc_kind);
    n += sizeof l->etc_kind;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t len = strlen(texts[i]);
        if (n + len > sizeof buf)
            break;
        memcpy(buf + n, texts[i], len);
        n += len;
    }
    sha256_hex(buf, n, digest);
    snprintf(l->name, sizeof l->name, "%.16s", digest);
}

static void read_layout(void)
{
    read_usr_links(&layout);
    for (size_t i = 0; i < ROOT_ETC_BINDS; i++) {
        char host[64];
        struct stat st;
        snprintf(host, sizeof host, "/%s", root_etc_binds[i]);
        layout.etc_kind[i] = stat(host, &st) < 0 ? 0 : S_ISDIR(st.st_mode) ? 'd' : 'f';
    }
    name_layout(&layout);
}

const struct root_layout *local_root_layout(void)
{
    pthread_once(&layout_once, read_layout);
    return &layout;
}

static size_t add_bind(struct root_bind *out, size_t n, const char *host, const char *target,
                       bool device)
{
    snprintf(out[n].host, sizeof out[n].host, "%s", host);
    snprintf(out[n].target, sizeof out[n].target, "%s", target);
    out[n].device = device;
    return n + 1;
}

size_t local_root_binds(const struct root_layout *l, struct root_bind out[ROOT_BINDS_MAX])
{
    char host[80];
    size_t n = add_bind(out, 0, "/usr", "usr", false);
    for (size_t i = 0; i < ROOT_USR_LINKS; i++)
        if (l->usr_target[i][0] == '\0') { /* a directory on the host, not a link */
            snprintf(host, sizeof host, "/%s", root_usr_links[i]);
            n = add_bind(out, n, host, root_usr_links[i], false);
        }
    for (size_t i = 0; i < ROOT_ETC_BINDS; i++)
        if (l->etc_kind[i]) {
            snprintf(host, sizeof host, "/%s", root_etc_binds[i]);
            n = add_bind(out, n, host, root_etc_binds[i], false);
        }
    for (size_t i = 0; i < ROOT_DEV_NODES; i++) {
        char target[32];
        snprintf(host, sizeof host, "/dev/%s", root_dev_nodes[i]);
        snprintf(target, sizeof target, "dev/%s", root_dev_nodes[i]);
        n = add_bind(out, n, host, target, true);
    }
    return n;
}

/* ---- the entries ----------------------------------------------------------------------------- */

struct maker {
    int dirfd;
    const struct root_owner *owner; /* NULL: as made (the child, on its own tmpfs) */
    const char *failed;
};

/* Exact modes and the owner, for a template (the maker's umask must not show). */
static int settle(struct maker *m, const char *path, mode_t mode, bool is_link)
{
    if (m->owner == NULL)
        return 0;
    if (fchownat(m->dirfd, path, m->owner->uid, m->owner->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
        (!is_link && fchmodat(m->dirfd, path, mode, 0) < 0)) {
        m->failed = path;
        return -1;
    }
    return 0;
}

static int dir(struct maker *m, const char *path, mode_t mode)
{
    if (mkdirat(m->dirfd, path, mode) < 0) {
        m->failed = path;
        return -1;
    }
    return settle(m, path, mode, false);
}

static int file(struct maker *m, const char *path, const char *text)
{
    int fd = openat(m->dirfd, path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    size_t len = text ? strlen(text) : 0;
    bool ok = fd >= 0 && (len == 0 || write(fd, text, len) == (ssize_t)len);
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        errno = e;
        m->failed = path;
        return -1;
    }
    return settle(m, path, 0644, false);
}

static int link_to(struct maker *m, const char *target, const char *path)
{
    if (symlinkat(target, m->dirfd, path) < 0) {
        m->failed = path;
        return -1;
    }
    return settle(m, path, 0, true);
}

/* "workspace", "tmp" and "root" are mount points for the data tmpfs; "run" stays an empty
 * directory (and, read-only, is what the masked /proc directories are bound from). */
static int make_dirs(struct maker *m)
{
    static const char *const dirs[] = {"etc", "etc/ssl", "usr", "dev", "workspace", "tmp", "root",
                                       "run", "var"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (dir(m, dirs[i], 0755) < 0)
            return -1;
    return dir(m, "proc", 0555);
}

static int make_etc(struct maker *m, const struct root_layout *l, bool network)
{
    const char *const files[][2] = {{"etc/passwd", etc_passwd},
                                    {"etc/group", etc_group},
                                    {"etc/hosts", root_etc_hosts},
                                    {"etc/nsswitch.conf", etc_nsswitch},
                                    {"etc/hostname", root_etc_hostname},
                                    {"etc/resolv.conf", root_resolv_conf(network)}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (file(m, files[i][0], files[i][1]) < 0)
            return -1;
    for (size_t i = 0; i < ROOT_ETC_BINDS; i++) {
        int rc = l->etc_kind[i] == 'd'   ? dir(m, root_etc_binds[i], 0755)
                 : l->etc_kind[i] == 'f' ? file(m, root_etc_binds[i], NULL)
                                         : 0;
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int make_links(struct maker *m, const struct root_layout *l)
{
    for (size_t i = 0; i < ROOT_USR_LINKS; i++) {
        const char *t = l->usr_target[i];
        int rc = t[0] == '-' ? 0 : t[0] ? link_to(m, t, root_usr_links[i])
                                        : dir(m, root_usr_links[i], 0755);
        if (rc < 0)
            return -1;
    }
    return link_to(m, "/tmp", "var/tmp");
}

/* dev/: mount points for the device nodes, devpts and /dev/shm, and the usual links. */
static int make_dev(struct maker *m)
{
    if (dir(m, "dev/pts", 0755) < 0 || dir(m, "dev/shm", 0755) < 0)
        return -1;
    for (size_t i = 0; i < ROOT_DEV_NODES; i++) {
        char path[32];
        snprintf(path, sizeof path, "dev/%s", root_dev_nodes[i]);
        if (file(m, path, NULL) < 0) {
            m->failed = root_dev_nodes[i]; /* path is on this stack frame */
            return -1;
        }
    }
    static const char *const links[][2] = {
        {"pts/ptmx", "dev/ptmx"},          {"/proc/self/fd", "dev/fd"},
        {"/proc/self/fd/0", "dev/stdin"},  {"/proc/self/fd/1", "dev/stdout"},
        {"/proc/self/fd/2", "dev/stderr"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (link_to(m, links[i][0], links[i][1]) < 0)
            return -1;
    return 0;
}

int local_root_dev_entries(int dirfd, const char **failed)
{
    struct maker m = {.dirfd = dirfd, .owner = NULL, .failed = NULL};
    int rc = make_dev(&m);
    *failed = m.failed;
    return rc;
}

int local_root_entries(int dirfd, const struct root_layout *l, bool network,
                       const struct root_owner *owner, const char **failed)
{
    struct maker m = {.dirfd = dirfd, .owner = owner, .failed = NULL};
    int rc = make_dirs(&m);
    if (rc == 0)
        rc = make_etc(&m, l, network);
    if (rc == 0)
        rc = make_links(&m, l);
    if (rc == 0)
        rc = make_dev(&m);
    *failed = m.failed;
    return rc;
}

/* ---- the template ---------------------------------------------------------------------------- */

static int build(const char *tmp, bool network, const struct root_owner *owner,
                 struct mcp_error *err)
{
    int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "open %s", tmp);
    const char *failed = NULL;
    int rc = local_root_entries(fd, local_root_layout(), network, owner, &failed);
    if (rc < 0)
        rc = mcp_error_set(err, MCP_ERR_IO, errno, "making %s in %s", failed, tmp);
    else if (fchown(fd, owner->uid, owner->gid) < 0 || fchmod(fd, 0755) < 0)
        rc = mcp_error_set(err, MCP_ERR_IO, errno, "chown %s", tmp);
    close(fd);
    return rc;
}

/* Removes the copies that makers killed mid-build left (never used: only a complete copy is
 * renamed into place). Run when a template is made, which is when such a maker died. */
static void remove_abandoned(const char *base)
{
    DIR *d = opendir(base);
    if (d == NULL)
        return;
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        struct stat st;
        if (strncmp(e->d_name, ROOT_NEW_PREFIX, strlen(ROOT_NEW_PREFIX)) != 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
            now - st.st_mtime < ROOT_NEW_ABANDONED_S)
            continue;
        char path[LOCAL_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        rmtree(path);
    }
    closedir(d);
}

int local_root_template(const char *base, bool network, uint32_t uid, uint32_t gid, char *out,
                        size_t size, struct mcp_error *err)
{
    const struct root_layout *l = local_root_layout();
    snprintf(out, size, "%s/%s-%s-%u-%u", base, l->name, network ? "net" : "nonet", uid, gid);
    struct stat st;
    if (lstat(out, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    if (mkdir(base, 0700) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdir %s", base);
    remove_abandoned(base);
    char tmp[LOCAL_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/" ROOT_NEW_PREFIX "XXXXXX", base);
    if (mkdtemp(tmp) == NULL)
        return mcp_error_set(err, MCP_ERR_IO, errno, "mkdtemp in %s", base);
    struct root_owner owner = {uid, gid};
    int rc = build(tmp, network, &owner, err);
    if (rc == 0 && rename(tmp, out) < 0) {
        /* Another process made the same template meanwhile: theirs serves as well. */
        if (errno != EEXIST && errno != ENOTEMPTY)
            rc = mcp_error_set(err, MCP_ERR_IO, errno, "rename %s to %s", tmp, out);
        rmtree(tmp);
    } else if (rc < 0) {
        rmtree(tmp);
    }
    return rc;
}
