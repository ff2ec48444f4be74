//! CPU-time sampling (`heaplens run --cpu`, `--cpu-only`, `heaplens report --cpu`) against
//! programs that know their answer: `examples/cpu_burn.c` (two threads spending 70% and 30%
//! of their CPU time in two functions, measured on their own CPU clocks, and an idle thread),
//! checked against the program's own measurement and against `perf record`; and
//! `examples/cpu_signals.c` (signal handlers, EINTR, its own SIGPROF profiler, an exit
//! status, a forked child), which must behave under the sampler as without it.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

/// `heaplens report --cpu --format json --top 0 TRACE`, parsed.
fn cpu_report(dir: &WorkDir, trace: &Path) -> Value {
    let out = heaplens(dir, &["report", "--cpu", "--format", "json", "--top", "0", trace.to_str().unwrap()]);
    assert_no_panic(&out, "heaplens report --cpu");
    let out = out.ok("heaplens report --cpu --format json");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{}", out.stdout))
}

/// The flat profile's row of the function whose name starts with `name` (compilers add
/// suffixes such as `.constprop.0`).
fn flat_row<'a>(v: &'a Value, name: &str) -> &'a Value {
    arr(v, "flat")
        .iter()
        .find(|r| r["function"].as_str().is_some_and(|f| f.starts_with(name)))
        .unwrap_or_else(|| panic!("no {name} in the flat profile\n{v:#}"))
}

/// The true share of each burn function in the workers' CPU time, percent, from the
/// program's own output; and each worker's CPU time in nanoseconds.
fn true_split(stdout: &str) -> (f64, f64, Vec<u64>) {
    let workers = truths(stdout, "cpu_burn");
    assert_eq!(workers.len(), 2, "two workers\n{stdout}");
    let seventy: u64 = workers.iter().map(|w| num(w, "seventy_us")).sum();
    let thirty: u64 = workers.iter().map(|w| num(w, "thirty_us")).sum();
    let total = (seventy + thirty) as f64;
    let per_worker = workers.iter().map(|w| (num(w, "seventy_us") + num(w, "thirty_us")) * 1000).collect();
    (seventy as f64 * 100.0 / total, thirty as f64 * 100.0 / total, per_worker)
}

/// (Issue 19, A.3.) The 70/30 split is reported within 3 percentage points (3 s of CPU per
/// worker: the kernel takes about 250 stacks a second, so 1500 in all; with 400 a loaded CI
/// machine once saw 66.3% for 69.9%), per function
/// (inclusive: the arithmetic is inlined into each), each worker's CPU time within 15%, and
/// the idle thread takes no share; the allocations of the same run are all recorded beside.
#[test]
fn cpu_time_is_split_as_the_program_spent_it() {
    let dir = WorkDir::new("cpu-split");
    let exe = compile_c(&dir, "cpu_burn.c", &["-pthread"]);
    let trace = dir.join("burn.hltrace");
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "--cpu", "-o"]).arg(&trace).arg("--").arg(&exe).arg("3000");
    let out = run_cmd(cmd, &dir.path).ok("heaplens run --cpu");
    let (seventy, thirty, per_worker) = true_split(&out.stdout);
    let v = cpu_report(&dir, &trace);
    let samples = u(&v, "samples") as f64;
    let share = |f: &str| u(flat_row(&v, f), "inclusive_samples") as f64 * 100.0 / samples;
    let (s70, s30) = (share("burn_seventy"), share("burn_thirty"));
    assert!((s70 - seventy).abs() <= 3.0, "burn_seventy {s70:.1}% of samples, {seventy:.1}% true\n{v:#}");
    assert!((s30 - thirty).abs() <= 3.0, "burn_thirty {s30:.1}% of samples, {thirty:.1}% true\n{v:#}");
    // In time, a sample weighs the timer periods its signal carried: noisier on a loaded
    // machine, where a tick may come late.
    let t70 = flat_row(&v, "burn_seventy")["inclusive_percent"].as_f64().unwrap();
    assert!((t70 - seventy).abs() <= 5.0, "burn_seventy {t70:.1}% of CPU time, {seventy:.1}% true\n{v:#}");
    assert_eq!(u(&v, "rate_hz"), 999);

    // Threads: the two workers carry the CPU time, the idle thread and main next to none.
    let threads = arr(&v, "threads");
    let busy: Vec<&Value> = threads.iter().filter(|t| t["percent"].as_f64().unwrap() >= 5.0).collect();
    assert_eq!(busy.len(), 2, "two busy threads\n{v:#}");
    let mut measured: Vec<u64> = busy.iter().map(|t| u(t, "cpu_ns")).collect();
    measured.sort_unstable();
    let mut truth = per_worker.clone();
    truth.sort_unstable();
    for (m, t) in measured.iter().zip(&truth) {
        let ratio = *m as f64 / *t as f64;
        assert!((0.85..=1.15).contains(&ratio), "a worker's CPU time: {m} ns sampled, {t} ns true\n{v:#}");
    }
    let rest: f64 =
        threads.iter().filter(|t| t["percent"].as_f64().unwrap() < 5.0).map(|t| t["percent"].as_f64().unwrap()).sum();
    assert!(rest < 2.0, "idle and main threads took {rest:.1}%\n{v:#}");
    // Samples add up: the flat profile's self times are all the CPU time.
    let self_sum: u64 = arr(&v, "flat").iter().map(|r| u(r, "self_samples")).sum();
    assert_eq!(self_sum, u(&v, "samples"));

    // The same trace's allocation report: each worker's malloc(64) per 10 ms slice.
    let mallocs: u64 = truths(&out.stdout, "cpu_burn").iter().map(|w| num(w, "mallocs")).sum();
    let m = report(&dir, &trace);
    let row = bin_row(&m, 64).unwrap_or_else(|| panic!("no 64-byte bin\n{m:#}"));
    assert_eq!(u(row, "allocs"), mallocs, "64-byte allocations");
}

