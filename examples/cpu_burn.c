/* CPU time in known proportions, for `heaplens run --cpu` (tests/cpu.rs).
 *
 * Two worker threads each spend 70% of their CPU time in burn_seventy and 30% in burn_thirty
 * (measured on the thread's own CPU-time clock, so the split holds however the machine is
 * loaded); a third thread sleeps throughout, using no CPU. Each worker also allocates a
 * little, so that allocations and samples share the trace.
 *
 * Usage: cpu_burn [MS]   MS = CPU milliseconds per worker (default 600).
 * Prints, per worker, the CPU time each function really used and the blocks it allocated.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long per_worker_ms = 600;
static volatile double sink;

static long thread_cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

/* Arithmetic for about `us` microseconds of this thread's CPU; returns what it used. Checks
 * the clock only every few thousand iterations so that nearly every sample lands in the
 * arithmetic, which is inlined into each burn_ function: their samples are their own. */
static inline __attribute__((always_inline)) long spin(long us, double step) {
    long start = thread_cpu_us(), now = start;
    double x = 1.0;
    while (now - start < us) {
        for (int i = 0; i < 20000; i++) x = x * 1.0000001 + step;
        now = thread_cpu_us();
    }
    sink = x;
    return now - start;
}

/* Different constants keep the compiler from folding the two into one function. */
static __attribute__((noinline)) long burn_seventy(long us) { return spin(us, 0.0000001); }
static __attribute__((noinline)) long burn_thirty(long us) { return spin(us, 0.0000003); }

struct result { long seventy_us, thirty_us, mallocs; };

static void *worker(void *arg) {
    struct result *r = arg;
    long total = per_worker_ms * 1000;
    /* Interleaved in slices of 4 to 16 ms (10 on average), so both run at every point of the
     * run; of random lengths, so that the slices do not keep step with the kernel's tick (a
     * CPU-time timer fires on it) and every sample lands anywhere in a slice. */
    unsigned seed = 12345u + (unsigned)(size_t)r;
    for (long done = 0; done < total;) {
        seed = seed * 1103515245u + 12345u;
        long slice = 4000 + (seed >> 8) % 12001;
        r->seventy_us += burn_seventy(slice * 7 / 10);
        r->thirty_us += burn_thirty(slice - slice * 7 / 10);
        done += slice;
        void *volatile p = malloc(64);
        free(p);
        r->mallocs++;
    }
    return NULL;
}

static volatile int stop_idle;

static void *idle(void *arg) {
    (void)arg;
    while (!stop_idle) usleep(20000);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) per_worker_ms = atol(argv[1]);
    pthread_t w[2], i;
    struct result r[2] = {{0, 0, 0}, {0, 0, 0}};
    pthread_create(&i, NULL, idle, NULL);
    for (int k = 0; k < 2; k++) pthread_create(&w[k], NULL, worker, &r[k]);
    for (int k = 0; k < 2; k++) pthread_join(w[k], NULL);
    stop_idle = 1;
    pthread_join(i, NULL);
    for (int k = 0; k < 2; k++)
        printf("cpu_burn: worker=%d seventy_us=%ld thirty_us=%ld mallocs=%ld\n", k, r[k].seventy_us, r[k].thirty_us,
               r[k].mallocs);
    return 0;
}
