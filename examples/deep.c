/* Deep recursion: allocates at depth 100 to 300, so whole stacks are long (bench/compare and the
 * incremental-unwinding test use it).
 * Usage: deep ALLOCATIONS */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long rng = 1;

__attribute__((noinline)) static void *leaf(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory"); /* no tail call: leaf stays a frame */
    return p;
}

__attribute__((noinline)) static size_t dive(int depth) {
    if (depth == 0) {
        void *p = leaf(16 + (rng >> 58));
        size_t r = (size_t)p & 1;
        free(p);
        return r;
    }
    size_t r = dive(depth - 1);
    __asm__ volatile("" ::: "memory"); /* no tail call: every level stays a frame */
    return r + 1;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    size_t sink = 0;
    for (long i = 0; i < n; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        sink += dive(100 + (int)(rng >> 56) % 200);
    }
    printf("deep: allocations=%ld sink=%zu\n", n, sink % 7);
    return 0;
}