/// (Issue 19, A.3.) `perf record --call-graph dwarf` on the same program finds the same split
/// (within 3 points of what heaplens reports).
#[test]
fn perf_agrees_with_the_split() {
    let dir = WorkDir::new("cpu-perf");
    let exe = compile_c(&dir, "cpu_burn.c", &["-pthread"]);
    let data = dir.join("perf.data");
    let mut cmd = Command::new("perf");
    cmd.args(["record", "-q", "-e", "cpu-clock", "--call-graph", "dwarf,4096", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&exe)
        .arg("2500");
    let rec = run_cmd(cmd, &dir.path);
    if !rec.status.success() && (rec.stderr.contains("perf_event_paranoid") || rec.stderr.contains("not supported")) {
        // The kernel refuses perf events here (a container's seccomp profile): nothing to compare.
        eprintln!("perf cannot record on this machine, skipped:\n{}", rec.stderr);
        return;
    }
    let rec = rec.ok("perf record");
    let (seventy, _, _) = true_split(&rec.stdout);
    let mut cmd = Command::new("perf");
    cmd.args(["report", "--children", "--stdio", "--sort", "symbol", "-g", "none", "--no-inline", "-i"]).arg(&data);
    let rep = run_cmd(cmd, &dir.path).ok("perf report");
    // "    69.74%    67.36%  [.] burn_seventy.constprop.0  ..."
    let perf_share = |name: &str| -> f64 {
        rep.stdout
            .lines()
            .find(|l| l.split_whitespace().nth(3).is_some_and(|s| s.starts_with(name)))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|p| p.trim_end_matches('%').parse().ok())
            .unwrap_or_else(|| panic!("perf report has no {name}\n{}", rep.stdout))
    };
    let (p70, p30) = (perf_share("burn_seventy"), perf_share("burn_thirty"));

    let trace = dir.join("burn.hltrace");
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "--cpu-only", "-o"]).arg(&trace).arg("--").arg(&exe).arg("2500");
    run_cmd(cmd, &dir.path).ok("heaplens run --cpu-only");
    let v = cpu_report(&dir, &trace);
    let samples = u(&v, "samples") as f64;
    let share = |f: &str| u(flat_row(&v, f), "inclusive_samples") as f64 * 100.0 / samples;
    let (h70, h30) = (share("burn_seventy"), share("burn_thirty"));
    assert!((h70 - p70).abs() <= 3.0, "burn_seventy: heaplens {h70:.1}%, perf {p70:.1}% (true {seventy:.1}%)");
    assert!((h30 - p30).abs() <= 3.0, "burn_thirty: heaplens {h30:.1}%, perf {p30:.1}%");
}

