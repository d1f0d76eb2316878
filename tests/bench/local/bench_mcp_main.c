/* The local benchmark's MCP phase alone (bench_local runs it too, after its C-API modes):
 *   bench_local_mcp [-n ROUNDS] [--quick] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_mcp.h"

int main(int argc, char **argv)
{
    struct bench_mcp_opts o = {.iterations = 100};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            o.iterations = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            o.iterations = 3, o.quick = true;
        else {
            fprintf(stderr, "usage: %s [-n ROUNDS] [--quick]\n", argv[0]);
            return 2;
        }
    }
    if (o.iterations <= 0)
        return 2;
    return bench_mcp_phase(&o);
}
