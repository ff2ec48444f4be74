/* Prints each argument's bytes in hex, one argument a line ("argv: 1 ff"), so that a test can
 * see the exact bytes a program was given (non-UTF-8 ones included); allocates one block so
 * that its trace holds something. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    char *copy = malloc(64);
    for (int i = 1; i < argc; i++) {
        printf("argv: %d ", i);
        for (const unsigned char *p = (const unsigned char *)argv[i]; *p; p++)
            printf("%02x", *p);
        printf("\n");
    }
    strcpy(copy, "done");
    puts(copy);
    free(copy);
    return 0;
}
