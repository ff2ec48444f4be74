// The thread-local guard and thread pointer live in C so they get the initial-exec TLS model:
// stable Rust's `thread_local!` in a cdylib goes through `__tls_get_addr`, which may call
// malloc (infinite recursion inside a malloc hook).
fn main() {
    println!("cargo:rerun-if-changed=csrc/tls.c");
    println!("cargo:rerun-if-changed=csrc/lifetime.c");
    cc::Build::new().file("csrc/tls.c").flag("-ftls-model=initial-exec").opt_level(2).compile("heaplens_tls");
    // The exec family and pthread_exit (see the file's comment); unwind tables for pthread_exit's
    // forced unwinding through the hook's frame.
    cc::Build::new().file("csrc/lifetime.c").flag("-fexceptions").opt_level(2).compile("heaplens_lifetime");
}
