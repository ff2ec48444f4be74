//! Progress bars on stderr for long loads, hidden when disabled or when stderr is not a
//! terminal (so tests and pipes see nothing), and the stage times of `HEAPLENS_TIMING`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar that may be hidden; every method is a no-op when it is.
pub struct Progress(ProgressBar);

impl Progress {
    /// A bar counting bytes out of `total`.
    pub fn bytes(enabled: bool, total: u64, what: &str) -> Self {
        Self::new(enabled, total, what, "{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})")
    }

    /// A bar counting items out of `total`.
    pub fn items(enabled: bool, total: u64, what: &str) -> Self {
        Self::new(enabled, total, what, "{msg} [{bar:30}] {pos}/{len} ({eta})")
    }

    fn new(enabled: bool, total: u64, what: &str, template: &str) -> Self {
        let target = if enabled { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        Self(bar)
    }

    /// Sets the position.
    pub fn set(&self, pos: u64) {
        self.0.set_position(pos);
    }

    /// Advances by `n`.
    pub fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// With `HEAPLENS_TIMING=1`, prints on stderr when each stage of the analysis ends
/// (milliseconds since the start), to see which stage holds the report up.
pub struct Timing(Option<std::time::Instant>);

impl Timing {
    /// Starts the clock (when `HEAPLENS_TIMING` is set).
    pub fn start() -> Self {
        Self(std::env::var_os("HEAPLENS_TIMING").filter(|v| v != "0").map(|_| std::time::Instant::now()))
    }

    /// Prints that `stage` ended now.
    pub fn mark(&self, stage: &str) {
        if let Some(t0) = self.0 {
            eprintln!("{:>8.1} ms {stage}", t0.elapsed().as_secs_f64() * 1e3);
        }
    }
}
