//! `heaplens live TRACE|PID`: the terminal view of a trace while it is written (the
//! `heaplens-live` crate), interactive or as text screens (`--plain --frames N`).

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::{LiveArgs, LiveScreens};

/// The view's settings from the command line (the order of the call sites comes with the
/// screens, see [`show`]).
pub fn options(a: &LiveArgs) -> heaplens_live::Options {
    heaplens_live::Options { old_after_ns: a.old.as_nanos() as u64, top: a.top, ..Default::default() }
}

/// Shows `trace` as `screens` asks with `options`: `frames` screens as text on `out` with
/// --plain (or --frames), else on the terminal until the user quits (`ended`: the program
/// ended, see [`heaplens_live::interactive`]).
///
/// # Errors
/// Writing the screens, or drawing on the terminal.
pub fn show(
    trace: &std::path::Path,
    screens: &LiveScreens,
    options: &heaplens_live::Options,
    ended: Option<&std::sync::atomic::AtomicBool>,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let options = heaplens_live::Options { sort: screens.sort, ..options.clone() };
    if screens.plain || screens.frames.is_some() {
        return heaplens_live::plain(trace, &options, screens.frames.unwrap_or(1), out)
            .context("cannot write the screens");
    }
    heaplens_live::interactive(trace, &options, ended)
        .context("cannot draw on the terminal (use --plain --frames N for text)")
}

/// Runs `heaplens live`.
pub fn execute(a: &LiveArgs) -> Result<()> {
    let pid = a.target.to_str().and_then(|t| t.parse::<u32>().ok());
    let trace: PathBuf = match pid {
        Some(pid) => crate::snapshot::trace_of(pid)?,
        None => a.target.clone(),
    };
    // A trace not there yet (the program is starting) is waited for, screen after screen; a
    // FIFO, a directory or a device never becomes one.
    if let Ok(m) = std::fs::metadata(&trace) {
        anyhow::ensure!(m.is_file(), "{} is not a regular file (a trace is one)", trace.display());
    }
    show(&trace, &a.screens, &options(a), None, &mut std::io::stdout().lock())?;
    // Screens of a file that never came are no view of anything: say so in the status. (A
    // process's trace was there: `heaplens attach` may have moved it to its `-o` name since.)
    anyhow::ensure!(pid.is_some() || trace.exists(), "no trace appeared at {}", trace.display());
    // Nor of a file that is no trace (its header is written first, so a trace being written
    // has one).
    match heaplens_trace::TraceReader::open(&trace) {
        Err(heaplens_trace::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
        Err(heaplens_trace::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound && pid.is_some() => Ok(()),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", trace.display())),
        Ok(_) => Ok(()),
    }
}
