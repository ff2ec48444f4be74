/*
 * fork.c - allocation on both sides of a fork.
 *
 * The parent mallocs BEFORE blocks of 311 bytes and frees them, forks, then mallocs AFTER more
 * blocks of 311 bytes (keeping every fifth). The child mallocs CHILD blocks of 313 bytes
 * (keeping every fourth) and exits normally. Under heaplens the parent's trace is FILE and the
 * child's is FILE.<childpid>. Each side prints its own truth (the child first: the parent
 * waits for it):
 *
 *     fork: role=child pid=1235 size=313 allocs=300 frees=225 kept=75
 *     fork: role=parent pid=1234 child=1235 size=311 allocs=500 frees=440 kept=60 child_status=0
 *
 * Usage: fork [BEFORE [AFTER [CHILD]]]   (defaults 200, 300, 300)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define PARENT_SIZE 311
#define CHILD_SIZE 313
#define MAX_BLOCKS 100000

static void *blocks[MAX_BLOCKS];

/* Mallocs n blocks of size bytes, frees all but every keep_every-th; returns the frees. */
__attribute__((noinline, noclone)) static long churn(long n, size_t size, long keep_every)
{
    long frees = 0;
    for (long i = 0; i < n; i++) {
        blocks[i] = malloc(size);
        if (blocks[i] == NULL)
            exit(2);
    }
    for (long i = 0; i < n; i++) {
        if (keep_every > 0 && i % keep_every == keep_every - 1)
            continue;
        free(blocks[i]);
        frees++;
    }
    return frees;
}

int main(int argc, char **argv)
{
    long before = argc > 1 ? atol(argv[1]) : 200;
    long after = argc > 2 ? atol(argv[2]) : 300;
    long in_child = argc > 3 ? atol(argv[3]) : 300;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (before < 0 || after < 0 || in_child < 0 || before > MAX_BLOCKS || after > MAX_BLOCKS ||
        in_child > MAX_BLOCKS) {
        fprintf(stderr, "fork: counts must be 0..%d\n", MAX_BLOCKS);
        return 1;
    }
    long parent_frees = churn(before, PARENT_SIZE, 0);

    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        long frees = churn(in_child, CHILD_SIZE, 4);
        printf("fork: role=child pid=%d size=%d allocs=%ld frees=%ld kept=%ld\n", (int)getpid(),
               CHILD_SIZE, in_child, frees, in_child - frees);
        exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
        perror("waitpid");
        return 1;
    }
    parent_frees += churn(after, PARENT_SIZE, 5);
    printf("fork: role=parent pid=%d child=%d size=%d allocs=%ld frees=%ld kept=%ld "
           "child_status=%d\n",
           (int)getpid(), (int)child, PARENT_SIZE, before + after, parent_frees,
           before + after - parent_frees, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
