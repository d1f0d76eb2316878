/* Subcommands of the mcpbox executable. Each is `int cli_<name>_main(int argc, char **argv)`
 * (argv[0] is the subcommand name) returning the process exit status, and has one line in the
 * table in cli/main.c. */
#ifndef MCPBOX_CLI_H
#define MCPBOX_CLI_H

struct mcp_server;
struct mcp_error;

/* mcpbox serve: the MCP server over stdio or HTTP (cli/main.c). */
int cli_serve_main(int argc, char **argv);
/* mcpbox sandbox create|ls|get|exec|cp|logs|rm|pause|resume (cli/cli_sandbox.c). */
int cli_sandbox_main(int argc, char **argv);
/* mcpbox image pull|ls|rm|prune: the local backend's OCI image store (cli/cli_image.c). */
int cli_image_main(int argc, char **argv);
/* `mcpbox volume`: named volumes (cli_volume.c). */
int cli_volume_main(int argc, char **argv);
/* mcpbox secret add|ls|rm: secrets the egress proxy injects (cli/cli_secret.c). */
int cli_secret_main(int argc, char **argv);
/* mcpbox doctor: the host checks (cli/cli_doctor.c). */
int cli_doctor_main(int argc, char **argv);
/* mcpbox setup --user NAME [--undo]: the one-time root step for a rootless user (cli/cli_setup.c). */
int cli_setup_main(int argc, char **argv);
/* mcpbox skill install|uninstall|show|path (cli/cli_skill.c). */
int cli_skill_main(int argc, char **argv);

/* Registers the sandbox tools (mcp/tools/) into the server (cli/server_tools.c). */
int server_add_sandbox_tools(struct mcp_server *srv, struct mcp_error *err);

struct mcp_config;
/* What a binary built on cli/ adds to `serve`, chosen at link time: in mcpbox nothing
 * (cli/serve_extras.c); a test binary its own options and what they register (the test-only
 * mcpbox-conformance, tests/fixtures/serve_fixtures.c). cli_serve_take_options removes the
 * binary's own options from argv before `serve` parses the rest, and returns the new argc. */
int cli_serve_take_options(int argc, char **argv);
int cli_serve_extras(struct mcp_server *srv, const struct mcp_config *cfg, struct mcp_error *err);

#endif
