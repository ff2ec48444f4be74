/* Truth program for symbolizing an executable deleted while it runs (a server's binary replaced
 * by an upgrade): it removes its own file, then allocates from a function of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *kept[4];

__attribute__((noinline)) void allocate_after_removal(void) {
    for (int i = 0; i < 4; i++) kept[i] = malloc(1000);
}

int main(void) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    if (unlink(self) != 0) return 1;
    usleep(200000); /* the symbolizer reads the module records meanwhile */
    allocate_after_removal();
    printf("deleted_exe: allocs=4 bytes=4000 removed=%s\n", self);
    return 0;
}
