# Install rules: `cmake --install BUILD [--prefix DIR]` puts the binary, the man page, the
# troubleshoot-sandbox skill, the docs and the examples in the usual places. The binary is
# self-contained (schemas, skill and the sandbox agent are embedded); the files below are for
# people and for `claude` to find.
include(GNUInstallDirs)

install(TARGETS mcpbox RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Man page, gzipped as Debian policy wants (man(1) reads it either way).
find_program(MCPBOX_GZIP gzip)
set(_man_src ${PROJECT_SOURCE_DIR}/docs/mcpbox.1)
if(MCPBOX_GZIP)
    set(_man_gz ${PROJECT_BINARY_DIR}/mcpbox.1.gz)
    add_custom_command(OUTPUT ${_man_gz}
        COMMAND ${MCPBOX_GZIP} -9 -n -c ${_man_src} > ${_man_gz}
        DEPENDS ${_man_src} COMMENT "Compressing the man page")
    add_custom_target(mcpbox_manpage ALL DEPENDS ${_man_gz})
    install(FILES ${_man_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
    install(FILES ${_man_src} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

# The skill and the server together, as a Claude Code plugin marketplace (DATADIR/mcpbox/
# claude-plugin); `mcpbox skill install` writes the same skill files from the binary.
include(${CMAKE_CURRENT_LIST_DIR}/claude_plugin.cmake)

# Docs the README links to, and the examples.
file(GLOB _mcpbox_docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${_mcpbox_docs} ${PROJECT_SOURCE_DIR}/docs/architecture.svg
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The license (Apache-2.0): the full text, and the machine-readable Debian copyright file where
# Debian policy looks for it (/usr/share/doc/mcpbox/copyright).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_CURRENT_LIST_DIR}/debian-copyright DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME copyright)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        PATTERN node_modules EXCLUDE PATTERN package-lock.json EXCLUDE)