/// (Issue 19, A.1.) `--cpu-only` records samples and no allocation, and `heaplens report`
/// shows the CPU profile without being asked; `--cpu=HZ` sets the rate.
#[test]
fn cpu_only_records_samples_alone() {
    let dir = WorkDir::new("cpu-only");
    let exe = compile_c(&dir, "cpu_burn.c", &["-pthread"]);
    let trace = dir.join("only.hltrace");
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "--cpu-only", "--cpu=250", "-o"]).arg(&trace).arg("--").arg(&exe).arg("300");
    run_cmd(cmd, &dir.path).ok("heaplens run --cpu-only");
    let t = heaplens_interpret::Trace::load(&trace, false).unwrap();
    assert!(t.threads.iter().all(|(_, p)| p.is_empty()), "allocation events recorded under --cpu-only");
    assert!(t.process.as_ref().unwrap().cpu_only);
    // The CPU-only monitor was loaded: it exports no allocation entry point, so the program's
    // allocation calls never passed through it.
    let monitor: Vec<String> = t
        .modules
        .iter()
        .map(|m| m.path.to_string_lossy().into_owned())
        .filter(|p| p.contains("libheaplens_preload"))
        .collect();
    assert!(monitor.iter().all(|p| p.ends_with("libheaplens_preload_cpu.so")) && !monitor.is_empty(), "{monitor:?}");
    let v = cpu_report(&dir, &trace);
    assert_eq!(u(&v, "rate_hz"), 250);
    // Threads that never allocate through the monitor are named too (by the writer, and at
    // their end), the program's main thread first of all.
    let threads = arr(&v, "threads");
    assert!(!threads.is_empty() && threads.iter().all(|t| t["name"] == "cpu_burn"), "{threads:#?}");
    // 2 x 300 ms at 250 Hz: about 150 samples.
    let cpu_ms = u(&v, "cpu_ns") / 1_000_000;
    assert!((500..=700).contains(&cpu_ms), "{cpu_ms} ms of CPU sampled for 600 ms burnt\n{v:#}");
    let text = heaplens(&dir, &["report".as_ref(), trace.as_os_str()]).ok("heaplens report");
    assert!(text.stdout.starts_with("heaplens report --cpu:"), "{}", text.stdout);
    assert!(text.stdout.contains("FLAT PROFILE") && text.stdout.contains("burn_seventy"), "{}", text.stdout);
}

/// (Issue 19, A.1.) Sampled allocation recording and CPU samples in one run.
#[test]
fn cpu_samples_beside_sampled_allocations() {
    let dir = WorkDir::new("cpu-sampled");
    let exe = compile_c(&dir, "cpu_burn.c", &["-pthread"]);
    let trace = dir.join("s.hltrace");
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "--cpu", "--sample-rate", "1k", "-o"]).arg(&trace).arg("--").arg(&exe).arg("200");
    run_cmd(cmd, &dir.path).ok("heaplens run --cpu --sample-rate");
    let v = cpu_report(&dir, &trace);
    let cpu_ms = u(&v, "cpu_ns") / 1_000_000;
    assert!((340..=460).contains(&cpu_ms), "{cpu_ms} ms of CPU sampled for 400 ms burnt\n{v:#}");
    assert!(at(&report(&dir, &trace), "trace/sample_rate").as_u64().unwrap() > 0);
}

/// (Issue 19, A.3.) Under the sampler a program's own signal handlers run as often, a read
/// it times out with SIGALRM still fails with EINTR, its system calls are never interrupted
/// by the sampler's signals, its own ITIMER_PROF profiler keeps its ticks, it exits with the
/// same status, and its forked child is sampled into a trace of its own.
#[test]
fn programs_with_signals_behave_the_same() {
    let dir = WorkDir::new("cpu-signals");
    let exe = compile_c(&dir, "cpu_signals.c", &[]);
    let bare = run_bare(&dir, &exe, &["fork"]);
    assert_eq!(bare.status.code(), Some(3), "{}", bare.show());
    let t: std::collections::BTreeMap<String, String> = truths(&bare.stdout, "signals").into_iter().flatten().collect();
    assert_eq!(num(&t, "child_status"), 0);
    assert_eq!(num(&t, "usr1_runs"), 100);
    assert_eq!(num(&t, "read_eintr"), 1);
    assert_eq!(num(&t, "syscall_eintr"), 0);
    for flags in [&["--cpu"][..], &["--cpu-only"][..], &["--cpu=5000"][..]] {
        let trace = dir.join(format!("sig{}.hltrace", flags[0].trim_start_matches('-').replace('=', "")));
        let mut cmd = Command::new(heaplens_exe());
        cmd.arg("run").args(flags).arg("-q").arg("-o").arg(&trace).arg("--").arg(&exe).arg("fork");
        let traced = run_cmd(cmd, &dir.path);
        assert_no_panic(&traced, "heaplens run");
        assert_eq!(describe(&traced.status), describe(&bare.status), "{flags:?}\n{}", traced.show());
        assert_eq!(traced.stdout, bare.stdout, "{flags:?}: the program saw something else\n{}", traced.show());
        let v = cpu_report(&dir, &trace);
        assert!(u(&v, "samples") > 0, "{flags:?}: no samples");
        // The child burnt 200 ms in child_burn: its own trace says so.
        let child = std::fs::read_dir(&dir.path)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{}.", trace.file_name().unwrap().to_string_lossy()))
            })
            .unwrap_or_else(|| panic!("{flags:?}: no trace of the forked child"));
        let c = cpu_report(&dir, &child);
        let share = flat_row(&c, "child_burn")["inclusive_percent"].as_f64().unwrap();
        assert!(share > 90.0, "{flags:?}: child_burn has {share:.1}% of the child's samples\n{c:#}");
        std::fs::remove_file(&child).unwrap();
    }
}

