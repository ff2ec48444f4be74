/*
 * spawn_tree.c - a process tree: a parent that runs two children (itself again, by posix_spawn
 * of /proc/self/exe), each allocating a known number of blocks, as a build runs its compilers.
 *
 * The parent mallocs 40 blocks of 100 bytes and frees 30; each child mallocs N blocks of SIZE
 * bytes and frees every other one. Children get (300, 48) and (500, 64). Each process prints its
 * own truth with write(2) (stdio would allocate its buffer), children first:
 *
 *     spawn_tree: role=child pid=1235 ppid=1234 allocs=300 bytes=14400 frees=150 kept_bytes=7200
 *     spawn_tree: role=parent pid=1234 ppid=1000 allocs=40 bytes=4000 frees=30 kept_bytes=1000
 *
 * Usage: spawn_tree            (the parent)
 *        spawn_tree child N SIZE
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void *blocks[100000];

static void say(const char *role, long allocs, long size, long frees)
{
    char line[256];
    long kept = allocs - frees;
    int n = snprintf(line, sizeof line,
                     "spawn_tree: role=%s pid=%d ppid=%d allocs=%ld bytes=%ld frees=%ld kept_bytes=%ld\n", role,
                     (int)getpid(), (int)getppid(), allocs, allocs * size, frees, kept * size);
    if (write(1, line, (size_t)n) != n)
        _exit(3);
}

/* Mallocs n blocks of size bytes and frees those whose index i has i % m != 0 when m > 0
 * (every other one for m = 2); returns the frees. */
__attribute__((noinline)) static long allocate_blocks(long n, long size, long keep_every)
{
    long frees = 0;
    for (long i = 0; i < n; i++)
        blocks[i] = malloc((size_t)size);
    for (long i = 0; i < n; i++)
        if (i % keep_every != 0) {
            free(blocks[i]);
            frees++;
        }
    return frees;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "child") == 0) {
        long n = atol(argv[2]), size = atol(argv[3]);
        say("child", n, size, allocate_blocks(n, size, 2));
        return 0;
    }
    static char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 2;
    self[len] = 0;
    char *kids[2][5] = {{self, "child", "300", "48", NULL}, {self, "child", "500", "64", NULL}};
    for (int k = 0; k < 2; k++) {
        pid_t pid;
        int status;
        if (posix_spawn(&pid, self, NULL, NULL, kids[k], environ) != 0 || waitpid(pid, &status, 0) != pid)
            return 2;
    }
    /* Keeps one in four: 10 of 40. */
    say("parent", 40, 100, allocate_blocks(40, 100, 4));
    return 0;
}
