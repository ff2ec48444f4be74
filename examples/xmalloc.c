/* Truth program for --skip: the program's own allocation wrapper, xmalloc, called from two
 * functions with known byte counts. Charged to xmalloc by default; with --skip '^xmalloc$'
 * to its callers. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

__attribute__((noinline)) void load_config(void **out) {
    for (int i = 0; i < 3; i++) out[i] = xmalloc(100);
}

__attribute__((noinline)) void parse_lines(void **out) {
    for (int i = 0; i < 5; i++) out[i] = xmalloc(40);
}

int main(void) {
    void *blocks[8];
    load_config(blocks);
    parse_lines(blocks + 3);
    printf("xmalloc: load_config=300 parse_lines=200\n");
    for (int i = 0; i < 8; i++) free(blocks[i]);
    return 0;
}
