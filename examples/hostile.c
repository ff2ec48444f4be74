/* Programs of the kinds that break profilers: daemons that close every descriptor, programs that
 * take their signals synchronously, raise signals to die, leave main with pthread_exit, run out
 * of memory, vfork, allocate in thread-exit destructors, exec, lower their descriptor limit,
 * crash, or free NULL. Each mode prints its true counts:
 *
 *   hostile: mode=M allocs=A frees=F [key=value ...]
 *
 * allocs and frees count only the program's own malloc and free calls of the mode (not stdio's
 * buffer), so a report must show at least those. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile keep[100000];

__attribute__((noinline)) static void *leaf_alloc(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *mid_alloc(size_t n) { return leaf_alloc(n); }

/* Allocates blocks [from, to) of `size` bytes. */
static void alloc_range(int from, int to, size_t size)
{
    for (int i = from; i < to; i++) keep[i] = mid_alloc(size);
}

static void free_range(int from, int to)
{
    for (int i = from; i < to; i++) free(keep[i]);
}

static const char DATA[150] = "the program's own data file: nothing else may ever be written into it";

/* Closes every descriptor >= 3 (as daemons do), opens its data file and writes 150 bytes. With
 * "dup2", the file is put on descriptor 3 from a higher number; with "replace", the program puts
 * its file on the number of the monitor's trace descriptor (found in /proc/self/fd). */
static int fds(const char *how)
{
    alloc_range(0, 500, 48);
    int fd;
    if (!strcmp(how, "replace")) {
        fd = open("data.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char link[64], target[4096];
        for (int n = 3; n < 65536; n++) {
            snprintf(link, sizeof link, "/proc/self/fd/%d", n);
            ssize_t len = readlink(link, target, sizeof target - 1);
            if (len > 0) {
                target[len] = 0;
                if (strstr(target, ".hltrace")) {
                    dup2(fd, n);
                    break;
                }
            }
        }
    } else {
        struct rlimit r;
        getrlimit(RLIMIT_NOFILE, &r);
        for (int n = 3; n < (int)r.rlim_cur; n++) close(n);
        fd = open("data.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (!strcmp(how, "dup2")) {
            int high = fcntl(fd, F_DUPFD, 10);
            close(fd);
            dup2(high, 3);
            close(high);
            fd = 3;
        }
    }
    /* Long enough for the monitor's writer to write several times meanwhile. */
    for (int round = 0; round < 5; round++) {
        alloc_range(500 + round * 100, 600 + round * 100, 64);
        usleep(20000);
    }
    if (write(fd, DATA, sizeof DATA) != sizeof DATA) return 1;
    free_range(0, 1000);
    printf("hostile: mode=fds-%s allocs=1000 frees=1000\n", how);
    return 0;
}

/* Blocks SIGTERM and SIGUSR1 and takes them synchronously, sent to the whole process. */
static int sigwait_mode(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, 0);
    int taken = 0;
    for (int i = 0; i < 20; i++) {
        alloc_range(i * 10, i * 10 + 10, 32);
        kill(getpid(), i % 2 ? SIGTERM : SIGUSR1);
        if (i % 2) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == sizeof si) taken++;
        } else {
            siginfo_t si;
            if (sigwaitinfo(&set, &si) > 0) taken++;
        }
    }
    free_range(0, 200);
    printf("hostile: mode=sigwait allocs=200 frees=200 taken=%d\n", taken);
    return 0;
}

static volatile int prof_runs, prof_off_main;
static pid_t main_tid;

static void on_prof(int sig)
{
    (void)sig;
    prof_runs++;
    if (syscall(SYS_gettid) != main_tid) prof_off_main++;
    void *volatile p = malloc(24);
    free(p);
}

/* A SIGPROF handler that allocates: it must always run on the program's (only) thread. The
 * handler's allocations are counted too. */
static int sigprof_mode(void)
{
    main_tid = syscall(SYS_gettid);
    signal(SIGPROF, on_prof);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &it, NULL);
    volatile unsigned long x = 0;
    while (prof_runs < 200) x++;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    printf("hostile: mode=sigprof runs=%d off_main=%d\n", prof_runs, prof_off_main);
    return 0;
}

static void *worker(void *arg)
{
    (void)arg;
    usleep(50000);
    alloc_range(0, 300, 40);
    free_range(0, 200);
    return NULL;
}

/* main leaves with pthread_exit; the process ends (status 0) with its last thread. */
static int pthread_exit_mode(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    printf("hostile: mode=pthread-exit allocs=300 frees=200\n");
    fflush(stdout);
    pthread_exit(NULL);
}

/* Allocates 64-byte blocks until malloc fails under a 1 GiB address-space limit, frees them
 * all and goes on. */
static int oom_mode(void)
{
    struct rlimit r = {1UL << 30, 1UL << 30};
    setrlimit(RLIMIT_AS, &r);
    void **list = NULL;
    for (;;) {
        void **p = malloc(64);
        if (!p) break;
        *p = list;
        list = p;
    }
    while (list) {
        void **next = *list;
        free(list);
        list = next;
    }
    alloc_range(0, 1000, 100);
    free_range(0, 1000);
    printf("hostile: mode=oom\n");
    return 0;
}

