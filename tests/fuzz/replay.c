/* Replays fuzz inputs as an ordinary test: every file named on the command line (directories are
 * walked one level deep) goes through LLVMFuzzerTestOneInput once. With ASan/UBSan any crash,
 * leak or undefined behaviour fails the test. An empty corpus is a failure: the test would
 * otherwise prove nothing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;

    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *data = malloc(size ? size : 1);
    size_t got = fread(data, 1, size, f);
    fclose(f);
    LLVMFuzzerTestOneInput(data, got);
    free(data);
    return 0;
}

static int run_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];

    if (!d)
        return -1;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (run_file(path) < 0) {
            closedir(d);
            return -1;
        }
        (*count)++;
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    int count = 0;
    struct stat st;

    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        int r = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? run_dir(argv[i], &count)
                                                                : (count++, run_file(argv[i]));
        if (r < 0)
            return 1;
    }
    printf("replayed %d input(s)\n", count);
    return count > 0 ? 0 : 1;
}
