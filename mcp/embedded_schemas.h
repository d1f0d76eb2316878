/* The schema files compiled into the binary by cmake/embed_schemas.cmake, so the binary is
 * self-contained: schemas/tools/<name>.json, each keyed by its path below schemas/
 * ("tools/run_command.json"). A table ends with a NULL path; the test binary's conformance
 * fixtures have a table of their own (tests/fixtures/). */
#ifndef MCPBOX_EMBEDDED_SCHEMAS_H
#define MCPBOX_EMBEDDED_SCHEMAS_H

#include <stddef.h>

struct embedded_schema {
    const char *path; /* below its schemas/ folder: "tools/run_command.json" */
    const char *data; /* the file's bytes, NUL-terminated */
    size_t len;
};

extern const struct embedded_schema embedded_schemas[];
extern const size_t embedded_schemas_count;

/* The file at path in embedded_schemas (below schemas/), or NULL (mcp/registry.c). */
const struct embedded_schema *embedded_schema_find(const char *path);

#endif
