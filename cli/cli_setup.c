/* `mcpbox setup --user NAME [--undo]`: the one-time root step that lets NAME run local sandboxes
 * as itself on a host without systemd delegation (docs/local-backend.md, "Running as an ordinary
 * user"). Idempotent; prints each change; installs nothing and starts nothing:
 *  - subordinate uids and gids (/etc/subuid, /etc/subgid), a free 65536 range as useradd would
 *    pick it, when NAME has none;
 *  - a cgroup subtree owned by NAME in each hierarchy mcpbox uses (v1: memory, pids, cpu,
 *    freezer; pure v2: one subtree with memory, pids and cpu enabled), with the files delegation
 *    needs chowned (cgroup.procs and tasks, or cgroup.procs, cgroup.subtree_control and
 *    cgroup.threads);
 *  - /dev/net/tun usable by NAME when it is 0600 (pasta opens it for network: true); the device
 *    is shared by every user set up, so its mode goes back when the last of them is undone.
 * Each change is recorded in /var/lib/mcpbox/setup-NAME; --undo reverses exactly those. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "cli/cli_util.h"

#define SETUP_RECORD_DIR "/var/lib/mcpbox"
#define SETUP_SUBID_MIN 100000UL      /* login.defs SUB_UID_MIN */
#define SETUP_SUBID_MAX 600100000UL   /* login.defs SUB_UID_MAX */
#define SETUP_SUBID_COUNT 65536UL     /* login.defs SUB_UID_COUNT */
#define SETUP_CG_ROOT "/sys/fs/cgroup"
#define SETUP_CG_DIR "mcpbox-u%u" /* == LOCAL_CG_USER_DIR (backend/local/local_cgroup.h) */
#define SETUP_TUN "/dev/net/tun"
#define SETUP_LINE_MAX 600

int cli_setup_main(int argc, char **argv);

struct setup {
    const char *name;
    uid_t uid;
    gid_t gid;
    char record[256];
    FILE *log; /* the record, appended to */
    int changes;
};

static void setup_usage(FILE *out)
{
    fputs("Usage: mcpbox setup --user NAME [--undo]\n"
          "\n"
          "Run once as root on a host without systemd cgroup delegation, so that the user NAME\n"
          "can run local sandboxes as itself (mcpbox serve, mcpbox sandbox, mcpbox doctor):\n"
          "  - gives NAME subordinate uids and gids (/etc/subuid, /etc/subgid) if it has none;\n"
          "  - makes a cgroup subtree owned by NAME in each hierarchy mcpbox uses;\n"
          "  - makes /dev/net/tun usable (mode 0666) if it is 0600 (pasta needs it).\n"
          "Idempotent; prints each change; installs and starts nothing. The changes are recorded\n"
          "in " SETUP_RECORD_DIR "/setup-NAME, and --undo reverses exactly those.\n"
          "\n"
          "  -u, --user NAME   the user (name or uid)\n"
          "      --undo        reverse what an earlier setup of NAME did\n"
          "  -h, --help        this text\n",
          out);
}

static void note(struct setup *s, const char *fmt, const char *arg, const char *rec)
{
    printf("mcpbox setup: ");
    printf(fmt, arg);
    printf("\n");
    if (rec && s->log) {
        fprintf(s->log, "%s\n", rec);
        fflush(s->log);
    }
    if (rec)
        s->changes++;
}

/* ---- subordinate ids ------------------------------------------------------------------------ */

static bool subid_has(const char *file, const struct setup *s, unsigned long *start,
                      unsigned long *count)
{
    FILE *f = fopen(file, "re");
    char line[SETUP_LINE_MAX], num[16];
    bool found = false;
    snprintf(num, sizeof num, "%u", (unsigned)s->uid);
    while (f && !found && fgets(line, sizeof line, f)) {
        char name[256];
        if (sscanf(line, "%255[^:]:%lu:%lu", name, start, count) == 3 &&
            (strcmp(name, s->name) == 0 || strcmp(name, num) == 0))
            found = true;
    }
    if (f)
        fclose(f);
    return found;
}

/* The lowest SETUP_SUBID_COUNT range at or above SETUP_SUBID_MIN that overlaps no entry of
 * either file (what useradd does). */
