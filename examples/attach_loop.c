/* A program to attach to (heaplens attach): 4 threads allocate and free in a loop and the main
 * thread prints their count on stderr every 100 ms, each line with the CLOCK_MONOTONIC time:
 *   attach_loop: t=NS allocs=N
 * stdout only says what is the same in every run. Modes:
 *   attach_loop loop [ITER]  4 threads x ITER allocations (default 2000000), sleeping 1 ms every
 *                            500; exits with status 7
 *   attach_loop fork         as loop with ITER/4, then forks a child that allocates and exits 3
 *   attach_loop sleep SEC    sleeps SEC seconds, then allocates
 *   attach_loop read         reads a line from stdin, then allocates and echoes it
 *   attach_loop hold N SIZE SEC  allocates N blocks of SIZE bytes in hold_blocks, says so,
 *                            keeps them SEC seconds, frees them; exits with status 4 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define RING 64
static atomic_ulong allocs;
static atomic_int running;
static long iterations = 2000000;

static unsigned long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long)ts.tv_sec * 1000000000ul + (unsigned long)ts.tv_nsec;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    char *ring[RING] = {0};
    unsigned long sum = 0;
    for (long i = 0; i < iterations; i++) {
        int k = (int)(i % RING);
        free(ring[k]);
        size_t size = 200 + (size_t)((i + id) % 64);
        ring[k] = malloc(size);
        ring[k][0] = (char)i;
        sum += (unsigned char)ring[k][0];
        atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
        if (i % 500 == 499)
            usleep(1000);
    }
    for (int k = 0; k < RING; k++)
        free(ring[k]);
    atomic_fetch_sub(&running, 1);
    return (void *)sum;
}

static unsigned long run_threads(void)
{
    pthread_t t[THREADS];
    atomic_store(&running, THREADS);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    while (atomic_load(&running) > 0) {
        fprintf(stderr, "attach_loop: t=%lu allocs=%lu\n", now_ns(), atomic_load(&allocs));
        usleep(100000);
    }
    unsigned long sum = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (unsigned long)r;
    }
    fprintf(stderr, "attach_loop: t=%lu allocs=%lu\n", now_ns(), atomic_load(&allocs));
    return sum;
}

static void some_blocks(const char *what)
{
    char *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = malloc(900 + i);
        snprintf(p[i], 900, "%s %d", what, i);
    }
    printf("attach_loop: %s blocks=100 last=%s\n", what, p[99]);
    for (int i = 0; i < 100; i++)
        free(p[i]);
}

/* The blocks of `hold`, allocated here (not inlined into main: the site the views name). */
__attribute__((noinline)) static char **hold_blocks(int n, size_t size)
{
    char **p = malloc(sizeof *p * (size_t)n);
    for (int i = 0; i < n; i++) {
        p[i] = malloc(size);
        memset(p[i], i, size);
    }
    return p;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "loop";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "sleep")) {
        sleep(argc > 2 ? (unsigned)atoi(argv[2]) : 3);
        some_blocks("after-sleep");
        return 5;
    }
    if (!strcmp(mode, "hold") && argc > 4) {
        int n = atoi(argv[2]);
        size_t size = (size_t)atol(argv[3]);
        char **p = hold_blocks(n, size);
        printf("attach_loop: held blocks=%d bytes=%zu\n", n, (size_t)n * size);
        sleep((unsigned)atoi(argv[4]));
        for (int i = 0; i < n; i++)
            free(p[i]);
        free(p);
        return 4;
    }
    if (!strcmp(mode, "read")) {
        char line[256];
        if (!fgets(line, sizeof line, stdin))
            return 1;
        line[strcspn(line, "\n")] = 0;
        some_blocks(line);
        return 6;
    }
    if (argc > 2)
        iterations = atol(argv[2]);
    if (!strcmp(mode, "fork"))
        iterations /= 4;
    unsigned long sum = run_threads();
    printf("attach_loop: threads=%d allocs=%lu sum=%lu\n", THREADS, atomic_load(&allocs), sum);
    if (!strcmp(mode, "fork")) {
        pid_t c = fork();
        if (c == 0) {
            some_blocks("child");
            _exit(3);
        }
        int st = 0;
        waitpid(c, &st, 0);
        printf("attach_loop: child exited %d\n", WEXITSTATUS(st));
        some_blocks("parent");
    }
    return 7;
}
