/* dlopen of libcurl on first use; see curl_loader.h for why. */
#define LOG_MODULE "osb-curl"

#include "lib/httpc/curl_loader.h"

#include <dlfcn.h>
#include <stdbool.h>

#include "lib/base/log.h"

struct httpc_curl_api httpc_curl;

/* The library stays loaded for the life of the process (curl keeps global state), so the
 * handle is never closed once everything resolved. */
static bool curl_loaded;

static int curl_missing(const char *soname, const char *what, struct mcp_error *err)
{
    return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "the OpenSandbox backend needs libcurl "
                         "(%s, Debian package libcurl4, 7.56 or newer): %s", soname, what);
}

/* Fills api from lib; -1 naming the first function libcurl lacks. */
static int curl_resolve(void *lib, struct httpc_curl_api *api, const char *soname,
                        struct mcp_error *err)
{
/* Stores through void ** (as POSIX's dlsym page does): ISO C has no object-to-function cast. */
#define HTTPC_CURL_RESOLVE(name)                                                                   \
    *(void **)&api->name = dlsym(lib, "curl_" #name);                                              \
    if (api->name == NULL)                                                                         \
        return curl_missing(soname, "it has no curl_" #name, err);
    HTTPC_CURL_FUNCTIONS(HTTPC_CURL_RESOLVE)
#undef HTTPC_CURL_RESOLVE
    return 0;
}

int httpc_curl_load_from(const char *soname, struct mcp_error *err)
{
    if (curl_loaded)
        return 0;
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return curl_missing(soname, dlerror(), err);
    struct httpc_curl_api api;
    if (curl_resolve(lib, &api, soname, err) != 0) {
        dlclose(lib);
        return -1;
    }
    CURLcode rc = api.global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        /* not closed: a half-done global init may have left state behind */
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "libcurl could not start: %s",
                             api.easy_strerror(rc));
    }
    httpc_curl = api;
    curl_loaded = true;
    log_debug("loaded %s (%s)", soname, api.version());
    return 0;
}

int httpc_curl_load(struct mcp_error *err)
{
    return httpc_curl_load_from(HTTPC_CURL_SONAME, err);
}