/// (Issue 19, A.1.) With allocations recorded too, the time the monitor spends recording them is
/// not the program's: such samples are not taken, they are counted, and no frame of the
/// monitor shows in the profile.
#[test]
fn the_monitors_own_time_is_not_sampled() {
    let dir = WorkDir::new("cpu-monitor-time");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "-q", "--cpu", "-o"]).arg(&trace).arg("--").arg(&exe).arg("1000000");
    let out = run_cmd(cmd, &dir.path).ok("heaplens run --cpu widgets");
    let made = num(&truth(&out.stdout, "widgets"), "made");
    let v = cpu_report(&dir, &trace);
    // A million allocations recorded take the monitor a good part of a second.
    assert!(u(&v, "samples_dropped") > 0, "no sample was skipped inside the monitor\n{v:#}");
    for r in arr(&v, "flat") {
        let module = r["module"].as_str().unwrap_or("");
        assert!(!module.contains("libheaplens_preload"), "a monitor frame in the profile: {r}");
    }
    // The monitor's own cost is measured and set against the program's CPU time.
    let (handler, writer) = (u(&v, "monitor/sampler_ns"), u(&v, "monitor/writer_cpu_ns"));
    assert!(handler > 0 && writer > 0, "the monitor's own time is not measured\n{v:#}");
    let percent = v["monitor"]["percent"].as_f64().expect("monitor/percent");
    let expected = (handler + writer) as f64 * 100.0 / u(&v, "cpu_ns") as f64;
    assert!((percent - expected).abs() < 1e-6 * expected.max(1.0), "{percent}% against {expected}%");
    // Every allocation is still recorded (stdio's buffer may add one).
    let allocations = u(&report(&dir, &trace), "summary/allocations");
    assert!((made..=made + 1).contains(&allocations), "{allocations} allocations for {made} widgets");
}

/// A program that reads the clock in a loop spends its time in the kernel's vDSO, which is no
/// file on disk, and a little in its own PLT entry for `clock_gettime`. Both are named: the
/// vDSO's function from this kernel's image (it was `linux-vdso.so.1+0xb47`, a row per
/// address), the PLT entry as `clock_gettime@plt` (it was `_init`, the symbol before `.plt`).
#[test]
fn vdso_and_plt_samples_are_named() {
    const SRC: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) static long spin(long n)
{
    struct timespec t;
    long s = 0;
    for (long i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        s += t.tv_nsec & 1;
    }
    return s;
}
int main(int argc, char **argv)
{
    printf("clock_loop: reads=%ld\n", argc > 1 ? atol(argv[1]) + 0 * spin(atol(argv[1])) : 0);
    return 0;
}
"#;
    let dir = WorkDir::new("cpu-vdso");
    let exe = compile_source(&dir, "gcc", "clock_loop.c", SRC, "clock_loop", C_FLAGS);
    let trace = dir.join("c.hltrace");
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "-q", "--cpu", "-o"]).arg(&trace).arg("--").arg(&exe).arg("20000000");
    let out = run_cmd(cmd, &dir.path).ok("heaplens run --cpu clock_loop");
    assert_eq!(out.stdout.trim(), "clock_loop: reads=20000000");
    let v = cpu_report(&dir, &trace);
    let samples = u(&v, "samples");
    assert!(samples >= 20, "{samples} samples\n{v:#}");
    let flat = arr(&v, "flat");
    let mut in_vdso = 0;
    for r in flat {
        let (function, module) = (r["function"].as_str().unwrap_or(""), r["module"].as_str().unwrap_or(""));
        assert_ne!(function, "_init", "a PLT sample named after _init: {r}");
        assert!(!function.contains("+0x"), "an unnamed frame: {r}");
        if module.starts_with("linux-vdso") {
            assert!(function.contains("clock_gettime"), "a vDSO frame named {function}: {r}");
            in_vdso += u(r, "self_samples");
        }
        if function.ends_with("@plt") {
            assert_eq!((function, module), ("clock_gettime@plt", "clock_loop"), "{r}");
        }
    }
    // Reading the clock is nearly all the loop does (96% of samples in a run here).
    assert!(in_vdso * 2 > samples, "{in_vdso} of {samples} samples in the vDSO\n{v:#}");
}
