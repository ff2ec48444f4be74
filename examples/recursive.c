/*
 * recursive.c - mutual recursion that allocates at every level, for the allocation call graph.
 *
 * walk_a calls walk_b, which calls walk_a again, until the depth runs out. walk_a mallocs
 * A_SIZE bytes and walk_b callocs B_SIZE bytes at every level; nothing else in the program
 * allocates. main starts ROUNDS walks of increasing depth, so the two functions form one
 * strongly connected component of the call graph and a profiler must merge them into a cycle
 * whose inclusive bytes are every byte allocated by the program.
 *
 * The recursive calls are not tail calls (each level frees its block after the call returns),
 * so every level keeps its own frame. Every fourth level of walk_a keeps its block (a leak),
 * so the leak table has something to show too.
 *
 * Prints its truth on one line, e.g.
 *
 *     recursive: allocations=... bytes=... a_calls=... b_calls=... a_bytes=... b_bytes=...
 *       kept=... kept_bytes=... max_depth=...
 *
 * Usage: recursive [ROUNDS]   (default 20; round r walks r+1 levels deep)
 */
#include <stdio.h>
#include <stdlib.h>

#define A_SIZE 48
#define B_SIZE 80

static long a_calls, b_calls, kept;
static void *kept_blocks[1 << 16];

__attribute__((noinline, noclone)) long walk_b(int depth);

__attribute__((noinline, noclone)) long walk_a(int depth)
{
    char *p = malloc(A_SIZE);
    if (p == NULL)
        exit(2);
    a_calls++;
    p[0] = (char)depth;
    long sum = depth;
    if (depth > 0)
        sum += walk_b(depth - 1);
    sum += p[0];
    if (depth % 4 == 3 && kept < (long)(sizeof kept_blocks / sizeof kept_blocks[0]))
        kept_blocks[kept++] = p;
    else
        free(p);
    return sum;
}

__attribute__((noinline, noclone)) long walk_b(int depth)
{
    char *p = calloc(1, B_SIZE);
    if (p == NULL)
        exit(2);
    b_calls++;
    p[1] = (char)depth;
    long sum = depth;
    if (depth > 0)
        sum += walk_a(depth - 1);
    sum += p[1];
    free(p);
    return sum;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    long check = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    for (int r = 0; r < rounds; r++)
        check += walk_a(r);

    long a_bytes = a_calls * A_SIZE, b_bytes = b_calls * B_SIZE;
    printf("recursive: allocations=%ld bytes=%ld a_calls=%ld b_calls=%ld a_bytes=%ld b_bytes=%ld "
           "kept=%ld kept_bytes=%ld max_depth=%d check=%ld\n",
           a_calls + b_calls, a_bytes + b_bytes, a_calls, b_calls, a_bytes, b_bytes, kept,
           kept * A_SIZE, rounds, check);
    return 0;
}
