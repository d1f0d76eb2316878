/* Placeholder entry point; replaced by the protocol core. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("mcpbox %s\n", MCPBOX_VERSION);
        return 0;
    }
    fprintf(stderr, "mcpbox: not yet implemented\n");
    return 1;
}
