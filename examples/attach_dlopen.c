/* A program to attach to that loads a library while attached (tests/attach_dlopen.rs).
 *
 * Usage: attach_dlopen [exec]
 *
 * Waits for a line on stdin (the test attaches meanwhile), then dlopens libplugin.so by its
 * bare name, found through this program's RUNPATH ($ORIGIN: the library is beside it), and at
 * once calls plugin_alloc(500, 0): 500 blocks of 777 bytes (plugin.c), all freed, within
 * microseconds of the dlopen. Prints
 *     attach_dlopen: allocs=500 size=777 kept=0
 * and exits with status 0; with "exec", then execs itself as `attach_dlopen after`, which
 * prints `attach_dlopen: after exec` and exits with status 6.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && !strcmp(argv[1], "after")) {
        printf("attach_dlopen: after exec\n");
        return 6;
    }
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    void *lib = dlopen("libplugin.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("attach_dlopen: %s\n", dlerror());
        return 1;
    }
    long (*plugin_alloc)(long, long) = (long (*)(long, long))dlsym(lib, "plugin_alloc");
    int (*plugin_block_size)(void) = (int (*)(void))dlsym(lib, "plugin_block_size");
    long kept = plugin_alloc(500, 0);
    printf("attach_dlopen: allocs=500 size=%d kept=%ld\n", plugin_block_size(), kept);
    if (argc > 1 && !strcmp(argv[1], "exec")) {
        char *args[] = {argv[0], "after", NULL};
        execv("/proc/self/exe", args);
        perror("execv");
        return 1;
    }
    return 0;
}