static unsigned long subid_free(void)
{
    static const char *const files[] = {"/etc/subuid", "/etc/subgid"};
    unsigned long start = SETUP_SUBID_MIN;
    for (bool moved = true; moved && start + SETUP_SUBID_COUNT <= SETUP_SUBID_MAX;) {
        moved = false;
        for (size_t i = 0; i < 2; i++) {
            FILE *f = fopen(files[i], "re");
            char line[SETUP_LINE_MAX];
            while (f && fgets(line, sizeof line, f)) {
                unsigned long s0, n;
                if (sscanf(line, "%*[^:]:%lu:%lu", &s0, &n) == 2 && s0 < start + SETUP_SUBID_COUNT &&
                    start < s0 + n)
                    start = s0 + n, moved = true;
            }
            if (f)
                fclose(f);
        }
    }
    return start + SETUP_SUBID_COUNT <= SETUP_SUBID_MAX ? start : 0;
}

static int subid_add(struct setup *s, const char *file, const char *kind, unsigned long start)
{
    char line[SETUP_LINE_MAX], rec[SETUP_LINE_MAX + 32];
    unsigned long have, count;
    if (subid_has(file, s, &have, &count)) {
        snprintf(line, sizeof line, "%s:%lu:%lu", s->name, have, count);
        note(s, "unchanged: %s", line, NULL);
        return 0;
    }
    snprintf(line, sizeof line, "%s:%lu:%lu", s->name, start, SETUP_SUBID_COUNT);
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    size_t len = strlen(line);
    line[len] = '\n';
    bool ok = fd >= 0 && write(fd, line, len + 1) == (ssize_t)(len + 1);
    line[len] = '\0';
    if (fd >= 0)
        close(fd);
    if (!ok) {
        fprintf(stderr, "mcpbox setup: cannot append to %s: %s\n", file, strerror(errno));
        return -1;
    }
    snprintf(rec, sizeof rec, "%s %s %s", kind, file, line);
    char msg[SETUP_LINE_MAX + 64];
    snprintf(msg, sizeof msg, "%s: added %s (subordinate %s for the sandboxes)", file, line,
             strcmp(kind, "subuid") == 0 ? "uids" : "gids");
    note(s, "%s", msg, rec);
    return 0;
}

static int setup_subids(struct setup *s)
{
    unsigned long a, b;
    bool has_u = subid_has("/etc/subuid", s, &a, &b), has_g = subid_has("/etc/subgid", s, &a, &b);
    unsigned long start = has_u && has_g ? 0 : subid_free();
    if (!(has_u && has_g) && start == 0) {
        fprintf(stderr, "mcpbox setup: no free range of %lu ids below %lu in /etc/subuid and "
                        "/etc/subgid\n", SETUP_SUBID_COUNT, SETUP_SUBID_MAX);
        return -1;
    }
    if (subid_add(s, "/etc/subuid", "subuid", start) < 0 ||
        subid_add(s, "/etc/subgid", "subgid", start) < 0)
        return -1;
    return 0;
}

/* ---- cgroups -------------------------------------------------------------------------------- */

static bool is_fs(const char *path, long magic)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && (long)sf.f_type == magic;
}

static int chown_in(const char *dir, const char *file, const struct setup *s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (file[0] && access(path, F_OK) < 0)
        return 0; /* e.g. cgroup.threads on an old kernel */
    if (chown(file[0] ? path : dir, s->uid, s->gid) == 0)
        return 0;
    fprintf(stderr, "mcpbox setup: chown %s: %s\n", file[0] ? path : dir, strerror(errno));
    return -1;
}

