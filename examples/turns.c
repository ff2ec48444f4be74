/*
 * turns.c - threads that take turns, and threads that run at once, handing blocks between them.
 *
 * heaplens keeps the times of events coarser (about 0.4 us) where no other thread's events can
 * fall among them, exact where they can; either way every free must meet its allocation when
 * the threads' events are merged. Three phases, each a known number of calls:
 *
 *   1. main mallocs BLOCKS blocks of 40 bytes; a worker frees them all and mallocs BLOCKS blocks
 *      of 56 bytes; main, after joining it, frees those (one thread at a time, 30 ms apart);
 *   2. a producer and a consumer run at once: the producer mallocs ROUNDS blocks of 72 bytes
 *      and passes each through a one-slot mailbox; the consumer frees each and mallocs a 24-byte
 *      block the producer frees (frees and reuses of one address on two threads, microseconds
 *      apart);
 *   3. main mallocs KEPT blocks of 88 bytes and never frees them.
 *
 * It prints its truth:
 *
 *     turns: mallocs=... frees=... leaked_blocks=... leaked_bytes=...
 *
 * Usage: turns [BLOCKS [ROUNDS]]   (defaults 30000 and 30000)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define KEPT 100

static long blocks = 30000, rounds = 30000;
static void **handed;
static _Atomic(void *) to_consumer, to_producer;

static void pause_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < blocks; i++) free(handed[i]);
    for (long i = 0; i < blocks; i++) handed[i] = malloc(56);
    return NULL;
}

static void *producer(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        void *p = malloc(72);
        while (atomic_load(&to_consumer) != NULL) {
        }
        atomic_store(&to_consumer, p);
        void *back;
        while ((back = atomic_exchange(&to_producer, NULL)) == NULL) {
        }
        free(back);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        void *p;
        while ((p = atomic_exchange(&to_consumer, NULL)) == NULL) {
        }
        free(p);
        atomic_store(&to_producer, malloc(24));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* no stdio buffer: every malloc is one of the phases' */
    if (argc > 1) blocks = atol(argv[1]);
    if (argc > 2) rounds = atol(argv[2]);
    handed = calloc(blocks, sizeof *handed);
    for (long i = 0; i < blocks; i++) handed[i] = malloc(40);
    pause_ms(30);
    pthread_t t, u;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    pause_ms(30);
    for (long i = 0; i < blocks; i++) free(handed[i]);
    free(handed);
    pause_ms(30);
    pthread_create(&t, NULL, producer, NULL);
    pthread_create(&u, NULL, consumer, NULL);
    pthread_join(t, NULL);
    pthread_join(u, NULL);
    pause_ms(30);
    static void *kept[KEPT];
    for (int i = 0; i < KEPT; i++) kept[i] = malloc(88);
    /* Frees count that of `handed` (calloc'd, like glibc's own thread structures). */
    long mallocs = 2 * blocks + 2 * rounds + KEPT;
    long frees = 1 + 2 * blocks + 2 * rounds;
    printf("turns: mallocs=%ld frees=%ld leaked_blocks=%d leaked_bytes=%d\n", mallocs, frees, KEPT, KEPT * 88);
    return kept[0] == NULL;
}
