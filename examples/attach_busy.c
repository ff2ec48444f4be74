/* A CPU-busy program to attach to with `heaplens attach --cpu` (tests/attach_cpu.rs).
 *
 * One thread spins in spin_early from the start (it is running when the attach comes); the
 * line "late" on stdin starts a second that spins in spin_late (created while attached); a
 * third thread sleeps until the line "idle" or the end of stdin (the line ends it while attached:
the monitor must then retire its sampler, which it made without running code on the thread).
The main thread reads stdin and allocates a 333-byte block
 * per line. At the end of stdin the spinning stops and the program prints what is the same in
 * every run, then exits with status 5.
 *
 * Usage: attach_busy < lines
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int stop, idle_stop;
static volatile double sink;

/* Arithmetic until told to stop; noinline so that each spinner is a function of its own. */
static __attribute__((noinline)) void spin_early(void) {
    double x = 1.0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 0.0000001;
    sink = x;
}

static __attribute__((noinline)) void spin_late(void) {
    double x = 2.0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        for (int i = 0; i < 100000; i++) x = x * 1.0000003 + 0.0000003;
    sink = x;
}

static void *early(void *arg) { (void)arg; spin_early(); return NULL; }
static void *late(void *arg) { (void)arg; spin_late(); return NULL; }

static void *idle(void *arg) {
    (void)arg;
    while (!atomic_load(&stop) && !atomic_load(&idle_stop)) usleep(20000);
    return NULL;
}

int main(void) {
    pthread_t e, l, i;
    int have_late = 0, lines = 0, idle_joined = 0;
    pthread_create(&i, NULL, idle, NULL);
    pthread_create(&e, NULL, early, NULL);
    char line[256];
    char *kept[64] = {0};
    while (fgets(line, sizeof line, stdin)) {
        kept[lines % 64] = malloc(333);
        memcpy(kept[lines % 64], line, strlen(line) + 1);
        lines++;
        if (!strcmp(line, "late\n") && !have_late) have_late = !pthread_create(&l, NULL, late, NULL);
        if (!strcmp(line, "idle\n") && !idle_joined) {
            atomic_store(&idle_stop, 1);
            idle_joined = !pthread_join(i, NULL);
        }
    }
    atomic_store(&stop, 1);
    pthread_join(e, NULL);
    if (have_late) pthread_join(l, NULL);
    if (!idle_joined) pthread_join(i, NULL);
    for (int k = 0; k < 64; k++) free(kept[k]);
    printf("attach_busy: lines=%d late=%d\n", lines, have_late);
    return 5;
}
