//! `heaplens snapshot PID|TRACE`: asks a program running under `heaplens run --aggregate` to
//! write a snapshot of its counters into its trace now, without stopping it, and waits until it
//! has taken the request (see [`heaplens_trace::snapshot`] for the channel).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::SnapshotArgs;

/// How long the monitor may take to notice the request (it looks every 50 ms).
const WAIT: Duration = Duration::from_secs(5);

/// The trace a running process writes: the `.hltrace` file among its open descriptors.
pub(crate) fn trace_of(pid: u32) -> Result<PathBuf> {
    let dir = format!("/proc/{pid}/fd");
    let fds =
        std::fs::read_dir(&dir).with_context(|| format!("cannot read {dir} (is process {pid} running, and yours?)"))?;
    for fd in fds.flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            if target.extension().is_some_and(|e| e == "hltrace") {
                return Ok(target);
            }
        }
    }
    bail!("process {pid} has no heaplens trace open (was it started with heaplens run --aggregate?)")
}

/// Runs `heaplens snapshot`.
pub fn execute(a: &SnapshotArgs) -> Result<()> {
    let trace = match a.target.to_str().and_then(|t| t.parse::<u32>().ok()) {
        Some(pid) => trace_of(pid)?,
        None => a.target.clone(),
    };
    if !trace.is_file() {
        bail!("{} is not a trace", trace.display());
    }
    let size = || std::fs::metadata(&trace).map(|m| m.len()).unwrap_or(0);
    let before = size();
    let request = heaplens_trace::snapshot_request_path(&trace);
    std::fs::write(&request, b"").with_context(|| format!("cannot create {}", request.display()))?;
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
