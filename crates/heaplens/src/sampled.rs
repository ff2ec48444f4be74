//! Export and the pictures draw and count the events a trace holds. In a sampled trace
//! (`heaplens run --sample-rate`) those are the samples, where `heaplens report` scales every
//! count up to an estimate of the whole run: say so once, so that nobody reads a sample count
//! as the program's.

use std::path::Path;

use heaplens_interpret::names::for_terminal;

/// Prints one line on stderr when `trace` was sampled.
pub fn note_sampled(trace: &Path, command: &str) {
    let Some(p) = heaplens_trace::process_of(trace) else { return };
    if p.sample_rate == 0 {
        return;
    }
    eprintln!(
        "heaplens: note: {} was sampled (one allocation recorded per {} bytes allocated, on average): this {command} counts and draws the samples alone; heaplens report gives the estimates for the whole run",
        for_terminal(&trace.display().to_string()),
        p.sample_rate
    );
}