static int delegate(struct setup *s, const char *mount, const char *const *files)
{
    char dir[256], rec[300], msg[400];
    snprintf(dir, sizeof dir, "%s/" SETUP_CG_DIR, mount, (unsigned)s->uid);
    bool made = mkdir(dir, 0755) == 0;
    if (!made && errno != EEXIST) {
        fprintf(stderr, "mcpbox setup: mkdir %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    bool already = !made && stat(dir, &st) == 0 && st.st_uid == s->uid;
    if (chown_in(dir, "", s) < 0)
        return -1;
    for (size_t i = 0; files[i]; i++)
        if (chown_in(dir, files[i], s) < 0)
            return -1;
    snprintf(rec, sizeof rec, "cgroup %s", dir);
    snprintf(msg, sizeof msg, "%s %s (owned by %s, with its %s%s%s)",
             made ? "created cgroup" : already ? "unchanged: cgroup" : "delegated existing cgroup",
             dir, s->name, files[0], files[1] ? " and " : "", files[1] ? files[1] : "");
    note(s, "%s", msg, made ? rec : NULL);
    return 0;
}

static int setup_cgroups(struct setup *s)
{
    static const char *const v1_files[] = {"cgroup.procs", "tasks", NULL};
    static const char *const v2_files[] = {"cgroup.procs", "cgroup.subtree_control",
                                           "cgroup.threads", NULL};
    static const char *const ctrls[] = {"memory", "pids", "cpu", "freezer"};
    if (is_fs(SETUP_CG_ROOT, CGROUP2_SUPER_MAGIC)) {
        /* The controllers must reach the subtree (the root is exempt from the no-internal-
         * process rule). Then root must move the user's session into it, as systemd would. */
        int fd = open(SETUP_CG_ROOT "/cgroup.subtree_control", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t w = write(fd, "+memory +pids +cpu", 18);
            (void)w;
            close(fd);
        }
        if (delegate(s, SETUP_CG_ROOT, v2_files) < 0)
            return -1;
        printf("mcpbox setup: note: on pure cgroup v2 mcpbox must run inside that subtree: "
               "have root (or systemd, with Delegate=yes) start %s's session in it, e.g. "
               "echo $PID > " SETUP_CG_ROOT "/" SETUP_CG_DIR "/login/cgroup.procs after mkdir "
               "and chown of .../login\n", s->name, (unsigned)s->uid);
        return 0;
    }
    int done = 0;
    for (size_t i = 0; i < sizeof ctrls / sizeof ctrls[0]; i++) {
        char mount[128];
        snprintf(mount, sizeof mount, SETUP_CG_ROOT "/%s", ctrls[i]);
        if (!is_fs(mount, CGROUP_SUPER_MAGIC))
            continue;
        if (delegate(s, mount, v1_files) < 0)
            return -1;
        done++;
    }
    if (done == 0)
        printf("mcpbox setup: no cgroup hierarchy found at " SETUP_CG_ROOT
               ": sandboxes of %s will run without memory and cpu limits\n", s->name);
    return 0;
}

/* ---- /dev/net/tun --------------------------------------------------------------------------- */

/* The mode a record says /dev/net/tun had before a setup opened it up. */
static bool record_tun_mode(const char *record, unsigned *mode)
{
    FILE *f = fopen(record, "re");
    char line[SETUP_LINE_MAX];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "tun " SETUP_TUN " %o", mode) == 1;
    if (f)
        fclose(f);
    return found;
}

/* Whether another user's setup record holds /dev/net/tun open (and its mode before that). */
static bool tun_held_by_other(const struct setup *s, unsigned *mode)
{
    DIR *dir = opendir(SETUP_RECORD_DIR);
    struct dirent *e;
    bool held = false;
    while (dir && !held && (e = readdir(dir)) != NULL) {
        char path[sizeof SETUP_RECORD_DIR + 256 + 2];
        if (strncmp(e->d_name, "setup-", 6) != 0 || strchr(e->d_name, '.') != NULL)
            continue; /* the record files only, not remove_line's temporaries */
        snprintf(path, sizeof path, SETUP_RECORD_DIR "/%s", e->d_name);
        held = strcmp(path, s->record) != 0 && record_tun_mode(path, mode);
    }
    if (dir)
        closedir(dir);
    return held;
}

static int setup_tun(struct setup *s)
{
    struct stat st;
    unsigned before;
    char rec[64], msg[300];
    if (stat(SETUP_TUN, &st) < 0) {
        printf("mcpbox setup: %s does not exist: network: true will not work (load the tun "
               "module: modprobe tun)\n", SETUP_TUN);
        return 0;
    }
    if ((st.st_mode & 0666) == 0666) {
        /* Opened up by another user's setup: record it here too, or undoing that setup would
         * take network: true away from this user. */
        if (!record_tun_mode(s->record, &before) && tun_held_by_other(s, &before)) {
            snprintf(rec, sizeof rec, "tun %s %04o", SETUP_TUN, before);
            note(s, "%s: 0666 from another user's setup; recorded here as well, so it stays "
                    "usable until the last setup that needs it is undone", SETUP_TUN, rec);
            return 0;
        }
        note(s, "unchanged: %s is already usable by every user (0666)", SETUP_TUN, NULL);
        return 0;
    }
    if (chmod(SETUP_TUN, (st.st_mode & 07777) | 0666) < 0) {
        fprintf(stderr, "mcpbox setup: chmod %s: %s\n", SETUP_TUN, strerror(errno));
        return -1;
    }
    snprintf(rec, sizeof rec, "tun %s %04o", SETUP_TUN, (unsigned)(st.st_mode & 07777));
    snprintf(msg, sizeof msg,
             "%s: mode %04o -> %04o, so that pasta (network: true) can open it as %s; it is "
             "0666 on hosts with udev, and opening it grants nothing without CAP_NET_ADMIN in a "
             "network namespace of one's own", SETUP_TUN, (unsigned)(st.st_mode & 07777),
             (unsigned)((st.st_mode & 07777) | 0666), s->name);
    note(s, "%s", msg, rec);
    return 0;
}

/* ---- undo ----------------------------------------------------------------------------------- */

static int remove_line(const char *file, const char *line)
{
    char tmp[256], buf[SETUP_LINE_MAX];
    snprintf(tmp, sizeof tmp, "%s.mcpbox-undo", file);
    FILE *in = fopen(file, "re"), *out = fopen(tmp, "we");
    bool removed = false;
    while (in && out && fgets(buf, sizeof buf, in)) {
        char cmp[SETUP_LINE_MAX];
        snprintf(cmp, sizeof cmp, "%s", buf);
        cmp[strcspn(cmp, "\n")] = '\0';
        if (!removed && strcmp(cmp, line) == 0)
            removed = true;
        else
            fputs(buf, out);
    }
    bool ok = in && out;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = false;
    if (!ok || chmod(tmp, 0644) < 0 || rename(tmp, file) < 0) {
        unlink(tmp);
        fprintf(stderr, "mcpbox setup: cannot rewrite %s\n", file);
        return -1;
    }
    printf("mcpbox setup: %s: removed %s\n", file, removed ? line : "nothing (already gone)");
    return 0;
}

/* Empty sandbox cgroups left below a delegated one go first (rmdir refuses a busy one). */
static int remove_cgroup(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null",
             dir);
    int rc = system(cmd);
    (void)rc;
    if (rmdir(dir) < 0 && errno != ENOENT) {
        fprintf(stderr, "mcpbox setup: rmdir %s: %s (destroy the user's sandboxes first: "
                        "mcpbox sandbox rm, run as that user)\n", dir, strerror(errno));
        return -1;
    }
    printf("mcpbox setup: removed cgroup %s\n", dir);
    return 0;
}

