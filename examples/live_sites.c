/* Call sites whose order depends on what they are sorted by (tests/live.rs, heaplens live
 * --sort): keep_big keeps 10 blocks of 100000 bytes to the end (the most bytes in use), and
 * churn_small allocates 100000 blocks of 100 bytes on a producer thread, each freed by a
 * consumer thread (the most bytes allocated, none in use at the end). Prints
 *     live_sites: keep_big=1000000 churn_small=10000000
 * and exits with status 0 (keep_big's blocks are still live). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define RING 256
#define CHURN 100000

static void *ring[RING];
static int head, tail;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

/* Writes the block so that the call is no tail call: churn_small stays on the stack. */
static __attribute__((noinline)) void *churn_small(void)
{
    char *p = malloc(100);
    *(volatile char *)p = 1;
    return p;
}

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < CHURN; i++) {
        void *p = churn_small();
        pthread_mutex_lock(&lock);
        while (head - tail == RING) pthread_cond_wait(&changed, &lock);
        ring[head++ % RING] = p;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (int i = 0; i < CHURN; i++) {
        pthread_mutex_lock(&lock);
        while (head == tail) pthread_cond_wait(&changed, &lock);
        void *p = ring[tail++ % RING];
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
        free(p);
    }
    return NULL;
}

/* Volatile: the compiler must not drop blocks it sees are never read. */
static void *volatile kept[10];

static __attribute__((noinline)) void keep_big(void)
{
    for (int i = 0; i < 10; i++) kept[i] = malloc(100000);
    *(volatile char *)kept[0] = 1;
}

int main(void)
{
    keep_big();
    pthread_t p, c;
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    printf("live_sites: keep_big=%d churn_small=%d\n", 10 * 100000, CHURN * 100);
    return 0;
}
