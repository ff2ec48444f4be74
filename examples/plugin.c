/*
 * plugin.c - a shared library that dlopen_main loads at run time.
 *
 * plugin_alloc(n, keep_every) mallocs n blocks of PLUGIN_BLOCK_SIZE (777) bytes, frees all but
 * every keep_every-th (0 = free them all) and returns how many it kept. It is the only code in
 * the process that asks for 777 bytes, so a profiler must attribute those blocks to a frame
 * symbolized as plugin_alloc in this library, even though the library was not loaded when the
 * program started (and, with dlclose, is gone before the program ends).
 *
 * Build: gcc -O2 -g -fPIC -shared -o libplugin.so plugin.c
 */
#include <stdlib.h>

#define PLUGIN_BLOCK_SIZE 777

static void *kept_blocks[100000];
static long nkept;

int plugin_block_size(void) { return PLUGIN_BLOCK_SIZE; }

long plugin_alloc(long n, long keep_every)
{
    void *live[32];
    int nlive = 0;
    long kept = 0;

    for (long i = 0; i < n; i++) {
        char *p = malloc(PLUGIN_BLOCK_SIZE);
        if (p == NULL)
            abort();
        p[0] = (char)i;
        if (keep_every > 0 && i % keep_every == keep_every - 1 &&
            nkept < (long)(sizeof kept_blocks / sizeof kept_blocks[0])) {
            kept_blocks[nkept++] = p;
            kept++;
            continue;
        }
        if (nlive == 32) {
            for (int k = 0; k < nlive; k++)
                free(live[k]);
            nlive = 0;
        }
        live[nlive++] = p;
    }
    for (int k = 0; k < nlive; k++)
        free(live[k]);
    return kept;
}
