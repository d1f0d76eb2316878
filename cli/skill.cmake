# `mcpbox skill`: the troubleshoot-sandbox skill, embedded in the binary at build time so that an
# installed mcpbox can install the skill with nothing else on disk. The protocol core links this
# library when the target exists.
# The same files the plugin and the package carry (cmake/claude_plugin.cmake).
set(_skill_dir ${PROJECT_SOURCE_DIR}/skills/troubleshoot-sandbox)
set(_skill_c)
foreach(_pair "SKILL.md=skill_text" "reference.md=skill_reference_text")
    string(REPLACE "=" ";" _pair ${_pair})
    list(GET _pair 0 _file)
    list(GET _pair 1 _symbol)
    set(_out ${CMAKE_CURRENT_BINARY_DIR}/${_symbol}.c)
    add_custom_command(OUTPUT ${_out}
        COMMAND ${CMAKE_COMMAND} -DIN=${_skill_dir}/${_file} -DOUT=${_out} -DSYMBOL=${_symbol}
                -DHEADER=mcp/cli_skill/skill_text.h -P ${CMAKE_CURRENT_SOURCE_DIR}/embed.cmake
        DEPENDS ${_skill_dir}/${_file} ${CMAKE_CURRENT_SOURCE_DIR}/embed.cmake
        COMMENT "Embedding the troubleshoot-sandbox skill's ${_file}")
    list(APPEND _skill_c ${_out})
endforeach()

add_library(mcpbox_cli_skill STATIC ${PROJECT_SOURCE_DIR}/mcp/cli_skill.c ${_skill_c})
target_link_libraries(mcpbox_cli_skill PUBLIC mcpbox_warnings mcpbox_base)
