/* The composition root of the backends: the one place that names each backend this executable
 * has, makes it from the server's configuration and puts it into the table (backend_set). */
#ifndef MCPBOX_CLI_BACKENDS_H
#define MCPBOX_CLI_BACKENDS_H

#include <uv.h>

struct backend_set;
struct mcp_config;
struct store;

/* server_backends_fn (mcp/server.h): local first (create_sandbox's default), then OpenSandbox. */
void backends_start(struct backend_set *set, uv_loop_t *loop, struct store *store,
                    const struct mcp_config *cfg);
/* "local,opensandbox": what --version prints. */
const char *backends_names(void);

#endif
