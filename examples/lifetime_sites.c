/* Three call sites whose blocks live for known spans, for the lifetime table's three views
 * (crates/heaplens/tests/view_api.rs):
 *   long_site   allocates LONG blocks, freed only after every temp_site block: each lives
 *               TEMP + (LONG - 1 - k) of the thread's allocations (100..109), and 20 ms;
 *   temp_site   allocates TEMP blocks, each freed before the next allocation (short-lived);
 *   leak_site   allocates LEAK blocks, never freed (live at exit).
 * Prints "lifetime_sites: long=LONG temp=TEMP leak=LEAK". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define LONG 10
#define TEMP 100
#define LEAK 7

static void *volatile sink;

/* Each writes to its block, so that the call to malloc is no tail call and the site keeps its
 * frame. */
__attribute__((noinline, noclone)) void *long_site(int i)
{
    char *p = malloc(64 + i);
    p[0] = 1;
    return p;
}
__attribute__((noinline, noclone)) void temp_site(int i)
{
    sink = malloc(32 + i);
    free(sink);
}
__attribute__((noinline, noclone)) void *leak_site(int i)
{
    char *p = malloc(16 + i);
    p[0] = 1;
    return p;
}

int main(void)
{
    void *kept[LONG];
    for (int k = 0; k < LONG; k++)
        kept[k] = long_site(k);
    for (int i = 0; i < TEMP; i++)
        temp_site(i);
    struct timespec ms20 = {0, 20 * 1000 * 1000};
    nanosleep(&ms20, NULL);
    for (int k = 0; k < LONG; k++)
        free(kept[k]);
    for (int i = 0; i < LEAK; i++)
        sink = leak_site(i);
    printf("lifetime_sites: long=%d temp=%d leak=%d\n", LONG, TEMP, LEAK);
    return 0;
}
