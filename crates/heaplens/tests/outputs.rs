//! Outputs never destroy: an output that is an input (the trace, the program, through a hard or
//! symbolic link too) is refused and the input left byte for byte; an existing output is left
//! as it was when a command fails and replaced whole when it succeeds, with no temporary file
//! left; devices are written in place and stay devices. And names are bytes: arguments and
//! paths that are not UTF-8 pass through as the OS gives them.

mod common;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Every command that writes with `-o`, as its arguments after the trace.
const WRITERS: &[&[&str]] = &[
    &["map"],
    &["timeline"],
    &["view"],
    &["export", "--format", "collapsed"],
    &["export", "--format", "flamegraph"],
    &["export", "--format", "pprof-text"],
    &["export", "--format", "pprof"],
    &["export", "--format", "firefox"],
    &["export", "--format", "heaptrack"],
    &["export", "--format", "parquet"],
];

/// `heaplens CMD TRACE [ARGS] -o OUT`.
fn write_cmd(dir: &WorkDir, cmd: &[&str], trace: &Path, out: &Path) -> Out {
    let mut args: Vec<&OsStr> = vec![OsStr::new(cmd[0]), trace.as_os_str()];
    args.extend(cmd[1..].iter().map(OsStr::new));
    args.extend([OsStr::new("-o"), out.as_os_str()]);
    heaplens(dir, &args)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    v.sort();
    v
}

fn argv_hex(dir: &WorkDir) -> PathBuf {
    compile_c(dir, "argv_hex.c", &[])
}

/// A work directory named `name`, argv_hex built in it and its trace `t.hltrace` of `argv_hex x`.
fn traced(name: &str) -> (WorkDir, PathBuf, PathBuf) {
    let dir = WorkDir::new(name);
    let exe = argv_hex(&dir);
    let trace = dir.join("t.hltrace");
    run_traced(&dir, &trace, &exe, &["x"]).ok("heaplens run");
    (dir, exe, trace)
}

#[test]
fn run_refuses_the_program_as_output() {
    let dir = WorkDir::new("run-onto-program");
    let exe = argv_hex(&dir);
    let before = std::fs::read(&exe).unwrap();
    for out in [exe.clone(), PathBuf::from("argv_hex")] {
        let o = heaplens(&dir, &[OsStr::new("run"), "-o".as_ref(), out.as_os_str(), "--".as_ref(), exe.as_os_str()]);
        assert_one_line_error(&o, "heaplens run -o PROG -- PROG");
        assert_eq!(std::fs::read(&exe).unwrap(), before, "the program changed");
    }
    // Found through PATH as exec finds it.
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "-o", "argv_hex", "--", "argv_hex"]).env("PATH", &dir.path);
    let o = run_cmd(cmd, &dir.path);
    assert_one_line_error(&o, "heaplens run -o argv_hex -- argv_hex (through PATH)");
    assert_eq!(std::fs::read(&exe).unwrap(), before, "the program changed");
}

#[test]
fn run_replaces_an_existing_trace_whole() {
    let dir = WorkDir::new("run-over-trace");
    let exe = argv_hex(&dir);
    let trace = dir.join("t.hltrace");
    run_traced(&dir, &trace, &exe, &["one"]).ok("first run");
    run_traced(&dir, &trace, &exe, &["two"]).ok("second run");
    let v = report(&dir, &trace);
    let argv = at(&v, "process/argv").to_string();
    assert!(argv.contains("two") && !argv.contains("one"), "the second run's trace: {argv}");
    assert_eq!(names(&dir.path), ["argv_hex", "t.hltrace"].map(OsString::from), "stray files");
}

#[test]
fn outputs_equal_to_the_trace_are_refused() {
    let (dir, _, trace) = traced("onto-trace");
    let before = std::fs::read(&trace).unwrap();
    let hard = dir.join("hard.hltrace");
    std::fs::hard_link(&trace, &hard).unwrap();
    let soft = dir.join("soft.hltrace");
    std::os::unix::fs::symlink(&trace, &soft).unwrap();
    for cmd in WRITERS {
        for out in [&trace, &hard, &soft] {
            let o = write_cmd(&dir, cmd, &trace, out);
            assert_one_line_error(&o, &format!("heaplens {cmd:?} -o {}", out.display()));
            assert!(o.stderr.contains("input"), "the error says why\n{}", o.show());
            assert_eq!(std::fs::read(&trace).unwrap(), before, "{cmd:?} -o {} changed the trace", out.display());
        }
    }
    // So is a picture's output equal to its --skip-file, another input.
    let skip = dir.join("skip.txt");
    std::fs::write(&skip, "^xmalloc$\n").unwrap();
    for cmd in ["map", "timeline", "view"] {
        let args = [cmd, trace.to_str().unwrap(), "--skip-file", skip.to_str().unwrap(), "-o", skip.to_str().unwrap()];
        let o = heaplens(&dir, &args);
        assert_one_line_error(&o, &format!("heaplens {cmd} -o its --skip-file"));
        assert_eq!(std::fs::read_to_string(&skip).unwrap(), "^xmalloc$\n", "{cmd} replaced its --skip-file");
    }
    let mut expected =
        ["argv_hex", "hard.hltrace", "skip.txt", "soft.hltrace", "t.hltrace"].map(OsString::from).to_vec();
    expected.sort();
    assert_eq!(names(&dir.path), expected, "stray files");
}

