// control_flow.cpp: allocations around every way control leaves a call chain abruptly, for
// checking that recording never breaks the program and that stacks stay right afterwards:
// C++ exceptions thrown through allocating frames, longjmp out of a deep chain, a signal
// handler that allocates, a bad_alloc from operator new, and a thread that exits.
// Each kind of block has its own size; every block is kept, so the leak table shows where
// each came from. Prints its truth:
//   control_flow: rounds=R thrown=R jumped=R signals=S bad_alloc=1 thread=1
// (left and right each make R/2 blocks of 777 bytes.)
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <pthread.h>
#include <stdexcept>

static void* volatile kept[100000];
static int nkept;
static void keep(void* p) { kept[nkept++] = p; }

#define BARRIER() __asm__ volatile("" ::: "memory")

__attribute__((noinline)) static void deep_throw(int n) {
    if (n == 0) {
        keep(malloc(111));
        throw std::runtime_error("unwind me");
    }
    deep_throw(n - 1);
    BARRIER();
}

static jmp_buf jump_target;

__attribute__((noinline)) static void deep_jump(int n) {
    if (n == 0) {
        keep(malloc(222));
        longjmp(jump_target, 1);
    }
    deep_jump(n - 1);
    BARRIER();
}

__attribute__((noinline)) static void after_throw() { keep(malloc(333)); BARRIER(); }
__attribute__((noinline)) static void after_jump() { keep(malloc(444)); BARRIER(); }

static void on_signal(int) { keep(malloc(555)); }

// Two callers with the same frame layout calling the same allocating function: their calls put
// the same return address (into `common`) in the same stack slot, and only the frame above
// tells them apart.
static volatile int sink;
__attribute__((noinline)) static void common() { keep(malloc(777)); BARRIER(); }
__attribute__((noinline)) static void left() { sink = sink + 1; common(); BARRIER(); }
__attribute__((noinline)) static void right() { sink = sink + 2; common(); BARRIER(); }

static void* thread_main(void*) {
    keep(malloc(666));
    return nullptr;
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    int thrown = 0, jumped = 0, signals = 0, bad = 0;
    for (int i = 0; i < rounds; i++) {
        try {
            deep_throw(20 + i % 7);
        } catch (const std::runtime_error&) {
            thrown++;
        }
        after_throw();
    }
    for (int i = 0; i < rounds; i++) {
        if (setjmp(jump_target) == 0)
            deep_jump(20 + i % 5);
        else
            jumped++;
        after_jump();
    }
    for (int i = 0; i < rounds; i++) {
        if (i % 2)
            left();
        else
            right();
    }
    signal(SIGUSR1, on_signal);
    for (int i = 0; i < 10; i++) {
        raise(SIGUSR1);
        signals++;
    }
    try {
        char* volatile huge = new char[(size_t)1 << 62];
        huge[0] = 1;
    } catch (const std::bad_alloc&) {
        bad++;
    }
    pthread_t t;
    pthread_create(&t, nullptr, thread_main, nullptr);
    pthread_join(t, nullptr);
    printf("control_flow: rounds=%d thrown=%d jumped=%d signals=%d bad_alloc=%d thread=1\n", rounds, thrown, jumped,
           signals, bad);
    return 0;
}
