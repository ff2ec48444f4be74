//! The monitor leaves the program's heap as it found it while sampling: the program's blocks
//! land where they land without heaplens, wherever heaplens is installed. (A monitor that
//! allocates from the program's heap moves every later block: a failed `dlsym` message naming
//! the monitor's path, `setenv`, zstd's context did, and the sampled widgets benchmark ran 1.00x
//! or 1.05x its bare time depending on the length of the monitor's path.)
//!
//! Without sampling the writer thread starts at once, and glibc takes its thread-local block
//! from the main arena: that mode is not held to this.

mod common;

use common::*;

#[test]
fn sampling_leaves_the_program_heap_alone() {
    let dir = WorkDir::new("heap-layout");
    let exe = compile_c(&dir, "heap_layout.c", &[]);
    let bare = truth(&run_bare(&dir, &exe, &[] as &[&str]).ok("bare").stdout, "heap_layout");
    assert!(bare["gaps"].split(',').all(|g| g.parse::<i64>().is_ok_and(|g| g > 0)), "{bare:?}");
    // The monitor under its own name, and a copy of it under a longer path and another name.
    let copy = dir.join("a-much-longer-directory-name-than-the-build-has").join("monitor-copy.so");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(heaplens_exe().with_file_name("libheaplens_preload.so"), &copy).unwrap();
    for (name, env) in [("installed", vec![]), ("copy", vec![("HEAPLENS_PRELOAD", copy.to_str().unwrap())])] {
        let trace = dir.join(format!("{name}.hltrace"));
        let mut cmd = std::process::Command::new(heaplens_exe());
        cmd.args(["run", "--sample-rate", "1000000000", "-o"]).arg(&trace).arg("--").arg(&exe);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = run_cmd(cmd, &dir.path).ok(name);
        assert_eq!(truth(&out.stdout, "heap_layout"), bare, "{name}: the monitor moved the program's blocks");
    }
}
