/*
 * widgets.c - the producer/consumer example of the mprof paper (Zorn & Hilfinger, Figure 1),
 * rewritten for heaplens.
 *
 * Two producers make widgets (make_red_widget, make_blue_widget); both get the memory from
 * make_widget, the only function that calls malloc. The consumer (consume_widget) frees blue
 * widgets and, by a deliberate bug, never frees red ones. A widget is an enum plus 50 ints:
 * 204 bytes on x86_64.
 *
 * The colour of each widget comes from a deterministic PRNG, so a run is repeatable, and the
 * program prints its own truth so that tests compare heaplens's numbers against it:
 *
 *     widgets: made=10000 red=5019 blue=4981 size=204 seed=1
 *
 * Usage: widgets [NUM_WIDGETS [SEED]]   (defaults: 10000 widgets, seed 1)
 *
 * The program makes no heap allocation besides the widgets: stdout is unbuffered, so stdio
 * never mallocs a buffer for it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum color { RED, BLUE };

typedef struct {
    enum color c;
    int data[50];
} widget;

_Static_assert(sizeof(widget) == 204, "a widget is 204 bytes");

#define MAX_WIDGETS (1 << 20)

/* The queue lives in static storage, not on the heap, so it adds no allocation. */
static widget *wqueue[MAX_WIDGETS];

static uint64_t rng_state;

/* xorshift64*: returns 1 or 0 with (nearly) equal probability. */
static int random_flip(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (int)((rng_state * 0x2545F4914F6CDD1DULL) >> 63);
}

/* noinline + noclone keep every function below a frame of its own in the call stack. */
__attribute__((noinline, noclone)) widget *make_widget(void)
{
    widget *w = malloc(sizeof(widget));
    if (w == NULL) {
        fputs("widgets: out of memory\n", stderr);
        exit(2);
    }
    for (int i = 0; i < 50; i++)
        w->data[i] = i;
    return w;
}

__attribute__((noinline, noclone)) widget *make_blue_widget(void)
{
    widget *w = make_widget();
    w->c = BLUE;
    return w;
}

__attribute__((noinline, noclone)) widget *make_red_widget(void)
{
    widget *w = make_widget();
    w->c = RED;
    return w;
}

__attribute__((noinline, noclone)) void consume_widget(widget *w)
{
    if (w->c == BLUE) {
        /* record blue widget */
        free(w);
    } else {
        /* record red widget: the bug, it is never freed */
    }
}

int main(int argc, char **argv)
{
    long n = 10000;
    unsigned long long seed = 1;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1)
        n = strtol(argv[1], NULL, 10);
    if (argc > 2)
        seed = strtoull(argv[2], NULL, 10);
    if (n < 0 || n > MAX_WIDGETS) {
        fprintf(stderr, "widgets: NUM_WIDGETS must be 0..%d\n", MAX_WIDGETS);
        return 1;
    }
    /* Mix the seed so that small seeds give well-spread states; never let the state be 0. */
    rng_state = (seed + 1) * 0x9E3779B97F4A7C15ULL;
    if (rng_state == 0)
        rng_state = 1;

    long red = 0, blue = 0;
    for (long i = 0; i < n; i++) {
        if (random_flip()) {
            wqueue[i] = make_blue_widget();
            blue++;
        } else {
            wqueue[i] = make_red_widget();
            red++;
        }
    }
    for (long i = 0; i < n; i++)
        consume_widget(wqueue[i]);

    printf("widgets: made=%ld red=%ld blue=%ld size=%zu seed=%llu\n", n, red, blue,
           sizeof(widget), seed);
    return 0;
}
