/*
 * growth.c - buffers grown by realloc, as dynamic arrays and string builders do.
 *
 * For each of N buffers: p = NULL, then p = realloc(p, size) for size = 16, 32, ..., 4096 (nine
 * calls, the first on NULL), writing the new tail each time; every odd buffer is then freed,
 * every even one kept (leaked). It prints its truth:
 *
 *     growth: buffers=N reallocs=9N released=8N frees=N/2 bytes=8176N kept=N-N/2 kept_bytes=...
 *
 * A realloc counts as one allocation and, when its old block is not NULL, one deallocation.
 *
 * Usage: growth [N]   (default 10000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 9
#define FIRST 16

static void **kept;

__attribute__((noinline, noclone)) static void *grow(long i)
{
    char *p = NULL;
    size_t old = 0;
    for (size_t size = FIRST; size <= FIRST << (STEPS - 1); size *= 2) {
        char *q = realloc(p, size);
        if (q == NULL)
            exit(2);
        memset(q + old, (int)(i & 0x7f), size - old);
        p = q;
        old = size;
    }
    return p;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000;
    if (n < 1 || n > 10000000)
        return 64;
    kept = malloc(sizeof(void *) * (size_t)n);
    if (kept == NULL)
        return 2;
    long frees = 0, nkept = 0;
    for (long i = 0; i < n; i++) {
        void *p = grow(i);
        if (i % 2) {
            free(p);
            frees++;
        } else {
            kept[nkept++] = p;
        }
    }
    long bytes_per = 0;
    for (size_t size = FIRST; size <= FIRST << (STEPS - 1); size *= 2)
        bytes_per += (long)size;
    printf("growth: buffers=%ld reallocs=%ld released=%ld frees=%ld bytes=%ld kept=%ld kept_bytes=%ld\n", n,
           n * STEPS, n * (STEPS - 1), frees, n * bytes_per, nkept, nkept * (long)(FIRST << (STEPS - 1)));
    return 0;
}
