/* The handler table the server registers (names match schemas/tools/<name>.json). */
#include "mcp/tools/tools.h"

#include "mcp/tools/tools-internal.h"

const struct tool_def sandbox_tools[] = {
    {"create_sandbox", tool_create_sandbox},
    {"list_sandboxes", tool_list_sandboxes},
    {"get_sandbox", tool_get_sandbox},
    {"destroy_sandbox", tool_destroy_sandbox},
    {"update_sandbox", tool_update_sandbox},
    {"run_command", tool_run_command},
    {"get_command", tool_get_command},
    {"kill_command", tool_kill_command},
    {"write_file", tool_write_file},
    {"read_file", tool_read_file},
    {"list_files", tool_list_files},
    {"search_files", tool_search_files},
    {"replace_in_file", tool_replace_in_file},
    {"move_path", tool_move_path},
    {"delete_path", tool_delete_path},
    {"make_directory", tool_make_directory},
    {"get_endpoint", tool_get_endpoint},
    {"diagnose_sandbox", tool_diagnose_sandbox},
    {"snapshot_sandbox", tool_snapshot_sandbox},
    {"run_code", tool_run_code},
    {"review_changes", tool_review_changes},
    {"apply_changes", tool_apply_changes},
    {"volume", tool_volume},
    {"terminal", tool_terminal},
};

const size_t sandbox_tools_count = sizeof(sandbox_tools) / sizeof(sandbox_tools[0]);
