/* dlopen of libarchive on the first unpack; see archive_loader.h for why. */
#include "backend/local/image/archive_loader.h"
#include "backend/local/image/layer_hash.h"

#include <dlfcn.h>
#include <stdbool.h>

struct oci_archive_api oci_archive;

static bool archive_loaded; /* never unloaded: unpack children use it after fork */

static int archive_missing(const char *what, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                         "unpacking image layers needs libarchive (%s, Debian package "
                         "libarchive13, 3.3 or newer with zstd): %s",
                         OCI_ARCHIVE_SONAME, what);
}

int oci_archive_load(struct mcp_error *err)
{
    if (archive_loaded)
        return 0;
    void *lib = dlopen(OCI_ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return archive_missing(dlerror(), err);
    struct oci_archive_api api;
/* Stores through void ** (as POSIX's dlsym page does): ISO C has no object-to-function cast. */
#define OCI_ARCHIVE_RESOLVE(name)                                                                  \
    *(void **)&api.name = dlsym(lib, "archive_" #name);                                            \
    if (api.name == NULL) {                                                                        \
        dlclose(lib);                                                                              \
        return archive_missing("it has no archive_" #name, err);                                   \
    }
    OCI_ARCHIVE_FUNCTIONS(OCI_ARCHIVE_RESOLVE)
#undef OCI_ARCHIVE_RESOLVE
    oci_archive = api;
    archive_loaded = true;
    layer_hash_setup(); /* libarchive brought libnettle: its SHA-256 is the faster */
    return 0;
}
