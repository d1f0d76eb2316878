/* Unpacking one layer (a tar, plain, gzip or zstd) into an empty directory, in a child process
 * chrooted there: no entry can reach outside the directory whatever libarchive or this code
 * gets wrong, and a crash in a decompressor cannot take the server down. On top, entries with
 * absolute names, ".." components, or links out of the root are refused (the whole layer is
 * then refused: a registry that sends them is hostile), and device nodes are skipped.
 *
 * OCI whiteouts become overlayfs whiteouts: ".wh.<name>" a 0/0 character device <name>, and
 * ".wh..wh..opq" the xattr user.overlay.opaque=y on its directory (the sandboxes mount their
 * overlay with userxattr). */
#ifndef MCPBOX_IMAGE_UNPACK_H
#define MCPBOX_IMAGE_UNPACK_H

#include <stdint.h>

#include "backend/local/image/manifest.h"
#include "lib/base/error.h"

#define UNPACK_MAX_ENTRIES 1000000u

struct unpack_result {
    uint64_t bytes;   /* file data written */
    uint64_t entries; /* entries applied */
    uint64_t skipped; /* device nodes and sockets not created */
    char diff_id[72]; /* "sha256:<hex>" of the uncompressed stream (what rootfs.diff_ids names) */
};

/* Rootless: the child unpacks as root of a new user namespace whose maps write_maps writes
 * (the sandboxes' shared mapping), so the files get the subordinate ids the sandboxes see as the
 * image's ids. NULL: as the server (root), with the image's own ids. */
struct unpack_userns {
    int (*write_maps)(void *arg, int pid, struct mcp_error *err);
    void *arg;
};

/* Blocking (run it in a worker thread). blob_fd is read from its current offset; root must
 * exist and be empty. max_bytes caps the data written (a tar bomb stops there with
 * MCP_ERR_LIMIT). oci_archive_load() must have succeeded before (on the loop). */
int image_unpack(int blob_fd, enum oci_compression compression, const char *root,
                 uint64_t max_bytes, const struct unpack_userns *ns, struct unpack_result *res,
                 struct mcp_error *err);

/* Blocking. Copies the directory src (a registered root filesystem) into the empty root, as
 * the server (root), in a fresh child: every owner id N (0..65535; others become 65534) is
 * written as shift+N, the ids a sandbox with the shared mapping shows as N. Symlinks are not
 * followed, mounts not crossed, device nodes and sockets skipped, extended attributes not
 * copied; max_bytes caps the file data as for a layer. res->diff_id stays "". */
int image_import_dir(const char *src, const char *root, uint32_t shift_uid, uint32_t shift_gid,
                     uint64_t max_bytes, struct unpack_result *res, struct mcp_error *err);

/* Rootless: removes everything below dir from inside such a user namespace (the user cannot
 * delete files owned by its subordinate ids); dir itself stays, made 0777. */
int image_clear_in_userns(const char *dir, const struct unpack_userns *ns, struct mcp_error *err);

/* The unpacker runs as a fresh exec of the mcpbox executable ("mcpbox __unpack-layer ..."):
 * mcpbox's main hands such an argv to image_unpack_child_main (through backends_helper,
 * cli/backends.c) before anything else. */
#define IMAGE_UNPACK_ARGV1 "__unpack-layer"
int image_unpack_child_main(int argc, char **argv);

/* The checks on one entry name, exposed for the tests: the name without leading "./" into out
 * (empty for the root itself); -1 if it is absolute or has a ".." component. */
int unpack_clean_path(const char *name, char *out, size_t size);

#endif
