/*
 * dlopen_main.c - loads a plugin with dlopen and lets it allocate (see plugin.c).
 *
 * Usage: dlopen_main PLUGIN.so [N [KEEP_EVERY [close]]]   (defaults 1000 and 10)
 *
 * Calls plugin_alloc(N, KEEP_EVERY) from the library and prints the truth:
 *
 *     dlopen: plugin=/path/libplugin.so size=777 allocs=1000 frees=900 kept=100 closed=0
 *
 * With a fourth argument "close" the library is dlclose'd before the program exits, so the
 * blocks it kept outlive the code that allocated them.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_main PLUGIN.so [N [KEEP_EVERY [close]]]\n");
        return 1;
    }
    long n = argc > 2 ? atol(argv[2]) : 1000;
    long keep_every = argc > 3 ? atol(argv[3]) : 10;
    int do_close = argc > 4 && strcmp(argv[4], "close") == 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen_main: %s\n", dlerror());
        return 1;
    }
    long (*plugin_alloc)(long, long) = (long (*)(long, long))dlsym(lib, "plugin_alloc");
    int (*plugin_block_size)(void) = (int (*)(void))dlsym(lib, "plugin_block_size");
    if (plugin_alloc == NULL || plugin_block_size == NULL) {
        fprintf(stderr, "dlopen_main: %s\n", dlerror());
        return 1;
    }
    long kept = plugin_alloc(n, keep_every);
    int size = plugin_block_size();
    if (do_close && dlclose(lib) != 0) {
        fprintf(stderr, "dlopen_main: dlclose: %s\n", dlerror());
        return 1;
    }
    printf("dlopen: plugin=%s size=%d allocs=%ld frees=%ld kept=%ld closed=%d\n", argv[1], size, n,
           n - kept, kept, do_close);
    return 0;
}