#[test]
fn an_existing_output_is_kept_on_failure_and_replaced_whole_on_success() {
    let (dir, _, trace) = traced("keep-or-replace");
    let bad = dir.join("bad.hltrace");
    std::fs::write(&bad, b"not a trace at all, and long enough to be read as one").unwrap();
    let out_dir = dir.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    for cmd in WRITERS.iter().filter(|c| !c.contains(&"parquet")) {
        let out = out_dir.join("result");
        std::fs::write(&out, b"earlier result").unwrap();
        for input in [&bad, &dir.join("absent.hltrace")] {
            let o = write_cmd(&dir, cmd, input, &out);
            assert_one_line_error(&o, &format!("heaplens {cmd:?} on {}", input.display()));
            assert_eq!(std::fs::read(&out).unwrap(), b"earlier result", "{cmd:?}: a failure changed the output");
            assert_eq!(names(&out_dir), [OsString::from("result")], "{cmd:?}: stray files after a failure");
        }
        write_cmd(&dir, cmd, &trace, &out).ok(&format!("heaplens {cmd:?}"));
        let new = std::fs::read(&out).unwrap();
        assert!(new.len() > 20 && new != b"earlier result", "{cmd:?}: the output was not replaced");
        assert_eq!(names(&out_dir), [OsString::from("result")], "{cmd:?}: stray files after success");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&out).unwrap().permissions());
        assert_eq!(mode & 0o044, 0o044, "{cmd:?}: the output is not readable by others ({mode:o})");
    }
}

#[test]
fn devices_are_written_in_place() {
    let (dir, exe, trace) = traced("devices");
    let is_char = |p: &str| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device());
    assert!(is_char("/dev/null") && is_char("/dev/full"));
    for cmd in WRITERS.iter().filter(|c| !c.contains(&"parquet")) {
        write_cmd(&dir, cmd, &trace, Path::new("/dev/null")).ok(&format!("heaplens {cmd:?} -o /dev/null"));
        assert!(is_char("/dev/null"), "{cmd:?} -o /dev/null: /dev/null is no longer a character device");
        let o = write_cmd(&dir, cmd, &trace, Path::new("/dev/full"));
        assert_one_line_error(&o, &format!("heaplens {cmd:?} -o /dev/full"));
        assert!(o.stderr.contains("/dev/full"), "the error names the path\n{}", o.show());
        assert!(is_char("/dev/full"), "{cmd:?} -o /dev/full: /dev/full is no longer a character device");
    }
    let o = heaplens(&dir, &[OsStr::new("run"), "-o".as_ref(), "/dev/null".as_ref(), "--".as_ref(), exe.as_os_str()]);
    let o = o.ok("heaplens run -o /dev/null");
    assert!(o.stdout.contains("done"), "the program ran\n{}", o.show());
    assert!(is_char("/dev/null"), "run -o /dev/null: /dev/null is no longer a character device");
    assert!(!Path::new("/dev/null.hltrace").exists());
}

#[test]
fn run_follows_a_dangling_link_as_a_shell_does() {
    let (dir, exe, _) = traced("dangling");
    let target = dir.join("made-here.hltrace");
    let link = dir.join("link.hltrace");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = heaplens(
        &dir,
        &[OsStr::new("run"), "-q".as_ref(), "-o".as_ref(), link.as_os_str(), "--".as_ref(), exe.as_os_str()],
    );
    o.ok("heaplens run -o DANGLING-LINK");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is still a link");
    assert!(u(&report(&dir, &link), "summary/allocations") > 0, "the trace is at the link's target");
    assert!(target.is_file());
}

