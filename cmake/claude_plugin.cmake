# The Claude Code plugin (issue 20). The source tree is a plugin marketplace: .claude-plugin/
# holds marketplace.json and plugin.json, and the plugin's skill is skills/troubleshoot-sandbox.
# The install puts a ready marketplace under DATADIR/mcpbox/claude-plugin whose server entry runs
# the installed binary (`claude plugin marketplace add /usr/share/mcpbox/claude-plugin`).
#
# One source of truth: plugin.json's version must be the project's version (checked here, so a
# mismatch fails the configure), and the skill files installed here are the ones the binary
# embeds (cli/) and the package ships (tests/package checks both).
set(MCPBOX_PLUGIN_JSON ${PROJECT_SOURCE_DIR}/.claude-plugin/plugin.json)
set(MCPBOX_SKILL_FILES ${PROJECT_SOURCE_DIR}/skills/troubleshoot-sandbox/SKILL.md
                       ${PROJECT_SOURCE_DIR}/skills/troubleshoot-sandbox/reference.md)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${MCPBOX_PLUGIN_JSON})
file(READ ${MCPBOX_PLUGIN_JSON} _plugin_json)
string(JSON _plugin_version GET "${_plugin_json}" version)
if(NOT _plugin_version STREQUAL PROJECT_VERSION)
    message(FATAL_ERROR ".claude-plugin/plugin.json says version ${_plugin_version} but the "
                        "project is ${PROJECT_VERSION} (CMakeLists.txt): make them the same")
endif()

set(_plugin_dir ${CMAKE_INSTALL_DATADIR}/mcpbox/claude-plugin)
install(FILES ${PROJECT_SOURCE_DIR}/.claude-plugin/marketplace.json
        DESTINATION ${_plugin_dir}/.claude-plugin)
install(FILES ${MCPBOX_SKILL_FILES} DESTINATION ${_plugin_dir}/skills/troubleshoot-sandbox)
# plugin.json is written at install time: the server entry names the binary where this install
# (or the package, whose prefix is /usr) puts it.
install(CODE "
    set(MCPBOX_PLUGIN_JSON \"${MCPBOX_PLUGIN_JSON}\")
    set(MCPBOX_PLUGIN_BIN \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/mcpbox\")
    set(MCPBOX_PLUGIN_OUT
        \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${_plugin_dir}/.claude-plugin/plugin.json\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/claude_plugin_json.cmake\")")
