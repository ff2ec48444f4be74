/*
 * control_names.c - a program whose names hold control characters, as a hostile or careless
 * program's may: the views must print and draw them without letting them act.
 *
 * The three allocating functions are compiled under placeholder names that the test renames
 * with `objcopy --redefine-sym` (an assembler will not take a newline in a symbol):
 *
 *     ctl_placeholder   -> "ctl\x01\x1b[31m\x07name"   (SOH, an ANSI colour, BEL)
 *     semi_placeholder  -> "a\nb;c 7"                  (a newline, a frame separator, a count)
 *     bidi_placeholder  -> "bidi\u202eright"           (a right-to-left override)
 *
 * A second thread names itself "th\x1b]0;x\x07" (a terminal's set-title sequence) and
 * allocates through ctl. Built without debug information, so that the symbol table names the
 * functions. Prints its truth:
 *
 *     names: ctl=101 ctl_bytes=105000 semi=51 semi_bytes=103000 bidi=1 bidi_bytes=4000
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void *ctl(size_t n) __asm__("ctl_placeholder");
void *semi(size_t n) __asm__("semi_placeholder");
void *bidi(size_t n) __asm__("bidi_placeholder");

/* The empty asm keeps each call to malloc a call, not a tail call, so the function stays on
 * the stack. */
__attribute__((noinline)) void *ctl(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}
__attribute__((noinline)) void *semi(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}
__attribute__((noinline)) void *bidi(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

static void *worker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "th\x1b]0;x\x07");
    for (int i = 0; i < 100; i++) free(ctl(1000));
    return ctl(5000);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    pthread_t t;
    void *kept;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, &kept) != 0) return 1;
    for (int i = 0; i < 50; i++) free(semi(2000));
    void *keep[2] = {semi(3000), bidi(4000)};
    printf("names: ctl=101 ctl_bytes=105000 semi=51 semi_bytes=103000 bidi=1 bidi_bytes=4000\n");
    __asm__ volatile("" : : "r"(keep), "r"(kept) : "memory");
    return 0;
}