#[test]
fn descriptor_paths_write_through_the_shells_descriptor() {
    let (dir, exe, trace) = traced("descriptors");
    let log = dir.join("log.txt");
    std::fs::write(&log, "before\n").unwrap();
    // A link of the user's own to the standard output, as /dev/stdout is the system's.
    let link = dir.join("mystdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
    for out in ["/dev/stdout", "-", link.to_str().unwrap()] {
        // `>> log.txt`: what heaplens writes goes after what is there.
        let script = format!(
            "{{ echo appended; '{}' export '{}' --format collapsed -o '{out}'; echo after; }} >> '{}'",
            heaplens_exe().display(),
            trace.display(),
            log.display()
        );
        let mut sh = Command::new("sh");
        sh.arg("-c").arg(script);
        let o = run_cmd(sh, &dir.path);
        assert!(o.status.success(), "export -o {out}\n{}", o.show());
    }
    let folded = dir.join("ref.folded");
    write_cmd(&dir, &["export", "--format", "collapsed"], &trace, &folded).ok("export to a file");
    let folded = std::fs::read_to_string(&folded).unwrap();
    assert!(!folded.is_empty());
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text, format!("before\n{}", format!("appended\n{folded}after\n").repeat(3)));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is still a link");
    assert!(std::fs::symlink_metadata("/dev/stdout").unwrap().file_type().is_symlink());
    // The trace is never written to a descriptor the program shares.
    let o = heaplens(&dir, &[OsStr::new("run"), "-o".as_ref(), "/dev/stdout".as_ref(), "--".as_ref(), exe.as_os_str()]);
    assert_one_line_error(&o, "run -o /dev/stdout");
    assert!(o.stderr.contains("names an open descriptor"), "{}", o.show());
    let o = heaplens(&dir, &[OsStr::new("run"), "-o".as_ref(), "-".as_ref(), "--".as_ref(), exe.as_os_str()]);
    assert_one_line_error(&o, "run -o -");
    assert!(!dir.join("-").exists(), "no file named -");
}

#[test]
fn arguments_that_are_not_utf8_reach_the_program() {
    let dir = WorkDir::new("argv-bytes");
    let exe = argv_hex(&dir);
    let trace = dir.join("t.hltrace");
    let arg = OsStr::from_bytes(b"a\xffb");
    let o = run_traced(&dir, &trace, &exe, &[arg, OsStr::new("ok")]).ok("heaplens run -- prog $'a\\xffb'");
    assert!(o.stdout.contains("argv: 1 61ff62\n"), "the program got other bytes\n{}", o.show());
    assert!(o.stdout.contains("argv: 2 6f6b\n"), "{}", o.show());
    // A program whose own path is not UTF-8.
    let odd = dir.join(OsStr::from_bytes(b"prog\xfe"));
    std::fs::copy(&exe, &odd).unwrap();
    run_traced(&dir, &trace, &odd, &["z"]).ok("heaplens run -- $'prog\\xfe'");
    // Its path is recorded as its bytes, so its symbols are found: main allocates, by name.
    let v = report(&dir, &trace);
    let direct = arr(&v, "direct/rows");
    assert!(direct.iter().any(|r| r["function"] == "main"), "main is named: {direct:?}");
}

#[test]
fn output_names_that_are_not_utf8_are_kept() {
    let dir = WorkDir::new("name-bytes");
    let exe = argv_hex(&dir);
    let name = OsStr::from_bytes(b"t\xff.hltrace");
    run_traced(&dir, &dir.join(name), &exe, &["x"]).ok("heaplens run -o $'t\\xff.hltrace'");
    assert!(names(&dir.path).iter().any(|n| n == name), "no t\\xff.hltrace in {:?}", names(&dir.path));
    assert_eq!(names(&dir.path).len(), 2, "other files: {:?}", names(&dir.path));
    // %p is filled byte for byte too.
    let sub = dir.join("pid");
    std::fs::create_dir(&sub).unwrap();
    run_traced(&dir, &sub.join(OsStr::from_bytes(b"\xfe%p.hltrace")), &exe, &["x"]).ok("heaplens run -o $'\\xfe%p'");
    let got = names(&sub);
    assert!(
        got.len() == 1 && got[0].as_bytes().starts_with(b"\xfe") && got[0].as_bytes()[1].is_ascii_digit(),
        "{got:?}"
    );
    // report and map read a trace by such a name.
    let trace = dir.join(name);
    let v = report(&dir, &trace);
    assert!(u(&v, "summary/allocations") >= 1);
    let png = dir.join(OsStr::from_bytes(b"m\xfd.png"));
    heaplens(&dir, &[OsStr::new("map"), trace.as_os_str(), "-o".as_ref(), png.as_os_str()]).ok("heaplens map");
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn a_relative_output_from_a_directory_that_is_not_utf8() {
    let dir = WorkDir::new("cwd-bytes");
    let exe = argv_hex(&dir);
    let cwd = dir.join(OsString::from_vec(b"d\xfe\xff".to_vec()));
    std::fs::create_dir(&cwd).unwrap();
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "-o", "rel.hltrace", "--"]).arg(&exe).arg("x");
    run_cmd(cmd, &cwd).ok("heaplens run -o rel.hltrace in $'d\\xfe\\xff'");
    assert_eq!(names(&cwd), [OsString::from("rel.hltrace")], "the trace is not where asked");
    assert!(u(&report(&dir, &cwd.join("rel.hltrace")), "summary/allocations") >= 1);
}
