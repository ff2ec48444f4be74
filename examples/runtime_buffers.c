/* Truth program for suppressions: the C library's one-time buffers (stdout's, a thread's TLS)
 * stay live at exit by design; make_leak's three 64-byte blocks are the program's real leak. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static __thread char tls_block[64];
void *kept[3]; /* global: the compiler may not drop the allocations */

__attribute__((noinline)) void make_leak(void) {
    for (int i = 0; i < 3; i++) kept[i] = malloc(64);
}

static void *worker(void *arg) {
    tls_block[0] = 1;
    return arg;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    make_leak();
    printf("runtime_buffers: leaked_objects=3 leaked_bytes=192 made=%d\n", kept[2] != NULL);
    return 0;
}
