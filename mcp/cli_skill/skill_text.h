/* The troubleshoot-sandbox skill (skills/troubleshoot-sandbox/SKILL.md), embedded at build time
 * by embed.cmake. skill_text is NUL-terminated; skill_text_len excludes the NUL. */
#ifndef MCPBOX_CLI_SKILL_TEXT_H
#define MCPBOX_CLI_SKILL_TEXT_H

#include <stddef.h>

extern const unsigned char skill_text[];
extern const size_t skill_text_len;

#endif
