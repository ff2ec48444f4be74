/* A program with signals of its own, for `heaplens run --cpu` (tests/cpu.rs): under the CPU
 * sampler it must behave exactly as without it.
 *
 *   - its SIGUSR1 handler runs once per signal it sends itself;
 *   - its SIGALRM handler, installed without SA_RESTART, interrupts a blocking read with EINTR
 *     (the program relies on that to time out);
 *   - while it burns CPU in system calls that a signal could interrupt (read and write on a
 *     pipe, poll, nanosleep), none fails with EINTR;
 *   - its own ITIMER_PROF profiler (SIGPROF, as gprof's) still gets its ticks;
 *   - it exits with status 3.
 *
 * Usage: cpu_signals [fork]   with `fork`, a child process burns CPU in child_burn first.
 * Prints `signals: key=value ...` with what it saw.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t usr1_runs, alarm_runs, prof_ticks;

static void on_usr1(int s) { (void)s; usr1_runs++; }
static void on_alarm(int s) { (void)s; alarm_runs++; }
static void on_prof(int s) { (void)s; prof_ticks++; }

static long thread_cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

static volatile double sink;

static __attribute__((noinline)) void child_burn(long us) {
    long start = thread_cpu_us();
    double x = 1.0;
    while (thread_cpu_us() - start < us)
        for (int i = 0; i < 20000; i++) x = x * 1.0000001 + 0.0000001;
    sink = x;
}

/* System calls in a loop for `us` of CPU time; returns how many failed with EINTR. */
static long syscalls_for(long us) {
    int p[2];
    if (pipe(p) != 0) return -1;
    long eintr = 0, start = thread_cpu_us();
    char buf[64];
    struct timespec zero = {0, 1000};
    while (thread_cpu_us() - start < us) {
        for (int i = 0; i < 200; i++) {
            if (write(p[1], "0123456789abcdef", 16) < 0 && errno == EINTR) eintr++;
            if (read(p[0], buf, sizeof buf) < 0 && errno == EINTR) eintr++;
            struct pollfd pf = {p[0], POLLIN, 0};
            if (poll(&pf, 1, 0) < 0 && errno == EINTR) eintr++;
        }
        if (nanosleep(&zero, NULL) != 0 && errno == EINTR) eintr++;
    }
    close(p[0]);
    close(p[1]);
    return eintr;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            child_burn(200000);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        printf("signals: child_status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }

    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 100; i++) raise(SIGUSR1);

    /* A read that only SIGALRM ends: no SA_RESTART, so it must fail with EINTR. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    int p[2];
    if (pipe(p) != 0) return 1;
    /* Every 100 ms until the read ends: on a loaded machine the first alarm may come before
       the read has started, and a one-shot timer would leave it blocked for ever. */
    struct itimerval every = {{0, 100000}, {0, 100000}};
    setitimer(ITIMER_REAL, &every, NULL);
    char c;
    ssize_t n = read(p[0], &c, 1);
    int read_eintr = n < 0 && errno == EINTR;
    struct itimerval stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &stop, NULL);

    long eintr = syscalls_for(300000);

    /* The program's own profiler: ITIMER_PROF ticks while it burns 200 ms. */
    signal(SIGPROF, on_prof);
    struct itimerval prof = {{0, 10000}, {0, 10000}};
    setitimer(ITIMER_PROF, &prof, NULL);
    child_burn(200000);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);

    printf("signals: usr1_runs=%d alarm_ok=%d read_eintr=%d syscall_eintr=%ld prof_ticks_ok=%d\n", (int)usr1_runs,
           alarm_runs >= 1, read_eintr, eintr, prof_ticks >= 5);
    return 3;
}
