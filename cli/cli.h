/* Subcommands of the mcpbox executable. Each is `int cli_<name>_main(int argc, char **argv)`
 * (argv[0] is the subcommand name) returning the process exit status, and has one line in the
 * table in mcp/main.c. */
#ifndef MCPBOX_CLI_H
#define MCPBOX_CLI_H

struct mcp_server;
struct mcp_error;

/* mcpbox serve: the MCP server over stdio or HTTP (mcp/main.c). */
int cli_serve_main(int argc, char **argv);
/* mcpbox sandbox ... / doctor (owner: local-ops), mcpbox skill ... (owner: ship). */
int cli_sandbox_main(int argc, char **argv);
/* mcpbox image pull|ls|rm|prune: the local backend's OCI image store (mcp/cli/cli_image.c). */
int cli_image_main(int argc, char **argv);
int cli_doctor_main(int argc, char **argv);
/* mcpbox setup --user NAME [--undo]: the one-time root step for a rootless user (mcp/cli). */
int cli_setup_main(int argc, char **argv);
int cli_skill_main(int argc, char **argv);

/* Registers the sandbox tools (mcp/tools/) when the executable was built with them; a no-op
 * otherwise (mcp/server_tools.c). */
int server_add_sandbox_tools(struct mcp_server *srv, struct mcp_error *err);

#endif
