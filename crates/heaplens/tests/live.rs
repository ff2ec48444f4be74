//! `heaplens live TRACE|PID --plain --frames N`: the live view follows a trace while the
//! program writes it, names the site holding the most bytes with its bytes within the first
//! screens, reads a trace whose last block is still being written, sorts the call sites as
//! asked (`examples/live_sites.c`), and, following a trace that grows block by block (half
//! blocks included), ends with the report's numbers; `heaplens run --live` shows the screens
//! beside the program.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The screens of a `--plain` output.
fn screens(stdout: &str) -> Vec<String> {
    stdout.split("--- heaplens live: screen ").skip(1).map(str::to_string).collect()
}

/// The rows of the table whose title line contains `table` (its box's columns only), each as
/// its cells.
fn rows_of(screen: &str, table: &str) -> Vec<Vec<String>> {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let Some(top) = lines.iter().position(|l| l.iter().collect::<String>().contains(table)) else { return vec![] };
    let title: String = lines[top].iter().collect();
    let at = title[..title.find(table).unwrap()].chars().count();
    let start = lines[top][..at].iter().rposition(|&c| c == '┌').unwrap_or(0);
    let end = lines[top][at..].iter().position(|&c| c == '┐').map_or(lines[top].len(), |e| at + e + 1);
    lines[top + 2..]
        .iter()
        .take_while(|l| l.get(start) != Some(&'└'))
        .map(|l| l[start.min(l.len())..end.min(l.len())].iter().collect::<String>())
        .map(|r| r.split(['│', ' ']).filter(|c| !c.is_empty()).map(str::to_string).collect::<Vec<_>>())
        .filter(|r| !r.is_empty())
        .collect()
}

/// The row of `site` in the table whose title line contains `table`, as its cells.
fn row_of(screen: &str, table: &str, site: &str) -> Option<Vec<String>> {
    rows_of(screen, table).into_iter().find(|r| r.iter().any(|c| c == site))
}

