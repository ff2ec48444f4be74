//! `heaplens live TRACE|PID`: the terminal view of a trace while it is written (the
//! `heaplens-live` crate), interactive or as text screens (`--plain --frames N`).

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::LiveArgs;

/// The view's settings from the command line.
pub fn options(a: &LiveArgs) -> heaplens_live::Options {
    heaplens_live::Options { old_after_ns: a.old.as_nanos() as u64, top: a.top, ..Default::default() }
}

/// Runs `heaplens live`.
pub fn execute(a: &LiveArgs) -> Result<()> {
    let trace: PathBuf = match a.target.to_str().and_then(|t| t.parse::<u32>().ok()) {
        Some(pid) => crate::snapshot::trace_of(pid)?,
        None => a.target.clone(),
    };
    // A trace not there yet (the program is starting) is waited for, screen after screen.
    if a.plain || a.frames.is_some() {
        let mut out = std::io::stdout().lock();
        return heaplens_live::plain(&trace, &options(a), a.frames.unwrap_or(1), &mut out)
            .context("cannot write the screens");
    }
    heaplens_live::interactive(&trace, &options(a), None)
        .context("cannot draw on the terminal (use --plain --frames N for text)")
}
