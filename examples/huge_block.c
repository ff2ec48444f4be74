/*
 * huge_block.c - one block of 5 GiB (never touched, so it costs address space, not memory)
 * among small ones, for the pictures: a block of 4 GiB or more keeps its whole size on the
 * page of `heaplens view` and in its drawing (sizes once travelled to the page as 32 bits).
 *
 *     huge_block: size=5368709120 small=100
 *
 * Exits 2 when the system refuses the 5 GiB (no overcommit), so a test says why.
 */
#include <stdio.h>
#include <stdlib.h>

#define HUGE_SIZE (5ULL << 30)

/* The empty asm after each call keeps it a call (not a jump), so each function is a frame. */
__attribute__((noinline)) static void *allocate_five_gib(void) {
    void *p = malloc(HUGE_SIZE);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *small_block(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    void *small[100];
    for (int i = 0; i < 100; i++) small[i] = small_block(64 + i);
    void *big = allocate_five_gib();
    if (!big) {
        printf("huge_block: malloc of %llu bytes refused\n", HUGE_SIZE);
        return 2;
    }
    for (int i = 0; i < 100; i += 2) free(small[i]);
    printf("huge_block: size=%llu small=100\n", HUGE_SIZE);
    return 0;
}
