/* A fork's files (snapshot.h, fork_stream_run): one save helper on the source, one load helper
 * on each copy, and this thread copying the tar from the first to all the others as it comes.
 * The layer never touches the disk and is never hashed: it lives only in pipes, for as long as
 * the copy takes. Every copy's helper checks every entry as a restore's does (snapshot_helper.c:
 * no link followed, nothing outside the three directories). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "backend/local/local_sandbox.h"
#include "backend/local/snapshot.h"
#include "lib/base/cleanup.h"
#include "lib/base/util.h"

#define FORK_PIPE_BYTES (1 << 20) /* room for a chunk while the others are written */

/* A load helper on every copy, each reading its own pipe (to[i] its write end): the number
 * started; fewer than count with fs->err set. */
static int start_loads(struct fork_stream *fs, struct snap_helper *h, int *to)
{
    cleanup_close int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0)
        return mcp_error_set(&fs->err, MCP_ERR_IO, errno, "cannot open /dev/null"), 0;
    for (int i = 0; i < fs->count; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return mcp_error_set(&fs->err, MCP_ERR_IO, errno, "pipe"), i;
        (void)fcntl(p[1], F_SETPIPE_SZ, FORK_PIPE_BYTES); /* a smaller pipe only costs time */
        struct lsbx *c = fs->copies[i];
        int rc = snap_helper_start(c->pid, c->pidfd, "load", p[0], null, &h[i], &fs->err);
        close(p[0]);
        if (rc < 0) {
            close(p[1]);
            return i;
        }
        to[i] = p[1];
    }
    return fs->count;
}

#define FORK_CHUNK (256 << 10)

static int too_big(const struct fork_stream *fs, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                         "the fork would copy more than %llu bytes, twice the sandbox's disk: "
                         "sparse files are copied whole; remove them (or copy the data out) and "
                         "fork again",
                         (unsigned long long)fs->max_bytes);
}

/* fan_out for one copy: the bytes moved from pipe to pipe by the kernel (splice), never through
 * this thread's memory (two of the six copies a fork makes of every byte). Once the copy's
 * helper stopped reading, the rest is read and dropped. */
static int fan_one(struct fork_stream *fs, int from, int *to, struct mcp_error *err)
{
    static _Thread_local char chunk[FORK_CHUNK];
    uint64_t bytes = 0;
    for (;;) {
        ssize_t r = *to >= 0 ? splice(from, NULL, *to, NULL, FORK_CHUNK, SPLICE_F_MOVE)
                             : read(from, chunk, sizeof chunk);
        if (r < 0 && errno == EPIPE && *to >= 0)
            close(*to), *to = -1;
        else if (r == 0 || (r < 0 && errno != EINTR))
            return 0; /* the end of the tar, or the save helper's failure (its message) */
        bytes += r > 0 ? (uint64_t)r : 0;
        if (bytes > fs->max_bytes)
            return too_big(fs, err);
    }
}

/* The tar from the save helper to every copy, up to max_bytes (a sandbox can make its tar far
 * larger than its disk: sparse files are stored whole). A copy whose helper stopped reading is
 * left out; its helper's message says why. */
static int fan_out(struct fork_stream *fs, int from, int *to, struct mcp_error *err)
{
    static _Thread_local char chunk[FORK_CHUNK];
    uint64_t bytes = 0;
    ssize_t r;
    if (fs->count == 1)
        return fan_one(fs, from, to, err);
    while ((r = read(from, chunk, sizeof chunk)) > 0 || (r < 0 && errno == EINTR)) {
        if (r <= 0)
            continue;
        bytes += (uint64_t)r;
        if (bytes > fs->max_bytes)
            return too_big(fs, err);
        for (int i = 0; i < fs->count; i++)
            if (to[i] >= 0 && write_full(to[i], chunk, (size_t)r) < 0)
                close(to[i]), to[i] = -1;
    }
    return 0;
}

/* The source frozen (where the host can) only while its save helper reads it. */
static int read_source(struct fork_stream *fs, int *to)
{
    struct lsbx *sb = fs->source;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return mcp_error_set(&fs->err, MCP_ERR_IO, errno, "pipe");
    (void)fcntl(p[0], F_SETPIPE_SZ, FORK_PIPE_BYTES);
    (void)local_snapshot_freeze(sb, fs->freeze); /* not frozen in time: read all the same */
    struct snap_helper h;
    int rc = snap_helper_start(sb->pid, sb->pidfd, "save", -1, p[1], &h, &fs->err);
    close(p[1]);
    struct mcp_error ferr = {0};
    int frc = rc == 0 ? fan_out(fs, p[0], to, &ferr) : 0;
    close(p[0]); /* a helper stopped early gets EPIPE */
    if (rc == 0)
        rc = snap_helper_finish(&h, &fs->err);
    local_snapshot_thaw(sb, fs->freeze);
    if (frc < 0) /* the cause: the helper's own failure is its consequence */
        fs->err = ferr, rc = -1;
    return rc;
}

int fork_stream_run(struct fork_stream *fs)
{
    struct snap_helper loads[LOCAL_FORK_MAX];
    int to[LOCAL_FORK_MAX];
    int started = start_loads(fs, loads, to);
    int rc = started == fs->count ? read_source(fs, to) : -1;
    for (int i = 0; i < started; i++)
        if (to[i] >= 0)
            close(
                to[i]); /* end of the tar; on a failure, a truncated one that its helper refuses */
    for (int i = 0; i < started; i++) {
        struct mcp_error e;
        if (snap_helper_finish(&loads[i], &e) < 0 && rc == 0)
            fs->err = e, rc = -1;
    }
    return rc;
}
