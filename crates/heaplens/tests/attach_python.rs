//! `heaplens attach` on python3, a real program with many modules that loads an extension
//! module (`_json`, by `dlopen`) while attached: its output and exit status are a bare run's,
//! the trace is sealed, and the JSON encoder's allocations, in the extension loaded after the
//! attach, are recorded (at least the bytes of the text it returns, which the script prints).
//! Skipped, saying so, only where python3 is not installed.

mod attaching;
mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use attaching::*;
use common::*;
use serde_json::Value;

/// Waits for a line, then imports json (its C accelerator `_json` is a shared library), dumps
/// and loads 20000 small dicts, prints the text's length and what came back, exits with 3.
const SCRIPT: &str = r#"
import sys
sys.stdin.readline()
import json
data = [{"k%d" % i: [i, str(i) * 3]} for i in range(20000)]
text = json.dumps(data)
back = json.loads(text)
print(len(text), len(back), sum(len(d) for d in back))
sys.exit(3)
"#;

/// The python3 executable itself (not a wrapper script such as pyenv's shim, whose process
/// would exec it): the system's, else the first on `PATH` that is an ELF file.
fn python3() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let candidates =
        ["/usr/bin", "/usr/local/bin", "/bin"].map(PathBuf::from).into_iter().chain(std::env::split_paths(&path));
    candidates.map(|d| d.join("python3")).find(|p| std::fs::read(p).is_ok_and(|b| b.starts_with(b"\x7fELF")))
}

/// Starts python3 on the script, `PYTHONMALLOC=malloc` (every object from `malloc`, not
/// pymalloc's arenas); its input is piped.
fn start(dir: &WorkDir, python: &PathBuf) -> std::process::Child {
    let mut cmd = Command::new(python);
    cmd.arg("script.py").env("PYTHONMALLOC", "malloc").current_dir(&dir.path);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("start python3")
}

#[test]
fn python3_loading_an_extension_while_attached_is_recorded() {
    let dir = WorkDir::new("attach-python");
    let Some(python) = python3() else {
        eprintln!("SKIPPED: python3 is not installed (bash .ci/run installs it)");
        return;
    };
    need_ptrace!(dir);
    std::fs::write(dir.join("script.py"), SCRIPT).unwrap();
    let mut bare = start(&dir, &python);
    bare.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let bare = wait_with_timeout(bare, "python3, bare");
    assert_eq!(bare.status.code(), Some(3), "bare run\n{}", bare.show());
    let text_len: u64 = bare.stdout.split_whitespace().next().and_then(|n| n.parse().ok()).expect("the text's length");

    let mut program = start(&dir, &python);
    let pid = program.id();
    // Past its start-up (heaplens gives a process younger than 300 ms that long anyway).
    std::thread::sleep(Duration::from_millis(500));
    let trace = dir.join("python.hltrace");
    let mut attaching = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap()]);
    wait_attached(pid, &mut attaching);
    program.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = wait_with_timeout(program, "python3, attached");
    let attached = wait_with_timeout(attaching, "heaplens attach");
    assert!(attached.status.success(), "{}", attached.show());
    assert_eq!(out.stdout, bare.stdout, "stdout as in a bare run");
    assert_eq!(out.stderr, bare.stderr, "stderr as in a bare run");
    assert_eq!(out.status.code(), Some(3), "exit status as in a bare run");

    let v = report(&dir, &trace);
    assert_eq!(at(&v, "process/attached"), &Value::Bool(true));
    assert_eq!(at(&v, "trace/complete"), &Value::Bool(true), "the trace is sealed");
    // 20000 dicts, lists and strings each way, and more: far over 100000 allocations.
    assert!(u(&v, "summary/allocations") > 100_000, "{} allocations", u(&v, "summary/allocations"));
    // Allocations with a frame in _json, the extension loaded while attached.
    let folded = dir.join("python.folded");
    heaplens(&dir, &["export", trace.to_str().unwrap(), "--format", "collapsed", "-o", folded.to_str().unwrap()])
        .ok("export collapsed");
    let folded = std::fs::read_to_string(&folded).unwrap();
    let in_json: u64 = folded
        .lines()
        .filter(|l| l.contains("_json"))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, n)| n.parse::<u64>().ok()))
        .sum();
    assert!(in_json >= text_len, "{in_json} bytes allocated under _json, the text alone is {text_len}");
}
