/* Prints where its first blocks land in the heap, relative to the first one: the same numbers
 * bare and under the monitor mean the monitor left the program's heap as it found it (a monitor
 * that allocates from the program's heap moves every block after its own). The heap starts at
 * a random page, hence the offset in the page.
 *
 *   heap_layout: first=<offset of the first block in its page> gaps=<d1>,<d2>,...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    static const size_t sizes[] = {40, 40, 24, 100, 1000, 8, 5000, 64};
    enum { N = sizeof sizes / sizeof sizes[0] };
    char *p[N];
    for (int i = 0; i < N; i++)
        p[i] = malloc(sizes[i]);
    printf("heap_layout: first=%lu gaps=", (unsigned long)((uintptr_t)p[0] & 0xfff));
    for (int i = 1; i < N; i++)
        printf("%s%ld", i > 1 ? "," : "", (long)(p[i] - p[i - 1]));
    printf("\n");
    for (int i = 0; i < N; i++)
        free(p[i]);
    return 0;
}
