/* timed.c: allocations at known moments, for checking the report's times. Allocates 1000
 * bytes, sleeps 250 ms, allocates 2000 more (the peak, 3000 bytes, comes after the sleep),
 * frees both. Prints its truth: `timed: sleep_ms=250 peak_bytes=3000`. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    char *volatile a = malloc(1000);
    struct timespec ts = {0, 250 * 1000 * 1000};
    nanosleep(&ts, NULL);
    char *volatile b = malloc(2000);
    free(a);
    free(b);
    printf("timed: sleep_ms=250 peak_bytes=3000\n");
    return 0;
}
