/* Many tiny short-lived blocks in a large heap, for the memory map's antialiasing test
 * (crates/heaplens/tests/map.rs): 48 long-lived blocks of 100000 bytes (below glibc's mmap
 * threshold, so they stretch the main heap to about 4.6 MiB, a few KiB per row of a map), then
 * ROUNDS rounds of a 24-byte block allocated and freed at once, always at one address halfway up
 * the heap (glibc's tcache hands the same chunk back). Each tiny block covers a
 * sliver of a pixel in both time and address: drawn naively they vanish; with the paper's
 * antialiasing their row stays visible. Prints "tiny_blocks: rounds=N big=48 big_size=100000". */
#include <stdio.h>
#include <stdlib.h>

#define BIG 48
#define BIG_SIZE 100000
#define ROUNDS 200000

int main(void)
{
    static void *big[BIG];
    void *volatile tiny;
    for (int i = 0; i < BIG; i++) {
        big[i] = malloc(BIG_SIZE);
        ((char *)big[i])[0] = 1;
        /* Halfway, the tiny block's first chunk: freed, it is the one every round reuses, in
         * the middle of the heap. */
        if (i == BIG / 2) {
            tiny = malloc(24);
            free(tiny);
        }
    }
    for (int i = 1; i < ROUNDS; i++) {
        tiny = malloc(24);
        free(tiny);
    }
    for (int i = 0; i < BIG; i++)
        free(big[i]);
    printf("tiny_blocks: rounds=%d big=%d big_size=%d\n", ROUNDS, BIG, BIG_SIZE);
    return 0;
}
