/* A program that calls a replacement allocator's own entry points, a known number of times
 * each, for heaplens' test of them (crates/heaplens/tests/replacement_allocators.rs). Build
 * with one of -DUSE_MIMALLOC -lmimalloc, -DUSE_JEMALLOC -ljemalloc, -DUSE_TCMALLOC -ltcmalloc.
 * It prints what it did as `allocator: key=value ...` (calls per entry point); blocks from leak_site stay live. */
#include <stdio.h>
#include <string.h>

#if defined(USE_MIMALLOC)
#include <mimalloc.h>
#elif defined(USE_JEMALLOC)
#include <jemalloc/jemalloc.h>
#elif defined(USE_TCMALLOC)
#include <gperftools/tcmalloc.h>
/* Declared for C++ only. */
void *tc_new(size_t size);
void tc_delete(void *p);
void *tc_newarray(size_t size);
void tc_deletearray(void *p);
#endif

/* Keeps the compiler from dropping an allocation it could prove unused. */
static void *volatile sink;

static void touch(void *p, size_t n) {
    memset(p, 1, n);
    sink = p;
}

__attribute__((noinline)) static void leak_site(int n, size_t size) {
    for (int i = 0; i < n; i++) {
#if defined(USE_MIMALLOC)
        touch(mi_malloc(size), size);
#elif defined(USE_JEMALLOC)
        touch(mallocx(size, 0), size);
#elif defined(USE_TCMALLOC)
        touch(tc_memalign(64, size), size);
#endif
    }
}

int main(void) {
#if defined(USE_MIMALLOC)
    for (int i = 0; i < 1000; i++) { void *p = mi_malloc(64); touch(p, 64); mi_free(p); }
    for (int i = 0; i < 500; i++) { void *p = mi_calloc(4, 25); touch(p, 100); mi_free_size(p, 100); }
    for (int i = 0; i < 300; i++) {
        void *p = mi_zalloc(48);
        touch(p, 48);
        p = mi_realloc(p, 4096);
        touch(p, 4096);
        mi_free(p);
    }
    for (int i = 0; i < 50; i++) { void *p = mi_malloc_aligned(256, 64); touch(p, 256); mi_free(p); }
    leak_site(7, 1000);
    printf("mimalloc: mi_malloc=1007 mi_calloc=500 mi_zalloc=300 mi_realloc=300 mi_malloc_aligned=50 "
           "mi_free=1350 mi_free_size=500 leaked=7 leaked_bytes=7000\n");
#elif defined(USE_JEMALLOC)
    for (int i = 0; i < 1000; i++) { void *p = mallocx(64, 0); touch(p, 64); dallocx(p, 0); }
    for (int i = 0; i < 400; i++) {
        void *p = mallocx(200, MALLOCX_ZERO);
        touch(p, 200);
        p = rallocx(p, 5000, 0);
        touch(p, 5000);
        sdallocx(p, 5000, 0);
    }
    leak_site(9, 333);
    printf("jemalloc: mallocx=1409 rallocx=400 dallocx=1000 sdallocx=400 leaked=9 leaked_bytes=2997\n");
#elif defined(USE_TCMALLOC)
    for (int i = 0; i < 1000; i++) { void *p = tc_malloc(64); touch(p, 64); tc_free(p); }
    for (int i = 0; i < 300; i++) { void *p = tc_calloc(3, 10); touch(p, 30); tc_free_sized(p, 30); }
    for (int i = 0; i < 200; i++) { void *p = tc_new(40); touch(p, 40); tc_delete(p); }
    for (int i = 0; i < 100; i++) { void *p = tc_newarray(80); touch(p, 80); tc_deletearray(p); }
    for (int i = 0; i < 150; i++) {
        void *p = tc_malloc(10);
        touch(p, 10);
        p = tc_realloc(p, 1000);
        touch(p, 1000);
        tc_free(p);
    }
    leak_site(5, 128);
    printf("tcmalloc: tc_malloc=1150 tc_calloc=300 tc_new=200 tc_newarray=100 tc_realloc=150 tc_memalign=5 "
           "tc_free=1150 tc_free_sized=300 tc_delete=200 tc_deletearray=100 leaked=5 leaked_bytes=640\n");
#endif
    return 0;
}
