/* Where mcpbox looks for pasta (the passt package), the one user-mode network stack it runs.
 * Shared by the network code and the doctor, so `mcpbox doctor` passes exactly when a sandbox
 * with network=true can start. */
#ifndef BACKEND_LOCAL_PASTA_PATH_H
#define BACKEND_LOCAL_PASTA_PATH_H

#include <stddef.h>
#include <unistd.h>

/* NULL when pasta is not installed. */
static inline const char *local_pasta_path(void)
{
    static const char *const paths[] = {"/usr/bin/pasta", "/usr/local/bin/pasta", "/bin/pasta"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

/* nft (Debian package nftables) programs the rules of egress by policy (egress_netns.c); the
 * doctor checks the same lookup. NULL when it is not installed. */
static inline const char *local_nft_path(void)
{
    static const char *const paths[] = {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft",
                                        "/usr/local/sbin/nft"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

#endif
