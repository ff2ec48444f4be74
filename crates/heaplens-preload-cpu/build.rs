// The monitor's C parts, from its own crate (this package builds the same sources).
fn main() {
    let csrc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../heaplens-preload/csrc");
    println!("cargo:rerun-if-changed={}", csrc.display());
    cc::Build::new().file(csrc.join("tls.c")).flag("-ftls-model=initial-exec").opt_level(2).compile("heaplens_tls");
    cc::Build::new().file(csrc.join("lifetime.c")).flag("-fexceptions").opt_level(2).compile("heaplens_lifetime");
}
