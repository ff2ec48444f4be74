//! `heaplens snapshot PID|TRACE`: asks a program running under `heaplens run --aggregate` to
//! write a snapshot of its counters into its trace now, without stopping it, and waits until it
//! has taken the request (see [`heaplens_trace::snapshot`] for the channel).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::SnapshotArgs;

/// How long the monitor may take to notice the request (it looks every 50 ms).
const WAIT: Duration = Duration::from_secs(5);

/// The name of the monitor's writer thread (`/proc/PID/task/*/comm`).
pub(crate) const WRITER: &str = "heaplens-writer";

/// Whether the monitor's writer thread runs in process `pid`.
pub(crate) fn writer_running(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == WRITER))
}

/// The trace the monitor in a running process writes: a `.hltrace` file open for writing in a
/// process where the monitor's writer thread runs. A program that merely has a trace open
/// (reading it, or a heaplens command) is not recorded.
///
/// # Errors
/// When `/proc/PID/fd` cannot be read, or no such trace is open.
pub(crate) fn trace_of(pid: u32) -> Result<PathBuf> {
    let dir = format!("/proc/{pid}/fd");
    let fds =
        std::fs::read_dir(&dir).with_context(|| format!("cannot read {dir} (is process {pid} running, and yours?)"))?;
    let written = |fd: &std::ffi::OsStr| {
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.to_string_lossy())).unwrap_or_default();
        info.lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
            .is_some_and(|f| f & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32)
    };
    let monitor = writer_running(pid);
    for fd in fds.flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            if monitor && target.extension().is_some_and(|e| e == "hltrace") && written(&fd.file_name()) {
                return Ok(target);
            }
        }
    }
    bail!("process {pid} is not recorded by heaplens (its monitor has no trace open)")
}

/// Runs `heaplens snapshot`.
pub fn execute(a: &SnapshotArgs) -> Result<()> {
    let trace = match a.target.to_str().and_then(|t| t.parse::<u32>().ok()) {
        Some(pid) => {
            trace_of(pid).map_err(|e| anyhow::anyhow!("{e} (is it running under heaplens run --aggregate?)"))?
        }
        None => a.target.clone(),
    };
    if !trace.is_file() {
        bail!("{} is not a trace", trace.display());
    }
    let size = || std::fs::metadata(&trace).map(|m| m.len()).unwrap_or(0);
    let before = size();
    let request = heaplens_trace::snapshot_request_path(&trace);
    heaplens_output::create_request(&request).with_context(|| format!("cannot create {}", request.display()))?;
    let start = Instant::now();
    while request.exists() {
        if start.elapsed() > WAIT {
            let _ = std::fs::remove_file(&request);
            bail!(
                "the program did not take the snapshot request within {} s (is it running under heaplens run --aggregate?)",
                WAIT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The monitor writes the snapshot right after taking the request.
    while size() == before && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("heaplens: snapshot written to {}", trace.display());
    Ok(())
}
