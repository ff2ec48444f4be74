/* Deep recursion whose stacks differ at many depths: each round walks 100 to 170 frames down
 * through one of two call sites per level (the choice is a bit of one of 256 keys), allocating
 * every 4 levels on the way down and freeing on the way back up, so consecutive stacks share
 * long outer prefixes and the stacks of different rounds part at any depth (bench/compare's
 * deep-paths).
 * Usage: deep_paths ROUNDS */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long rng = 1;
static unsigned long long key;

static size_t walk_a(int level, int depth);
static size_t walk_b(int level, int depth);

__attribute__((noinline)) static size_t step(int level, int depth) {
    if (level == depth) {
        void *p = malloc(24 + (rng >> 59));
        __asm__ volatile("" : : "r"(p) : "memory");
        size_t r = (size_t)p & 1;
        free(p);
        return r;
    }
    void *p = NULL;
    if (level % 4 == 3) {
        p = malloc(16 + 8 * (level % 5));
        __asm__ volatile("" : : "r"(p) : "memory");
    }
    size_t r = (key >> (level % 64)) & 1 ? walk_a(level + 1, depth) : walk_b(level + 1, depth);
    free(p);
    __asm__ volatile("" ::: "memory"); /* no tail call: every level stays a frame */
    return r + 1;
}

__attribute__((noinline)) static size_t walk_a(int level, int depth) {
    size_t r = step(level, depth);
    __asm__ volatile("" ::: "memory");
    return r;
}

__attribute__((noinline)) static size_t walk_b(int level, int depth) {
    size_t r = step(level, depth) + 1;
    __asm__ volatile("" ::: "memory");
    return r;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    unsigned long long keys[256];
    for (int i = 0; i < 256; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        keys[i] = rng;
    }
    size_t sink = 0, calls = 0;
    for (long i = 0; i < n; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        key = keys[rng >> 56];
        int depth = 50 + (int)((rng >> 40) % 36); /* two frames a level: 100 to 170 frames */
        calls += 1 + depth / 4;
        sink += step(0, depth);
    }
    printf("deep_paths: allocations=%zu sink=%zu\n", calls, sink % 7);
    return 0;
}
