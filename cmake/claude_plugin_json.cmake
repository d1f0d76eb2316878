# Install step of cmake/claude_plugin.cmake: writes the installed plugin.json, the source's with
# the MCP server's command set to the installed binary (MCPBOX_PLUGIN_BIN).
file(READ "${MCPBOX_PLUGIN_JSON}" _json)
string(JSON _json SET "${_json}" mcpServers sandbox command "\"${MCPBOX_PLUGIN_BIN}\"")
message(STATUS "Installing: ${MCPBOX_PLUGIN_OUT} (server: ${MCPBOX_PLUGIN_BIN} serve)")
file(WRITE "${MCPBOX_PLUGIN_OUT}" "${_json}\n")
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${MCPBOX_PLUGIN_OUT}")
