//! How `heaplens snapshot` asks a running monitor in aggregated mode for a snapshot of its
//! counters: by creating a request file next to the trace, which the monitor's writer thread
//! looks for every 50 ms and removes when it takes the request. A file the monitor owns, not a
//! signal: the program's signals stay its own. The same for `heaplens detach`, and the answers
//! of the monitor's entry point that `heaplens attach` calls through gdb.

use std::path::{Path, PathBuf};

/// The request file for the trace at `trace`: `TRACE.snapshot`.
pub fn snapshot_request_path(trace: &Path) -> PathBuf {
    let mut p = trace.as_os_str().to_owned();
    p.push(".snapshot");
    PathBuf::from(p)
}

/// The request file that asks a monitor loaded by `heaplens attach` to detach: `TRACE.detach`,
/// next to the trace it writes. The monitor looks for it every 50 ms, and removes it once it
/// has put the program's entries back, written the End block and closed the trace.
pub fn detach_request_path(trace: &Path) -> PathBuf {
    let mut p = trace.as_os_str().to_owned();
    p.push(".detach");
    PathBuf::from(p)
}

/// `heaplens_attach` (the monitor's entry point `heaplens attach` calls): recording started.
pub const ATTACH_OK: i32 = 0;
/// `heaplens_attach`: this monitor is recording already (attached, or preloaded).
pub const ATTACH_BUSY: i32 = 1;
/// `heaplens_attach`: the trace cannot be created at the path given.
pub const ATTACH_NO_TRACE: i32 = 2;
/// `heaplens_attach`: an internal error; nothing was hooked.
pub const ATTACH_FAILED: i32 = 3;
