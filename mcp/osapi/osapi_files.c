/* execd's files, directories, metrics and code-context endpoints, over the backend's file
 * operations. */
#define LOG_MODULE "osapi"
#include "mcp/osapi/osapi-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/base/util.h"
#include "mcp/base/xalloc.h"

bool osapi_files_route(struct osapi_req *req, const char *path)
{
    return false;
}
