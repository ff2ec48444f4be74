/* Two builds of one program for `heaplens diff`: built with -DFACTOR=2, build_index makes
 * twice the blocks (twice the allocations and bytes, all of them held at the peak); the other
 * functions are the same. -DPAD moves every function's code (a rebuild that moved code). Each
 * function's truth is printed: its allocations and bytes.
 */
#include <stdio.h>
#include <stdlib.h>

#ifndef FACTOR
#define FACTOR 1
#endif

static void *volatile sink;
static void *kept[1024];
static int nkept;

#ifdef PAD
__attribute__((noinline)) int padding(int x)
{
    int s = 0;
    for (int i = 0; i < x; i++)
        s += i * x ^ (s >> 3);
    return s;
}
#endif

/* 300 blocks of 40 bytes, each freed at once. */
__attribute__((noinline)) static long parse_input(void)
{
    for (int i = 0; i < 300; i++) {
        char *p = malloc(40);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
    return 300 * 40;
}

/* 200 x FACTOR blocks of 48 bytes, held until main frees them. */
__attribute__((noinline)) static long build_index(void)
{
    for (int i = 0; i < 200 * FACTOR; i++) {
        kept[nkept] = malloc(48);
        sink = kept[nkept++];
    }
    return 200L * FACTOR * 48;
}

/* 50 blocks of 1000 bytes, each freed at once. */
__attribute__((noinline)) static long write_output(void)
{
    for (int i = 0; i < 50; i++) {
        char *p = malloc(1000);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
    return 50 * 1000;
}

int main(void)
{
#ifdef PAD
    sink = (void *)(long)padding(3);
#endif
    long a = parse_input();
    long b = build_index();
    long c = write_output();
    for (int i = 0; i < nkept; i++)
        free(kept[i]);
    printf("diff_grow: factor=%d parse_input=%ld build_index=%ld build_index_calls=%d write_output=%ld\n", FACTOR,
           a, b, 200 * FACTOR, c);
    return 0;
}