/* A vfork child whose exec fails calls _exit; the parent goes on. */
static int vfork_mode(void)
{
    alloc_range(0, 10, 32);
    pid_t p = vfork();
    if (p == 0) {
        char *argv[] = {"/nonexistent/program", NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    waitpid(p, &st, 0);
    alloc_range(10, 1000, 32);
    free_range(0, 500);
    printf("hostile: mode=vfork allocs=1000 frees=500 child=%d\n", WEXITSTATUS(st));
    return 0;
}

/* Threads whose thread-specific destructors free and allocate; one key's destructor sets its
 * value again, so it runs in a second round. */
static pthread_key_t keys[10];

static void destroy(void *p)
{
    free(p);
    void *volatile q = malloc(5555);
    free(q);
}

static pthread_key_t again_key;
static __thread int again_rounds;
static void destroy_again(void *p)
{
    free(p);
    if (again_rounds++ == 0) pthread_setspecific(again_key, malloc(3333));
}

static void *key_thread(void *arg)
{
    (void)arg;
    for (int k = 0; k < 10; k++) pthread_setspecific(keys[k], malloc(100));
    pthread_setspecific(again_key, malloc(200));
    return NULL;
}

static int keys_mode(void)
{
    for (int k = 0; k < 10; k++) pthread_key_create(&keys[k], destroy);
    pthread_key_create(&again_key, destroy_again);
    pthread_t t[10];
    for (int i = 0; i < 10; i++) pthread_create(&t[i], NULL, key_thread, NULL);
    for (int i = 0; i < 10; i++) pthread_join(t[i], NULL);
    /* per thread: 10 x (malloc 100, free, malloc 5555, free) + malloc 200, free, malloc 3333
     * (a second round), free */
    printf("hostile: mode=keys allocs=220 frees=220\n");
    return 0;
}

/* Allocates 2000 blocks, unsets LD_PRELOAD and execs another program. */
static int exec_mode(void)
{
    alloc_range(0, 2000, 32);
    printf("hostile: mode=exec allocs=2000 frees=0\n");
    fflush(stdout);
    unsetenv("LD_PRELOAD");
    execl("/bin/true", "true", (char *)NULL);
    return 1;
}

/* Lowers its descriptor limit to 3, allocates through main > mid_alloc > leaf_alloc, forks a
 * child that allocates too. */
static int nofile_mode(void)
{
    struct rlimit r = {3, 3};
    setrlimit(RLIMIT_NOFILE, &r);
    alloc_range(0, 50, 40);
    pid_t p = fork();
    if (p == 0) {
        alloc_range(50, 100, 40);
        _exit(0);
    }
    waitpid(p, NULL, 0);
    printf("hostile: mode=nofile allocs=50 frees=0\n");
    return 0;
}

static void own_segv_handler(int sig)
{
    static const char msg[] = "hostile: own handler ran\n";
    if (write(1, msg, sizeof msg - 1) < 0) _exit(3);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* 50,000 mallocs and 25,000 frees within the first 100 ms, then death. */
static int crash_mode(const char *how)
{
    alloc_range(0, 50000, 16);
    free_range(0, 25000);
    printf("hostile: mode=crash-%s allocs=50000 frees=25000\n", how);
    fflush(stdout);
    if (!strcmp(how, "abort")) abort();
    if (!strcmp(how, "segv")) *(volatile int *)0 = 1;
    if (!strcmp(how, "term")) raise(SIGTERM);
    if (!strcmp(how, "handler")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = own_segv_handler;
        sigaction(SIGSEGV, &sa, NULL);
        *(volatile int *)0 = 1;
    }
    if (!strcmp(how, "kill")) {
        usleep(200000);
        kill(getpid(), SIGKILL);
    }
    if (!strcmp(how, "usr2")) raise(SIGUSR2);
    return 0;
}

static int null_frees_mode(void)
{
    for (int i = 0; i < 37; i++) free(keep[99999]);
    printf("hostile: mode=null-frees null_frees=37\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *arg = argc > 2 ? argv[2] : "";
    if (!strcmp(mode, "fds")) return fds(arg);
    if (!strcmp(mode, "sigwait")) return sigwait_mode();
    if (!strcmp(mode, "sigprof")) return sigprof_mode();
    if (!strcmp(mode, "pthread-exit")) return pthread_exit_mode();
    if (!strcmp(mode, "oom")) return oom_mode();
    if (!strcmp(mode, "vfork")) return vfork_mode();
    if (!strcmp(mode, "keys")) return keys_mode();
    if (!strcmp(mode, "exec")) return exec_mode();
    if (!strcmp(mode, "nofile")) return nofile_mode();
    if (!strcmp(mode, "crash")) return crash_mode(arg);
    if (!strcmp(mode, "null-frees")) return null_frees_mode();
    fprintf(stderr, "usage: hostile fds close|dup2|replace | sigwait | sigprof | pthread-exit | oom | vfork |"
                    " keys | exec | nofile | crash abort|segv|term|handler|kill|usr2 | null-frees\n");
    return 2;
}
