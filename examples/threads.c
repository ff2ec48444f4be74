/*
 * threads.c - several threads allocating at once, each with its own block size.
 *
 * Thread t (0-based) mallocs PER_THREAD blocks of SIZE(t) = 500 + 8*t + 3 bytes (odd sizes, at
 * most 1007 so each has its own row in the allocation bin table, and asked for by nothing else),
 * frees all but every KEEP_EVERY-th of them, and returns. The threads start together behind a barrier so their allocations interleave. main
 * joins them and prints its truth, one summary line and one line per thread:
 *
 *     threads: threads=8 per_thread=5000 allocations=40000 frees=... kept=... kept_bytes=...
 *       bytes=...
 *     thread: index=0 size=503 allocs=5000 frees=... kept=...
 *
 * Usage: threads [THREADS [PER_THREAD]]   (defaults 8 and 5000)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 64
#define MAX_PER_THREAD 100000
#define KEEP_EVERY 50
#define SIZE(t) (500 + 8 * (t) + 3)

struct job {
    int index;
    long per_thread;
    long frees;
    long kept;
};

static pthread_barrier_t start;
static void *kept_blocks[MAX_THREADS][MAX_PER_THREAD / KEEP_EVERY + 1];

__attribute__((noinline, noclone)) static void *worker(void *arg)
{
    struct job *j = arg;
    size_t size = SIZE(j->index);
    void *live[64];
    int nlive = 0;

    pthread_barrier_wait(&start);
    for (long i = 0; i < j->per_thread; i++) {
        char *p = malloc(size);
        if (p == NULL)
            exit(2);
        p[0] = (char)i;
        if (i % KEEP_EVERY == KEEP_EVERY - 1) {
            kept_blocks[j->index][j->kept++] = p;
            continue;
        }
        /* Hold up to 64 blocks at a time, so frees are not all right after their malloc. */
        if (nlive == 64) {
            for (int k = 0; k < nlive; k++) {
                free(live[k]);
                j->frees++;
            }
            nlive = 0;
        }
        live[nlive++] = p;
    }
    for (int k = 0; k < nlive; k++) {
        free(live[k]);
        j->frees++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 8;
    long per_thread = argc > 2 ? atol(argv[2]) : 5000;
    static pthread_t tids[MAX_THREADS];
    static struct job jobs[MAX_THREADS];

    setvbuf(stdout, NULL, _IONBF, 0);
    if (nthreads < 1 || nthreads > MAX_THREADS || per_thread < 0 || per_thread > MAX_PER_THREAD) {
        fprintf(stderr, "threads: THREADS must be 1..%d, PER_THREAD 0..%d\n", MAX_THREADS,
                MAX_PER_THREAD);
        return 1;
    }
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int t = 0; t < nthreads; t++) {
        jobs[t].index = t;
        jobs[t].per_thread = per_thread;
        if (pthread_create(&tids[t], NULL, worker, &jobs[t]) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            return 1;
        }
    }
    long frees = 0, kept = 0, kept_bytes = 0, bytes = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(tids[t], NULL);
        frees += jobs[t].frees;
        kept += jobs[t].kept;
        kept_bytes += jobs[t].kept * SIZE(t);
        bytes += per_thread * SIZE(t);
    }
    printf("threads: threads=%d per_thread=%ld allocations=%ld frees=%ld kept=%ld kept_bytes=%ld "
           "bytes=%ld\n",
           nthreads, per_thread, nthreads * per_thread, frees, kept, kept_bytes, bytes);
    for (int t = 0; t < nthreads; t++)
        printf("thread: index=%d size=%d allocs=%ld frees=%ld kept=%ld\n", t, SIZE(t),
               per_thread, jobs[t].frees, jobs[t].kept);
    return 0;
}
