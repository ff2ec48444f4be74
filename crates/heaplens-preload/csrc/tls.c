/* Per-thread monitor state with the initial-exec TLS model: reaching it never calls into the
 * dynamic loader, never allocates and registers no destructor. */
#include <stdint.h>

struct hl_tls {
    uint32_t guard;  /* non-zero while the monitor itself runs on this thread */
    uint32_t dead;   /* set once this thread's state has been torn down at thread exit */
    void *thread;    /* the thread's ThreadState, or NULL before its first event */
    int64_t sample_left; /* bytes until the next sampled allocation (--sample-rate) */
    uint64_t rng;        /* the sampler's random state, 0 until first used */
    void *cpu;           /* the thread's CPU-time sampler (--cpu), or NULL */
    uint64_t cpu_gen;    /* the sampling generation `cpu` belongs to (attach: one per attach) */
};

/* Not static: the entry stubs (src/fastpath.rs) reach it with @GOTTPOFF, as the C code does. */
__attribute__((visibility("hidden"))) __thread struct hl_tls hl_tls_slot __attribute__((tls_model("initial-exec")));

__attribute__((visibility("hidden"))) struct hl_tls *hl_tls(void) { return &hl_tls_slot; }

/* The slot's offset from the thread pointer: the same in every thread for initial-exec TLS, so
 * Rust can reach the slot with one fs-relative add instead of a call. */
__attribute__((visibility("hidden"))) long hl_tls_offset(void)
{
    return (long)((char *)&hl_tls_slot - (char *)__builtin_thread_pointer());
}
