# CPack: `cpack -G DEB` (in a build directory) makes a .deb for Debian 12 that pulls in the
# runtime libraries mcpbox links against; `cpack -G TGZ` a plain tarball of the same files.
set(CPACK_PACKAGE_NAME mcpbox)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "mcpbox")
set(CPACK_PACKAGE_CONTACT "mcpbox maintainers <maintainers@mcpbox.invalid>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "MCP server that gives AI agents sandboxes")
set(CPACK_PACKAGE_DESCRIPTION
    "mcpbox speaks the Model Context Protocol over stdio and Streamable HTTP and offers tools to
create sandboxes, run commands, read and write files and diagnose failures. Sandboxes are local
(Linux namespaces, cgroups, seccomp; no container daemon) or on an OpenSandbox server. Ships the
troubleshoot-sandbox skill for Claude Code.")
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The libraries the binary links (checked by the package_deb test against the binary's NEEDED
# entries), with the Debian 12 versions as the floor; libcurl4 is not linked but dlopened by the
# OpenSandbox backend when it starts (lib/httpc/curl_loader.h); libarchive13 is not linked
# but dlopened to unpack OCI image layers (backend/local/image/archive_loader.c); libnettle8 comes
# with libarchive13, and its SHA-256 is used for layer digests when libarchive has loaded it
# (backend/local/image/layer_hash.c), so it is named too. libssl3 is linked for the TLS the egress
# proxy terminates for hosts a secret is bound to (backend/local/egress_tls.c).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.36), libjansson4 (>= 2.14), libcurl4 (>= 7.88.1), libuv1 (>= 1.44.2), libsqlite3-0 (>= 3.40.1), libseccomp2 (>= 2.5.4), libhttp-parser2.9 (>= 2.9.4), libarchive13 (>= 3.6.2), libnettle8 (>= 3.8.1), libssl3 (>= 3.0.9)")
# uidmap: newuidmap/newgidmap and /etc/subuid ranges (non-root hosts); passt: the user-mode
# network stack (pasta) that `mcpbox doctor` checks for sandbox egress; nftables: nft writes
# the rules of a sandbox with a network_policy (backend/local/egress_netns.c).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "uidmap, passt, nftables")

include(CPack)
