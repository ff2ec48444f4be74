//! heaplens live: a terminal view of a trace while it is written (`heaplens live TRACE|PID`,
//! `heaplens run --live`).
//!
//! Every second the view replays the trace as far as it is written, through the public replay
//! of `heaplens-interpret` ([`heaplens_interpret::view::replay`]): a block still being written
//! at the end is left for the next round, and a trace not yet readable (just created, no
//! Process block yet) is waited for. The screen shows the bytes in use over time, the call
//! sites holding the most bytes now and allocating the most per second (since the last
//! round), the sites whose blocks have lived longer than a threshold (leak candidates), and the
//! threads. Sites are named by the program's own innermost frame (the attribution every view
//! uses, [`heaplens_interpret::paths::Attribution::own_code`]), names escaped for the terminal.
//!
//! The view reads the file only: the program pays for the recording and nothing more.
//! [`plain`] prints screens as text (for scripts and tests), [`interactive`] draws them with
//! ratatui until `q`, Esc or Ctrl-C.

#![warn(missing_docs)]

pub mod draw;
pub mod screen;
pub mod sort;
pub mod tally;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use screen::{Follower, Screen};
pub use sort::Sort;

/// How the view is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// Blocks live longer than this are leak candidates, in nanoseconds.
    pub old_after_ns: u64,
    /// Rows per table.
    pub top: usize,
    /// Time between two screens.
    pub interval: Duration,
    /// The call sites' order (the terminal's `s` key changes it).
    pub sort: Sort,
}

impl Default for Options {
    fn default() -> Self {
        Options { old_after_ns: 10_000_000_000, top: 8, interval: Duration::from_secs(1), sort: Sort::InUse }
    }
}

/// Width and height of a screen printed by [`plain`], in characters.
pub const PLAIN_SIZE: (u16, u16) = (110, 44);

/// Prints `frames` screens of the trace at `path` as text to `out`, one every
/// `options.interval` (none after the last), each under a `--- heaplens live: screen N ---`
/// line.
///
/// # Errors
/// Writing to `out`.
pub fn plain(path: &Path, options: &Options, frames: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let mut follower = Follower::new(path.to_path_buf(), options.clone());
    for i in 0..frames {
        let started = Instant::now();
        let screen = follower.refresh();
        writeln!(out, "--- heaplens live: screen {} ---", i + 1)?;
        out.write_all(draw::to_text(screen, PLAIN_SIZE.0, PLAIN_SIZE.1).as_bytes())?;
        out.flush()?;
        if i + 1 < frames {
            std::thread::sleep(options.interval.saturating_sub(started.elapsed()));
        }
    }
    Ok(())
}

/// Draws the trace at `path` on the terminal, a new screen every `options.interval`, until
/// the user presses `q`, Esc or Ctrl-C; `s` sorts the call sites by the next order
/// ([`Sort::next`]) at once. When `ended` turns true (the program ended), the screen says so
/// and stays until the user quits.
///
/// # Errors
/// The terminal's (not a terminal, cannot switch to raw mode).
pub fn interactive(path: &Path, options: &Options, ended: Option<&AtomicBool>) -> std::io::Result<()> {
    use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};

    let mut follower = Follower::new(path.to_path_buf(), options.clone());
    enable_raw_mode()?;
    let mut stdout = std::io::stdout();
    crossterm::execute!(stdout, EnterAlternateScreen)?;
    let restore = || {
        let _ = disable_raw_mode();
        let _ = crossterm::execute!(std::io::stdout(), LeaveAlternateScreen);
    };
    let result = (|| {
        let mut terminal = ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
        loop {
            let done = ended.is_some_and(|e| e.load(Ordering::Acquire));
            let screen = follower.refresh();
            if done {
                screen.note = Some("the program ended: q to quit".into());
            }
            // A full redraw: the program may write to the same terminal.
            terminal.clear()?;
            terminal.draw(|f| draw::draw(f, screen))?;
            let until = Instant::now() + options.interval;
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if !event::poll(left)? {
                    break;
                }
                if let Event::Key(k) = event::read()? {
                    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if k.kind != KeyEventKind::Press {
                        continue;
                    }
                    if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                        return Ok(());
                    }
                    if k.code == KeyCode::Char('s') {
                        // Sorted again at once, from what was read (no new round).
                        follower.set_sort(follower.sort().next());
                        break;
                    }
                }
            }
        }
    })();
    restore();
    result
}
