/* Names chosen to attack `heaplens view`'s page: a function named like the page template's
 * placeholder, one named like markup (asm labels; the quotes inside make the assembler take
 * any characters), and a thread named to open an HTML comment and a script. The test runs it
 * with hostile arguments from a directory with a hostile name. Every block it makes is live at
 * exit, so each function owns blocks on the map. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *placeholder_alloc(size_t n) __asm__("\"{{META}}\"");
void *markup_alloc(size_t n) __asm__("\"<img src=x onerror=alert(1)>\"");

static void *volatile keep[64];

__attribute__((noinline)) void *placeholder_alloc(size_t n)
{
    void *p = malloc(n);
    memset(p, 1, n);
    return p;
}

__attribute__((noinline)) void *markup_alloc(size_t n)
{
    void *p = malloc(n);
    memset(p, 2, n);
    return p;
}

static void *thread_main(void *arg)
{
    (void)arg;
    /* At most 15 bytes: the kernel's limit. */
    pthread_setname_np(pthread_self(), "<!--<script>");
    for (int i = 0; i < 16; i++)
        keep[32 + i] = markup_alloc(4096);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 0; i < 16; i++)
        keep[i] = placeholder_alloc(8192);
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    printf("hostile_page: args=%d blocks=32\n", argc - 1);
    return 0;
}
