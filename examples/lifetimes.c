/* Blocks whose lifetimes are known in steps, for the replay API's test (crates/heaplens/tests/
 * view_api.rs). Step j allocates block j of 100 + j bytes; block j is freed right after step
 * j + j % 13 (so it lives j % 13 steps), except every 17th block, which is never freed. Every
 * 50th block is moved at once by realloc to 100000 + j bytes, and that block is freed instead.
 * Prints "lifetimes: steps=N" so that the test knows N. */
#include <stdio.h>
#include <stdlib.h>

#define STEPS 5000

static void *blocks[STEPS];

int main(void) {
    for (int i = 0; i < STEPS; i++) {
        blocks[i] = malloc(100 + i);
        if (i % 50 == 0) blocks[i] = realloc(blocks[i], 100000 + i);
        for (int j = i - 12; j <= i; j++) {
            if (j >= 0 && j + j % 13 == i && j % 17 != 0) free(blocks[j]);
        }
    }
    printf("lifetimes: steps=%d\n", STEPS);
    return 0;
}
