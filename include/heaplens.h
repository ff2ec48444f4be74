/* heaplens.h: report the blocks of your own allocators (pools, arenas, free lists) to heaplens.
 *
 * Header-only, no library to link: under `heaplens run` each call records an event, with the
 * call stack of the call and the pool as its innermost frame, so the pool shows in every
 * report, export and picture as its own entry point. Without heaplens a call costs a load and a
 * well-predicted branch. Thread-safe. The four calls are statement macros.
 *
 *     #include "heaplens.h"
 *
 *     void *arena_alloc(arena_t *a, size_t size) {
 *         void *p = ...;                           // the arena's own bookkeeping
 *         heaplens_alloc(a, p, size);              // a block of `size` bytes of pool `a`
 *         return p;
 *     }
 *     void arena_free_all(arena_t *a) { ...; heaplens_pool_reset(a); }
 *
 *     heaplens_pool_name(&arena, "parser arena");  // any time: names the pool in every view
 *
 * A pool is any pointer that identifies it (its struct, say). heaplens_free(pool, ptr)
 * releases one block; heaplens_pool_reset(pool) releases every block of the pool still live.
 * Pool blocks are counted apart from malloc's: an arena whose memory came from malloc shows
 * both its chunk (allocated by malloc) and the blocks in it.
 *
 * Needs dlsym, which is in the C library from glibc 2.34 on (older ones: link with -ldl).
 * The entry point is looked up once per translation unit. Licence: the project's (MIT OR Apache-2.0). */
#ifndef HEAPLENS_H
#define HEAPLENS_H

#include <dlfcn.h>
#include <stddef.h>

/* glibc's RTLD_DEFAULT, which <dlfcn.h> defines only under _GNU_SOURCE. */
#define HEAPLENS_RTLD_DEFAULT ((void *)0)

#ifdef __cplusplus
extern "C" {
#endif

/* What a call says (the first argument of heaplens_pool_v1). */
enum { HEAPLENS_ALLOC = 1, HEAPLENS_FREE = 2, HEAPLENS_NAME = 3, HEAPLENS_RESET = 4 };

typedef void (*heaplens_pool_fn)(int kind, const void *pool, const void *ptr, size_t size);

/* After each call: code after it keeps the compiler from making it a tail call, which would
 * drop the calling function (the pool's allocate function) from the recorded stack. */
#define HEAPLENS_NO_TAIL_CALL() __asm__ __volatile__("")

/* The monitor's entry point, or NULL when the program runs without heaplens. */
static inline heaplens_pool_fn heaplens__entry(void) {
    /* 0: not looked up yet; 1: absent; else the function. */
    static unsigned long state;
    unsigned long s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (__builtin_expect(s == 0, 0)) {
        void *f = dlsym(HEAPLENS_RTLD_DEFAULT, "heaplens_pool_v1");
        s = f ? (unsigned long)f : 1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 1 ? (heaplens_pool_fn)0 : (heaplens_pool_fn)s;
}

/* The calls are macros, not inline functions: the debug info would name an inline function
 * as a frame of its own between the pool's allocate function and the pool. */
#define heaplens__call(kind, pool, ptr, size)                                         \
    do {                                                                              \
        heaplens_pool_fn heaplens__f = heaplens__entry();                             \
        if (heaplens__f) {                                                            \
            heaplens__f((kind), (const void *)(pool), (const void *)(ptr), (size));   \
            HEAPLENS_NO_TAIL_CALL();                                                  \
        }                                                                             \
    } while (0)

/* A block of `size` bytes at `ptr` was allocated from `pool`. */
#define heaplens_alloc(pool, ptr, size) heaplens__call(HEAPLENS_ALLOC, pool, ptr, (size_t)(size))

/* The block at `ptr` of `pool` was released. */
#define heaplens_free(pool, ptr) heaplens__call(HEAPLENS_FREE, pool, ptr, 0)

/* Names `pool` in every view ("parser arena"); a later name replaces an earlier one. */
#define heaplens_pool_name(pool, name) heaplens__call(HEAPLENS_NAME, pool, name, 0)

/* Every block of `pool` still live was released at once (an arena freed or rewound). */
#define heaplens_pool_reset(pool) heaplens__call(HEAPLENS_RESET, pool, 0, 0)

#ifdef __cplusplus
}
#endif

#endif /* HEAPLENS_H */
