/* libarchive, loaded on the first unpack (as libcurl is, see curl_loader.h): its dependencies
 * (libxml2, nettle, lzma, acl, ...) would cost every idle server resident memory, though only
 * image pulls use it. <archive.h> provides the types and constants; each entry of oci_archive
 * has the exact type of the libarchive function it stands for. */
#ifndef MCPBOX_IMAGE_ARCHIVE_LOADER_H
#define MCPBOX_IMAGE_ARCHIVE_LOADER_H

#include <archive.h>
#include <archive_entry.h>

#include "lib/base/error.h"

#define OCI_ARCHIVE_SONAME "libarchive.so.13"

#define OCI_ARCHIVE_FUNCTIONS(X)                                                                   \
    X(read_new)                                                                                    \
    X(read_free)                                                                                   \
    X(read_support_format_tar) X(read_support_filter_gzip) X(read_support_filter_zstd)             \
        X(read_support_filter_none) X(read_open_fd) X(read_next_header) X(read_data_block)         \
            X(read_data_skip) X(error_string) X(write_disk_new) X(write_free) X(                   \
                write_disk_set_options) X(write_header) X(write_data_block) X(write_finish_entry)  \
                X(entry_pathname) X(entry_set_pathname) X(entry_hardlink) X(entry_set_hardlink)    \
                    X(entry_filetype) X(entry_size) X(entry_symlink) X(read_support_format_raw)    \
                        X(read_open) X(read_disk_new) X(read_disk_set_symlink_physical)            \
                            X(read_disk_set_behavior) X(read_disk_open) X(read_next_header2)       \
                                X(read_disk_descend) X(entry_new) X(entry_free) X(entry_uid)       \
                                    X(entry_gid) X(entry_set_uid) X(entry_set_gid) X(              \
                                        entry_linkresolver_new) X(entry_linkresolver_set_strategy) \
                                        X(entry_linkresolver_free) X(entry_linkify) X(write_new)   \
                                            X(write_set_format_pax_restricted) X(write_open_fd)    \
                                                X(write_data) X(write_close) X(entry_mode)         \
                                                    X(entry_set_mode) X(read_open_memory)          \
                                                        X(entry_mtime) X(entry_mtime_nsec)         \
                                                            X(entry_atime) X(entry_atime_nsec)     \
                                                                X(entry_atime_is_set)

#define OCI_ARCHIVE_ENTRY(name) __typeof__(archive_##name) *name;
struct oci_archive_api {
    OCI_ARCHIVE_FUNCTIONS(OCI_ARCHIVE_ENTRY)
};
#undef OCI_ARCHIVE_ENTRY

extern struct oci_archive_api oci_archive;

/* Loads libarchive once; later calls return 0 at once. -1 with err (saying which package to
 * install) if it is missing or lacks a function. Not thread-safe: call it from the loop. */
int oci_archive_load(struct mcp_error *err);

#endif
