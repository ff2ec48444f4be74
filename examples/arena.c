/* The arena allocator of "Roll your own memory profiling" (reference 004), reporting its
 * blocks to heaplens through include/heaplens.h instead of a profile of its own. Build with
 * `gcc -O2 -g -Iinclude examples/arena.c`. a() allocates n ints and calls b(), which
 * allocates n ints: main calls a(2 Mi) twice and b(3 Mi) once, from an arena it never frees
 * (as the article's). A scratch arena is filled and reset ten times, which releases its
 * blocks. It prints what it allocated per call site as `arena: key=value ...`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "heaplens.h"

typedef struct {
    uint8_t *start;
    uint8_t *end;
} arena_t;

static arena_t arena_new(size_t cap) {
    uint8_t *p = malloc(cap);
    if (p == NULL) abort();
    return (arena_t){p, p + cap};
}

__attribute__((noinline)) static void *arena_alloc(arena_t *a, size_t size, size_t align, size_t count) {
    size_t available = a->end - a->start;
    size_t padding = -(uintptr_t)a->start & (align - 1);
    size_t offset = padding + size * count;
    if (available < offset) {
        fprintf(stderr, "Out of memory: available=%zu allocation_size=%zu\n", available, offset);
        abort();
    }
    uint8_t *res = a->start + padding;
    a->start += offset;
    heaplens_alloc(a, res, size * count);
    return res;
}

/* The article's a() and b(), using what they allocate (a call whose result goes unused in
 * last place compiles to a jump, and the caller's frame is then not on the stack). */
__attribute__((noinline)) int *b(int n, arena_t *arena) {
    int *p = arena_alloc(arena, sizeof(int), _Alignof(int), n);
    p[0] = n;
    return p;
}

__attribute__((noinline)) int *a(int n, arena_t *arena) {
    int *p = arena_alloc(arena, sizeof(int), _Alignof(int), n);
    p[0] = *b(n, arena);
    return p;
}

int main(void) {
    arena_t arena = arena_new(1 << 28);
    heaplens_pool_name(&arena, "main arena");
    for (int i = 0; i < 2; i++) a(2 * 1024 * 1024, &arena);
    b(3 * 1024 * 1024, &arena);

    arena_t scratch = arena_new(1 << 20);
    uint8_t *base = scratch.start;
    heaplens_pool_name(&scratch, "scratch");
    for (int round = 0; round < 10; round++) {
        for (int k = 0; k < 100; k++) arena_alloc(&scratch, 1, 1, 100);
        scratch.start = base;
        heaplens_pool_reset(&scratch);
    }
    free(base);

    size_t mib8 = 2 * 1024 * 1024 * sizeof(int);
    printf("arena: a_blocks=2 a_bytes=%zu a_b_blocks=2 a_b_bytes=%zu main_b_blocks=1 main_b_bytes=%zu "
           "scratch_blocks=1000 scratch_bytes=100000 resets=10\n",
           2 * mib8, 2 * mib8, (size_t)3 * 1024 * 1024 * sizeof(int));
    return 0;
}