static int undo_one(const struct setup *s, const char *rec)
{
    char kind[16], path[256], rest[SETUP_LINE_MAX];
    if (sscanf(rec, "%15s %255s %599[^\n]", kind, path, rest) < 2)
        return 0;
    if (strcmp(kind, "subuid") == 0 || strcmp(kind, "subgid") == 0)
        return remove_line(path, rest);
    if (strcmp(kind, "cgroup") == 0)
        return remove_cgroup(path);
    if (strcmp(kind, "tun") == 0) {
        unsigned mode = (unsigned)strtoul(rest, NULL, 8), other;
        if (tun_held_by_other(s, &other)) {
            printf("mcpbox setup: %s: kept usable, another user's setup still needs it\n", path);
            return 0;
        }
        if (chmod(path, mode) < 0) {
            fprintf(stderr, "mcpbox setup: chmod %s: %s\n", path, strerror(errno));
            return -1;
        }
        printf("mcpbox setup: %s: mode back to %04o\n", path, mode);
    }
    return 0;
}

static int setup_undo(struct setup *s)
{
    FILE *f = fopen(s->record, "re");
    if (f == NULL) {
        printf("mcpbox setup: nothing to undo for %s (no %s)\n", s->name, s->record);
        return CLI_EXIT_OK;
    }
    char *lines[256];
    size_t n = 0;
    char buf[SETUP_LINE_MAX];
    while (n < 256 && fgets(buf, sizeof buf, f))
        lines[n++] = strdup(buf);
    fclose(f);
    int rc = 0;
    for (size_t i = n; i-- > 0;) { /* newest first */
        if (undo_one(s, lines[i]) < 0)
            rc = -1;
        free(lines[i]);
    }
    if (rc == 0) {
        unlink(s->record);
        printf("mcpbox setup: undone; removed %s\n", s->record);
    }
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---- main ----------------------------------------------------------------------------------- */

static int lookup(struct setup *s, const char *who)
{
    struct passwd *pw = getpwnam(who);
    char *end;
    unsigned long n = strtoul(who, &end, 10);
    if (pw == NULL && *end == '\0' && end != who)
        pw = getpwuid((uid_t)n);
    if (pw == NULL) {
        fprintf(stderr, "mcpbox setup: no user '%s' (create it first, e.g. useradd -m %s)\n",
                who, who);
        return -1;
    }
    if (pw->pw_uid == 0) {
        fprintf(stderr, "mcpbox setup: '%s' is root, which needs no setup\n", who);
        return -1;
    }
    s->name = strdup(pw->pw_name);
    s->uid = pw->pw_uid, s->gid = pw->pw_gid;
    snprintf(s->record, sizeof s->record, SETUP_RECORD_DIR "/setup-%s", s->name);
    return 0;
}

static int setup_parse(int argc, char **argv, const char **user, bool *undo)
{
    static const struct option longopts[] = {{"user", required_argument, NULL, 'u'},
                                             {"undo", no_argument, NULL, 'U'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+u:h", longopts, NULL)) != -1) {
        if (opt == 'u')
            *user = optarg;
        else if (opt == 'U')
            *undo = true;
        else {
            setup_usage(opt == 'h' ? stdout : stderr);
            return opt == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
    }
    if (*user == NULL || optind < argc) {
        fprintf(stderr, "mcpbox setup: %s\n", *user ? "unexpected argument" : "--user NAME is required");
        setup_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

int cli_setup_main(int argc, char **argv)
{
    const char *user = NULL;
    bool undo = false;
    int rc = setup_parse(argc, argv, &user, &undo);
    if (rc >= 0)
        return rc;
    if (geteuid() != 0) {
        fprintf(stderr, "mcpbox setup: run it as root, once (sudo mcpbox setup --user %s); the "
                        "user then runs mcpbox as itself\n", user);
        return CLI_EXIT_FAIL;
    }
    struct setup s = {0};
    if (lookup(&s, user) < 0)
        return CLI_EXIT_FAIL;
    if (undo) {
        rc = setup_undo(&s);
        free((char *)s.name);
        return rc;
    }
    mkdir(SETUP_RECORD_DIR, 0755);
    s.log = fopen(s.record, "ae");
    if (s.log == NULL) {
        fprintf(stderr, "mcpbox setup: cannot write %s: %s\n", s.record, strerror(errno));
        free((char *)s.name);
        return CLI_EXIT_FAIL;
    }
    rc = setup_subids(&s) < 0 || setup_cgroups(&s) < 0 || setup_tun(&s) < 0 ? CLI_EXIT_FAIL
                                                                             : CLI_EXIT_OK;
    fclose(s.log);
    if (s.changes > 0)
        printf("mcpbox setup: %d change%s recorded in %s (mcpbox setup --user %s --undo reverses "
               "them)\n", s.changes, s.changes == 1 ? "" : "s", s.record, s.name);
    else
        printf("mcpbox setup: nothing to change for %s\n", s.name);
    if (rc == CLI_EXIT_OK)
        printf("mcpbox setup: %s can now check the host with `mcpbox doctor` and run `mcpbox "
               "serve` as itself\n", s.name);
    free((char *)s.name);
    return rc;
}
