/* The troubleshoot-sandbox skill (skills/troubleshoot-sandbox/), embedded at build time by
 * embed.cmake. Each text is NUL-terminated; its _len excludes the NUL. */
#ifndef MCPBOX_CLI_SKILL_TEXT_H
#define MCPBOX_CLI_SKILL_TEXT_H

#include <stddef.h>

extern const unsigned char skill_text[];
extern const size_t skill_text_len;
/* skills/troubleshoot-sandbox/reference.md: the detail SKILL.md points to. */
extern const unsigned char skill_reference_text[];
extern const size_t skill_reference_text_len;

#endif
