/* The schema files (schemas/tools/<name>.json, schemas/fixtures/<name>.json) compiled into the binary by
 * cmake/embed_schemas.cmake, so the binary is self-contained. */
#ifndef MCPBOX_EMBEDDED_SCHEMAS_H
#define MCPBOX_EMBEDDED_SCHEMAS_H

#include <stddef.h>

struct embedded_schema {
    const char *path; /* relative to schemas/: "tools/run_command.json" */
    const char *data; /* the file's bytes, NUL-terminated */
    size_t len;
};

extern const struct embedded_schema embedded_schemas[];
extern const size_t embedded_schemas_count;

/* The file at path (relative to schemas/), or NULL. */
const struct embedded_schema *embedded_schema_find(const char *path);

#endif
