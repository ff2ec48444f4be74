/*
 * endings.c - the ways a program can end, for checking that heaplens passes them through.
 *
 * Every mode first mallocs (and frees half of) COUNT blocks of 96 bytes, so the trace has
 * something in it, and prints a line with its truth before it ends:
 *
 *     endings exit N       prints, then exit(N)
 *     endings segv         prints, then dereferences a null pointer (dies by SIGSEGV)
 *     endings abort        prints, then abort() (dies by SIGABRT)
 *     endings wait [COUNT] prints, then sleeps for 60 s: a test kills it meanwhile
 *     endings signals      prints, then a second line with how it found SIGINT and SIGQUIT
 *                          (ign: ignored, dfl: default), then exits 0
 *
 *     endings: mode=exit pid=4321 allocs=1000 frees=500 size=96
 *
 * Usage: endings MODE [ARG]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE 96

static void *kept_blocks[1 << 20];

__attribute__((noinline, noclone)) static long allocate(long count)
{
    long frees = 0;
    for (long i = 0; i < count; i++) {
        char *p = malloc(SIZE);
        if (p == NULL)
            exit(99);
        p[0] = (char)i;
        if (i % 2 == 0) {
            free(p);
            frees++;
        } else {
            kept_blocks[i / 2] = p;
        }
    }
    return frees;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: endings exit N | segv | abort | wait [COUNT]\n");
        return 64;
    }
    const char *mode = argv[1];
    long count = 1000;
    if (strcmp(mode, "wait") == 0) {
        count = argc > 2 ? atol(argv[2]) : 200000;
        if (count < 0 || count > 2 * (long)(sizeof kept_blocks / sizeof kept_blocks[0]))
            return 64;
    }
    long frees = allocate(count);
    printf("endings: mode=%s pid=%d allocs=%ld frees=%ld size=%d\n", mode, (int)getpid(), count,
           frees, SIZE);

    if (strcmp(mode, "exit") == 0) {
        exit(argc > 2 ? atoi(argv[2]) : 0);
    } else if (strcmp(mode, "segv") == 0) {
        volatile int *volatile nowhere = NULL;
        *nowhere = 1;
        raise(SIGSEGV); /* not reached */
    } else if (strcmp(mode, "abort") == 0) {
        abort();
    } else if (strcmp(mode, "wait") == 0) {
        sleep(60);
        return 0;
    } else if (strcmp(mode, "signals") == 0) {
        struct sigaction si, sq;
        sigaction(SIGINT, NULL, &si);
        sigaction(SIGQUIT, NULL, &sq);
        printf("endings: sigint=%s sigquit=%s\n", si.sa_handler == SIG_IGN ? "ign" : "dfl",
               sq.sa_handler == SIG_IGN ? "ign" : "dfl");
        return 0;
    }
    fprintf(stderr, "endings: unknown mode %s\n", mode);
    return 64;
}
