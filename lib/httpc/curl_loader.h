/* libcurl, loaded on first use. mcpbox does not link libcurl: its ~40 dependent libraries
 * (TLS stacks, LDAP, SSH, Kerberos, ...) would cost every `mcpbox serve` several MiB of resident
 * pages and their constructors' start-up work, though only the OpenSandbox backend uses HTTP.
 * The backend calls libcurl through httpc_curl, a table filled by httpc_curl_load() with dlopen +
 * dlsym. <curl/curl.h> still provides the types and constants; each entry has the exact type of
 * the libcurl function it stands for (httpc_curl.easy_init is curl_easy_init, and so on). */
#ifndef MCPBOX_HTTPC_CURL_LOADER_H
#define MCPBOX_HTTPC_CURL_LOADER_H

#include <curl/curl.h>

#include "lib/base/error.h"

#define HTTPC_CURL_SONAME "libcurl.so.4" /* the runtime library of libcurl 7.x and 8.x */

/* Every libcurl function the backend calls, without the curl_ prefix. */
#define HTTPC_CURL_FUNCTIONS(X)                                                                    \
    X(global_init) X(version) X(free) X(getdate)                                                   \
    X(easy_init) X(easy_cleanup) X(easy_setopt) X(easy_getinfo) X(easy_strerror) X(easy_escape)    \
    X(multi_init) X(multi_cleanup) X(multi_setopt) X(multi_add_handle) X(multi_remove_handle)      \
    X(multi_assign) X(multi_socket_action) X(multi_info_read)                                      \
    X(slist_append) X(slist_free_all)                                                              \
    X(mime_init) X(mime_free) X(mime_addpart) X(mime_name) X(mime_filename) X(mime_type)           \
    X(mime_data)

/* __typeof__ of a function name neither calls nor references it: no link-time dependency. */
#define HTTPC_CURL_ENTRY(name) __typeof__(curl_##name) *name;
struct httpc_curl_api {
    HTTPC_CURL_FUNCTIONS(HTTPC_CURL_ENTRY)
};
#undef HTTPC_CURL_ENTRY

/* Valid after httpc_curl_load() succeeded; all NULL before. */
extern struct httpc_curl_api httpc_curl;

/* Loads libcurl (HTTPC_CURL_SONAME), resolves every function and runs curl_global_init, once;
 * later calls return 0 at once. -1 with err set (naming the library or the missing function) if
 * libcurl is not installed or too old; httpc_curl stays empty then and a later call tries again. */
int httpc_curl_load(struct mcp_error *err);

/* The same with another library file name (tests: a missing library gives a clear error). */
int httpc_curl_load_from(const char *soname, struct mcp_error *err);

#endif
