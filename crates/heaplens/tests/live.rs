//! `heaplens live TRACE|PID --plain --frames N`: the live view follows a trace while the
//! program writes it, names the site holding the most bytes with its bytes within the first
//! screens, and reads a trace whose last block is still being written.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The screens of a `--plain` output.
fn screens(stdout: &str) -> Vec<String> {
    stdout.split("--- heaplens live: screen ").skip(1).map(str::to_string).collect()
}

/// The row of `site` in the table whose title line contains `table` (the left or right half
/// of the screen), as its cells.
fn row_of(screen: &str, table: &str, site: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = screen.lines().collect();
    let top = lines.iter().position(|l| l.contains(table))?;
    let left = lines[top].find(table).is_none_or(|i| i < lines[top].len() / 2);
    lines[top + 1..].iter().take_while(|l| !l.starts_with('└')).find_map(|l| {
        let half: String =
            if left { l.chars().take(l.chars().count() / 2).collect() } else { l.chars().skip(55).collect() };
        half.contains(site).then(|| half.split(['│', ' ']).filter(|c| !c.is_empty()).map(str::to_string).collect())
    })
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
    let out = heaplens(&dir, &["live", trace.to_str().unwrap(), "--plain", "--frames", "3", "--old", "1"]).ok("live");
    let shown = screens(&out.stdout);
    assert_eq!(shown.len(), 3, "{}", out.show());
    // Screens come a second apart: the third is 2 s after the first.
    let first = shown
        .iter()
        .position(|s| {
            row_of(s, "holding the most bytes now", "hold_blocks")
                .is_some_and(|r| r[0] == "976.9" && r[1] == "KiB" && r[2] == "41")
        })
        .unwrap_or_else(|| panic!("no screen shows hold_blocks holding 976.9 KiB in 41 blocks\n{}", out.stdout));
    assert!(first <= 2, "shown on screen {}", first + 1);
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
        screens(&out.stdout)
            .iter()
            .any(|s| row_of(s, "holding the most bytes now", "hold_blocks")
                .is_some_and(|r| r[0] == "32.1" && r[2] == "9")),
        "hold_blocks holding 32.1 KiB (8 blocks of 4096 bytes and their array) in 9 blocks\n{}",
        out.stdout
    );
    wait_with_timeout(run, "heaplens run");
    let out = heaplens(&dir, &["live", "999999999", "--plain"]);
    assert_one_line_error(&out, "live on no process");
}