#[test]
fn the_top_site_and_its_bytes_show_within_the_first_screens() {
    let dir = WorkDir::new("live-plain");
    let exe = compile_c(&dir, "attach_loop.c", &["-pthread"]);
    let trace = dir.join("hold.hltrace");
    // 40 blocks of 25,000 bytes and their array of 320 (976.9 KiB in 41 blocks) from
    // hold_blocks, held 4 s.
    let mut run = Command::new(heaplens_exe());
    run.args(["run", "-q", "-o"]).arg(&trace).arg("--").arg(&exe).args(["hold", "40", "25000", "4"]);
    run.current_dir(&dir.path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let run = run.spawn().unwrap();
    // Started with the program: the first screen may come before the trace does.
    let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain", "--frames", "4", "--old", "1"]).ok("live");
    let shown = screens(&out.stdout);
    assert_eq!(shown.len(), 4, "{}", out.show());
    // Screens come a second apart: the third is 2 s after the first.
    let first = shown
        .iter()
        .position(|s| {
            row_of(s, "call sites, by bytes in use now", "hold_blocks")
                .is_some_and(|r| r[0] == "976.9" && r[1] == "KiB" && r[2] == "41")
        })
        .unwrap_or_else(|| panic!("no screen shows hold_blocks holding 976.9 KiB in 41 blocks\n{}", out.stdout));
    assert!(first <= 2, "shown on screen {}", first + 1);
    // The program holds its blocks without a call for 4 s: time goes on for the view, and
    // they become leak candidates once a second old.
    let old = shown.iter().skip(first + 1).find_map(|s| row_of(s, "old blocks", "hold_blocks"));
    let old = old.unwrap_or_else(|| panic!("hold_blocks' blocks never shown as old while idle\n{}", out.stdout));
    assert_eq!((&old[0][..], &old[1][..], &old[2][..]), ("976.9", "KiB", "41"), "{old:?}");
    let ran = wait_with_timeout(run, "heaplens run");
    assert_eq!(ran.status.code(), Some(4), "{}", ran.show());
    assert!(ran.stdout.contains("held blocks=40 bytes=1000000"), "{}", ran.show());

    // The finished trace: recording ended, nothing held.
    let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain"]).ok("live on the finished trace");
    assert!(out.stdout.contains("recording ended"), "{}", out.stdout);
    assert!(out.stdout.contains("peak 980.9 KiB"), "{}", out.stdout);

    // A trace cut in the middle of a block (as while it is written): the blocks before it.
    let bytes = std::fs::read(&trace).unwrap();
    let cut = dir.join("cut.hltrace");
    let largest = blocks(&bytes).into_iter().max_by_key(|b| b.len).unwrap();
    std::fs::write(&cut, &bytes[..largest.offset + largest.len / 2]).unwrap();
    let out = heaplens(&dir, &["live", cut.to_str().unwrap(), "--plain"]).ok("live on a cut trace");
    assert!(!out.stdout.contains("waiting for the trace"), "{}", out.stdout);
    assert!(out.stdout.contains("heaplens live "), "{}", out.stdout);
}

#[test]
fn an_aggregated_trace_is_followed_by_its_snapshots() {
    let dir = WorkDir::new("live-aggregate");
    let exe = compile_c(&dir, "attach_loop.c", &["-pthread"]);
    let trace = dir.join("agg.hltrace");
    // Counters, not events (`--aggregate`): hold_blocks' 40 blocks of 25,000 bytes and their
    // array (976.9 KiB in 41 blocks), held 3 s.
    let mut run = Command::new(heaplens_exe());
    run.args(["run", "-q", "--aggregate", "-o"]).arg(&trace).arg("--").arg(&exe).args(["hold", "40", "25000", "3"]);
    run.current_dir(&dir.path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let run = run.spawn().unwrap();
    let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain", "--frames", "3"]).ok("live");
    let shown = screens(&out.stdout);
    assert!(
        shown.iter().any(|s| row_of(s, "call sites, by bytes in use now", "hold_blocks")
            .is_some_and(|r| r[0] == "976.9" && r[1] == "KiB" && r[2] == "41")),
        "no screen shows hold_blocks holding 976.9 KiB in 41 blocks (the snapshot asked for)\n{}",
        out.stdout
    );
    assert!(shown.iter().any(|s| s.contains("counters (--aggregate)")), "{}", out.stdout);
    let ran = wait_with_timeout(run, "heaplens run");
    assert_eq!(ran.status.code(), Some(4), "{}", ran.show());
    // The finished trace: its last snapshot, as the report gives it.
    let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain"]).ok("live on the finished trace");
    assert!(out.stdout.contains("recording ended"), "{}", out.stdout);
    let v = report(&dir, &trace);
    assert!(out.stdout.contains(&format!("allocs {} (", u(&v, "summary/allocations"))), "{v:#}\n{}", out.stdout);
    assert!(out.stdout.contains("peak 980.9 KiB"), "{}", out.stdout);
}

#[test]
fn a_running_program_is_found_by_its_pid() {
    let dir = WorkDir::new("live-pid");
    let exe = compile_c(&dir, "attach_loop.c", &["-pthread"]);
    let mut run = Command::new(heaplens_exe());
    run.args(["run", "-q", "-o"]).arg(dir.join("pid.hltrace")).arg("--").arg(&exe).args(["hold", "8", "4096", "3"]);
    run.current_dir(&dir.path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let run = run.spawn().unwrap();
    let start = Instant::now();
    // The program, once it has its trace open.
    let pid = loop {
        let children =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", run.id(), run.id())).unwrap_or_default();
        let pid = children.split_whitespace().next().and_then(|p| p.parse::<u32>().ok());
        let open = pid.is_some_and(|p| {
            std::fs::read_dir(format!("/proc/{p}/fd")).is_ok_and(|d| {
                d.flatten().any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.ends_with("pid.hltrace")))
            })
        });
        if open {
            break pid.unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the program did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = heaplens(&dir, &["live", &pid.to_string(), "--plain", "--frames", "3"]).ok("live PID");
    assert!(out.stdout.contains(&format!("(pid {pid})")), "{}", out.stdout);
    assert!(
        screens(&out.stdout).iter().any(|s| row_of(s, "call sites, by bytes in use now", "hold_blocks")
            .is_some_and(|r| r[0] == "32.1" && r[2] == "9")),
        "hold_blocks holding 32.1 KiB (8 blocks of 4096 bytes and their array) in 9 blocks\n{}",
        out.stdout
    );
    wait_with_timeout(run, "heaplens run");
    let out = heaplens(&dir, &["live", "999999999", "--plain"]);
    assert_one_line_error(&out, "live on no process");
}

/// `examples/live_sites.c` recorded: keep_big holds 976.6 KiB to the end, churn_small
/// allocated 9.5 MiB and holds nothing.
fn traced_sites(dir: &WorkDir) -> std::path::PathBuf {
    let exe = compile_c(dir, "live_sites.c", &["-pthread"]);
    let trace = dir.join("sites.hltrace");
    let out = run_traced(dir, &trace, &exe, &[] as &[&str]);
    assert_eq!(out.stdout, "live_sites: keep_big=1000000 churn_small=10000000\n", "{}", out.show());
    trace
}

#[test]
fn the_call_sites_sort_as_asked_and_the_screen_says_how() {
    let dir = WorkDir::new("live-sort");
    let trace = traced_sites(&dir);
    for (sort, label, first, second) in [
        ("in-use", "bytes in use now", "keep_big", "main"),
        ("rate", "bytes allocated per second", "churn_small", "keep_big"),
        ("total", "bytes allocated in all", "churn_small", "keep_big"),
    ] {
        let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain", "--sort", sort]).ok("live --sort");
        assert!(out.stdout.contains(&format!("call sites sorted by {label}")), "{sort}: the header\n{}", out.stdout);
        assert!(out.stdout.contains("s: sort the call sites"), "{sort}: the footer lists the keys\n{}", out.stdout);
        let rows = rows_of(&out.stdout, &format!("call sites, by {label}"));
        let sites: Vec<&str> = rows.iter().map(|r| r.last().unwrap().as_str()).collect();
        assert_eq!(&sites[..2], &[first, second], "{sort}\n{}", out.stdout);
        // in use, blocks, bytes/s, allocs/s, allocated (units split off), site.
        let table = format!("call sites, by {label}");
        let big = row_of(&out.stdout, &table, "keep_big").unwrap();
        assert_eq!((&big[0][..], &big[1][..], &big[2][..]), ("976.6", "KiB", "10"), "{sort}: {big:?}");
        assert_eq!((&big[big.len() - 3][..], &big[big.len() - 2][..]), ("976.6", "KiB"), "{sort}: {big:?}");
        // Shown by every order, also by bytes in use, where it holds none (below those that do).
        let churn = row_of(&out.stdout, &table, "churn_small").unwrap();
        assert_eq!((&churn[0][..], &churn[2][..]), ("0", "0"), "{sort}: nothing held: {churn:?}");
        assert_eq!((&churn[churn.len() - 3][..], &churn[churn.len() - 2][..]), ("9.5", "MiB"), "{churn:?}");
    }
    let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain", "--sort", "bytes"]);
    assert!(!out.status.success() && out.stderr.contains("is not one of in-use, rate, total"), "{}", out.show());
}

#[test]
fn run_live_plain_prints_the_screens_beside_the_program() {
    let dir = WorkDir::new("run-live");
    let exe = compile_c(&dir, "attach_loop.c", &["-pthread"]);
    let bare = run_bare(&dir, &exe, &["hold", "40", "25000", "3"]);
    let trace = dir.join("run-live.hltrace");
    let args = ["run", "-q", "--live", "--plain", "--frames", "3", "--sort", "total", "-o", trace.to_str().unwrap()];
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(args).arg("--").arg(&exe).args(["hold", "40", "25000", "3"]);
    let out = run_cmd(cmd, &dir.path);
    // The program's stdout and status as bare; the screens on stderr.
    assert_eq!(out.stdout, bare.stdout, "stdout as in a bare run\n{}", out.show());
    assert_eq!(out.status.code(), bare.status.code(), "{}", out.show());
    let shown = screens(&out.stderr);
    assert_eq!(shown.len(), 3, "three screens\n{}", out.stderr);
    // The first screen may come before the trace (it then says it waits for it).
    assert!(shown.iter().all(|s| s.contains("call sites, by bytes allocated in all")), "{}", out.stderr);
    assert!(
        shown.iter().any(|s| {
            row_of(s, "call sites, by bytes allocated in all", "hold_blocks")
                .is_some_and(|r| r[0] == "976.9" && r[2] == "41")
        }),
        "a screen shows hold_blocks holding 976.9 KiB in 41 blocks\n{}",
        out.stderr
    );
    assert!(trace.exists(), "the trace is written as without --live");
}

/// A trace left unsealed by a writer that is gone (its End block missing, the file untouched
/// for 10 s) is shown to its last event, as the report shows it; while the file is fresh its
/// last 200 ms wait for blocks that may still come.
#[test]
fn an_unsealed_trace_no_longer_written_is_shown_to_its_end() {
    use heaplens_trace::BlockKind;
    let dir = WorkDir::new("live-settled");
    let sealed = traced_sites(&dir);
    let blocks: Vec<_> =
        common::damage::trace_blocks(&sealed).into_iter().filter(|(k, _)| *k != BlockKind::End).collect();
    let trace = dir.join("unsealed.hltrace");
    common::damage::write_raw(&trace, &blocks);
    let live = |trace: &std::path::Path| {
        let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain", "--frames", "1"]).ok("live");
        row_of(&out.stdout, "call sites, by bytes in use now", "keep_big")
    };
    let fresh = live(&trace);
    assert!(fresh.is_none(), "a fresh unsealed trace's last 200 ms are held back: {fresh:?}");
    let old = std::time::SystemTime::now() - Duration::from_secs(10);
    std::fs::File::options().write(true).open(&trace).unwrap().set_modified(old).unwrap();
    let big = live(&trace).expect("keep_big once the trace has settled");
    let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain", "--frames", "1"]).ok("live");
    assert!(out.stdout.contains("recording cut short"), "nothing writes it: {}", out.stdout);
    assert_eq!((&big[0][..], &big[1][..], &big[2][..]), ("976.6", "KiB", "10"), "{big:?}");
    let v = report(&dir, &trace);
    assert_eq!(u(&v, "summary/leaked_bytes"), 1_000_000, "the report agrees");
}

#[test]
fn a_trace_that_never_appears_is_an_error_after_its_screens() {
    let dir = WorkDir::new("live-missing");
    let missing = dir.join("never.hltrace");
    let out = heaplens(&dir, &["live", missing.to_str().unwrap(), "--plain", "--frames", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stdout.contains("to appear"), "the screen says it waits\n{}", out.stdout);
    assert!(out.stderr.contains("no trace appeared at"), "{}", out.show());
    // A file that is no trace never becomes one.
    let zeros = dir.join("zeros.hltrace");
    std::fs::write(&zeros, [0u8; 100]).unwrap();
    let out = heaplens(&dir, &["live", zeros.to_str().unwrap(), "--plain", "--frames", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stderr.contains("not a heaplens trace"), "{}", out.show());
}
