/* Shared between the fixture files. */
#ifndef MCPBOX_FIXTURES_INTERNAL_H
#define MCPBOX_FIXTURES_INTERNAL_H

#include "mcp/tool.h"

/* A 1x1 PNG and a tiny WAV, as the conformance reference server uses. */
#define FIXTURE_PNG_BASE64                                                                         \
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
#define FIXTURE_WAV_BASE64 "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

/* Fixtures that ask the client something (fixtures_client.c). */
tool_handler_fn fixture_sampling, fixture_elicitation, fixture_elicitation_defaults,
    fixture_elicitation_enums;

#endif
